"""The elements that flow between the pipeline stages: small, picklable named tuples, no behaviour.

Dask's Beam runner (2.77) mixes the tagged outputs of a multi-output ParDo into one collection, so no stage uses
tagged outputs: a document batch carries its own dead letters, and stages that need to tell elements apart look
at their type.
"""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa

OFFSET = "offset"  # a document's position is a byte offset in its (decompressed) file: text and JSONL
ROW = "row"  # a document's position is a row number in its file: Parquet


class CorpusRange(NamedTuple):
    """A unit of reading: a byte range of an uncompressed file, one Parquet row group, or a whole file.

    ``start``/``end`` are byte offsets (``kind == "bytes"``), a row-group index and the next one (``"row_group"``,
    with ``first_row`` the file row of the group's first row), or 0 and the file size (``"file"``).
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

    def document_ids(self) -> list[str]:
        return [document_id(self.source, self.position_kind, p) for p in self.positions]


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
