"""The training pre-flight (``train --estimate``) against the run it predicts, per corpus kind and input kind.

    .venv/bin/python benchmarks/bench_estimate.py [--quick] [--all] [--sample 0.05] [--work /tmp/bench-estimate]

Corpora of different kinds, assembled from the shared data and from files already on this machine (none of them
was used to fit the estimate's rules or its memory model): ``code`` (the .py sources of the venv's
site-packages, a document per file), ``multilingual`` (fortunes in five languages and the UDHR in many),
``dictionary`` (the tokens of four tiktoken vocabularies and the words of the installed packages' docs, one entry
per line), ``logs`` (Debian changelogs under /usr/share/doc, an entry per document), ``mix`` (all of them and the
other shared corpora, interleaved in long runs), and ``heavy`` (English prose with a heavy tail: a few documents
of random identifiers whose sizes follow a Pareto law). Each is written as ``.jsonl``, ``.jsonl.gz``, ``.zst``,
Parquet (row groups of 20,000 rows) and ``many``: 400 ``.jsonl.gz`` files.

Measured: the exact unique chunks (the counts of ``train --counts-only``, 2 workers, on the ``.jsonl``: the same
for every kind) and the driver's peak RSS (``train --from-counts``); predicted: the estimate from a sample of
``--sample`` of the ``.jsonl``'s bytes (the same text budget for every kind), its driver memory as ``beam-bpe
--version``'s RSS plus the merge loop's. ``--quick`` counts in-process (bpe_core.count_chunks) and skips memory.
With ``--all``, also every corpus together (a file of each, or 400 each for ``many``) sampled as ``train`` samples
by default (5% of the stored bytes, at least 32 MiB): the issue's case of a few large compressed files of different
kinds. Prints one row per corpus and kind, the load average and the estimate's seconds beside it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_scale import BIN, MULTI, measure
from benchlib import iter_records

KINDS = ("jsonl", "jsonl.gz", "zst", "parquet", "many")
ESTIMATE = """
import json, sys, time
from pipeline.corpus.plan import CorpusSpec, InputSpec, plan_corpus
from pipeline.train.estimate import estimate_corpus
from pipeline.train.settings import train_settings
fmt = "parquet" if sys.argv[1].endswith(".parquet") else "jsonl"
spec = CorpusSpec(fmt)
plan = plan_corpus([InputSpec(p) for p in sys.argv[1].split(",")], spec)
settings = train_settings({}, {"vocab_size": int(sys.argv[3]), "pretokenizer": sys.argv[4]})
t = time.perf_counter()
est = estimate_corpus(plan, spec, settings, sample_bytes=int(sys.argv[2]) or None)  # 0: train's default sample
print(json.dumps({**est.to_manifest(), "seconds_taken": time.perf_counter() - t}))
"""
TARGET_BYTES = 40 << 20


def _texts_code() -> list[str]:
    root = Path(sys.executable).resolve().parent.parent / "lib"
    paths = sorted(p for p in root.glob("python3*/site-packages/**/*.py") if p.is_file())
    return _up_to([p.read_text("utf-8", "replace") for p in paths[:40000]])


def _texts_multilingual() -> list[str]:
    return [r["text"] for name in ("fortunes_multi", "multi_udhr") for r in iter_records(name)]


def _texts_dictionary() -> list[str]:
    import base64

    data = Path(os.environ.get("BEAM_BPE_TEST_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
    entries = []
    for name in ("r50k", "p50k", "cl100k", "o200k"):
        for line in (data / "tiktoken" / f"{name}_base.tiktoken").read_text().splitlines():
            entries.append(base64.b64decode(line.split()[0]).decode("utf-8", "replace"))
    words = sorted({w for p in Path("/usr/share/doc").rglob("copyright") for w in p.read_text("utf-8", "replace")
                    .split() if w.isalpha()})  # fmt: skip
    entries += words
    return [" ".join(entries[i : i + 50]) for i in range(0, len(entries), 50)]


def _texts_logs() -> list[str]:
    out = []
    for path in sorted(Path("/usr/share/doc").rglob("changelog*")):
        try:
            raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        except (OSError, EOFError):
            continue
        out += [e for e in raw.decode("utf-8", "replace").split("\n\n") if e.strip()]
    return _up_to(out)


def _texts_heavy() -> list[str]:
    rng = random.Random(36)
    prose = [r["text"] for name in ("en_bible_kjv", "docs_python_rst", "fortunes_multi") for r in iter_records(name)]
    out = []
    for text in prose:
        out.append(text)
        if rng.random() < 0.02:
            n = min(400_000, int(200 * rng.paretovariate(0.9)))  # identifiers per document: a heavy tail
            out.append(" ".join(f"{rng.getrandbits(40):x}" for _ in range(n // 10)))
    return out


def _up_to(texts: list[str], limit: int = TARGET_BYTES) -> list[str]:
    out, size = [], 0
    for t in texts:
        if size >= limit:
            break
        out.append(t)
        size += len(t.encode("utf-8", "surrogatepass"))
    return out


def _texts_mix(parts: dict[str, list[str]]) -> list[str]:
    shared = [r["text"] for name in ("en_bible_kjv", "docs_python_rst", "code_cpython") for r in iter_records(name)]
    runs = [texts[i : i + 2000] for texts in [*parts.values(), shared] for i in range(0, len(texts), 2000)]
    random.Random(7).shuffle(runs)
    return _up_to([t for run in runs for t in run], 2 * TARGET_BYTES)


def corpora() -> dict[str, list[str]]:
    parts = {"code": _texts_code(), "multilingual": _texts_multilingual(), "dictionary": _texts_dictionary(),
             "logs": _texts_logs(), "heavy": _texts_heavy()}  # fmt: skip
    parts["mix"] = _texts_mix({k: v for k, v in parts.items() if k != "heavy"})
    return parts


def write_kinds(work: Path, name: str, texts: list[str]) -> dict[str, Path]:
    """The corpus as every input kind (written once; reused by a later run)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    base = work / name
    base.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts).encode("utf-8", "surrogatepass")
    paths = {"jsonl": base / "corpus.jsonl", "jsonl.gz": base / "corpus.jsonl.gz", "zst": base / "corpus.jsonl.zst",
             "parquet": base / "corpus.parquet", "many": base / "many"}  # fmt: skip
    if not paths["jsonl"].exists():
        paths["jsonl.gz"].write_bytes(gzip.compress(lines, 6))
        paths["zst"].write_bytes(zstandard.ZstdCompressor(level=3).compress(lines))
        safe = [t.encode("utf-8", "replace").decode("utf-8") for t in texts]
        pq.write_table(pa.table({"text": safe}), paths["parquet"], row_group_size=20000)
        paths["many"].mkdir(exist_ok=True)
        cut = lines.split(b"\n")[:-1]
        step = -(-len(cut) // 400)
        for i in range(0, len(cut), step):
            (paths["many"] / f"part-{i // step:04d}.jsonl.gz").write_bytes(
                gzip.compress(b"\n".join(cut[i : i + step]) + b"\n", 6)
            )
        paths["jsonl"].write_bytes(lines)
    return paths


def _input(kind: str, path: Path) -> str:
    return str(path / "*.jsonl.gz") if kind == "many" else str(path)


def truth(work: Path, name: str, jsonl: str, texts: list[str] | None, args) -> dict:
    """Exact unique chunks and words, and (without --quick) the driver's peak RSS of the run, of the ``jsonl``
    input (a path or glob)."""
    cached = work / name / f"truth-{args.vocab_size}{'-quick' if args.quick else ''}.json"
    if cached.exists():
        return json.loads(cached.read_text())
    cached.parent.mkdir(parents=True, exist_ok=True)
    if args.quick:
        import bpe_core

        counts = bpe_core.count_chunks(texts, args.pretokenizer)
        out = {"chunks": len(counts), "words": sum(1 for c in counts if len(c) >= 2), "rss": 0}
    else:
        counts_dir, train_dir = work / name / "counts", work / name / "train"
        cli = str(BIN / "beam-bpe")
        inputs = [arg for path in jsonl.split(",") for arg in ("--input", path)]
        measure([cli, "train", *inputs, "--counts-only", "--pretokenizer", args.pretokenizer,
                 "--out", str(counts_dir), "--overwrite", "--no-progress", *MULTI])  # fmt: skip
        from bench_scale import WORDS_SUMMARY

        out = json.loads(subprocess.run([sys.executable, "-c", WORDS_SUMMARY, str(counts_dir)], capture_output=True,
                                        text=True, check=True).stdout)  # fmt: skip
        trained = measure([cli, "train", "--from-counts", str(counts_dir), "--out", str(train_dir), "--vocab-size",
                           str(args.vocab_size), "--overwrite", "--no-progress"])  # fmt: skip
        out["rss"] = trained["rss"]
    cached.write_text(json.dumps(out))
    return out


def estimate(pattern: str, sample: int, args) -> dict:
    run = subprocess.run([sys.executable, "-c", ESTIMATE, pattern, str(sample), str(args.vocab_size),
                          args.pretokenizer], capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(run.stdout.strip().splitlines()[-1])


def _row(name: str, kind: str, mb: float, e: dict, true: dict, idle: int, args) -> dict:
    """Print one corpus and kind: predicted against measured, and whether it holds (within 25%, or in its range)."""
    mib = 1 << 20
    c_err, c_ok = _within(e, true["chunks"], "chunks", "chunks_low", "chunks_high")
    chunks = f"{e['chunks']:,}" if e["decided"] else f"{e['chunks_low']:,}..{e['chunks_high']:,}"
    line = f"{name:<13}{kind:<10}{mb:6.0f} {chunks:>34} {true['chunks']:>10,} {c_err:+6.0%}"
    m_ok = True
    if not args.quick:
        e = {**e, "mem": idle + e["loop_memory"], "mem_low": idle + e["loop_memory_low"],
             "mem_high": idle + e["loop_memory_high"]}  # fmt: skip
        m_err, m_ok = _within(e, true["rss"], "mem", "mem_low", "mem_high")
        mem = f"{e['mem'] / mib:.0f}" if e["decided"] else f"{e['mem_low'] / mib:.0f}..{e['mem_high'] / mib:.0f}"
        line += f" {mem:>24} {true['rss'] / mib:9.0f} {m_err:+6.0%}"
    marks = f"{'yes' if c_ok else 'NO'}, {'yes' if m_ok else 'NO'}" if not args.quick else "yes" if c_ok else "NO"
    print(f"{line}  {marks:<17} {os.getloadavg()[0]:4.1f}  {e['seconds_taken']:5.1f}", flush=True)
    return {
        "corpus": name,
        "kind": kind,
        "chunks_ok": c_ok,
        "memory_ok": m_ok,
        "chunk_error": c_err,
        "estimate": e,
        "truth": true,
    }


def _within(e: dict, true: float, point: str, low: str, high: str) -> tuple[float, bool]:
    error = e[point] / true - 1
    if e["decided"]:
        return error, abs(error) <= 0.25
    return error, e[low] <= true <= e[high] and e[high] <= 2 * e[low]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="exact chunks counted in-process; no memory runs")
    parser.add_argument("--sample", type=float, default=0.05, help="sample as a share of the .jsonl's bytes")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "bench-estimate"))
    parser.add_argument("--corpora", default="code,multilingual,dictionary,logs,mix,heavy")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--vocab-size", type=int, default=16384)
    parser.add_argument("--pretokenizer", default="cl100k")
    parser.add_argument("--all", action="store_true", help="also every corpus together, with train's default sample")
    args = parser.parse_args()
    work, names, kinds = Path(args.work), args.corpora.split(","), args.kinds.split(",")
    idle = 0 if args.quick else measure([str(BIN / "beam-bpe"), "--version"])["rss"]
    built = corpora()
    rows = []
    head = f"{'corpus':<13}{'kind':<10}{'MB':>6} {'unique chunks: predicted':>34} {'exact':>10} {'error':>7}"
    print(f"{head} {'driver MiB: predicted':>24} {'measured':>9} {'error':>7}  ok: chunks, memory  load  estimate s")
    for name in names:
        texts = built[name]
        paths = write_kinds(work, name, texts)
        true = truth(work, name, str(paths["jsonl"]), texts, args)
        sample = int(args.sample * paths["jsonl"].stat().st_size)
        mb = paths["jsonl"].stat().st_size / 1e6
        for kind in kinds:
            rows.append(_row(name, kind, mb, estimate(_input(kind, paths[kind]), sample, args), true, idle, args))
    if args.all:  # every corpus together, a file each (or 400 each), with train's own default sample
        everything = {"jsonl": "corpus.jsonl", "jsonl.gz": "corpus.jsonl.gz", "zst": "corpus.jsonl.zst",
                      "parquet": "corpus.parquet", "many": "many/*.jsonl.gz"}  # fmt: skip

        def inputs(kind: str) -> str:
            return ",".join(str(work / n / everything[kind]) for n in names)

        texts = [t for name in names for t in built[name]] if args.quick else None
        true = truth(work, "all-" + "-".join(names), inputs("jsonl"), texts, args)
        mb = sum((work / n / "corpus.jsonl").stat().st_size for n in names) / 1e6
        for kind in kinds:
            rows.append(_row("all, default", kind, mb, estimate(inputs(kind), 0, args), true, idle, args))
    (work / "results.json").write_text(json.dumps(rows, indent=1))
    print(
        f"\nwithin 25%, or inside a range of at most 2x: unique chunks {sum(r['chunks_ok'] for r in rows)} of "
        f"{len(rows)}, driver memory {sum(r['memory_ok'] for r in rows)} of {len(rows)} (load {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
