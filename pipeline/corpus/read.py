"""Stage: read the corpus. Planned ranges in, document batches (with their dead letters) out.

Shared by the training and the encoding pipelines. Runner portability: files are opened through fsspec inside the
DoFn (no Beam ``Read`` source, which Dask's runner cannot translate), and everything is emitted from ``process()``
(Dask's runner drops ``finish_bundle`` output up to Beam 2.77).
"""

from __future__ import annotations

from collections.abc import Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

from pipeline.corpus.plan import CorpusPlan, CorpusSpec
from pipeline.corpus.readers import read_range
from pipeline.corpus.records import CorpusRange, DeadLetterBatch, DocumentBatch
from pipeline.launch.progress import active_channel

NAMESPACE = "beam_bpe.read_corpus"


class ReadRangeFn(beam.DoFn):
    """One planned range -> its document batches, in file order. Counts ranges, batches, documents, dead letters."""

    def __init__(self, spec: CorpusSpec) -> None:
        self.spec = spec
        self.ranges = Metrics.counter(NAMESPACE, "ranges")
        self.batches = Metrics.counter(NAMESPACE, "batches")
        self.documents_read = Metrics.counter(NAMESPACE, "documents_read")
        self.documents_ok = Metrics.counter(NAMESPACE, "documents_ok")
        self.dead_letters = Metrics.counter(NAMESPACE, "dead_letters")
        self.bytes_read = Metrics.counter(NAMESPACE, "bytes_read")
        # the terminal's progress bar, where one is drawn (pipeline/launch/progress.py)
        self.progress = active_channel()

    def process(self, rng: CorpusRange) -> Iterator[DocumentBatch]:
        self.ranges.inc()
        for batch in read_range(rng, self.spec):
            self.batches.inc()
            self.documents_read.inc(batch.documents_read)
            self.documents_ok.inc(len(batch.texts))
            self.dead_letters.inc(len(batch.dead_letters))
            self.bytes_read.inc(batch.bytes_read)
            self.progress.batch(rng.index, documents=batch.documents_read, text_bytes=batch.bytes_read, last=batch.last)
            yield batch


class ReadCorpus(beam.PTransform):
    """Read a planned corpus: ``PBegin -> PCollection[DocumentBatch]``.

    The plan (files sorted, cut into ranges) is made before the pipeline runs (:func:`plan_corpus`), so the ranges
    and document ids are the same on every runner; the ranges are reshuffled so that a large file spreads over
    workers.

    >>> batches = pipeline | "ReadCorpus" >> ReadCorpus(plan, CorpusSpec("jsonl"))  # doctest: +SKIP
    """

    def __init__(self, plan: CorpusPlan, spec: CorpusSpec) -> None:
        super().__init__()
        self.plan, self.spec = plan, spec

    def expand(self, pbegin):
        # reshuffle=False: Create adds a reshuffle of its own above one element (11 leaf transforms for a one-range
        # corpus, 15 for 25 ranges); SpreadRanges is the one reshuffle. The elements stay Create's (not one element
        # expanded by a FlatMap): Dask's runner partitions a Create by its elements, and a FlatMap's output not.
        return (
            pbegin
            | "CreateRanges" >> beam.Create(self.plan.ranges, reshuffle=False)
            | "SpreadRanges" >> beam.Reshuffle()
            | "ReadRanges" >> beam.ParDo(ReadRangeFn(self.spec))
        )


class SelectDeadLettersFn(beam.DoFn):
    """Document batch -> its dead letters (if any), for the writing step."""

    def __init__(self) -> None:
        self.batches = Metrics.counter(NAMESPACE, "batches_with_dead_letters")
        self.records = Metrics.counter(NAMESPACE, "dead_letter_records")

    def process(self, batch: DocumentBatch) -> Iterator[DeadLetterBatch]:
        if batch.dead_letters:
            self.batches.inc()
            self.records.inc(len(batch.dead_letters))
            yield DeadLetterBatch(batch.range_index, batch.batch_index, batch.dead_letters)


class SelectDeadLetters(beam.PTransform):
    """``PCollection[DocumentBatch] -> PCollection[DeadLetterBatch]``: the rejected records, with their positions."""

    def expand(self, batches):
        return batches | "SelectDeadLetters" >> beam.ParDo(SelectDeadLettersFn())
