"""Byte-pair merging of one piece: the reference kernels every encoder of this project must equal.

A piece starts as one token per byte. At each step the adjacent pair with the smallest merge value is merged,
the leftmost one on ties (tiktoken's ``_byte_pair_merge``, Hugging Face's ``Word::merge_all``). A pair's value is
``rank << 32 | merged_id``; pairs that do not merge have the value ``NO_MERGE``. Where the value comes from is the
vocabulary's business (:class:`MergeTable` for merge lists, :class:`RankTable` for rank-only tiktoken files).

Short pieces use a scan (quadratic in the piece length but all of it in C-level list operations); long pieces use
a heap plus a linked list, O(n log n) whatever the vocabulary, so that a 1 MiB piece without spaces cannot stall.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

NO_MERGE = 1 << 62
ID_MASK = (1 << 32) - 1
# Scan below this many tokens, heap above. Measured on cl100k over docs_python_rst: pieces longer than 64 bytes
# are under 0.1% of pieces; at 64 tokens the scan costs about what the heap does.
SCAN_LIMIT = 64
# Pair caches are cleared when they reach this size, to bound memory on endless streams of novel text.
PAIR_CACHE_LIMIT = 1 << 21

Lookup = Callable[[int], int]


class MergeTable(dict):
    """``(left << 32 | right) -> rank << 32 | merged_id`` from an explicit merge list; misses are NO_MERGE."""

    def __missing__(self, key: int) -> int:
        return NO_MERGE


class RankTable(dict):
    """Pair values for a rank-only vocabulary: a pair merges if the concatenated bytes are a token.

    The rank of the merged token is its id (tiktoken's rule). Values are computed on first use and cached.
    """

    def __init__(self, id_to_bytes: list[bytes | None], bytes_to_id: dict[bytes, int]) -> None:
        super().__init__()
        self._id_to_bytes = id_to_bytes
        self._bytes_to_id = bytes_to_id

    def __missing__(self, key: int) -> int:
        if len(self) >= PAIR_CACHE_LIMIT:
            self.clear()
        left = self._id_to_bytes[key >> 32]
        right = self._id_to_bytes[key & ID_MASK]
        rank = self._bytes_to_id.get(left + right)  # type: ignore[operator]
        value = NO_MERGE if rank is None else (rank << 32 | rank)
        self[key] = value
        return value

    def __reduce__(self):  # pickle the inputs, not the cache
        return (RankTable, (self._id_to_bytes, self._bytes_to_id))


def merge_ids(ids: list[int], lookup: Lookup, stats: list[int] | None = None) -> list[int]:
    """Merge ``ids`` (one piece) in place of a copy and return the final token ids."""
    if len(ids) < 2:
        return ids
    if len(ids) <= SCAN_LIMIT and stats is None:
        return _merge_scan(list(ids), lookup)
    return _merge_heap(ids, lookup, stats)


def _merge_scan(ids: list[int], lookup: Lookup) -> list[int]:
    values = [lookup(ids[i] << 32 | ids[i + 1]) for i in range(len(ids) - 1)]
    while True:
        best = min(values)
        if best == NO_MERGE:
            return ids
        i = values.index(best)  # leftmost on ties
        ids[i] = best & ID_MASK
        del ids[i + 1]
        del values[i]
        if i > 0:
            values[i - 1] = lookup(ids[i - 1] << 32 | ids[i])
        if i < len(values):
            values[i] = lookup(ids[i] << 32 | ids[i + 1])
        elif not values:
            return ids


def _merge_heap(ids: list[int], lookup: Lookup, stats: list[int] | None) -> list[int]:
    """Heap of (value, position, pair key) with lazy invalidation over a doubly linked list of positions.

    Each merge pushes at most two entries, so pushes and pops stay below 3n: O(n log n) in all.
    ``stats``, when given, receives [heap pushes, heap pops] for tests that bound the work.
    """
    toks = list(ids)
    n = len(toks)
    nxt = list(range(1, n + 1))
    prv = list(range(-1, n - 1))
    heap = []
    for i in range(n - 1):
        key = toks[i] << 32 | toks[i + 1]
        value = lookup(key)
        if value != NO_MERGE:
            heap.append((value, i, key))
    heapq.heapify(heap)
    pushes, pops = len(heap), 0
    heappop, heappush = heapq.heappop, heapq.heappush
    while heap:
        value, i, key = heappop(heap)
        pops += 1
        j = nxt[i]
        if toks[i] < 0 or j >= n or (toks[i] << 32 | toks[j]) != key:
            continue  # stale: a neighbour merged since this entry was pushed
        toks[i] = value & ID_MASK
        toks[j] = -1
        k = nxt[j]
        nxt[i] = k
        if k < n:
            prv[k] = i
        p = prv[i]
        if p >= 0:
            pkey = toks[p] << 32 | toks[i]
            pvalue = lookup(pkey)
            if pvalue != NO_MERGE:
                heappush(heap, (pvalue, p, pkey))
                pushes += 1
        if k < n:
            nkey = toks[i] << 32 | toks[k]
            nvalue = lookup(nkey)
            if nvalue != NO_MERGE:
                heappush(heap, (nvalue, i, nkey))
                pushes += 1
    if stats is not None:
        stats[:] = [pushes, pops]
    return [t for t in toks if t >= 0]
