"""The elements that flow between the pipeline stages: small, picklable named tuples, no behaviour.

Dask's Beam runner (2.77, 2.78) mixes the tagged outputs of a multi-output ParDo into one collection, so no stage uses
tagged outputs: a document batch carries its own dead letters, and stages that need to tell elements apart look
at their type.
"""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa

OFFSET = "offset"  # a document's position is a byte offset in its (decompressed) file: text and JSONL
ROW = "row"  # a document's position is a row number in its file: Parquet


class CorpusRange(NamedTuple):
    """A unit of reading: a list of (file, start, end) pieces, read in order.

    Most ranges are one piece, held in the fields themselves: a byte range of an uncompressed file (``kind ==
    "bytes"``, ``start``/``end`` byte offsets), one Parquet row group (``"row_group"``: a row-group index and the
    next one, ``first_row`` the file row of the group's first row), or a whole file (``"file"``: 0 and its size).
    A range of many small whole files (``"files"``) lists them in ``pieces`` as ``(path, source_index, start, end)``
    (always ``0`` and the file's size), the first of them also in ``source``/``source_index``; ``start``/``end``
    are then 0 and the pieces' total bytes. Packing is what lets a million one-line files be a few hundred ranges
    (one range per file cost ~2.8 ms and ~13 KB each: issue 36). :func:`range_pieces` gives every range's pieces.
    """

    index: int
    source: str
    source_index: int
    kind: str
    start: int
    end: int
    first_row: int = 0
    weight: int = 1
    format: str = ""  # the file's format under --format auto (from its name); "" where the CorpusSpec's applies
    pieces: tuple = ()  # kind "files": ((path, source_index, start, end), ...), whole files in path order


PACKED = "files"  # the kind of a range of several whole files


def range_pieces(rng: CorpusRange) -> tuple[tuple[str, int, int, int], ...]:
    """The ``(path, source_index, start, end)`` pieces of a range, in reading order (one for most ranges).

    >>> range_pieces(CorpusRange(0, "a.txt", 0, "bytes", 0, 10))
    (('a.txt', 0, 0, 10),)
    """
    if rng.kind == PACKED:
        return rng.pieces
    return ((rng.source, rng.source_index, rng.start, rng.end),)


class DeadLetter(NamedTuple):
    """A rejected document: where it is (file and byte offset or row) and why it was rejected."""

    source: str
    position: int
    position_kind: str
    reason: str
    excerpt: str = ""

    def to_json_dict(self) -> dict:
        return {
            "source": self.source,
            self.position_kind: self.position,
            "reason": self.reason,
            "excerpt": self.excerpt,
        }


class DocumentBatch(NamedTuple):
    """Documents of one range, in file order, with the dead letters found among them.

    A range gives one or more batches (``batch_index`` 0, 1, ...; ``last`` on the final one), so a consumer that
    needs whole ranges (the encoding pipeline's one shard per range) can reassemble them in order.
    ``documents_read`` counts every record parsed, good or bad: ``len(texts) + len(dead_letters)``.
    A batch of a packed range may hold documents of several files: ``source_runs`` is then
    ``((source, source_index, documents), ...)``, consecutive runs of its documents by file (dead letters carry their
    own source); it is empty where every document is of ``source``. :func:`batch_sources` gives one source per
    document either way.
    """

    range_index: int
    batch_index: int
    last: bool
    source: str
    source_index: int
    weight: int
    position_kind: str
    positions: list[int]
    texts: list[str]
    dead_letters: list[DeadLetter]
    documents_read: int
    bytes_read: int
    source_runs: tuple = ()

    def document_ids(self) -> list[str]:
        sources = per_document(source_runs_of(self))
        return [document_id(s, self.position_kind, p) for s, p in zip(sources, self.positions, strict=True)]


def source_runs_of(batch) -> tuple[tuple[str, int, int], ...]:
    """``((source, source_index, documents), ...)`` of a batch (a DocumentBatch or anything with the same fields),
    one run where the batch is of one file."""
    if batch.source_runs:
        return batch.source_runs
    return ((batch.source, getattr(batch, "source_index", -1), len(batch.positions)),)


def split_by_source(batch) -> list[tuple[str, int, int, int, int]]:
    """``(source, source_index, first document, end, dead letters)`` of each file of a batch, in order."""
    out, start = [], 0
    for source, source_index, n, *_ in source_runs_of(batch):
        several = bool(batch.source_runs)
        dead = sum(1 for d in batch.dead_letters if d.source == source) if several else len(batch.dead_letters)
        out.append((source, source_index, start, start + n, dead))
        start += n
    return out


def per_document(runs) -> list[str]:
    """The source of each document, from its runs (``(source, source_index, documents, ...)``)."""
    return [run[0] for run in runs for _ in range(run[2])]


class ShardCounts(NamedTuple):
    """The globally reduced chunk counts of one output shard (chunks assigned by a stable hash): an Arrow table
    ``chunk: binary, count: int64`` sorted by chunk (pipeline.train.counts_files.SCHEMA), never a dict of bytes."""

    shard: int
    num_shards: int
    table: pa.Table


class CorpusStats(NamedTuple):
    """Corpus-wide integers summed over all ranges (documents read, counted, dead letters, bytes, ...)."""

    name_to_value: dict[str, int]


class DeadLetterBatch(NamedTuple):
    """The dead letters of one document batch, on their way to the writing step."""

    range_index: int
    batch_index: int
    dead_letters: list[DeadLetter]


def document_id(source: str, position_kind: str, position: int) -> str:
    """A document's id: its file and byte offset (``path@123``) or row (``path#45``).

    >>> document_id("data/a.jsonl", "offset", 120)
    'data/a.jsonl@120'
    """
    return f"{source}{'@' if position_kind == OFFSET else '#'}{position}"
