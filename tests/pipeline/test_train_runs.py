"""Stage test: CountRuns (phase 2 of superword training) against bpe_core.superword.reference.count_runs, for any
split."""

from __future__ import annotations

import pickle

import apache_beam as beam
import cloudpickle
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that
from conftest import corpus

import bpe_core
from bpe_core.formats.artifact import dumps_artifact
from bpe_core.superword import reference as sw
from pipeline.corpus.records import DocumentBatch, ShardCounts
from pipeline.train.count import shard_of
from pipeline.train.counts_files import SCHEMA
from pipeline.train.runs import CountRuns, CountRunsFn


def _batch(texts, *, index=0, weight=1):
    return DocumentBatch(index, 0, True, "src", 0, weight, "offset", list(range(len(texts))), list(texts), [],
                         len(texts), sum(map(len, texts)))  # fmt: skip


@pytest.fixture(scope="module")
def docs():
    return corpus("en_bible_kjv", 80) + corpus("code_cpython", 40)


@pytest.fixture(scope="module")
def word(docs):
    return bpe_core.train(bpe_core.count_chunks(docs, "cl100k"), 700)


def _check(expected, documents):
    def check(records):
        runs, stats = {}, None
        for r in records:
            if isinstance(r, ShardCounts):
                assert r.table.schema.remove_metadata() == SCHEMA
                keys, counts = r.table.column("chunk").to_pylist(), r.table.column("count").to_pylist()
                assert keys == sorted(set(keys)) and all(shard_of(k, r.num_shards) == r.shard for k in keys)
                assert not runs.keys() & set(keys)
                runs.update(zip(keys, counts, strict=True))
            else:
                stats = r.name_to_value
        assert runs == expected, "pipeline runs differ from bpe_core.superword.reference.count_runs"
        assert stats["documents_counted"] == documents and stats["run_occurrences"] == sum(expected.values())

    return check


@pytest.mark.parametrize("rule", sw.RULES)
@pytest.mark.parametrize(("splits", "shards"), [(1, 1), (3, 2), (7, 5)])
def test_runs_equal_the_reference_for_any_split(docs, word, rule, splits, shards):
    expected = sw.count_runs(docs, word, rule)
    batches = [_batch(docs[i::splits], index=i) for i in range(splits)]
    with BeamTestPipeline() as p:
        records = p | beam.Create(batches) | CountRuns(dumps_artifact(word), rule, shards)
        assert_that(records, _check(expected, len(docs)))


def test_weight_multiplies(docs, word):
    expected = {k: 3 * n for k, n in sw.count_runs(docs[:20], word).items()}
    with BeamTestPipeline() as p:
        records = p | beam.Create([_batch(docs[:20], weight=3)]) | CountRuns(dumps_artifact(word), "letter-run", 2)
        assert_that(records, _check(expected, 20))


def test_dofn_pickles(word):
    fn = CountRunsFn(dumps_artifact(word), "letter-run", 3)
    for dumps, loads in ((pickle.dumps, pickle.loads), (cloudpickle.dumps, cloudpickle.loads)):
        back = loads(dumps(fn))
        out = list(back.process(_batch(["the cat sat on the mat and the dog"])))
        assert out[-1][1]["documents_counted"] == 1


@pytest.fixture(scope="module")
def all_runs(docs, word):
    return sw.count_runs(docs, word)


def _write_runs(root, runs: dict[bytes, int], shards: int) -> str:
    """runs/ as CountRuns + WriteRuns leave it: one sorted Parquet file per hash shard (empty ones too)."""
    import pyarrow as pa

    from pipeline.train.runs import runs_parquet, runs_shard_name

    root.mkdir(parents=True, exist_ok=True)
    for shard in range(shards):
        keys = sorted(k for k in runs if shard_of(k, shards) == shard)
        table = pa.table([pa.array(keys, pa.binary()), pa.array([runs[k] for k in keys], pa.int64())], schema=SCHEMA)
        (root / runs_shard_name(shard, shards)).write_bytes(runs_parquet(table))
    return str(root)


@pytest.mark.parametrize("shards", [1, 3, 7])
@pytest.mark.parametrize("sized", [True, False], ids=["sized-from-metadata", "grown"])
def test_run_columns_hold_every_run_and_train_the_same_supermerges(tmp_path, all_runs, word, shards, sized,
                                                                    monkeypatch):  # fmt: skip
    """The driver's columns (no dict) hold exactly the counted runs, and the native loop on them gives the merges
    of the dict path (sorted run_columns) and of the Python reference; record batches smaller than a shard too."""
    from pipeline.train import counts_files
    from pipeline.train.runs import load_run_columns

    runs = all_runs
    real = counts_files._record_batches
    monkeypatch.setattr("pipeline.train.runs._record_batches", lambda path: real(path, batch_rows=97))
    if not sized:  # metadata that under-counts: the columns grow as batches come
        monkeypatch.setattr("pipeline.train.runs._sizes", lambda paths: (1, 4))
    columns, report = load_run_columns(_write_runs(tmp_path / "runs", runs, shards))
    assert columns.ids.dtype == "uint32" and columns.offsets.dtype == columns.counts.dtype == "int64"
    assert sw.run_columns_to_dict(columns) == runs and len(columns) == len(runs)
    assert report["unique_runs"] == report["runs_reduced"] == len(runs)
    assert report["run_occurrences"] == report["occurrences_reduced"] == sum(runs.values())
    assert report["dropped_below_min_run_count"] == {"runs": 0, "occurrences": 0}
    alphabet = [word.token_bytes(i) for i in range(len(word.vocab))]
    for tie_break in ("ids", "bytes"):
        from_dict = sw.train_supermerges(runs, alphabet, 120, tie_break=tie_break)
        assert sw.train_supermerges(columns, alphabet, 120, tie_break=tie_break) == from_dict
    if shards == 3:  # the reference backend takes the columns too (slow: a few merges)
        assert sw.train_supermerges(columns, alphabet, 8, backend="python") == sw.train_supermerges(runs, alphabet, 8)


def test_run_columns_refuse_bad_keys_and_missing_shards(tmp_path):
    from pipeline.errors import ShardFileError
    from pipeline.train.runs import load_run_columns

    good = sw.run_key([300, 301])
    for bad in (good + b"\x01\x00", sw.run_key([300])):  # not whole u32 ids; a single id is no run
        with pytest.raises(ShardFileError, match="two or more little-endian u32 ids"):
            load_run_columns(_write_runs(tmp_path / f"bad-{len(bad)}", {good: 2, bad: 1}, 1))
    root = _write_runs(tmp_path / "three", {good: 2}, 3)
    next((tmp_path / "three").glob("runs-00001-*")).unlink()
    with pytest.raises(ShardFileError, match="missing"):
        load_run_columns(root)
    with pytest.raises(ShardFileError, match="no runs"):
        load_run_columns(str(tmp_path / "none"))
