"""Plain text: a document is a line without its final ``\\n`` (a ``\\r`` before it stays, as the peers keep it), or a
whole file with ``--text-unit file``. A block of valid UTF-8 lines becomes one Arrow column (newlines cut out with
numpy); a block that is not valid UTF-8 is decoded line by line, so that exactly the bad lines are dead letters."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from pipeline.corpus.batcher import Batcher, too_long
from pipeline.corpus.lines import (
    BOM,
    line_documents,
    line_table,
    reject_long,
    split_lines,
    undecodable,
    valid_utf8,
)
from pipeline.corpus.plan import CorpusSpec
from pipeline.corpus.records import CorpusRange


def text_documents(rng: CorpusRange, spec: CorpusSpec, batcher: Batcher) -> Iterator[None]:
    """The documents of a text range into ``batcher``: one per line, or the whole file with ``--text-unit file``."""
    if spec.text_unit == "file":
        return line_documents(rng, spec, batcher, _whole_text, whole_file=True)
    return line_documents(rng, spec, batcher, _text_block)


def _whole_text(block: bytes, offset: int, limit: int, batcher: Batcher) -> None:
    _text_block(block, offset, limit, batcher, whole_file=True)


def _text_block(block: bytes, offset: int, limit: int, batcher: Batcher, *, whole_file: bool = False) -> None:
    if not whole_file and valid_utf8(block):
        _text_lines(block, offset, limit, batcher)
        return
    pieces = [(offset, block)] if whole_file else split_lines(block, offset)
    for position, line in pieces:
        if position == 0 and line.startswith(BOM):
            line = line[len(BOM) :]
        if len(line) > limit:
            batcher.reject(position, too_long(len(line), limit), line, len(line))
            continue
        try:
            batcher.add(position, line.decode("utf-8"), len(line))
        except UnicodeDecodeError as exc:
            batcher.reject(position, undecodable(exc), line, len(line))


def _text_lines(block: bytes, offset: int, limit: int, batcher: Batcher) -> None:
    """A block of valid UTF-8 lines as one Arrow column: the block's bytes with the newlines (and a file-opening
    BOM) cut out, the offsets from the line table; no Python string per line."""
    lines = line_table(block, offset)
    keep = reject_long(block, offset, lines, np.ones(len(lines.ends), bool), limit, batcher)
    begins, ends = lines.begins[keep], lines.ends[keep]
    size = len(block) + 1
    inside = np.cumsum(np.bincount(begins, minlength=size) - np.bincount(ends, minlength=size))[:-1] > 0
    data = np.frombuffer(block, np.uint8)[inside]
    offsets = np.zeros(len(begins) + 1, np.int64)
    np.cumsum(ends - begins, out=offsets[1:])
    texts = pa.LargeStringArray.from_buffers(len(begins), pa.py_buffer(offsets), pa.py_buffer(data.tobytes()))
    batcher.add_column(offset + lines.starts[keep], texts, int(offsets[-1]))
