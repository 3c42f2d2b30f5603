"""Stage: pre-tokenize and count. Document batches in, globally reduced 64-bit chunk counts per output shard out.

Each batch is counted in-process by ``bpe_core.count_chunks`` (the algorithm stays in bpe_core), aggregated inside
``process()`` with a bound on distinct chunks (flushed when reached), and emitted as one dict per output shard,
so the shuffle moves a few large elements instead of one element per chunk. A ``CombinePerKey`` over the shard
index then sums the dicts. Corpus statistics travel the same way under the key ``"stats"``, because counters are
not available on every runner (Dask's runner has no metrics).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

import bpe_core
from bpe_core import PreTokenizer
from pipeline.corpus.records import CorpusStats, DocumentBatch, ShardCounts

NAMESPACE = "beam_bpe.count_chunks"
STATS_KEY = "stats"
SLICE_BYTES = 1 << 20
MAX_DISTINCT_CHUNKS = 1 << 20


def shard_of(chunk: bytes, num_shards: int) -> int:
    """The output shard of a chunk: a stable hash (crc32), the same on every machine and Python version."""
    return zlib.crc32(chunk) % num_shards if num_shards > 1 else 0


def sum_into(acc: dict, counts: dict) -> dict:
    """Add ``counts`` into ``acc`` (the larger one is kept as the accumulator) and return it."""
    if len(counts) > len(acc):
        acc, counts = counts, acc
    get = acc.get
    for key, n in counts.items():
        acc[key] = get(key, 0) + n
    return acc


class SumCountsFn(beam.CombineFn):
    """Sum dicts of integer counts key by key (Python ints: exact; checked against int64 when written)."""

    def create_accumulator(self) -> dict:
        return {}

    def add_input(self, acc: dict, counts: dict) -> dict:
        if not acc:
            return dict(counts)  # inputs are not ours to change: copy, then add into the copy
        get = acc.get
        for key, n in counts.items():
            acc[key] = get(key, 0) + n
        return acc

    def merge_accumulators(self, accumulators: Iterable[dict]) -> dict:
        merged: dict = {}
        for acc in accumulators:
            merged = sum_into(merged, acc)
        return merged

    def extract_output(self, acc: dict) -> dict:
        return acc


class CountChunksFn(beam.DoFn):
    """Document batch -> ``(shard, {chunk: count})`` partial counts and one ``("stats", {...})`` record."""

    def __init__(self, pretokenizer: PreTokenizer, num_shards: int, *, max_distinct: int = MAX_DISTINCT_CHUNKS) -> None:
        self.pre_state = (tuple(pretokenizer.patterns), pretokenizer.normalizer, pretokenizer.name)
        self.num_shards, self.max_distinct = num_shards, max_distinct
        self.batches = Metrics.counter(NAMESPACE, "batches")
        self.documents = Metrics.counter(NAMESPACE, "documents_counted")
        self.flushes = Metrics.counter(NAMESPACE, "flushes")
        self.partials = Metrics.counter(NAMESPACE, "partial_counts_out")
        self.pre: PreTokenizer | None = None

    def setup(self) -> None:
        patterns, normalizer, name = self.pre_state
        self.pre = PreTokenizer(patterns, normalizer=normalizer, name=name)

    def process(self, batch: DocumentBatch) -> Iterator[tuple]:
        if self.pre is None:
            self.setup()
        self.batches.inc()
        acc: dict[bytes, int] = {}
        occurrences = 0
        for texts in _slices(batch.texts, SLICE_BYTES):
            # one thread: the runner already runs one bundle per core (see EncodePolicy.encode)
            acc = sum_into(acc, dict(bpe_core.count_chunks(texts, self.pre, num_threads=1)))
            if len(acc) >= self.max_distinct:
                occurrences += yield from self._flush(acc, batch.weight)
                acc = {}
        occurrences += yield from self._flush(acc, batch.weight)
        self.documents.inc(len(batch.texts))
        yield STATS_KEY, _batch_stats(batch, occurrences)

    def _flush(self, acc: dict[bytes, int], weight: int):
        if not acc:
            return 0
        self.flushes.inc()
        if weight != 1:
            acc = {chunk: n * weight for chunk, n in acc.items()}
        occurrences = sum(acc.values())
        if self.num_shards == 1:
            parts = {0: acc}
        else:
            parts: dict[int, dict[bytes, int]] = {}
            for chunk, n in acc.items():
                parts.setdefault(shard_of(chunk, self.num_shards), {})[chunk] = n
        for shard in sorted(parts):
            self.partials.inc()
            yield shard, parts[shard]
        return occurrences


def _slices(texts: list[str], limit: int) -> Iterator[list[str]]:
    start, size = 0, 0
    for i, text in enumerate(texts):
        size += len(text)
        if size >= limit:
            yield texts[start : i + 1]
            start, size = i + 1, 0
    if start < len(texts):
        yield texts[start:]


def _batch_stats(batch: DocumentBatch, occurrences: int) -> dict[str, int]:
    return {
        "batches": 1,
        "ranges_read": int(batch.last),
        "documents_read": batch.documents_read,
        "documents_counted": len(batch.texts),
        "dead_letters": len(batch.dead_letters),
        "bytes_read": batch.bytes_read,
        "text_chars": sum(map(len, batch.texts)),
        "weighted_documents": len(batch.texts) * batch.weight,
        "chunk_occurrences": occurrences,
    }


def _to_record(item: tuple, num_shards: int):
    key, value = item
    return CorpusStats(value) if key == STATS_KEY else ShardCounts(key, num_shards, value)


class PreTokenizeAndCount(beam.PTransform):
    """``PCollection[DocumentBatch] -> PCollection[ShardCounts | CorpusStats]``: pre-tokenize, count, reduce.

    One ``ShardCounts`` per non-empty output shard holds the exact global counts of the chunks hashed to it
    (weighted by each batch's source weight); one ``CorpusStats`` holds the corpus integers.

    >>> counts = batches | "PreTokenizeAndCount" >> PreTokenizeAndCount(PreTokenizer.from_spec("cl100k"), 4)  # doctest: +SKIP
    """

    def __init__(self, pretokenizer: PreTokenizer, num_shards: int = 1, *, max_distinct: int = MAX_DISTINCT_CHUNKS):
        super().__init__()
        if not isinstance(num_shards, int) or num_shards < 1:
            raise ValueError(f"num_shards must be a positive integer, got {num_shards!r}")
        self.pretokenizer, self.num_shards, self.max_distinct = pretokenizer, num_shards, max_distinct

    def expand(self, batches):
        n = self.num_shards
        return (
            batches
            | "CountChunks" >> beam.ParDo(CountChunksFn(self.pretokenizer, n, max_distinct=self.max_distinct))
            | "SumCounts" >> beam.CombinePerKey(SumCountsFn())
            | "ToRecords" >> beam.Map(_to_record, n)
        )
