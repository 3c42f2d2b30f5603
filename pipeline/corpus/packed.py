"""Read a range of many small whole files (``kind == "files"``) as one block: their bytes back to back, parsed by
the format's block parser once, the documents then given back to their files.

Reading each small file alone cost ~1 ms of fixed work per file (an fsspec open, then numpy and Arrow calls on a
block of one line): 100,000 one-line files spent most of an encode there (issue 36). Here the pieces are read with
plain ``open`` where local, joined with a newline after any that lacks one (a last line without its newline is the
same document either way), parsed as blocks of at most ``BLOCK_LINES`` lines, and each document's position is
mapped back to its file and offset. Pieces that would parse differently joined (a byte-order mark opening a file
other than the first: it is dropped only at a file's start) and compressed pieces are read one by one instead.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import fsspec
import numpy as np

from pipeline.corpus.batcher import Batcher
from pipeline.corpus.formats.jsonl import _jsonl_block
from pipeline.corpus.formats.text import _text_block
from pipeline.corpus.lines import BOM, few_lines
from pipeline.corpus.plan import CorpusSpec, compression_of
from pipeline.corpus.records import CorpusRange
from pipeline.corpus.texts import text_bytes
from pipeline.storage.paths import is_url


def joinable(rng: CorpusRange, spec: CorpusSpec, fmt: str) -> bool:
    """Whether a packed range can be read as one block: line documents of text or JSONL, uncompressed files."""
    return (
        fmt in ("text", "jsonl")
        and spec.text_unit == "line"
        and not any(compression_of(path) for path, *_ in rng.pieces)
    )


def read_joined(rng: CorpusRange, spec: CorpusSpec, fmt: str, batcher: Batcher) -> Iterator[None] | None:
    """Fill ``batcher`` with the documents of every piece, file by file; None where the pieces cannot be joined
    (then the caller reads them one by one)."""
    contents = [_read(path, start, end) for path, _, start, end in rng.pieces]
    if any(data.startswith(BOM) for data in contents[1:]):
        return None
    return _parse_joined(rng, spec, fmt, batcher, contents)


def _parse_joined(rng, spec, fmt, batcher: Batcher, contents: list[bytes]) -> Iterator[None]:
    starts, parts, at = [], [], 0
    for data in contents:
        starts.append(at)
        if data and not data.endswith(b"\n"):
            data += b"\n"
        parts.append(data)
        at += len(data)
    block = b"".join(parts)
    parse = _text_block if fmt == "text" else functools.partial(_jsonl_block, field=spec.text_field)
    scratch = Batcher(rng, spec, batcher.kind)
    for offset, lines in few_lines(0, block):
        parse(lines, offset, spec.max_document_bytes, scratch)
        yield from _give_back(scratch.take(), rng, np.asarray(starts, np.int64), batcher)


def _give_back(joined, rng: CorpusRange, starts: np.ndarray, batcher: Batcher) -> Iterator[None]:
    """The documents and dead letters of the joined block, back in their files, in order; yields after each file,
    so that the caller cuts batches of about ``batch_bytes`` between files."""
    positions = np.asarray(joined.positions, np.int64)
    owner = np.searchsorted(starts, positions, side="right") - 1
    dead_owner = np.searchsorted(starts, [d.position for d in joined.dead_letters], side="right") - 1
    texts = joined.texts.arrow
    cuts = np.searchsorted(owner, np.arange(len(starts) + 1))
    for piece in np.unique(np.concatenate([owner, dead_owner]).astype(np.int64)).tolist():
        path, source_index, _, _ = rng.pieces[piece]
        batcher.begin_file(path, source_index)
        lo, hi = int(cuts[piece]), int(cuts[piece + 1])
        if hi > lo:
            column = texts.slice(lo, hi - lo)
            batcher.add_column(positions[lo:hi] - starts[piece], column, int(text_bytes(column).sum()))
        for d, o in zip(joined.dead_letters, dead_owner.tolist(), strict=True):
            if o == piece:
                batcher.add_dead(d._replace(source=path, position=d.position - int(starts[piece])))
        yield


def _read(path: str, start: int, end: int) -> bytes:
    if not is_url(path):
        with open(path, "rb") as f:
            f.seek(start)
            return f.read(end - start)
    with fsspec.open(path, "rb") as f:
        f.seek(start)
        return f.read(end - start)
