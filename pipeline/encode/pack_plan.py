"""Where each document's tokens go in fixed-length sequences: the two packing algorithms, on lengths alone.

A pack is an index over the token shards, never a copy of them: a row per piece of a sequence (``seq``, ``shard``,
``offset`` in the shard's token stream, ``length``, ``doc_id``, ``doc_offset`` inside its document), so another
sequence length is another index, not another encode. No Beam and no file access here (``packing.py`` reads and
writes); the functions take the per-document token counts of one shard and return the rows as NumPy columns.

- ``concat``: the documents (each ending in its EOS) as one stream in output order, cut every ``L`` tokens; a
  sequence may span documents and shards. Every sequence but the last holds exactly ``L`` tokens.
- ``ffd``: first-fit-decreasing inside windows of ``FFD_WINDOW`` consecutive documents of a shard: a document
  longer than ``L`` is cut into ``L``-token pieces first (each a sequence of its own, counted as cut), the rest are
  placed longest first (ties: the earlier document) into the first sequence with room; inside a sequence the
  pieces keep document order. No sequence exceeds ``L``; no document of at most ``L`` tokens is split.

>>> cols = concat_rows(shard=0, lengths=np.array([3, 5]), start=0, length=4)
>>> cols["seq"].tolist(), cols["offset"].tolist(), cols["length"].tolist(), cols["doc_offset"].tolist()
([0, 0, 1], [0, 3, 4], [3, 1, 4], [0, 0, 1])
"""

from __future__ import annotations

import numpy as np

PACK_METHODS = ("concat", "ffd")
FFD_WINDOW = 10_000  # documents per first-fit window: the same for every shard size, so packs do not depend on it


def _columns(seq, shard: int, offset, length, doc, doc_offset) -> dict[str, np.ndarray]:
    n = len(seq)
    return {
        "seq": np.asarray(seq, dtype=np.int64),
        "shard": np.full(n, shard, dtype=np.int32),
        "offset": np.asarray(offset, dtype=np.int64),
        "length": np.asarray(length, dtype=np.int64),
        "doc": np.asarray(doc, dtype=np.int64),  # the document's index in its shard (packing.py names it)
        "doc_offset": np.asarray(doc_offset, dtype=np.int64),
    }


def concat_rows(*, shard: int, lengths: np.ndarray, start: int, length: int) -> dict[str, np.ndarray]:
    """The concat rows of one shard whose first token is token ``start`` of the whole output's stream."""
    lengths = np.asarray(lengths, dtype=np.int64)
    doc_start = np.concatenate(([0], np.cumsum(lengths)[:-1])) if lengths.size else lengths
    g0 = start + doc_start  # each document's first token in the global stream
    g1 = g0 + lengths
    # pieces per document: the sequences its tokens touch (an empty document is one empty piece, kept for its id)
    first_seq = g0 // length
    last_seq = np.where(lengths > 0, (g1 - 1) // length, first_seq)
    count = last_seq - first_seq + 1
    doc = np.repeat(np.arange(lengths.size), count)
    k = np.arange(doc.size) - np.repeat(np.cumsum(count) - count, count)  # piece number inside its document
    seq = first_seq[doc] + k
    piece_start = np.maximum(seq * length, g0[doc])
    piece_end = np.minimum((seq + 1) * length, g1[doc])
    return _columns(seq, shard, piece_start - start, piece_end - piece_start, doc, piece_start - g0[doc])


def _first_fit(sizes: list[int], capacity: int) -> list[int]:
    """The bin of each item, first fit in the given order (a max segment tree over the bins' room: log time each)."""
    n = max(1, len(sizes))
    size = 1 << (n - 1).bit_length()
    room = [capacity] * (2 * size)
    out = []
    for s in sizes:
        node = 1
        while node < size:  # leftmost leaf with room >= s: every unopened bin has the whole capacity
            node = 2 * node if room[2 * node] >= s else 2 * node + 1
        out.append(node - size)
        room[node] -= s
        node //= 2
        while node:
            room[node] = max(room[2 * node], room[2 * node + 1])
            node //= 2
    return out


def ffd_rows(*, shard: int, lengths: np.ndarray, first_seq: int, length: int, window: int = FFD_WINDOW):
    """The ffd rows of one shard, its sequences numbered from ``first_seq``; also the number of documents cut."""
    lengths = np.asarray(lengths, dtype=np.int64)
    doc_start = np.concatenate(([0], np.cumsum(lengths)[:-1])) if lengths.size else lengths
    rows: list[tuple[int, int, int, int, int]] = []  # (seq, offset, length, doc, doc_offset)
    seq, cut = first_seq, 0
    for w0 in range(0, lengths.size, window):
        docs = range(w0, min(w0 + window, lengths.size))
        items = []  # (size, doc, doc_offset): what first fit places
        for d in docs:
            n = int(lengths[d])
            whole, rest = divmod(n, length) if n > length else (0, n)
            if whole:
                cut += 1
                for k in range(whole):  # full pieces: a sequence each, in document order
                    rows.append((seq, int(doc_start[d]) + k * length, length, d, k * length))
                    seq += 1
            if rest or not whole:
                items.append((rest, d, whole * length))
        items.sort(key=lambda it: (-it[0], it[1]))
        bins = _first_fit([it[0] for it in items], length)
        placed = sorted(zip(bins, items, strict=True), key=lambda b: (b[0], b[1][1]))
        for b, (size, d, off) in placed:
            rows.append((seq + b, int(doc_start[d]) + off, size, d, off))
        seq += (max(bins) + 1) if bins else 0
    cols = list(zip(*rows, strict=True)) if rows else [(), (), (), (), ()]
    return _columns(cols[0], shard, cols[1], cols[2], cols[3], cols[4]), cut, seq
