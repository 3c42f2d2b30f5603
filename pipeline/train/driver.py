"""The driver's half of training: reduced counts in, tokenizer files and the manifest out (no Beam here).

It runs once, on the launching machine, after the counting pipeline: reads the counts streaming, runs
``bpe_core.train`` and writes ``tokenizer.bpe``, ``tokenizer.tiktoken`` and ``tokenizer.json`` (when the core can
export it). Nothing in these files depends on paths, times, runners or sharding.
"""

from __future__ import annotations

import hashlib
import logging

import fsspec

import bpe_core
from bpe_core import ChunkCounts, Tokenizer
from pipeline.launch.progress import Reporter
from pipeline.storage.files import read_bytes, remove
from pipeline.storage.paths import join
from pipeline.train.settings import TrainSettings

TOKENIZER_FILES = ("tokenizer.bpe", "tokenizer.tiktoken", "tokenizer.json")


def train_tokenizer(counts: ChunkCounts, settings: TrainSettings, reporter: Reporter) -> Tokenizer:
    """``bpe_core.train`` on the reduced counts with the validated settings; the merge loop's memory estimate, which
    the core logs (it never prints), is reported as a stage."""
    budget = settings.vocab_size - 256 - len(settings.special_tokens)
    native_log = logging.getLogger("bpe_core.native")
    handler, level, propagate = _StageHandler(reporter), native_log.level, native_log.propagate
    native_log.addHandler(handler)
    native_log.setLevel(logging.INFO)
    native_log.propagate = False  # shown once, as a stage (Beam configures the root logger at INFO)
    try:
        tok = bpe_core.train(
            counts,
            settings.vocab_size,
            special_tokens=settings.special_names,
            min_frequency=settings.min_frequency,
            tie_break=settings.tie_break,
            name=settings.name,
            progress=reporter.merges(budget),
        )
    finally:
        native_log.removeHandler(handler)
        native_log.setLevel(level)
        native_log.propagate = propagate
    reporter.end_progress(len(tok.merges))
    ids = settings.special_ids(len(tok.vocab))
    if ids != tok.special_tokens:  # ids given as NAME=ID
        tok = Tokenizer(tok.vocab, merges=tok.merge_ids, pretokenizer=tok.pretokenizer, special_tokens=ids,
                        name=tok.name, backend=tok.backend)  # fmt: skip
    return tok


class _StageHandler(logging.Handler):
    """The core's INFO records (the merge loop's memory estimate) as the reporter's ``memory`` stage."""

    def __init__(self, reporter: Reporter) -> None:
        super().__init__(logging.INFO)
        self.reporter = reporter

    def emit(self, record: logging.LogRecord) -> None:
        self.reporter.stage("memory", estimate=record.getMessage())


def write_tokenizers(tok: Tokenizer, settings: TrainSettings, out_dir: str) -> dict:
    """The manifest's ``artifacts`` (and, with several sizes, ``vocabularies``) of the tokenizer files of a trained
    ``tok``: in ``out_dir`` for one size, in ``out_dir/v{N}/`` for each of several (``write_tokenizer_sizes``)."""
    if len(settings.vocab_sizes) > 1:  # one merge loop to the largest size, each smaller one cut from it
        return write_tokenizer_sizes(tok, settings, out_dir)
    return {"artifacts": write_tokenizer_files(tok, out_dir)}


def write_tokenizer_sizes(tok: Tokenizer, settings: TrainSettings, out_dir: str) -> dict:
    """The tokenizer of each of several sizes, cut from ``tok`` (trained to the largest) into ``out_dir/v{N}/``;
    return the manifest's ``artifacts`` (keyed ``v{N}/file``) and ``vocabularies`` (merges and n_vocab per size).

    A size beyond what training reached (no pair reached min_frequency) is the whole tokenizer, as a separate run
    at that size would have stopped at the same merge.
    """
    artifacts, vocabularies = {}, {}
    for size in settings.vocab_sizes:
        sub = tok.truncated(min(size, tok.n_vocab))
        folder = f"v{size}"
        remove(join(out_dir, folder))  # an earlier run's files (--overwrite) must not stay beside these
        fs, path = fsspec.core.url_to_fs(join(out_dir, folder))
        fs.makedirs(path, exist_ok=True)
        files = write_tokenizer_files(sub, join(out_dir, folder))
        artifacts.update({f"{folder}/{name}": entry for name, entry in files.items()})
        vocabularies[folder] = {"vocab_size": size, "merges": len(sub.merges), "n_vocab": sub.n_vocab}
    return {"artifacts": artifacts, "vocabularies": vocabularies}


def write_tokenizer_files(tok: Tokenizer, out_dir: str) -> dict:
    """Write the artifact and its exports; return ``{file: {"sha256", "bytes"}}`` for the manifest.

    A superword tokenizer is ``tokenizer.bpe`` alone: a rank file or ``tokenizer.json`` cannot hold its supermerges.
    """
    tok.save(join(out_dir, "tokenizer.bpe"))
    if tok.superword is None:
        tok.to_tiktoken(join(out_dir, "tokenizer.tiktoken"))
        tok.to_huggingface(join(out_dir, "tokenizer.json"))
    written = {}
    for name in TOKENIZER_FILES:
        try:
            data = read_bytes(join(out_dir, name))
        except FileNotFoundError:
            continue
        written[name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    return written
