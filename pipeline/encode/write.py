"""Stage: encode and write the token-id shards, one unit of work per output shard: the encoding pipeline's one branch.

    ShardUnit (a shard's ranges, the outputs that still need it) -> Reshuffle
        -> EncodeShard: read its ranges in order, encode each batch with each tokenizer, stream it into that
           tokenizer's shard writer; close the files, write the dead letters and the stats file  -> ShardWritten

A shard is written by one worker from start to end and is complete (its stats file written) as soon as its last
range is encoded, during the run: a run stopped at any point keeps every shard it finished, and the rerun redoes
only the others (pipeline/encode/resume.py). The price is that parallelism is the number of shards, not of ranges:
the default ``--shard-size`` gives a corpus at least 16 shards up to 1 GiB each (pipeline/encode/settings.py). No
shuffle of ids and no part files: memory is one batch per tokenizer, on every runner (the Dask runner keeps every
collection in memory, and only small ``ShardWritten`` records leave the step). Every write goes to a temporary
name, and the stats file goes last, so a retried unit or a rerun produces the same files and never a half file; a
unit that finds its shard already complete (a retry) only reports it. Everything is emitted from ``process()``
(Dask's runner drops ``finish_bundle`` output up to Beam 2.77).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import NamedTuple

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics

from pipeline.corpus.plan import CorpusSpec
from pipeline.corpus.readers import read_range
from pipeline.corpus.records import CorpusRange
from pipeline.encode.documents import encode_batch
from pipeline.encode.layout import ShardLayout
from pipeline.encode.policy import EncodePolicy
from pipeline.encode.shards import ShardSink, read_stats
from pipeline.encode.tokenizer import TokenizerRef
from pipeline.launch.progress import active_channel

NAMESPACE = "beam_bpe.write_shards"
READ_NAMESPACE = "beam_bpe.read_corpus"
ENCODE_NAMESPACE = "beam_bpe.encode_documents"


class ShardOutput(NamedTuple):
    """One output folder the stage writes into: its tokenizer, policy and layout (small and picklable)."""

    tokenizer: TokenizerRef
    policy: EncodePolicy
    layout: ShardLayout
    verify: bool = False
    fail_at_shard: int | None = None  # test-only fault hook: that shard's unit raises before writing anything


class ShardUnit(NamedTuple):
    """One unit of work: shard ``index`` (the same ranges in every output) for the outputs (indices into the
    stage's outputs) where it is not complete yet."""

    index: int
    ranges: tuple[CorpusRange, ...]
    outputs: tuple[int, ...]


class ShardWritten(NamedTuple):
    """The result of the pipeline: one per shard and output, with the stats recorded in ``_shards/{name}.json``."""

    output: int
    index: int
    stats: dict


def shard_units(ranges: list[CorpusRange], layouts: list[ShardLayout], todo: list[set[int]]) -> list[ShardUnit]:
    """The units of work: every shard that some output still needs (``todo[i]``: output i's shards), its ranges in
    input order. The outputs share one plan, so their shards hold the same ranges (checked)."""
    first = layouts[0]
    for layout in layouts[1:]:
        if (layout.range_to_shard, layout.num_shards) != (first.range_to_shard, first.num_shards):
            raise RuntimeError("the outputs of one run cut the corpus into different shards: this is a bug")
    by_shard: dict[int, list[CorpusRange]] = {}
    for r in ranges:
        by_shard.setdefault(first.shard_of(r.index), []).append(r)
    units = []
    for index in sorted(by_shard):
        outputs = tuple(i for i, shards in enumerate(todo) if index in shards)
        if outputs:
            units.append(ShardUnit(index, tuple(sorted(by_shard[index], key=lambda r: r.index)), outputs))
    return units


class EncodeShardFn(beam.DoFn):
    """``ShardUnit`` -> its shard in every output that needs it -> ``ShardWritten`` per output. Counts ranges,
    batches, documents, tokens, dead letters and shards as the read, encode and write stages did."""

    def __init__(self, outputs: list[ShardOutput], spec: CorpusSpec) -> None:
        self.outputs, self.spec = list(outputs), spec
        self.ranges = Metrics.counter(READ_NAMESPACE, "ranges")
        self.batches = Metrics.counter(READ_NAMESPACE, "batches")
        self.documents_read = Metrics.counter(READ_NAMESPACE, "documents_read")
        self.bytes_read = Metrics.counter(READ_NAMESPACE, "bytes_read")
        self.documents = Metrics.counter(ENCODE_NAMESPACE, "documents")
        self.tokens = Metrics.counter(ENCODE_NAMESPACE, "tokens")
        self.dead_letters = Metrics.counter(ENCODE_NAMESPACE, "dead_letters")
        self.verified = Metrics.counter(ENCODE_NAMESPACE, "verified")
        self.shards = Metrics.counter(NAMESPACE, "shards_written")
        self.already = Metrics.counter(NAMESPACE, "shards_already_complete")
        self.progress = active_channel()  # the terminal's progress bar, where one is drawn
        self.toks: list | None = None

    def setup(self) -> None:
        self.toks = [o.tokenizer.load() for o in self.outputs]  # once per worker process

    def process(self, unit: ShardUnit) -> Iterator[ShardWritten]:
        if self.toks is None:  # runners that skip setup() (none known; cheap to guard)
            self.setup()
        todo = []
        for i in unit.outputs:
            stats = read_stats(self.outputs[i].layout, unit.index)
            if stats is not None:  # a retried unit: the shard was completed by the first attempt
                self.already.inc()
                yield ShardWritten(i, unit.index, stats)
            else:
                todo.append(i)
        for i in todo:
            if unit.index == self.outputs[i].fail_at_shard:
                raise RuntimeError(f"test fault: EncodeShard fails at shard {unit.index} (fail_at_shard)")
        if todo:
            yield from self._write(unit, todo)

    def _write(self, unit: ShardUnit, todo: list[int]) -> Iterator[ShardWritten]:
        with contextlib.ExitStack() as stack:
            sinks = [stack.enter_context(ShardSink(self.outputs[i].layout, unit.index)) for i in todo]
            for rng in unit.ranges:
                self.ranges.inc()
                for batch in read_range(rng, self.spec):
                    self._count_read(rng, batch)
                    batch = self._select(batch)
                    for i, sink in zip(todo, sinks, strict=True):
                        out = self.outputs[i]
                        encoded = encode_batch(self.toks[i], batch, out.policy, np.dtype(out.layout.dtype),
                                               verify=out.verify)  # fmt: skip
                        self._count_encoded(encoded)
                        sink.add(encoded)
        for i, sink in zip(todo, sinks, strict=True):  # closed by the with block: files, dead letters, stats
            self.shards.inc()
            yield ShardWritten(i, unit.index, sink.stats)

    def _select(self, batch):
        """The part of a batch this stage encodes (all of it; a blend's stage keeps what its epoch takes)."""
        return batch

    def _count_read(self, rng: CorpusRange, batch) -> None:
        self.batches.inc()
        self.documents_read.inc(batch.documents_read)
        self.bytes_read.inc(batch.bytes_read)
        self.progress.batch(rng.index, documents=batch.documents_read, text_bytes=batch.bytes_read, last=batch.last)

    def _count_encoded(self, encoded) -> None:
        self.documents.inc(len(encoded.positions))
        self.tokens.inc(int(encoded.offsets[-1]))
        self.dead_letters.inc(len(encoded.dead_letters))
        self.verified.inc(encoded.verified)


class WriteShards(beam.PTransform):
    """``PBegin -> PCollection[ShardWritten]``: every unit's shard in every output that needs it, documents in
    input order.

    >>> written = pipeline | "WriteShards" >> WriteShards(units, outputs, spec)  # doctest: +SKIP
    """

    def __init__(self, units: list[ShardUnit], outputs: list[ShardOutput], spec: CorpusSpec) -> None:
        super().__init__()
        self.units, self.outputs, self.spec = list(units), list(outputs), spec

    def expand(self, pbegin):
        return (
            pbegin
            | "CreateShards" >> beam.Create(self.units)
            | "SpreadShards" >> beam.Reshuffle()
            | "EncodeShards" >> beam.ParDo(EncodeShardFn(self.outputs, self.spec))
        )
