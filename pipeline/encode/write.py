"""Stage: write the token-id shards (each holding consecutive ranges): the encoding pipeline's one terminal branch.

    EncodedBatch -> WritePart (one Arrow part file per batch, under _tmp/) -> (shard, PartInfo)
                 -> GroupByKey(shard) -> FinalizeShard (parts in range and batch order -> shard files, dead letters,
                                                         stats naming every range)

Only small ``PartInfo`` records go through the shuffle, never the tokens, so a shard of any size is written with
memory bounded by one batch, on every runner: the Dask runner keeps every collection in memory. The parts are the
price of that (measured in benchmarks/bench_scale.py): a shard's ranges are encoded in parallel on any worker, so
their ids must wait somewhere until the shard can be written in order. Every write goes to a temporary name first
and a shard's stats file is written last, so a retried bundle or a rerun produces the same files and never a half
file; a finalizer that finds its shard already complete (a retry) only reports it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from pipeline.corpus.records import DeadLetter
from pipeline.encode.documents import EncodedBatch
from pipeline.encode.layout import TMP_DIR, ShardLayout
from pipeline.encode.parts import write_part
from pipeline.encode.shards import read_stats, write_dead_letters, write_shard, write_stats
from pipeline.storage.files import remove

NAMESPACE = "beam_bpe.write_shards"


class PartInfo(NamedTuple):
    """What the finalizer needs to know of one written part: small, it goes through the shuffle."""

    range_index: int
    batch_index: int
    last: bool
    source: str
    position_kind: str
    documents_read: int
    documents: int
    tokens: int
    text_bytes: int
    verified: int
    dead_letters: list[DeadLetter]
    path: str  # "" when the batch holds no document to write
    source_runs: tuple = ()  # EncodedBatch.source_runs: a batch of several files


class ShardWritten(NamedTuple):
    """The result of the pipeline: one per shard, with the stats recorded in ``_shards/{name}.json``."""

    index: int
    stats: dict


class WritePartFn(beam.DoFn):
    """Encoded batch -> its part file (deterministic name: a retry writes the same bytes) -> ``(shard, PartInfo)``."""

    def __init__(self, layout: ShardLayout) -> None:
        self.layout = layout
        self.parts = Metrics.counter(NAMESPACE, "parts_written")
        self.part_bytes = Metrics.counter(NAMESPACE, "part_bytes_written")

    def process(self, batch: EncodedBatch) -> Iterator[tuple[int, PartInfo]]:
        path = ""
        if len(batch.positions):
            path = self.layout.part_path(batch.range_index, batch.batch_index)
            size = write_part(path, batch.positions, batch.offsets, batch.tokens)
            self.parts.inc()
            self.part_bytes.inc(size)
        info = PartInfo(
            batch.range_index, batch.batch_index, batch.last, batch.source, batch.position_kind, batch.documents_read,
            len(batch.positions), int(batch.offsets[-1]), batch.text_bytes, batch.verified, batch.dead_letters, path,
            batch.source_runs,
        )  # fmt: skip
        yield self.layout.shard_of(batch.range_index), info


class FinalizeShardFn(beam.DoFn):
    """``(shard, [PartInfo])`` -> the shard's files, its dead letters and its stats file -> ``ShardWritten``.

    ``fail_at_shard`` is a test-only fault hook: the finalizer of that shard raises before writing anything.
    """

    def __init__(self, layout: ShardLayout, *, fail_at_shard: int | None = None) -> None:
        self.layout, self.fail_at_shard = layout, fail_at_shard
        self.shards = Metrics.counter(NAMESPACE, "shards_written")
        self.already = Metrics.counter(NAMESPACE, "shards_already_complete")
        self.dead_letters = Metrics.counter(NAMESPACE, "dead_letters_written")

    def process(self, element: tuple[int, Iterable[PartInfo]]) -> Iterator[ShardWritten]:
        index, infos = element
        stats = read_stats(self.layout, index)
        if stats is not None:  # a retried bundle: the shard was completed by the first attempt
            self.already.inc()
            yield ShardWritten(index, stats)
            return
        if index == self.fail_at_shard:
            raise RuntimeError(f"test fault: FinalizeShard fails at shard {index} (fail_at_shard)")
        parts = _in_order(index, list(infos), self.layout.ranges_of(index))
        yield ShardWritten(index, self._write(index, parts))

    def _write(self, index: int, parts: list[PartInfo]) -> dict:
        layout = self.layout
        files = write_shard(layout, index, [(p.path, _runs(p), p.position_kind) for p in parts if p.path])
        dead = [d for p in parts for d in p.dead_letters]
        files.update(write_dead_letters(layout, index, dead))
        stats = {
            "index": index,
            "name": layout.name(index),
            "fingerprint": layout.fingerprint,
            "position_kind": parts[0].position_kind,
            "files": files,
            "batches": len(parts),
            **_sums(parts),
            "ranges": [_range_entry(layout, r, rp) for r, rp in _by_range(parts)],
        }
        write_stats(layout, index, stats)  # last: from here on the shard is complete
        remove(layout.path(TMP_DIR, layout.name(index)))
        self.shards.inc()
        self.dead_letters.inc(len(dead))
        return stats


SUMS = ("documents_read", "documents", "tokens", "text_bytes", "verified")


def _sums(parts: list[PartInfo]) -> dict:
    return dict(
        {key: sum(getattr(p, key) for p in parts) for key in SUMS}, dead_letters=sum(len(p.dead_letters) for p in parts)
    )


def _runs(part: PartInfo) -> tuple:
    return part.source_runs or ((part.source, -1, part.documents, part.tokens, part.text_bytes),)


def _range_entry(layout: ShardLayout, index: int, parts: list[PartInfo]) -> dict:
    """A range's line in the shard's stats; a range of several files also lists, as columns, its files with the
    documents, tokens and text bytes of each (``sources``), so that document ids and per-file figures need no more."""
    entry = dict(_sums(parts), index=index, source=layout.relative(parts[0].source))
    if any(p.source_runs for p in parts):
        paths: list[str] = []
        columns: dict[str, list[int]] = {"documents": [], "tokens": [], "text_bytes": []}
        for source, _, documents, tokens, size in (run for p in parts if p.documents for run in _runs(p)):
            source = layout.relative(source)
            if not paths or paths[-1] != source:
                paths.append(source)
                for values in columns.values():
                    values.append(0)
            for key, value in zip(columns, (documents, tokens, size), strict=True):
                columns[key][-1] += value
        entry["sources"] = {"paths": paths, **columns}
    return entry


def _by_range(parts: list[PartInfo]) -> list[tuple[int, list[PartInfo]]]:
    out: list[tuple[int, list[PartInfo]]] = []
    for p in parts:
        if not out or out[-1][0] != p.range_index:
            out.append((p.range_index, []))
        out[-1][1].append(p)
    return out


def _in_order(index: int, parts: list[PartInfo], ranges: list[int]) -> list[PartInfo]:
    """The parts sorted by range and batch, checked to be, for each of the shard's ranges, batches 0..k with only
    the last one marked last."""
    parts.sort(key=lambda p: (p.range_index, p.batch_index))
    got = _by_range(parts)
    for r, rp in got:
        indices = [p.batch_index for p in rp]
        if indices != list(range(len(rp))) or not rp[-1].last or any(p.last for p in rp[:-1]):
            raise RuntimeError(
                f"shard {index}, range {r}: got the parts {indices} (last: {[p.last for p in rp]}), expected 0..k with "
                "only k marked last: a batch was lost or duplicated on the way; this is a bug, please report it"
            )
    if [r for r, _ in got] != ranges:
        raise RuntimeError(
            f"shard {index}: got parts of the ranges {[r for r, _ in got]}, expected {ranges}: a range was lost on the "
            "way; this is a bug, please report it"
        )
    return parts


class WriteShards(beam.PTransform):
    """``PCollection[EncodedBatch] -> PCollection[ShardWritten]``: each shard from its ranges, documents in order.

    >>> written = encoded | "WriteShards" >> WriteShards(layout)  # doctest: +SKIP
    """

    def __init__(self, layout: ShardLayout, *, fail_at_shard: int | None = None) -> None:
        super().__init__()
        self.layout, self.fail_at_shard = layout, fail_at_shard

    def expand(self, encoded):
        return (
            encoded
            | "WriteParts" >> beam.ParDo(WritePartFn(self.layout))
            | "GroupPartsByShard" >> beam.GroupByKey()
            | "FinalizeShards" >> beam.ParDo(FinalizeShardFn(self.layout, fail_at_shard=self.fail_at_shard))
        )
