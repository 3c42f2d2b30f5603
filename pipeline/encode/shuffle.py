"""Stage: ``--shuffle SEED``, the documents of the whole corpus written in a seeded order (issue 34, item 3).

    ShardUnit (a group of consecutive ranges, as a plain run's shard) -> Reshuffle
        -> EncodeAndPartition: read, encode, key each document, write one part file under _tmp/shuffle/ whose
           record batches are the group's documents of each output shard, sorted by key  -> (shard, PartRef)
        -> GroupByKey (small records only: which part file and record batches hold the shard's documents)
        -> WriteShuffledShard: the shard's record batches of every part, sorted by key, through the format's writer

Every document's key is :func:`shuffle_keys`: the first 8 bytes of BLAKE2b over ``"{seed}:{doc_id}"``, the id as the
manifest records it (relative to the inputs' root), so the order does not move with the folder, the runner, the
bundles, ``--range-bytes`` or the worker count. Output shard ``i`` of ``n`` holds the keys in ``[i, i + 1) * 2**64 /
n`` (:func:`shard_of_keys`), sorted by ``(key, doc_id)``: the shards one after the other are one sorted order of the
corpus, and ``n`` comes from the corpus's bytes and ``--shard-size`` alone (:func:`shuffled_shard_count`). A
dead letter goes where its key puts it, as a document would (its shard's file, in key order); each range is also
listed by its home shard (``index % n``), even where that holds none of its documents, so every planned range is in
some shard.

Memory: the ids pass through part files, never through Beam (the local runners hold a GroupByKey's values in memory):
a worker holds one group's documents (``--shard-size`` of input) while it partitions them, and one output shard's
while it sorts and writes it. No shard is complete before every range is encoded, and part files go with the run:
a stopped run keeps only the shards it finished, and its rerun reads the whole corpus again for the others.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import NamedTuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.metrics import Metrics

from pipeline.corpus.plan import CorpusSpec
from pipeline.corpus.readers import read_range
from pipeline.corpus.records import document_id, per_document
from pipeline.encode.documents import encode_batch
from pipeline.encode.layout import TMP_DIR, ShardLayout
from pipeline.encode.shards import read_stats, write_dead_letters, write_stats
from pipeline.encode.shuffle_keys import shard_of_keys, shuffle_keys
from pipeline.encode.shuffle_stats import shard_stats
from pipeline.encode.write import ENCODE_NAMESPACE, READ_NAMESPACE, ShardOutput, ShardUnit, ShardWritten
from pipeline.errors import UsageError
from pipeline.launch.progress import active_channel
from pipeline.storage.files import glob

NAMESPACE = "beam_bpe.shuffle"
PART_DIR = posixpath.join(TMP_DIR, "shuffle")
WRITE_DOCUMENTS = 8192  # documents per write of a shuffled shard: the sorted copy is made one such slice at a time


class PartRef(NamedTuple):
    """What a shuffled shard receives from one group: the part file's record batches ``[first, end)`` that hold its
    documents (none where ``first == end``) and the ranges they come from ``{index: (source, position kind)}``; from
    its home ranges, ``dead`` (``{index: (source, position kind, several files, dead letters)}``)."""

    group: int
    first: int
    end: int
    ranges: dict
    dead: dict


def part_path(layout: ShardLayout, group: int) -> str:
    return layout.path(PART_DIR, f"part-{group:05d}.arrow")


class _Group:
    """The encoded documents of one group, as columns, until they are partitioned."""

    def __init__(self) -> None:
        self.ids: list[np.ndarray] = []
        self.lengths: list[np.ndarray] = []
        self.columns: dict[str, list] = {"doc_id": [], "source": [], "position": [], "range": [], "text_bytes": []}
        self.kinds: dict[int, tuple[str, str, bool]] = {}  # range -> (source, position kind, several files)
        self.dead: dict[int, list] = {}

    def add(self, layout: ShardLayout, rng, encoded) -> None:
        source = layout.relative(rng.source)
        self.kinds.setdefault(rng.index, (source, encoded.position_kind, bool(encoded.source_runs)))
        self.dead.setdefault(rng.index, []).extend(encoded.dead_letters)
        n = len(encoded.positions)
        if not n:
            return
        sources = (
            [layout.relative(s) for s in per_document(encoded.source_runs)] if encoded.source_runs else [source] * n
        )
        kind = encoded.position_kind
        c = self.columns
        c["doc_id"] += [document_id(s, kind, int(p)) for s, p in zip(sources, encoded.positions, strict=True)]
        c["source"] += sources
        c["position"].append(encoded.positions)
        c["range"].append(np.full(n, rng.index, np.int64))
        c["text_bytes"].append(np.asarray(encoded.doc_text_bytes, np.int64))
        self.ids.append(encoded.tokens[encoded.offsets[0] : encoded.offsets[-1]])
        self.lengths.append(np.diff(encoded.offsets))

    def table(self, seed: int, num_shards: int, dtype) -> tuple[pa.Table, np.ndarray, np.ndarray]:
        """The group's documents in reading order, the order that sorts them by (shard, key, doc_id), and each
        one's shard in that order. The sort is of the small columns only: the ids are copied one shard at a time."""
        c = self.columns
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        values = np.concatenate(self.ids) if self.ids else np.zeros(0, dtype)
        self.ids = []
        keys = shuffle_keys(seed, c["doc_id"])
        shards = shard_of_keys(keys, num_shards)
        doc_ids = pa.array(c["doc_id"], pa.string())
        order = _sort_order(pa.table({"shard": shards, "key": keys, "doc_id": doc_ids}), ("shard", "key", "doc_id"))

        def cat(name):
            return np.concatenate(c[name]) if c[name] else np.zeros(0, np.int64)

        table = pa.table({
            "key": keys, "doc_id": doc_ids, "source": pa.array(c["source"], pa.string()), "position": cat("position"),
            "range": cat("range"), "text_bytes": cat("text_bytes"),
            "tokens": pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values)),
        })  # fmt: skip
        return table, order, shards[order]


def _sort_order(table: pa.Table, columns: tuple[str, ...]) -> np.ndarray:
    return pc.sort_indices(table, sort_keys=[(c, "ascending") for c in columns]).to_numpy()


class EncodeAndPartitionFn(beam.DoFn):
    """``ShardUnit`` (a group of ranges) -> its part file -> ``(shard, PartRef)`` for every shard still to write."""

    def __init__(self, output: ShardOutput, spec: CorpusSpec, todo: list[int]) -> None:
        self.output, self.spec, self.todo = output, spec, sorted(todo)
        self.ranges = Metrics.counter(READ_NAMESPACE, "ranges")
        self.documents_read = Metrics.counter(READ_NAMESPACE, "documents_read")
        self.documents = Metrics.counter(ENCODE_NAMESPACE, "documents")
        self.tokens = Metrics.counter(ENCODE_NAMESPACE, "tokens")
        self.dead_letters = Metrics.counter(ENCODE_NAMESPACE, "dead_letters")
        self.parts = Metrics.counter(NAMESPACE, "part_files")
        self.progress = active_channel()
        self.tok = None

    def setup(self) -> None:
        self.tok = self.output.tokenizer.load()

    def process(self, unit: ShardUnit) -> Iterator[tuple[int, PartRef]]:
        if self.tok is None:
            self.setup()
        out, layout = self.output, self.output.layout
        group = _Group()
        for rng in unit.ranges:
            self.ranges.inc()
            for batch in read_range(rng, self.spec):
                self.documents_read.inc(batch.documents_read)
                self.progress.batch(rng.index, documents=batch.documents_read, text_bytes=batch.bytes_read,
                                    last=batch.last)  # fmt: skip
                encoded = encode_batch(self.tok, batch, out.policy, np.dtype(layout.dtype), verify=out.verify)
                self.documents.inc(len(encoded.positions))
                self.tokens.inc(int(encoded.offsets[-1]))
                self.dead_letters.inc(len(encoded.dead_letters))
                group.add(layout, rng, encoded)
            group.kinds.setdefault(rng.index, (layout.relative(rng.source), "", False))  # a range of no batch
        table, order, shards = group.table(layout.shuffle, layout.num_shards, np.dtype(layout.dtype))
        refs, written = {}, 0
        path = part_path(layout, unit.index)
        ranges = table.column("range").to_numpy()
        with _atomic_part(path) as sink, pa.ipc.new_file(sink, table.schema) as writer:
            for shard in self.todo:
                lo, hi = np.searchsorted(shards, [shard, shard + 1])
                batches = table.take(order[lo:hi]).combine_chunks().to_batches() if hi > lo else []
                for batch in batches:
                    writer.write_batch(batch)
                kinds = {int(r): group.kinds[int(r)][:2] for r in np.unique(ranges[order[lo:hi]])}
                refs[shard] = PartRef(unit.index, written, written + len(batches), kinds, {})
                written += len(batches)
                del batches
        del table
        pa.default_memory_pool().release_unused()  # the pool keeps freed blocks; the next group needs as much again
        self.parts.inc()
        dead = _dead_by_shard(layout, group.dead)
        for index, (source, kind, several) in group.kinds.items():
            for shard in {index % layout.num_shards} | {sh for sh, by_range in dead.items() if index in by_range}:
                if shard in refs:  # the range's home (listed even without its documents) and its dead letters'
                    refs[shard].dead[index] = (source, kind, several, dead.get(shard, {}).get(index, []))
        yield from refs.items()


def _dead_by_shard(layout: ShardLayout, dead: dict[int, list]) -> dict[int, dict[int, list]]:
    """``{shard: {range: [(key, id, dead letter)]}}``: a dead letter goes where its key says, as a document would,
    so where it lands does not depend on the ranges."""
    out: dict[int, dict[int, list]] = {}
    for index, letters in dead.items():
        if not letters:
            continue
        ids = [document_id(layout.relative(d.source), d.position_kind, d.position) for d in letters]
        keys = shuffle_keys(layout.shuffle, ids)
        for d, doc_id, key, shard in zip(letters, ids, keys.tolist(), shard_of_keys(keys, layout.num_shards).tolist(),
                                         strict=True):  # fmt: skip
            out.setdefault(shard, {}).setdefault(index, []).append((key, doc_id, d))
    return out


class _atomic_part:
    """A part file written under a temporary name and renamed when whole (a retried unit writes it again)."""

    def __init__(self, path: str) -> None:
        import os

        import fsspec

        self.path, self.tmp = path, f"{path}.tmp-{os.getpid()}"
        self.fs, self.local = fsspec.core.url_to_fs(self.tmp)
        self.file = None

    def __enter__(self):
        self.fs.makedirs(posixpath.dirname(self.local), exist_ok=True)
        self.file = self.fs.open(self.local, "wb")
        return self.file

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.file.close()
        if exc is None:
            self.fs.mv(self.local, self.fs._strip_protocol(self.path))
        else:
            self.fs.rm(self.local)
        return False


class WriteShuffledShardFn(beam.DoFn):
    """``(shard, [PartRef])`` -> the shard's documents of every part, sorted by (key, doc_id), written through the
    format's writer; its dead letters and stats file (last) -> ``ShardWritten``."""

    def __init__(self, output: ShardOutput) -> None:
        self.output = output
        self.shards = Metrics.counter(NAMESPACE, "shards_written")
        self.already = Metrics.counter(NAMESPACE, "shards_already_complete")

    def process(self, element) -> Iterator[ShardWritten]:
        index, refs = element
        layout = self.output.layout
        if index == self.output.fail_at_shard:
            raise RuntimeError(f"test fault: WriteShuffledShard fails at shard {index} (fail_at_shard)")
        stats = read_stats(layout, index)
        if stats is not None:  # a retried unit: the first attempt completed the shard
            self.already.inc()
            yield ShardWritten(0, index, stats)
            return
        refs = sorted(refs, key=lambda r: r.group)
        table = _read_parts(layout, refs)
        order = _sort_order(table.select(["key", "doc_id"]), ("key", "doc_id"))
        writer = layout.format.writer(layout.path(layout.name(index)), layout)
        batches = 0
        try:
            for start in range(0, table.num_rows, WRITE_DOCUMENTS):  # the sorted copy made one slice at a time
                _write_slice(writer, table.take(order[start : start + WRITE_DOCUMENTS]).combine_chunks())
                batches += 1
        except BaseException as exc:
            writer.abort(exc)
            raise
        files = writer.close()
        stats = shard_stats(layout, index, table, refs, self.output.verify, batches)
        dead = [d for _, _, d in sorted((t for r in refs for v in r.dead.values() for t in v[3]), key=lambda t: t[:2])]
        files.update(write_dead_letters(layout, index, dead))
        stats["files"] = files
        write_stats(layout, index, stats)  # last: from here on the shard is complete
        del table
        pa.default_memory_pool().release_unused()
        self.shards.inc()
        yield ShardWritten(0, index, stats)


def _read_parts(layout: ShardLayout, refs: list[PartRef]) -> pa.Table:
    import fsspec

    tables = []
    for ref in refs:
        if ref.end <= ref.first:
            continue
        with fsspec.open(part_path(layout, ref.group), "rb") as f:
            reader = pa.ipc.open_file(f)
            tables.append(pa.Table.from_batches([reader.get_batch(k) for k in range(ref.first, ref.end)]))
    if not tables:
        return pa.table({"key": pa.array([], pa.uint64()), "doc_id": pa.array([], pa.string())})
    return pa.concat_tables(tables)


def _write_slice(writer, part: pa.Table) -> None:
    tokens = part.column("tokens").chunk(0)
    lengths = pc.list_value_length(tokens).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    ids = pc.list_flatten(tokens).to_numpy(zero_copy_only=False)
    columns = {"doc_ids": part.column("doc_id").chunk(0), "sources": part.column("source").to_pylist(),
               "positions": part.column("position").to_numpy()}  # fmt: skip
    writer.write(ids, offsets, **{name: columns[name] for name in writer.wants})


class WriteShuffledShards(beam.PTransform):
    """``PBegin -> PCollection[ShardWritten]``: the shards ``todo`` of one output, documents in the seeded order.

    >>> written = pipeline | "WriteShuffledShards" >> WriteShuffledShards(units, output, spec, todo)  # doctest: +SKIP
    """

    def __init__(self, units: list[ShardUnit], output: ShardOutput, spec: CorpusSpec, todo) -> None:
        super().__init__()
        self.units, self.output, self.spec, self.todo = list(units), output, spec, sorted(todo)

    def expand(self, pbegin):
        return (
            pbegin
            | "CreateGroups" >> beam.Create(self.units)
            | "SpreadGroups" >> beam.Reshuffle()
            | "EncodeAndPartition" >> beam.ParDo(EncodeAndPartitionFn(self.output, self.spec, self.todo))
            | "GroupByShard" >> beam.GroupByKey()
            | "WriteShuffledShard" >> beam.ParDo(WriteShuffledShardFn(self.output))
        )


def group_units(ranges, layout: ShardLayout) -> list[ShardUnit]:
    """The units of the first step: consecutive ranges as a plain run's shards (``layout.range_to_shard``)."""
    by_group: dict[int, list] = {}
    for r in ranges:
        by_group.setdefault(layout.range_to_shard[r.index] if layout.range_to_shard else r.index, []).append(r)
    return [ShardUnit(g, tuple(sorted(rs, key=lambda r: r.index)), (0,)) for g, rs in sorted(by_group.items())]


def encode_shuffled(outputs: list, beam_args: list[str], reporter) -> None:
    """``run.encode_outputs`` for a shuffled output: every range read (each shard holds documents of all of them),
    only the shards still to write written."""
    from pipeline.launch.options import pipeline_options, run_to_end

    if len(outputs) > 1:
        raise UsageError("--shuffle encodes with one --tokenizer per run: run one job per tokenizer (--out OUT/NAME)")
    out = outputs[0]
    if out.finished is not None:
        return
    plan, layout = out.plan, out.layout
    units = group_units(plan.corpus.ranges, layout)
    reporter.stage("resume", shards=layout.num_shards, complete=layout.num_shards - len(out.todo),
                   todo=len(out.todo), ranges=len(plan.corpus.ranges))  # fmt: skip
    if not out.todo or not units:
        return
    spec = ShardOutput(plan.ref, plan.policy, layout, verify=plan.job.settings.verify,
                       fail_at_shard=plan.job.fail_at_shard)  # fmt: skip
    sizes = {f.path: f.size for f in plan.corpus.files}
    with reporter.pipeline("encode", ranges=plan.corpus.ranges, file_sizes=sizes, beam_args=beam_args,
                           shards=lambda: (len(glob(layout.stats_glob())), layout.num_shards)):  # fmt: skip
        pipeline = beam.Pipeline(options=pipeline_options(beam_args, num_ranges=len(units)))
        _ = pipeline | "WriteShuffledShards" >> WriteShuffledShards(units, spec, plan.job.corpus, out.todo)
        run_to_end(pipeline)


def shuffled_graph(pipeline, plan):
    """The stages of a shuffled run on ``pipeline`` (every shard of the plan): the Dataflow translation's."""
    layout = plan.layout
    spec = ShardOutput(plan.ref, plan.policy, layout, verify=plan.job.settings.verify)
    units = group_units(plan.corpus.ranges, layout)
    return pipeline | "WriteShuffledShards" >> WriteShuffledShards(units, spec, plan.job.corpus,
                                                                   range(layout.num_shards))  # fmt: skip
