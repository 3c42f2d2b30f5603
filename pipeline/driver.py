"""The driver's half of training: reduced counts in, tokenizer files and the manifest out (no Beam here).

It runs once, on the launching machine, after the counting pipeline: reads the counts streaming, runs
``bpe_core.train`` and writes ``tokenizer.bpe``, ``tokenizer.tiktoken`` and ``tokenizer.json`` (when the core can
export it). Nothing in these files depends on paths, times, runners or sharding.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
import time

import bpe_core
from bpe_core import ChunkCounts, Tokenizer
from pipeline.files import COMPLETED, MANIFEST, join, read_bytes, write_atomic

TOKENIZER_FILES = ("tokenizer.bpe", "tokenizer.tiktoken", "tokenizer.json")


class Reporter:
    """A progress bar with merges per second and ETA on a terminal; one JSON line per stage otherwise."""

    def __init__(self, stream=None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.perf_counter()

    def stage(self, name: str, **fields) -> None:
        if self.tty:
            details = ", ".join(f"{k}={v}" for k, v in fields.items())
            print(f"[beam-bpe] {name}: {details}", file=self.stream)
        else:
            print(json.dumps({"stage": name, **fields}, sort_keys=True), file=self.stream)
        self.stream.flush()

    def merges(self, total: int):
        """A ``progress(done, budget)`` callback for ``bpe_core.train``, or None off a terminal."""
        if not self.tty:
            return None
        start = time.perf_counter()

        def progress(done: int, budget: int) -> None:
            elapsed = max(time.perf_counter() - start, 1e-9)
            rate = done / elapsed
            eta = (budget - done) / rate if rate else float("inf")
            width = 30
            filled = int(width * done / max(budget, 1))
            bar = "#" * filled + "." * (width - filled)
            self.stream.write(f"\r[{bar}] {done}/{budget} merges, {rate:,.0f}/s, ETA {eta:,.0f} s ")
            self.stream.flush()

        return progress

    def end_progress(self) -> None:
        if self.tty:
            self.stream.write("\n")


def train_tokenizer(counts: ChunkCounts, settings: dict, reporter: Reporter) -> Tokenizer:
    """``bpe_core.train`` on the reduced counts with the validated settings."""
    budget = settings["vocab_size"] - 256 - len(settings["special_tokens"])
    tok = bpe_core.train(
        counts,
        settings["vocab_size"],
        special_tokens=settings["special_tokens"],
        min_frequency=settings["min_frequency"],
        tie_break=settings["tie_break"],
        name=settings["name"],
        progress=reporter.merges(budget),
    )
    reporter.end_progress()
    return tok


def write_tokenizer_files(tok: Tokenizer, out_dir: str) -> dict:
    """Write the artifact and its exports; return ``{file: {"sha256", "bytes"}}`` for the manifest.

    ``tokenizer.json`` is written when ``Tokenizer.to_huggingface`` exists in the installed bpe_core.
    """
    tok.save(join(out_dir, "tokenizer.bpe"))
    tok.to_tiktoken(join(out_dir, "tokenizer.tiktoken"))
    if hasattr(tok, "to_huggingface"):
        tok.to_huggingface(join(out_dir, "tokenizer.json"))
    written = {}
    for name in TOKENIZER_FILES:
        try:
            data = read_bytes(join(out_dir, name))
        except FileNotFoundError:
            continue
        written[name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    return written


def versions() -> dict:
    import apache_beam
    import pyarrow
    import regex

    return {
        "beam_bpe": bpe_core.__version__,
        "apache_beam": apache_beam.__version__,
        "pyarrow": pyarrow.__version__,
        "regex": regex.__version__,
        "python": platform.python_version(),
    }


def finish_output(out_dir: str, manifest: dict) -> None:
    """Write ``manifest.json``, then the ``COMPLETED`` marker: a directory without the marker is incomplete."""
    manifest = dict(manifest, versions=versions())
    write_atomic(join(out_dir, MANIFEST), (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())
    write_atomic(join(out_dir, COMPLETED), b"")
