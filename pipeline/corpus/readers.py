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
from pipeline.corpus.plan import CorpusSpec
from pipeline.corpus.records import CorpusRange, DocumentBatch

Reader = Callable[[CorpusRange, CorpusSpec, Batcher], Iterator[None]]


def reader_of(name: str) -> tuple[str, Reader]:
    """(position kind, reader) of the registered format ``name``: ``{name}_documents`` of its module."""
    module = importlib.import_module(f"pipeline.corpus.formats.{name}")
    return FORMATS[name].position_kind, getattr(module, f"{name}_documents")


def read_range(rng: CorpusRange, spec: CorpusSpec) -> Iterator[DocumentBatch]:
    """The documents of one range, in file order, as batches; the final batch has ``last=True``."""
    position_kind, reader = reader_of(rng.format or spec.format)
    batcher = Batcher(rng, spec, position_kind)
    for _ in reader(rng, spec, batcher):
        if batcher.full():
            yield batcher.take()
    yield batcher.take(last=True)
