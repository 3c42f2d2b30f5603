"""The driver's half of training: reduced counts in, tokenizer files and the manifest out (no Beam here).

It runs once, on the launching machine, after the counting pipeline: reads the counts streaming, runs
``bpe_core.train`` and writes ``tokenizer.bpe``, ``tokenizer.tiktoken`` and ``tokenizer.json`` (when the core can
export it). Nothing in these files depends on paths, times, runners or sharding.
"""

from __future__ import annotations

import hashlib

import bpe_core
from bpe_core import ChunkCounts, Tokenizer
from pipeline.launch.progress import Reporter
from pipeline.launch.settings import TrainSettings
from pipeline.storage.files import join, read_bytes

TOKENIZER_FILES = ("tokenizer.bpe", "tokenizer.tiktoken", "tokenizer.json")


def train_tokenizer(counts: ChunkCounts, settings: TrainSettings, reporter: Reporter) -> Tokenizer:
    """``bpe_core.train`` on the reduced counts with the validated settings."""
    budget = settings.vocab_size - 256 - len(settings.special_tokens)
    tok = bpe_core.train(
        counts,
        settings.vocab_size,
        special_tokens=settings.special_tokens,
        min_frequency=settings.min_frequency,
        tie_break=settings.tie_break,
        name=settings.name,
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
