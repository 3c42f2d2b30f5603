"""Scale check of issue 17 item 5 (not a test): encode a large corpus into Megatron shards and check the output.

    .venv/bin/python benchmarks/scale_check.py CORPUS.jsonl [--shard-size 256MiB] [--out DIR] [--workers 2]

Runs ``beam-bpe encode --shard-format megatron --shard-size SIZE`` with Beam's multi_processing runner and
``--workers`` workers on the cl100k vocabulary of the shared data, samples the process tree every 0.2 s (the peak
resident memory, VmHWM, of every process: the driver, Beam's job service threads live in it, and each worker), then
prints the wall time, the files written, every process's peak and the load average, and opens every shard with
megatron-core's ``IndexedDataset``: its documents and tokens must equal the manifest's (exit 1 otherwise). The corpus
is e.g. ``benchmarks/bench_scale.py``'s ``scale-1.jsonl`` (1 GB of text).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("BEAM_BPE_TEST_DATA", ROOT.parent / "shared" / "data"))


def sample(proc: subprocess.Popen, peaks: dict[int, dict]) -> None:
    try:
        tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in tree:
        try:
            with open(f"/proc/{p.pid}/status") as f:
                hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
            entry = peaks.setdefault(p.pid, {"cmd": " ".join(p.cmdline())[:120], "peak_kib": 0})
            entry["peak_kib"] = max(entry["peak_kib"], hwm)
        except (OSError, StopIteration, psutil.Error):
            continue


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    parser.add_argument("--shard-size", default="256MiB")
    parser.add_argument("--out", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "beam-bpe-scale-check"))
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    table = json.loads((DATA / "tiktoken" / "encodings.json").read_text())["cl100k_base"]
    command = [
        str(Path(sys.executable).parent / "beam-bpe"),
        "encode",
        "--tokenizer",
        str(DATA / "tiktoken" / table["rank_file"]),
        "--pretokenizer",
        "cl100k",
        "--input",
        args.corpus,
        "--out",
        args.out,
        "--overwrite",
        "--shard-format",
        "megatron",
        "--shard-size",
        args.shard_size,
        "--direct_running_mode",
        "multi_processing",
        "--direct_num_workers",
        str(args.workers),
    ]
    peaks: dict[int, dict] = {}
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while proc.poll() is None:
        sample(proc, peaks)
        time.sleep(0.2)
    wall = time.monotonic() - started
    out, err = proc.communicate()
    if proc.returncode != 0:
        print(err[-3000:], file=sys.stderr)
        return 1
    manifest = json.loads((Path(args.out) / "manifest.json").read_text())
    files = sorted(p for p in Path(args.out).rglob("*") if p.is_file())
    print(out.strip())
    print(f"input {os.path.getsize(args.corpus):,} bytes, --shard-size {args.shard_size}, {args.workers} workers: "
          f"wall {wall:.1f} s, load average {os.getloadavg()[0]:.1f} (2 cores shared)")  # fmt: skip
    print(f"{len(manifest['shards'])} shards, {len(files)} files in {args.out}:")
    for p in files:
        print(f"  {p.relative_to(args.out)}  {p.stat().st_size:,} bytes")
    print("peak resident memory (VmHWM) of every process:")
    for pid, entry in sorted(peaks.items()):
        print(f"  pid {pid}: {entry['peak_kib'] / 1024:,.0f} MiB  {entry['cmd']}")
    return check_megatron(Path(args.out), manifest)


def check_megatron(out: Path, manifest: dict) -> int:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDataset
    documents = tokens = 0
    for shard in manifest["shards"]:
        dataset = IndexedDataset(str(out / shard["name"]))
        documents += len(dataset)
        tokens += int(dataset.sequence_lengths.sum())
    ok = documents == manifest["documents_written"] and tokens == manifest["tokens"]
    print(
        f"megatron-core IndexedDataset: {documents:,} documents, {tokens:,} tokens; manifest: "
        f"{manifest['documents_written']:,} documents, {manifest['tokens']:,} tokens: {'equal' if ok else 'DIFFERENT'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
