"""Helpers shared by the pipeline tests: corpus files on tmp_path, CLI runs, reading outputs back."""

from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path

import zstandard

from pipeline.cli import main


def write_jsonl(path: Path, docs: list[str], *, field: str = "text", extra: list[bytes] = ()) -> Path:
    """Docs as JSONL (``{"text": ...}`` per line), compressed by the file's extension; ``extra`` raw lines appended."""
    lines = [json.dumps({field: d, "id": i}, ensure_ascii=False).encode() for i, d in enumerate(docs)]
    data = b"\n".join(lines + list(extra)) + b"\n"
    return write_bytes(path, data)


def write_bytes(path: Path, data: bytes) -> Path:
    name = str(path)
    if name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    elif name.endswith(".bz2"):
        data = bz2.compress(data)
    elif name.endswith(".zst"):
        data = zstandard.ZstdCompressor().compress(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def shard_docs(docs: list[str], n: int) -> list[list[str]]:
    """``n`` contiguous slices of ``docs`` (some may be empty)."""
    size = -(-len(docs) // n)
    return [docs[i * size : (i + 1) * size] for i in range(n)]


def run_cli(*args: str) -> int:
    return main([str(a) for a in args])


def tokenizer_files(out: Path) -> dict[str, bytes]:
    return {
        name: (out / name).read_bytes()
        for name in ("tokenizer.bpe", "tokenizer.tiktoken", "tokenizer.json")
        if (out / name).exists()
    }


def read_dead_letters(out: Path) -> list[dict]:
    records = []
    for path in sorted((out / "dead_letters").glob("*.jsonl")):
        records += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return records


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())
