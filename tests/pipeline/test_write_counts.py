"""Stage tests: WriteCounts (TestPipeline + assert_that) writes complete files; counts read back streaming."""

from __future__ import annotations

import json

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpe_core
from bpe_core import PreTokenizer
from bpe_core.train.sorted_counts import sorted_counts_from_dict
from pipeline.corpus.records import CorpusStats, DeadLetter, DeadLetterBatch, ShardCounts
from pipeline.errors import ShardFileError
from pipeline.train.count import shard_of
from pipeline.train.counts_files import (
    SCHEMA,
    counts_parquet,
    counts_pretokenizer,
    counts_table,
    load_chunk_table,
    load_counts,
    shard_name,
    write_missing_shards,
)
from pipeline.train.write_counts import WriteCounts


def test_write_counts_stage_writes_every_file_and_reads_back(tmp_path):
    pre = PreTokenizer.from_spec("o200k")
    counts = {b"b": 5, b"a": 7, b" the": 2**40, b"zz": 1}
    shards = {}
    for chunk, n in counts.items():
        shards.setdefault(shard_of(chunk, 3), {})[chunk] = n
    elements = [ShardCounts(s, 3, counts_table(sorted_counts_from_dict(c))) for s, c in shards.items()]
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
    assert table.schema.field("count").type == "int64" and table.column("chunk").to_pylist() == sorted(
        table.column("chunk").to_pylist()
    )
    assert json.loads((tmp_path / "dead_letters" / "dead-letters-00004-00000.jsonl").read_text()) == {
        "source": "f.jsonl", "offset": 10, "reason": "malformed JSON", "excerpt": "{x"}  # fmt: skip
    assert not list(tmp_path.rglob(".tmp-*"))


def test_counts_filters_break_ties_by_bytes_and_report_exactly(tmp_path):
    pre = PreTokenizer.from_spec("cl100k")
    from pipeline.storage.files import write_atomic

    counts = {b"a": 9, b"b": 4, b"c": 4, b"d": 4, b"e": 1, b"f": 1}
    write_atomic(f"{tmp_path}/{shard_name(0, 1)}", counts_parquet(counts, pre))
    kept, report = load_counts(str(tmp_path), min_chunk_count=2, max_chunks=3)
    assert dict(kept) == {b"a": 9, b"b": 4, b"c": 4}
    assert report["dropped_below_min_count"] == {"chunks": 2, "occurrences": 2}
    assert report["dropped_over_max_chunks"] == {"chunks": 1, "occurrences": 4, "threshold_count": 4, "ties_kept": 2}


def test_incomplete_counts_are_refused(tmp_path):
    from pipeline.storage.files import write_atomic

    write_atomic(f"{tmp_path}/{shard_name(1, 2)}", counts_parquet({b"x": 1}, PreTokenizer.from_spec("cl100k")))
    with pytest.raises(ShardFileError, match="incomplete counts"):
        load_counts(str(tmp_path))
    with pytest.raises(ShardFileError, match="no counts-"):
        load_counts(str(tmp_path / "nowhere"))


def _write_shards(directory, counts: dict, num_shards: int, pre) -> None:
    from pipeline.storage.files import write_atomic

    for shard in range(num_shards):
        part = {c: n for c, n in counts.items() if shard_of(c, num_shards) == shard}
        write_atomic(f"{directory}/{shard_name(shard, num_shards)}", counts_parquet(part, pre))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(counts=st.dictionaries(st.binary(max_size=4), st.integers(1, 40), max_size=60), shards=st.integers(1, 4),
       min_count=st.integers(0, 5), max_chunks=st.integers(0, 12))  # fmt: skip
def test_chunk_table_keeps_the_chunks_and_report_of_load_counts(
    tmp_path_factory, counts, shards, min_count, max_chunks
):
    """Differential: the driver's streaming native table against the dict loader (the reference): the same report,
    the same kept chunks (checked through the merges a training on each gives)."""
    pre = PreTokenizer.from_spec("cl100k")
    directory = tmp_path_factory.mktemp("counts")
    _write_shards(directory, counts, shards, pre)
    expected, expected_report = load_counts(str(directory), min_chunk_count=min_count, max_chunks=max_chunks)
    table, report = load_chunk_table(str(directory), min_chunk_count=min_count, max_chunks=max_chunks)
    assert report == expected_report
    assert len(table) == len(expected) and table.pretokenizer == pre
    with_pairs = {c: n for c, n in expected.items() if len(c) >= 2}
    assert table.train_sizes() == (len(with_pairs), sum(map(len, with_pairs)))
    ours = bpe_core.train(table, 300, min_frequency=1)
    reference = bpe_core.train(dict(expected), 300, min_frequency=1, backend="python")
    assert ours.merges == reference.merges


def test_chunk_table_refuses_a_chunk_in_the_wrong_shard_or_out_of_order(tmp_path):
    from pipeline.storage.files import write_atomic

    pre = PreTokenizer.from_spec("cl100k")
    wrong = next(c for c in (b"a", b"b", b"c", b"d") if shard_of(c, 2) == 0)
    write_atomic(f"{tmp_path}/{shard_name(0, 2)}", counts_parquet({}, pre))
    write_atomic(f"{tmp_path}/{shard_name(1, 2)}", counts_parquet({wrong: 3}, pre))
    with pytest.raises(ShardFileError, match="hashed to shard 0"):
        load_chunk_table(str(tmp_path))
    one = tmp_path / "one"
    unsorted = pa.table([pa.array([b"b", b"a"], pa.binary()), pa.array([1, 2], pa.int64())], schema=SCHEMA)
    write_atomic(f"{one}/{shard_name(0, 1)}", counts_parquet(unsorted, pre))
    with pytest.raises(ShardFileError, match="out of order or repeated"):
        load_chunk_table(str(one))
