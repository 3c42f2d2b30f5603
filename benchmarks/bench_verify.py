"""``beam-bpe verify`` on ~1 GB of shards: throughput (MB of shard data per second, wall and per CPU second) and peak
RSS, pinned to one core.

The output is made here with the project's own Parquet shard writer (random ids, so that zstd cannot shrink them;
documents of ~1,000 tokens with ids ``a.jsonl@OFFSET``) and a manifest with receipts built by
``pipeline.encode.receipts``: an encode run of ~2 GB of text would take far longer than the check it feeds. Then
``verify`` runs in a child process under ``taskset -c 0`` and its ``ru_maxrss`` is read.

    python benchmarks/bench_verify.py [--gb 1.0] [--dir /tmp/bench-verify] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa

DOC_TOKENS = 1000
SHARDS = 4


def make_output(out: str, gb: float) -> int:
    from pipeline.encode.formats import FORMATS
    from pipeline.encode.layout import ShardLayout
    from pipeline.encode.receipts import receipts_of

    os.makedirs(out, exist_ok=True)
    layout = ShardLayout(out, "tokens", SHARDS, "parquet", "uint16", "d" * 64, "f" * 64)
    tokens_per_shard = int(gb * 1e9 / 2 / SHARDS)
    docs_per_shard = tokens_per_shard // DOC_TOKENS
    rng = np.random.default_rng(0)
    shards, offset = [], 0
    for index in range(SHARDS):
        start = offset
        with FORMATS["parquet"].writer(layout.path(layout.name(index)), layout) as writer:
            for first in range(0, docs_per_shard, 4096):
                n = min(4096, docs_per_shard - first)
                ids = rng.integers(0, 50257, n * DOC_TOKENS, dtype=np.uint16)
                offsets = np.arange(n + 1, dtype=np.int64) * DOC_TOKENS
                doc_ids = pa.array([f"a.jsonl@{offset + 4000 * k}" for k in range(n)])
                offset += 4000 * n
                writer.write(ids, offsets, doc_ids=doc_ids)
        files = writer.close()
        rng_entry = {"index": index, "source": "a.jsonl", "kind": "bytes", "start": start, "end": offset,
                     "first_row": 0, "documents": docs_per_shard, "documents_read": docs_per_shard}  # fmt: skip
        shards.append({"name": layout.name(index), "files": files, "documents": docs_per_shard, "ranges": [rng_entry],
                       "tokens": docs_per_shard * DOC_TOKENS, "position_kind": "offset"})  # fmt: skip
    manifest = {"kind": "beam-bpe encode", "settings": {"shard_format": "parquet", "prefix": "tokens"},
                "shards": shards, "documents_written": docs_per_shard * SHARDS,
                "receipts": receipts_of(shards, SHARDS)}  # fmt: skip
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    open(os.path.join(out, "COMPLETED"), "w").close()
    return sum(f["bytes"] for s in shards for f in s["files"].values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--dir", default="/tmp/bench-verify")
    parser.add_argument("--keep", action="store_true", help="keep the output (and reuse it next time)")
    args = parser.parse_args()
    out = os.path.join(args.dir, "out")
    if not os.path.exists(os.path.join(out, "COMPLETED")):
        made = make_output(out, args.gb)
        print(f"made {made / 1e6:,.0f} MB of Parquet shards in {out}")
    size = sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out) if n.endswith(".parquet"))
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    child = subprocess.run([*pin, sys.executable, "-m", "pipeline.cli", "verify", out], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(child.stdout.strip() or child.stderr.strip())
    print(
        f"verify: {size / 1e6:,.0f} MB of shards, exit {child.returncode}, {seconds:.2f} s wall "
        f"({size / 1e6 / seconds:,.0f} MB/s), {cpu:.2f} s CPU ({size / 1e6 / cpu:,.0f} MB/s per CPU second), "
        f"peak RSS {after.ru_maxrss / 1024:,.0f} MiB, pinned to one core: {bool(pin)}; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    if not args.keep:
        shutil.rmtree(args.dir)


if __name__ == "__main__":
    main()
