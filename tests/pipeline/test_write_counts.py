"""Stage tests: WriteCounts (TestPipeline + assert_that) writes complete files; counts read back streaming."""

from __future__ import annotations

import json

import apache_beam as beam
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from bpe_core import PreTokenizer
from pipeline.corpus.records import CorpusStats, DeadLetter, DeadLetterBatch, ShardCounts
from pipeline.train.count import shard_of
from pipeline.train.counts_files import CountsError, counts_pretokenizer, load_counts, write_missing_shards
from pipeline.train.write_counts import WriteCounts


def test_write_counts_stage_writes_every_file_and_reads_back(tmp_path):
    pre = PreTokenizer.from_spec("o200k")
    counts = {b"b": 5, b"a": 7, b" the": 2**40, b"zz": 1}
    shards = {}
    for chunk, n in counts.items():
        shards.setdefault(shard_of(chunk, 3), {})[chunk] = n
    elements = [ShardCounts(s, 3, c) for s, c in shards.items()]
    elements += [DeadLetterBatch(4, 0, [DeadLetter("f.jsonl", 10, "offset", "malformed JSON", "{x")])]
    elements += [CorpusStats({"documents_read": 3, "documents_counted": 2, "dead_letters": 1})]
    out = str(tmp_path)
    expected = [f"{out}/counts/counts-{s:05d}-of-00003.parquet" for s in shards]
    expected += [f"{out}/dead_letters/dead-letters-00004-00000.jsonl", f"{out}/counts/_stats.json"]
    with BeamTestPipeline(runner="FnApiRunner") as p:
        written = p | beam.Create(elements) | "WriteCounts" >> WriteCounts(out, pre)
        assert_that(written, equal_to(expected))
    write_missing_shards(f"{out}/counts", 3, pre)
    loaded, report = load_counts(f"{out}/counts")
    assert dict(loaded) == counts and loaded.pretokenizer == pre == counts_pretokenizer(f"{out}/counts")
    table = pq.read_table(expected[0])
    assert table.schema.field("count").type == "int64" and table.column("chunk").to_pylist() == sorted(table.column("chunk").to_pylist())
    assert json.loads((tmp_path / "dead_letters" / "dead-letters-00004-00000.jsonl").read_text()) == {
        "source": "f.jsonl", "offset": 10, "reason": "malformed JSON", "excerpt": "{x"}  # fmt: skip
    assert not list(tmp_path.rglob(".tmp-*"))


def test_counts_filters_break_ties_by_bytes_and_report_exactly(tmp_path):
    pre = PreTokenizer.from_spec("cl100k")
    from pipeline.storage.files import write_atomic
    from pipeline.train.counts_files import counts_parquet, shard_name

    counts = {b"a": 9, b"b": 4, b"c": 4, b"d": 4, b"e": 1, b"f": 1}
    write_atomic(f"{tmp_path}/{shard_name(0, 1)}", counts_parquet(counts, pre))
    kept, report = load_counts(str(tmp_path), min_chunk_count=2, max_chunks=3)
    assert dict(kept) == {b"a": 9, b"b": 4, b"c": 4}
    assert report["dropped_below_min_count"] == {"chunks": 2, "occurrences": 2}
    assert report["dropped_over_max_chunks"] == {"chunks": 1, "occurrences": 4, "threshold_count": 4, "ties_kept": 2}


def test_incomplete_counts_are_refused(tmp_path):
    from pipeline.storage.files import write_atomic
    from pipeline.train.counts_files import counts_parquet, shard_name

    write_atomic(f"{tmp_path}/{shard_name(1, 2)}", counts_parquet({b"x": 1}, PreTokenizer.from_spec("cl100k")))
    with pytest.raises(CountsError, match="incomplete counts"):
        load_counts(str(tmp_path))
    with pytest.raises(CountsError, match="no counts-"):
        load_counts(str(tmp_path / "nowhere"))
