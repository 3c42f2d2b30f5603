"""One shard's files: written batch by batch with its format's writer, its dead letters, its stats file.

A shard is complete when its stats file (``_shards/{name}.json``) is there: it is written last, after the data files
and the dead letters, names every file with its size and sha256 and carries the job's fingerprint. No Beam here.
"""

from __future__ import annotations

import json
import posixpath

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.corpus.records import document_id
from pipeline.encode.layout import DEAD_DIR, ShardLayout
from pipeline.encode.streams import write_file
from pipeline.storage.files import read_bytes


class ShardSink:
    """One shard being written: its format's writer, fed encoded batches in order, then its dead letters and its
    stats file (last: from there on the shard is complete). Memory: one batch and the shard's dead letters.

    >>> with ShardSink(layout, 0) as sink:  # doctest: +SKIP
    ...     sink.add(encoded_batch)
    >>> sink.stats["tokens"]  # doctest: +SKIP
    """

    def __init__(self, layout: ShardLayout, index: int) -> None:
        self.layout, self.index = layout, index
        self.writer = layout.format.writer(layout.path(layout.name(index)), layout)
        self.ranges: list[tuple[int, str, dict]] = []  # (range, source, sums), in order
        self.dead: list = []
        self.batches = 0
        self.position_kind = ""
        self.stats: dict | None = None

    def __enter__(self) -> ShardSink:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is None:
            self.close()
        else:
            self.writer.abort(exc)
        return False

    def add(self, batch) -> None:
        """Append one encoded batch (``EncodedBatch``) of the shard's next range, or of the range being written."""
        if not self.ranges or self.ranges[-1][0] != batch.range_index:
            self.ranges.append((batch.range_index, batch.source, dict.fromkeys((*SUMS, "dead_letters"), 0)))
        sums = self.ranges[-1][2]
        if len(batch.positions):
            source = self.layout.relative(batch.source)  # documents named relative to the inputs' root: portable
            positions = pa.array(batch.positions)
            columns = {name: _column(name, source, batch.position_kind, positions) for name in self.writer.wants}
            self.writer.write(batch.tokens, batch.offsets, **columns)
        for key, value in (("documents_read", batch.documents_read), ("documents", len(batch.positions)),
                           ("tokens", int(batch.offsets[-1])), ("text_bytes", batch.text_bytes),
                           ("verified", batch.verified), ("dead_letters", len(batch.dead_letters))):  # fmt: skip
            sums[key] += value
        self.dead += batch.dead_letters
        self.batches += 1
        self.position_kind = self.position_kind or batch.position_kind

    def close(self) -> dict:
        """The data files renamed, the dead letters and the stats file written; the stats."""
        layout, index = self.layout, self.index
        expected = layout.ranges_of(index)
        if [r for r, _, _ in self.ranges] != expected:
            self.writer.abort()
            raise RuntimeError(
                f"shard {index}: got the ranges {[r for r, _, _ in self.ranges]}, expected {expected}: a range was "
                "lost on the way; this is a bug, please report it"
            )
        files = self.writer.close()
        files.update(write_dead_letters(layout, index, self.dead))
        totals = {key: sum(sums[key] for _, _, sums in self.ranges) for key in (*SUMS, "dead_letters")}
        self.stats = {
            "index": index,
            "name": layout.name(index),
            "fingerprint": layout.fingerprint,
            "position_kind": self.position_kind,
            "files": files,
            "batches": self.batches,
            **totals,
            "ranges": [dict(sums, index=r, source=layout.relative(source)) for r, source, sums in self.ranges],
        }
        write_stats(layout, index, self.stats)  # last: from here on the shard is complete
        return self.stats


SUMS = ("documents_read", "documents", "tokens", "text_bytes", "verified")


def document_ids(source: str, kind: str, positions) -> pa.Array:
    """``document_id`` of every position, as one Arrow string column (computed by Arrow, not per document)."""
    prefix = document_id(source, kind, 0)[:-1]
    return pc.binary_join_element_wise(pa.scalar(prefix), pc.cast(positions, pa.string()), "")


def _column(name: str, source: str, kind: str, positions: pa.Array):
    if name == "doc_ids":
        return document_ids(source, kind, positions)
    if name == "sources":
        return [source] * len(positions)
    return positions.to_numpy()


def write_dead_letters(layout: ShardLayout, index: int, dead_letters: list) -> dict:
    if not dead_letters:
        return {}
    data = b"".join(_json_line(d.to_json_dict()) for d in dead_letters)
    return {posixpath.join(DEAD_DIR, layout.name(index) + ".jsonl"): write_file(layout.dead_letters_path(index), data)}


def _json_line(record: dict) -> bytes:
    """One JSON line, valid UTF-8 even where the record holds lone surrogates (escaped as ``\\udXXX`` then)."""
    try:
        return (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(record) + "\n").encode("ascii")


def write_stats(layout: ShardLayout, index: int, stats: dict) -> None:
    write_file(layout.stats_path(index), (json.dumps(stats, indent=1, sort_keys=True) + "\n").encode())


def read_stats(layout: ShardLayout, index: int) -> dict | None:
    """The stats of a complete shard of this job, or None where the shard is incomplete."""
    try:
        stats = json.loads(read_bytes(layout.stats_path(index)))
    except FileNotFoundError:
        return None
    return stats if stats.get("fingerprint") == layout.fingerprint else None
