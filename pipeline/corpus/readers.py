"""Read one corpus range into document batches (no Beam here: the reading DoFn and the tests call these).

One module per input format in ``pipeline/corpus/formats/`` (``text``, ``jsonl``, ``parquet``; the registry
``FORMATS`` in its ``__init__.py``), each filling a :class:`Batcher` (``pipeline/corpus/batcher.py``) with its
``{name}_documents``; the line formats share the block-then-line reading of ``pipeline/corpus/lines.py``.

Texts stay in Arrow from the parser to the encoder: a batch's texts are one ``large_string`` array (a
:class:`TextColumn`), built from pyarrow's JSON column, from the block itself for text lines (newlines cut out with
numpy) or from the Parquet column. Only the exact paths (a block that fails UTF-8 or parsing, a bad Parquet column)
make Python strings, for the documents they read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator

from pipeline.corpus.batcher import Batcher
from pipeline.corpus.formats import FORMATS
from pipeline.corpus.packed import joinable, read_joined
from pipeline.corpus.plan import CorpusSpec, compression_of
from pipeline.corpus.records import PACKED, CorpusRange, DocumentBatch

Reader = Callable[[CorpusRange, CorpusSpec, Batcher], Iterator[None]]


def reader_of(name: str) -> tuple[str, Reader]:
    """(position kind, reader) of the registered format ``name``: ``{name}_documents`` of its module."""
    module = importlib.import_module(f"pipeline.corpus.formats.{name}")
    return FORMATS[name].position_kind, getattr(module, f"{name}_documents")


def read_range(rng: CorpusRange, spec: CorpusSpec) -> Iterator[DocumentBatch]:
    """The documents of one range, in file order, as batches; the final batch has ``last=True``.

    A range of several small files (``kind == "files"``) reads them one after another into the same batches, so a
    million one-line files make a few hundred batches, not a million.
    """
    fmt = rng.format or spec.format
    position_kind, reader = reader_of(fmt)
    batcher = Batcher(rng, spec, position_kind)
    joined = read_joined(rng, spec, fmt, batcher) if rng.kind == PACKED and joinable(rng, spec, fmt) else None
    if joined is not None:
        for _ in joined:
            if batcher.full():
                yield batcher.take()
        yield batcher.take(last=True)
        return
    for piece in _pieces(rng):
        batcher.begin_file(piece.source, piece.source_index)
        for _ in reader(piece, spec, batcher):
            if batcher.full():
                yield batcher.take()
    yield batcher.take(last=True)


def _pieces(rng: CorpusRange) -> Iterator[CorpusRange]:
    """Each piece of a range as a one-file range (the range itself where it is one)."""
    if rng.kind != PACKED:
        yield rng
        return
    for path, source_index, start, end in rng.pieces:
        kind = "file" if compression_of(path) or end == start else "bytes"
        yield rng._replace(source=path, source_index=source_index, kind=kind, start=start, end=end, pieces=())
