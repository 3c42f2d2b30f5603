"""Stage tests: PreTokenizeAndCount (TestPipeline + assert_that) against bpe_core.count_chunks, and its combiner."""

from __future__ import annotations

import pickle
import random
from collections import Counter

import apache_beam as beam
import cloudpickle
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to
from conftest import corpus
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe_core
from bpe_core import PreTokenizer
from bpe_core.train.sorted_counts import SortedChunkCounter, sorted_counts_from_dict
from pipeline.corpus.records import CorpusStats, DeadLetter, DocumentBatch, ShardCounts
from pipeline.train.count import CountChunksFn, MergeCountsFn, PreTokenizeAndCount, shard_of
from pipeline.train.counts_files import SCHEMA, counts_table


def _batch(texts, *, index=0, weight=1, dead=()):
    return DocumentBatch(index, 0, True, "src", 0, weight, "offset", list(range(len(texts))), list(texts), list(dead),
                         len(texts) + len(dead), sum(map(len, texts)))  # fmt: skip


def _as_dict(table) -> dict:
    assert table.schema.remove_metadata() == SCHEMA
    chunks, counts = table.column("chunk").to_pylist(), table.column("count").to_pylist()
    assert chunks == sorted(set(chunks)), "a counts table must be sorted by chunk, each chunk once"
    return dict(zip(chunks, counts, strict=True))


def _merged(records):
    counts, stats = {}, None
    for r in records:
        if isinstance(r, ShardCounts):
            part = _as_dict(r.table)
            assert all(shard_of(c, r.num_shards) == r.shard for c in part)
            assert not counts.keys() & part.keys()
            counts.update(part)
        else:
            stats = r.name_to_value
    return counts, stats


def _matches(expected_counts: dict, documents: int):
    def check(records):
        counts, stats = _merged(records)
        assert counts == expected_counts, "pipeline counts differ from bpe_core.count_chunks"
        assert stats["documents_counted"] == documents
        assert stats["chunk_occurrences"] == sum(expected_counts.values())

    return check


def test_counts_equal_bpe_core_count_chunks_on_a_shared_corpus():
    docs = corpus("fortunes_multi", 1500)
    pre = PreTokenizer.from_spec("cl100k")
    batches = [_batch(docs[i : i + 200], index=i) for i in range(0, len(docs), 200)]
    expected = bpe_core.count_chunks(docs, "cl100k")
    with BeamTestPipeline(runner="FnApiRunner") as p:
        created = p | beam.Create(batches)
        for num_shards, max_distinct in ((1, 1 << 20), (4, 50)):  # 50: flushes many times inside a batch
            records = created | f"Count{num_shards}" >> PreTokenizeAndCount(pre, num_shards, max_distinct=max_distinct)
            assert_that(records, _matches(dict(expected), len(docs)), label=f"check{num_shards}")


def test_stage_output_with_assert_that_and_weights():
    pre = PreTokenizer.from_spec("cl100k")
    batches = [_batch(["hi hi"], weight=3), _batch(["hi"], index=1, dead=[DeadLetter("src", 9, "offset", "bad")])]
    with BeamTestPipeline(runner="FnApiRunner") as p:
        records = p | beam.Create(batches) | PreTokenizeAndCount(pre, 1)
        counts = (
            records
            | beam.Filter(lambda r: isinstance(r, ShardCounts))
            | beam.Map(lambda r: sorted(_as_dict(r.table).items()))
        )
        stats = (
            records
            | beam.Filter(lambda r: isinstance(r, CorpusStats))
            | beam.Map(
                lambda r: (
                    r.name_to_value["documents_read"],
                    r.name_to_value["documents_counted"],
                    r.name_to_value["dead_letters"],
                )
            )
        )
        assert_that(counts, equal_to([[(b" hi", 3), (b"hi", 4)]]), label="counts")
        assert_that(stats, equal_to([(3, 2, 1)]), label="stats")


def _table(part: dict):
    return counts_table(sorted_counts_from_dict(part) if part else None)


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(st.dictionaries(st.binary(max_size=3), st.integers(1, 10**12)), max_size=40),
       seed=st.integers(0, 1000))  # fmt: skip
def test_merge_counts_is_independent_of_how_the_input_is_split(parts, seed):
    """Differential: the CombineFn's merged table equals a collections.Counter sum, for any split and order (40
    parts: past MERGE_FAN_IN, so the accumulator compacts on the way)."""
    fn = MergeCountsFn()
    expected: Counter = Counter()
    for part in parts:
        expected.update(part)
    rng = random.Random(seed)
    shuffled = parts[:]
    rng.shuffle(shuffled)
    cuts = sorted(rng.randint(0, len(shuffled)) for _ in range(rng.randint(0, 3)))
    accs = []
    for group in (shuffled[a:b] for a, b in zip([0, *cuts], [*cuts, len(shuffled)], strict=True)):
        acc = fn.create_accumulator()
        for part in group:
            acc = fn.add_input(acc, _table(part))
        accs.append(fn.compact(acc) if rng.random() < 0.5 else acc)
    snapshot = [dict(p) for p in parts]
    assert _as_dict(fn.extract_output(fn.merge_accumulators(accs))) == dict(expected)
    assert parts == snapshot  # inputs are never changed


def test_merge_counts_sums_statistics_and_refuses_an_int64_overflow():
    fn = MergeCountsFn()
    acc = fn.add_input(fn.add_input(fn.create_accumulator(), {"a": 1, "b": 2}), {"a": 3})
    assert fn.extract_output(acc) == {"a": 4, "b": 2}
    big = _table({b"x": (1 << 62) + 1})
    with pytest.raises(OverflowError, match="int64"):
        fn.extract_output(fn.merge_accumulators([[big], [big]]))


@pytest.mark.parametrize("spec", ["cl100k", r"\w+|\s+|[^\w\s]+"])
def test_sorted_counter_equals_count_chunks_for_native_and_regex_pretokenizers(spec):
    """Both counting paths (the native counter, the Python one for a plain regex) against bpe_core.count_chunks."""
    docs = corpus("multi_udhr", 300) + ["caf\u00e9 \ud800 x", "\u00ff" * 5]
    counter = SortedChunkCounter(spec)
    counter.add(docs[:100])
    counter.add(docs[100:])
    parts, total = counter.take(5, weight=7)
    expected = {c: 7 * n for c, n in bpe_core.count_chunks(docs, spec).items()}
    got: dict = {}
    for shard, table in parts:
        part = _as_dict(counts_table(table))
        assert {shard_of(c, 5) for c in part} == {shard}
        got.update(part)
    assert got == expected
    assert total == sum(expected.values())
    assert counter.distinct() == 0


def test_shard_of_is_stable_and_the_dofn_pickles():
    assert [shard_of(c, 7) for c in (b"hello", b" world", b"")] == [
        2,
        1,
        0,
    ]  # crc32 (zlib): a standard, fixed across machines
    fn = CountChunksFn(PreTokenizer.from_spec("o200k"), 3)
    for dumps, loads in ((pickle.dumps, pickle.loads), (cloudpickle.dumps, cloudpickle.loads)):
        copy = loads(dumps(fn))
        copy.setup()
        assert copy.pre == PreTokenizer.from_spec("o200k")
