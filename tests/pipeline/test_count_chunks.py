"""Stage tests: PreTokenizeAndCount (TestPipeline + assert_that) against bpe_core.count_chunks, and its combiner."""

from __future__ import annotations

import pickle
import random

import apache_beam as beam
import cloudpickle
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to
from conftest import corpus
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe_core
from bpe_core import PreTokenizer
from pipeline.corpus.records import CorpusStats, DeadLetter, DocumentBatch, ShardCounts
from pipeline.train.count import CountChunksFn, PreTokenizeAndCount, SumCountsFn, shard_of


def _batch(texts, *, index=0, weight=1, dead=()):
    return DocumentBatch(index, 0, True, "src", 0, weight, "offset", list(range(len(texts))), list(texts), list(dead),
                         len(texts) + len(dead), sum(map(len, texts)))  # fmt: skip


def _merged(records):
    counts, stats = {}, None
    for r in records:
        if isinstance(r, ShardCounts):
            assert all(shard_of(c, r.num_shards) == r.shard for c in r.chunk_to_count)
            assert not counts.keys() & r.chunk_to_count.keys()
            counts.update(r.chunk_to_count)
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
        counts = records | beam.Filter(lambda r: isinstance(r, ShardCounts)) | beam.Map(lambda r: sorted(r.chunk_to_count.items()))
        stats = records | beam.Filter(lambda r: isinstance(r, CorpusStats)) | beam.Map(
            lambda r: (r.name_to_value["documents_read"], r.name_to_value["documents_counted"], r.name_to_value["dead_letters"]))
        assert_that(counts, equal_to([[(b" hi", 3), (b"hi", 4)]]), label="counts")
        assert_that(stats, equal_to([(3, 2, 1)]), label="stats")


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(st.dictionaries(st.sampled_from([b"a", b"b", b"c", b"ab"]), st.integers(1, 10**12)), max_size=8),
       seed=st.integers(0, 1000))  # fmt: skip
def test_sum_counts_is_independent_of_how_the_input_is_split(parts, seed):
    fn = SumCountsFn()
    expected: dict = {}
    for part in parts:
        for k, v in part.items():
            expected[k] = expected.get(k, 0) + v
    rng = random.Random(seed)
    shuffled = parts[:]
    rng.shuffle(shuffled)
    cut = rng.randint(0, len(shuffled))
    accs = []
    for group in (shuffled[:cut], shuffled[cut:]):
        acc = fn.create_accumulator()
        for part in group:
            acc = fn.add_input(acc, part)
        accs.append(acc)
    snapshot = [dict(p) for p in parts]
    assert fn.extract_output(fn.merge_accumulators(accs)) == expected
    assert parts == snapshot  # inputs are never changed


def test_shard_of_is_stable_and_the_dofn_pickles():
    assert [shard_of(c, 7) for c in (b"hello", b" world", b"")] == [2, 1, 0]  # crc32 (zlib): a standard, fixed across machines
    fn = CountChunksFn(PreTokenizer.from_spec("o200k"), 3)
    for dumps, loads in ((pickle.dumps, pickle.loads), (cloudpickle.dumps, cloudpickle.loads)):
        copy = loads(dumps(fn))
        copy.setup()
        assert copy.pre == PreTokenizer.from_spec("o200k")
