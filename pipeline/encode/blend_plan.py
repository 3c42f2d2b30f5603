"""A mixture's selection, on keys and lengths alone: which documents of a source each epoch takes. No Beam.

Every document has a key per epoch, ``splitmix64(base ^ splitmix64(position))`` with ``base`` the first 8 bytes of
``blake2b(seed, source name, epoch, file)`` (the file as the output names it, relative to the inputs' root): it
depends on the document's id only, never on the runner, the sharding or the worker count. A source whose target is
T tokens and which holds N tokens is taken whole ``T // N`` times (full epochs); the rest, ``T - (T // N) * N``, is
taken from one more epoch in that epoch's key order (ties: file, then position) until it is met, never cutting a
document, so a share overshoots by less than one document. That last epoch is a threshold: the documents whose
``(key, file, position)`` is at most the last one taken (the ``cutoff``), which a worker tests on its own batch.
Without a target (no ``total_tokens``) every document is taken once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

_M1, _M2, _GOLDEN = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, element-wise on ``uint64`` (wrapping arithmetic).

    >>> int(splitmix64(np.zeros(1, np.uint64))[0])
    16294208416658607535
    """
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def file_base(seed: int, source: str, epoch: int, file: str) -> np.uint64:
    """The key base of one file of a source in one epoch."""
    digest = hashlib.blake2b(f"{seed}\0{source}\0{epoch}\0{file}".encode(), digest_size=8).digest()
    return np.uint64(int.from_bytes(digest, "little"))


def document_keys(seed: int, source: str, epoch: int, files: list[str], file_index, positions) -> np.ndarray:
    """The keys of documents given as (index into ``files``, position) columns."""
    file_index = np.asarray(file_index, dtype=np.int64)
    bases = np.array([file_base(seed, source, epoch, f) for f in files], dtype=np.uint64)
    mixed = splitmix64(np.asarray(positions, dtype=np.int64).astype(np.uint64))
    return splitmix64(bases[file_index] ^ mixed) if len(file_index) else np.zeros(0, np.uint64)


def chosen(keys: np.ndarray, file_index, positions, cutoff: tuple[int, int, int] | None) -> np.ndarray:
    """The mask of documents at or below ``cutoff`` (``(key, file, position)``; None: every document)."""
    if cutoff is None:
        return np.ones(len(keys), dtype=bool)
    key, file, position = np.uint64(cutoff[0]), cutoff[1], cutoff[2]
    file_index, positions = np.asarray(file_index), np.asarray(positions)
    same_key = keys == key
    return (keys < key) | (same_key & ((file_index < file) | ((file_index == file) & (positions <= position))))


@dataclass(frozen=True)
class SourcePick:
    """What one source contributes: ``full_epochs`` whole passes, then, where ``cutoff`` is set, epoch
    ``full_epochs`` up to it; the tokens and documents that come to."""

    full_epochs: int
    cutoff: tuple[int, int, int] | None
    tokens: int
    documents: int
    source_tokens: int
    source_documents: int

    @property
    def epochs(self) -> int:
        """Passes over the source, the last one partial where ``cutoff`` is set."""
        return self.full_epochs + (self.cutoff is not None)

    def cutoffs(self) -> list[list[int] | None]:
        """One entry per epoch: None (every document) or the cutoff."""
        return [None] * self.full_epochs + ([list(self.cutoff)] if self.cutoff is not None else [])


def pick_source(seed: int, source: str, files: list[str], file_index, positions, tokens, target: int | None):
    """The ``SourcePick`` of one source from its documents' columns (file index, position, tokens)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    total, count = int(tokens.sum()), len(tokens)
    if target is None:
        return SourcePick(1, None, total, count, total, count)
    if total == 0:
        raise ValueError(f"source {source}: a target of {target} tokens, and it holds no token ({count} documents)")
    full, rest = divmod(target, total)
    if rest == 0:
        return SourcePick(full, None, full * total, full * count, total, count)
    keys = document_keys(seed, source, full, files, file_index, positions)
    file_index, positions = np.asarray(file_index, np.int64), np.asarray(positions, np.int64)
    order = np.lexsort((positions, file_index, keys))
    taken = int(np.searchsorted(np.cumsum(tokens[order]), rest, side="left")) + 1
    last = order[taken - 1]
    cutoff = (int(keys[last]), int(file_index[last]), int(positions[last]))
    partial = int(tokens[order[:taken]].sum())
    return SourcePick(full, cutoff, full * total + partial, full * count + taken, total, count)


def source_targets(spec) -> list[int | None]:
    """Each source's token target: its share of ``total_tokens``, its own ``tokens``, or None (every document
    once: no ``total_tokens`` and weights)."""
    if not spec.by_weight:
        return [s.tokens for s in spec.sources]
    if spec.total_tokens is None:
        return [None] * len(spec.sources)
    return [round(share * spec.total_tokens) for share in spec.shares()]
