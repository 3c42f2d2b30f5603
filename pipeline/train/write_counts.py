"""Stage: write the reduced counts, the dead letters and the corpus statistics: the pipeline's one terminal step.

The stage writes its own files (temporary name, then rename) instead of using Beam's file sinks, and it takes all
the pipeline's results flattened into one collection: Dask's runner (Beam 2.77, 2.78) computes only the last branch of
a graph, so every output must flow into this step.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

from bpe_core import PreTokenizer
from pipeline.corpus.records import CorpusStats, DeadLetterBatch, ShardCounts
from pipeline.storage.files import write_atomic
from pipeline.storage.paths import join
from pipeline.train.counts_files import STATS_FILE, counts_parquet, shard_name

NAMESPACE = "beam_bpe.write_counts"


def dead_letter_name(range_index: int, batch_index: int) -> str:
    return f"dead-letters-{range_index:05d}-{batch_index:05d}.jsonl"


class WriteOutputsFn(beam.DoFn):
    """One element -> one file: a counts shard, a batch's dead letters, or the statistics. Emits the path."""

    def __init__(self, out_dir: str, pretokenizer: PreTokenizer) -> None:
        self.out_dir = out_dir
        self.pre_state = (tuple(pretokenizer.patterns), pretokenizer.normalizer, pretokenizer.name)
        self.shards = Metrics.counter(NAMESPACE, "count_shards_written")
        self.chunks = Metrics.counter(NAMESPACE, "chunks_written")
        self.dead_files = Metrics.counter(NAMESPACE, "dead_letter_files_written")
        self.dead_records = Metrics.counter(NAMESPACE, "dead_letters_written")
        self.unknown = Metrics.counter(NAMESPACE, "unknown_elements")

    def process(self, element) -> Iterator[str]:
        if isinstance(element, ShardCounts):
            path = join(self.out_dir, "counts", shard_name(element.shard, element.num_shards))
            patterns, normalizer, name = self.pre_state
            pre = PreTokenizer(patterns, normalizer=normalizer, name=name)
            write_atomic(path, counts_parquet(element.table, pre))
            self.shards.inc()
            self.chunks.inc(element.table.num_rows)
        elif isinstance(element, DeadLetterBatch):
            path = join(self.out_dir, "dead_letters", dead_letter_name(element.range_index, element.batch_index))
            lines = [json.dumps(d.to_json_dict(), ensure_ascii=False) + "\n" for d in element.dead_letters]
            write_atomic(path, "".join(lines).encode("utf-8", "surrogatepass"))
            self.dead_files.inc()
            self.dead_records.inc(len(lines))
        elif isinstance(element, CorpusStats):
            path = join(self.out_dir, "counts", STATS_FILE)
            write_atomic(path, json.dumps(dict(sorted(element.name_to_value.items())), indent=1).encode())
        else:
            self.unknown.inc()
            raise TypeError(f"WriteCounts got an element it cannot write: {type(element).__name__}")
        yield path


class WriteCounts(beam.PTransform):
    """``PCollection[ShardCounts | DeadLetterBatch | CorpusStats] -> PCollection[str]`` (the paths written).

    Layout under ``out_dir``: ``counts/counts-{i:05d}-of-{n:05d}.parquet``, ``counts/_stats.json``,
    ``dead_letters/dead-letters-{range:05d}-{batch:05d}.jsonl``.

    >>> (counts, dead) | beam.Flatten() | "WriteCounts" >> WriteCounts("out", pretokenizer)  # doctest: +SKIP
    """

    def __init__(self, out_dir: str, pretokenizer: PreTokenizer) -> None:
        super().__init__()
        self.out_dir, self.pretokenizer = out_dir, pretokenizer

    def expand(self, results):
        return results | "WriteFiles" >> beam.ParDo(WriteOutputsFn(self.out_dir, self.pretokenizer))
