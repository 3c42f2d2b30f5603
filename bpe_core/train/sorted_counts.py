"""Chunk counts as sorted columns: the count stage's and the driver's form, never one Python object per chunk.

A ``SortedCounts`` is a table in Arrow's binary layout (``offsets``: int32, ``n + 1``; ``data``: uint8, the chunks'
bytes one after another; ``counts``: int64), its rows sorted by chunk bytes (unsigned, as Python compares bytes),
each chunk once. ``SortedChunkCounter`` counts texts and hands its counts over as such tables, one per hash shard
(``zlib.crc32(chunk) % num_shards``); ``merge_sorted_counts`` merges tables natively (a k-way merge, equal chunks
summed, exact int64 with an error past it); ``ChunkTable`` gathers tables for the native merge loop
(``train_chunk_table``).

>>> counter = SortedChunkCounter("cl100k")
>>> counter.add(["hi hi"])
>>> [(shard, sorted_counts_to_dict(t)) for shard, t in counter.take(1, weight=2)[0]]
[(0, {b' hi': 2, b'hi': 2})]
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

import numpy as np

from bpe_core import native
from bpe_core.pretokenize.pretokenizer import PreTokenizer, PreTokenizerSpec
from bpe_core.pretokenize.text import Text, as_str, as_text
from bpe_core.train.native_loop import train_table_merges


class SortedCounts(NamedTuple):
    """One sorted table of chunk counts in Arrow's binary layout (see the module docstring)."""

    offsets: np.ndarray
    data: np.ndarray
    counts: np.ndarray

    def __len__(self) -> int:  # rows, not fields
        return len(self.counts)


def shard_of(chunk: bytes, num_shards: int) -> int:
    """The hash shard of a chunk: crc32, the same on every machine and Python version."""
    return zlib.crc32(chunk) % num_shards if num_shards > 1 else 0


def sorted_counts_from_dict(chunk_to_count: Mapping[bytes, int]) -> SortedCounts:
    """A dict as a sorted table (the slow path: one Python object per chunk; for tests and non-native counting)."""
    chunks = sorted(chunk_to_count)
    lengths = np.fromiter((len(c) for c in chunks), dtype=np.int64, count=len(chunks))
    offsets = np.zeros(len(chunks) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        raise ValueError(f"the chunks hold {offsets[-1]:,} bytes: a table holds at most 2 GiB; use more shards")
    counts = [chunk_to_count[c] for c in chunks]
    if counts and (max(counts) > np.iinfo(np.int64).max or min(counts) < 0):
        raise OverflowError(f"a chunk count is outside 0 .. 2**63 - 1 ({max(counts)}): lower the source weights")
    data = np.frombuffer(b"".join(chunks), dtype=np.uint8)
    return SortedCounts(offsets.astype(np.int32), data, np.array(counts, dtype=np.int64))


def sorted_counts_to_dict(table: SortedCounts) -> dict[bytes, int]:
    """The table as a dict (tests and small tables)."""
    data, o = table.data.tobytes(), table.offsets
    return {data[o[i] : o[i + 1]]: int(c) for i, c in enumerate(table.counts)}


def merge_sorted_counts(parts: Iterable[SortedCounts]) -> SortedCounts:
    """The sum of sorted tables as one sorted table (native k-way merge; OverflowError past int64).

    >>> a, b = sorted_counts_from_dict({b"x": 1, b"y": 2}), sorted_counts_from_dict({b"y": 3})
    >>> sorted_counts_to_dict(merge_sorted_counts([a, b]))
    {b'x': 1, b'y': 5}
    """
    parts = [p for p in parts if len(p)]
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return sorted_counts_from_dict({})
    return SortedCounts(*native.merge_sorted_counts([tuple(p) for p in parts]))


class SortedChunkCounter:
    """Count texts' chunks and take the counts as sorted tables per hash shard.

    The native counter (a hand-written pre-tokenizer without normalizer) keeps the counts in C++; any other
    pre-tokenizer counts through ``count_chunks`` into a Python dict (the reference's slow path).
    """

    def __init__(self, pretokenizer: PreTokenizerSpec) -> None:
        self.pre = PreTokenizer.from_spec(pretokenizer)
        kind = getattr(self.pre, "native_kind", None)
        self._native = native.make_chunk_counter(kind) if kind is not None and native.available() else None
        self._dict: Counter[bytes] = Counter()

    def add(self, texts: list[Text], *, num_threads: int | None = 1) -> None:
        """Count the chunks of ``texts`` (str or bytes), on ``num_threads`` threads (None: every usable core).

        The counts are ``count_chunks``'s: a normalizer runs here first, and the text then goes to the native
        counter as its surrogateescape UTF-8, as ``count_chunks`` does.
        """
        threads = native.resolve_threads(num_threads)
        if self._native is None:
            for text in texts:
                self._dict.update(p.encode("utf-8", "surrogateescape") for p in self.pre.split(as_str(text)))
            return
        if self.pre.normalizer:
            texts = [self.pre.normalize(as_str(t)).encode("utf-8", "surrogateescape") for t in texts]
        elif not all(type(t) is str or type(t) is bytes for t in texts):
            texts = [t if type(t) is str or type(t) is bytes else as_text(t) for t in texts]
        self._native.add(texts, threads)

    def distinct(self) -> int:
        """Distinct chunks held now (an upper bound where both paths were used)."""
        return (self._native.size() if self._native is not None else 0) + len(self._dict)

    def take(self, num_shards: int, *, weight: int = 1) -> tuple[list[tuple[int, SortedCounts]], int]:
        """``([(shard, table), ...] for the non-empty shards, the sum of the weighted counts)``; empties the counter."""
        parts: dict[int, list[SortedCounts]] = {}
        total = 0
        if self._native is not None:
            shards, total = self._native.take_sorted(num_shards, weight)
            for shard, columns in shards:
                parts.setdefault(shard, []).append(SortedCounts(*columns))
        if self._dict:
            split: dict[int, dict[bytes, int]] = {}
            for chunk, n in self._dict.items():
                split.setdefault(shard_of(chunk, num_shards), {})[chunk] = n * weight
                total += n * weight
            self._dict = Counter()
            for shard, counts in split.items():
                parts.setdefault(shard, []).append(sorted_counts_from_dict(counts))
        return [(shard, merge_sorted_counts(parts[shard])) for shard in sorted(parts)], total


class ChunkTable:
    """Unique chunks gathered from sorted tables for the native merge loop, 1 byte per chunk byte plus 16 per chunk.

    ``add`` checks that each shard's rows are sorted, distinct and hashed to that shard (so no chunk is in two
    shards) and drops counts below ``min_count`` with exact tallies; ``keep_top`` keeps the most frequent chunks.
    """

    def __init__(self, *, pretokenizer: PreTokenizer | None = None) -> None:
        self._table = native.make_chunk_table()
        self.pretokenizer = pretokenizer  # as ChunkCounts remembers it: bpe_core.train uses it

    def add(self, table: SortedCounts, *, shard: int, num_shards: int, min_count: int = 0) -> None:
        self._table.add(table.offsets, table.data, table.counts, shard, num_shards, min_count)

    def keep_top(self, max_chunks: int) -> None:
        self._table.keep_top(max_chunks)

    def reserve(self, rows: int, data_bytes: int) -> None:
        """Room for ``rows`` chunks of ``data_bytes`` in all (a hint: growth beyond it still works)."""
        self._table.reserve(rows, data_bytes)

    def __len__(self) -> int:
        return len(self._table)

    def min_count_kept(self) -> int:
        return self._table.min_count_kept()

    def count_equal(self, value: int) -> int:
        return self._table.count_equal(value)

    def tallies(self) -> dict[str, int]:
        """rows, occurrences (all added), low_rows, low_occurrences (below min_count), over_rows, over_occurrences
        (dropped by keep_top): exact Python ints."""
        return self._table.tallies()

    def train_sizes(self) -> tuple[int, int]:
        return self._table.train_sizes()


def train_chunk_table(
    table: ChunkTable,
    budget: int,
    min_count: int,
    tie_break: str,
    progress: Callable[[int, int], None] | None = None,
    *,
    memory_limit: int | None = None,
) -> tuple[list[tuple[int, int]], list[bytes]]:
    """The native merge loop on a ``ChunkTable`` (emptied): the merges and token bytes of ``train_merges``."""
    return train_table_merges(table._table, budget, min_count, tie_break, progress, memory_limit=memory_limit)
