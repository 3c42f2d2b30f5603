"""``encode --shuffle`` against a plain run (issue 34 item 3, not a test): peak RSS, CPU and wall, one command.

    .venv/bin/python benchmarks/bench_shuffle.py [--size 0.3] [--rounds 2] [--work DIR]

On ``bench_scale.py``'s corpus of ``--size`` GB (built once and cached there), ``beam-bpe encode`` with cl100k into
Parquet shards on two ``multi_processing`` workers, plain and ``--shuffle 7`` interleaved, each run a whole process
measured by ``bench_scale.measure`` (peak RSS of the largest process). Prints each run with the load average, the
ratios shuffle/plain (the issue's target: peak RSS at most 1.5x) and checks the two outputs hold the same tokens and
documents.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from bench_scale import BIN, MULTI, ROOT, build_corpus, measure


def encode(work: Path, corpus: Path, label: str, extra: list[str]) -> dict:
    rank = str(ROOT.parent / "shared" / "data" / "tiktoken" / "cl100k_base.tiktoken")
    out = work / f"shuffle-bench-{label}"
    cmd = [str(BIN / "beam-bpe"), "encode", "--tokenizer", rank, "--pretokenizer", "cl100k", "--input", str(corpus)]
    run = measure([*cmd, "--out", str(out), "--shard-format", "parquet", "--overwrite", *MULTI, *extra])
    manifest = json.loads((out / "manifest.json").read_text())
    return dict(run, label=label, tokens=manifest["tokens"], documents=manifest["documents_written"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=0.3, help="GB of text (bench_scale.py's corpus)")
    parser.add_argument("--rounds", type=int, default=2, help="plain and shuffled runs, interleaved")
    parser.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "beam-bpe-scale"))
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    corpus = build_corpus(work, args.size)
    runs: dict[str, list[dict]] = {"plain": [], "shuffle": []}
    for _ in range(args.rounds):
        for label, extra in (("plain", []), ("shuffle", ["--shuffle", "7"])):
            r = encode(work, corpus, label, extra)
            runs[label].append(r)
            print(f"{label:<8} wall {r['wall']:6.1f} s cpu {r['cpu']:6.1f} s peak {r['rss'] / 2**20:6.0f} MiB "
                  f"load {r['load']:.1f}", flush=True)  # fmt: skip
    plain, shuffled = runs["plain"], runs["shuffle"]
    if {(r["tokens"], r["documents"]) for r in plain} != {(r["tokens"], r["documents"]) for r in shuffled}:
        sys.exit("the shuffled output does not hold the plain output's tokens and documents")
    for key, what in (("rss", "peak RSS"), ("cpu", "CPU"), ("wall", "wall (under load)")):
        ratio = max(r[key] for r in shuffled) / min(r[key] for r in plain)
        print(f"shuffle/plain {what}: {ratio:.2f} (worst shuffled over best plain)")


if __name__ == "__main__":
    main()
