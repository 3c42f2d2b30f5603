"""Benchmark the encoding pipeline (not a test): one command, prints ratios measured in the same run.

    .venv/bin/python benchmarks/bench_encode_pipeline.py [--corpora all] [--shard-format parquet] [--repeat 1]

On all shared corpora (~63 MB of text, decompressed once to JSONL in a temporary folder so that files are cut into
ranges), with the cl100k_base vocabulary, each phase runs in a fresh subprocess that reports its wall time, CPU
time (its own plus its children's) and peak RSS (imports and tokenizer loading excluded from the times, but in the
two ``--workers 2`` phases):

- in_process: the same documents read with json.loads and encoded in a plain loop with the in-process encoder
  (``Tokenizer.encode_ordinary_batch``, one call per MiB of text), ids packed into numpy arrays;
- tiktoken: ``Encoding.encode_ordinary_batch`` on the same documents, one thread and tiktoken's default (8);
- pipeline_in_memory: ``beam-bpe encode`` with ``--direct_running_mode in_memory``; pipeline_verify: the same with
  ``--verify``; pipeline_multi_processing: ``--direct_num_workers 2``;
- workers_2_cl100k and workers_2_qwen35: the ``beam-bpe encode --workers 2`` command itself (the venv's console
  script beside this interpreter) with cl100k_base and with llama.cpp's Qwen 3.5 GGUF (the reference files:
  ``python tests/tools/fetch_reference_files.py``), the same documents: the MB/s of Qwen 3.5 against cl100k's in the
  same run (issue 31: target >= 0.8x). Timed: the whole command, as a user meets it (its interpreter's start, its
  imports, the tokenizer loaded by the launcher and by the workers' fork server, the encoding, the manifest); wall
  time, and CPU time through RUSAGE_CHILDREN (the command and every process it waited for). A command run, not
  ``pipeline.cli.main`` called here: the launcher forks the workers from a preloaded server only for ``beam-bpe``,
  ``python -m`` or ``python -c`` (a script of one's own gets fresh interpreters per worker, 0.69-0.72x).

The token counts of the cl100k pipelines and of the in-process loop are checked to be equal.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchlib import data_file, jsonl_workdir, pipeline_parser, run_phase, tiktoken_encoding, usage

MODES = {
    "pipeline_in_memory": ["--direct_running_mode", "in_memory"],
    "pipeline_verify": ["--direct_running_mode", "in_memory", "--verify"],
    "pipeline_multi_processing": ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"],
}
# `beam-bpe encode --workers 2` by vocabulary (_vocab_args)
WORKERS = {"workers_2_cl100k": "cl100k", "workers_2_qwen35": "qwen35"}
SLICE_BYTES = 1 << 20


def _rank_file() -> str:
    return str(data_file("tiktoken", "cl100k_base.tiktoken"))


def _texts(path: Path) -> list[str]:
    return [json.loads(line)["text"] for line in path.open(encoding="utf-8")]


def _slices(texts: list[str]):
    start = size = 0
    for i, text in enumerate(texts):
        size += len(text)
        if size >= SLICE_BYTES:
            yield texts[start : i + 1]
            start, size = i + 1, 0
    if start < len(texts):
        yield texts[start:]


def _in_process(work: Path) -> dict:
    import itertools

    import numpy as np

    import bpe_core

    tok = bpe_core.Tokenizer.from_file(_rank_file(), pretokenizer="cl100k")
    cpu0, _ = usage()
    start = time.perf_counter()
    tokens = 0
    for path in sorted(work.glob("*.jsonl")):
        for texts in _slices(_texts(path)):
            ids = tok.encode_ordinary_batch(texts)
            flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.uint32, count=sum(map(len, ids)))
            tokens += flat.size
    return {"start": start, "cpu0": cpu0, "tokens": tokens}


def _tiktoken(work: Path, threads: int) -> dict:
    enc = tiktoken_encoding("cl100k")  # encode_ordinary: its special tokens play no part
    cpu0, _ = usage()
    start = time.perf_counter()
    tokens = 0
    for path in sorted(work.glob("*.jsonl")):
        tokens += sum(map(len, enc.encode_ordinary_batch(_texts(path), num_threads=threads)))
    return {"start": start, "cpu0": cpu0, "tokens": tokens}


def _vocab_args(vocab: str) -> list[str]:
    if vocab == "cl100k":
        return ["--tokenizer", _rank_file(), "--pretokenizer", "cl100k"]
    from native_cases import reference_gguf  # exits naming the fetch where the reference files are absent

    return ["--tokenizer", str(reference_gguf(vocab))]


def _pipeline(work: Path, name: str, shard_format: str) -> dict:
    out = work / f"out-{name}"
    shutil.rmtree(out, ignore_errors=True)
    inputs = [a for p in sorted(work.glob("*.jsonl")) for a in ("--input", str(p))]
    vocab = WORKERS.get(name, "cl100k")
    mode = ["--workers", "2"] if name in WORKERS else MODES[name]
    args = [
        "encode",
        *_vocab_args(vocab),
        *inputs,
        "--out",
        str(out),
        "--shard-format",
        shard_format,
    ]
    if name in WORKERS:
        cpu0, _ = usage()
        start = time.perf_counter()
        _run_command([*args, *mode])
    else:
        from pipeline.cli import main  # imports outside the timed region (apache_beam alone takes ~2 s to import)

        cpu0, _ = usage()
        start = time.perf_counter()
        assert main([*args, *mode]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    return {"start": start, "cpu0": cpu0, "tokens": manifest["tokens"], "shards": len(manifest["shards"])}


def _run_command(args: list[str]) -> None:
    """``beam-bpe args``, the console script of this interpreter's environment, as a command line runs it."""
    command = Path(sys.executable).parent / "beam-bpe"
    if not command.exists():
        raise SystemExit(f"{command} is missing: install the package into this environment (make setup)")
    done = subprocess.run([str(command), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"beam-bpe {' '.join(args)} exited with {done.returncode}:\n{done.stderr[-4000:]}")


def phase(name: str, work: Path, shard_format: str) -> dict:
    if name == "in_process":
        r = _in_process(work)
    elif name.startswith("tiktoken"):
        r = _tiktoken(work, 1 if name == "tiktoken_1_thread" else 8)
    else:
        r = _pipeline(work, name, shard_format)
    wall = time.perf_counter() - r.pop("start")
    cpu, rss_kb = usage()
    return {"wall": wall, "cpu": cpu - r.pop("cpu0"), "rss_mb": rss_kb / 1024, **r}


def _run_phase(name: str, work: Path, shard_format: str) -> dict:
    return run_phase(__file__, ["--phase", name, "--work", str(work), "--shard-format", shard_format])


def main() -> None:
    parser = pipeline_parser(__doc__)
    parser.add_argument("--shard-format", default="parquet", choices=("parquet", "megatron"))
    parser.add_argument("--repeat", type=int, default=1, help="rounds of all phases; the best wall time of each counts")
    parser.add_argument(
        "--phases",
        default=None,
        help="comma-separated phases to run (default: all), e.g. workers_2_cl100k,workers_2_qwen35",
    )
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(phase(args.phase, Path(args.work), args.shard_format)))
        return
    with jsonl_workdir("bench-encode-", args.corpora) as (work, mb):
        print(
            f"corpus: {args.corpora} = {mb:.1f} MB of text; cl100k_base; "
            f"{args.shard_format} shards; {os.cpu_count()} cores"
        )
        names = ["in_process", "tiktoken_1_thread", "tiktoken_8_threads", *MODES, *WORKERS]
        if args.phases:
            unknown = set(args.phases.split(",")) - set(names)
            if unknown:
                parser.error(f"--phases: unknown {sorted(unknown)}; the phases are {', '.join(names)}")
            names = [n for n in names if n in args.phases.split(",")]
        results: dict[str, dict] = {}
        for round_ in range(args.repeat):  # rounds interleave the phases: a busy spell hits all of them alike
            for name in names:
                r = _run_phase(name, work, args.shard_format)
                if name not in results or r["wall"] < results[name]["wall"]:
                    results[name] = r
                print(
                    f"  [{round_ + 1}/{args.repeat}] {name:27s} wall {r['wall']:7.1f} s  cpu {r['cpu']:7.1f} s  "
                    f"peak RSS {r['rss_mb']:6.0f} MB  ({mb / r['wall']:6.2f} MB/s, {r['tokens']} tokens)"
                )
        if args.repeat > 1:
            print(f"best of {args.repeat} rounds (by wall time):")
            for name, r in results.items():
                print(f"  {name:27s} wall {r['wall']:7.1f} s  cpu {r['cpu']:7.1f} s  ({mb / r['wall']:6.2f} MB/s)")
        _print_ratios(results)


def _print_ratios(r: dict) -> None:
    same = {k: v["tokens"] for k, v in r.items() if WORKERS.get(k, "cl100k") == "cl100k"}
    if len(set(same.values())) > 1:
        print(f"  WARNING: token counts differ: {same}")
    if "workers_2_qwen35" in r and "workers_2_cl100k" in r:
        ratio = r["workers_2_cl100k"]["wall"] / r["workers_2_qwen35"]["wall"]
        cpu = r["workers_2_qwen35"]["cpu"] / r["workers_2_cl100k"]["cpu"]
        print(f"  --workers 2, Qwen 3.5 GGUF against cl100k_base: MB/s {ratio:.2f}x (target >= 0.8x: "
              f"{'met' if ratio >= 0.8 else 'NOT met'}); CPU seconds {cpu:.2f}x cl100k's")  # fmt: skip
    if not {"in_process", "pipeline_in_memory", "pipeline_verify", *MODES} <= r.keys():
        return
    base = r["in_process"]
    print("ratios (lower is better; target: pipeline_in_memory / in_process <= 1.3x):")
    for name in MODES:
        print(
            f"  {name} / in_process: wall {r[name]['wall'] / base['wall']:.2f}x, "
            f"cpu {r[name]['cpu'] / base['cpu']:.2f}x, "
            f"peak RSS {r[name]['rss_mb'] / base['rss_mb']:.2f}x"
        )
    verify = r["pipeline_verify"]["wall"] / r["pipeline_in_memory"]["wall"]
    print(f"  --verify cost: pipeline_verify / pipeline_in_memory: wall {verify:.2f}x")
    for peer in [p for p in ("tiktoken_1_thread", "tiktoken_8_threads") if p in r]:
        print(f"  pipeline_in_memory / {peer}: wall {r['pipeline_in_memory']['wall'] / r[peer]['wall']:.2f}x; "
              f"in_process / {peer}: wall {base['wall'] / r[peer]['wall']:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
