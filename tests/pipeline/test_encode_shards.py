"""Stage tests: the shard sink in both formats (ranges and batches in order, dead letters, stats), WriteShards
(TestPipeline + assert_that: one unit per shard, retries); the Megatron
MMIDIDX writer and reader against the format's bytes."""

from __future__ import annotations

import dataclasses
import pickle
import random
import struct

import apache_beam as beam
import cloudpickle
import numpy as np
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipeline.corpus.plan import CorpusSpec, InputSpec, plan_corpus
from pipeline.corpus.records import DeadLetter
from pipeline.encode.documents import EncodedBatch
from pipeline.encode.formats import FORMATS
from pipeline.encode.formats.megatron import MegatronIndex, MegatronReader, token_dtype
from pipeline.encode.layout import ShardLayout, assign_shards
from pipeline.encode.policy import EncodePolicy
from pipeline.encode.shards import ShardSink, read_stats
from pipeline.encode.tokenizer import open_tokenizer
from pipeline.encode.write import EncodeShardFn, ShardOutput, WriteShards, shard_units
from pipeline.errors import ShardFileError


def _encoded(
    range_index: int, batch_index: int, last: bool, docs: list[list[int]], dtype: str, *, dead=()
) -> EncodedBatch:
    positions = np.arange(len(docs), dtype=np.int64) * 100 + batch_index * 10_000
    tokens = np.array([i for d in docs for i in d], dtype=dtype)
    return EncodedBatch(
        range_index,
        batch_index,
        last,
        f"/data/src-{range_index}.jsonl",
        "offset",
        positions,
        np.cumsum([0] + [len(d) for d in docs], dtype=np.int64),
        tokens,
        list(dead),
        len(docs) + len(dead),
        sum(len(d) for d in docs),
        0,
    )


def _docs(seed: int, n: int, vocab: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(rng.randrange(0, 40))] for _ in range(n)]


def _read(root, layout: ShardLayout, index: int) -> list[list[int]]:
    name = layout.name(index)
    if layout.shard_format == "parquet":
        table = pq.read_table(root / f"{name}.parquet")
        assert str(table.schema.field("tokens").type.value_type) == layout.dtype
        return table.column("tokens").to_pylist()
    reader = MegatronReader(str(root / name))
    assert reader.index.dtype.__name__ == layout.dtype
    return [seq.tolist() for seq in reader]


def _write(layout: ShardLayout, index: int, elements: list[EncodedBatch]) -> dict:
    with ShardSink(layout, index) as sink:
        for batch in elements:
            sink.add(batch)
    return sink.stats


@pytest.mark.parametrize(
    "shard_format,vocab", [("parquet", 50257), ("megatron", 50257), ("parquet", 100277), ("megatron", 100277)]
)
def test_a_shard_sink_writes_its_ranges_batches_in_order_with_dead_letters_and_stats(tmp_path, shard_format, vocab):
    dtype = FORMATS[shard_format].dtype(vocab)
    layout = ShardLayout(str(tmp_path), "tok", 3, shard_format, dtype, "ab" * 32, "fp")
    batches = {(r, b): _docs(10 * r + b, 7, vocab) for r in range(3) for b in range(3 if r == 1 else 1)}
    dead = DeadLetter("/data/src-1.jsonl", 10_050, "offset", "malformed JSON")
    for r in range(3):
        elements = [_encoded(r, b, b == (2 if r == 1 else 0), batches[(r, b)], dtype,
                             dead=[dead] if (r, b) == (1, 1) else ()) for b in range(3 if r == 1 else 1)]  # fmt: skip
        stats = _write(layout, r, elements)
        assert (stats["documents"], stats["dead_letters"], stats["batches"]) == (
            7 * len(elements),
            r == 1,
            len(elements),
        )
    for r in range(3):
        expected = [d for b in range(3 if r == 1 else 1) for d in batches[(r, b)]]
        assert _read(tmp_path, layout, r) == expected
        assert read_stats(layout, r)["tokens"] == sum(map(len, expected))
    assert not list(tmp_path.rglob("*.arrow")) and not list(tmp_path.rglob(".tmp-*")), "no part or temporary file"
    assert (tmp_path / "dead_letters" / "tok-00001-of-00003.jsonl").read_text().count("\n") == 1


@pytest.mark.parametrize("shard_format", ["parquet", "megatron"])
def test_a_shard_of_several_ranges_holds_them_in_input_order_and_names_each(tmp_path, shard_format):
    dtype = FORMATS[shard_format].dtype(50257)
    layout = ShardLayout(str(tmp_path), "tok", 2, shard_format, dtype, "ab" * 32, "fp", range_to_shard=(0, 0, 0, 1))
    batches = {(r, b): _docs(10 * r + b, 5, 50257) for r in range(4) for b in range(2 if r == 1 else 1)}
    elements = [_encoded(r, b, b == (1 if r == 1 else 0), docs, dtype) for (r, b), docs in batches.items()]
    assert _write(layout, 0, elements[:4])["documents"] == 20 and _write(layout, 1, elements[4:])["documents"] == 5
    expected = [d for r in range(3) for b in range(2 if r == 1 else 1) for d in batches[(r, b)]]
    assert _read(tmp_path, layout, 0) == expected and _read(tmp_path, layout, 1) == batches[(3, 0)]
    ranges = read_stats(layout, 0)["ranges"]
    assert [(r["index"], r["source"], r["documents"]) for r in ranges] == [
        (r, f"/data/src-{r}.jsonl", 10 if r == 1 else 5) for r in range(3)
    ]
    if shard_format == "parquet":  # every document's id names its own source
        ids = pq.read_table(tmp_path / "tok-00000-of-00002.parquet").column("doc_id").to_pylist()
        assert (
            ids[0] == "/data/src-0.jsonl@0" and ids[5] == "/data/src-1.jsonl@0" and ids[-1] == "/data/src-2.jsonl@400"
        )


def test_a_shard_missing_a_range_is_refused_and_leaves_no_file(tmp_path):
    layout = ShardLayout(str(tmp_path), "tok", 1, "parquet", "uint16", "", "fp", range_to_shard=(0, 0, 0))
    with pytest.raises(RuntimeError, match=r"got the ranges \[0, 2\], expected \[0, 1, 2\]"):
        _write(layout, 0, [_encoded(0, 0, True, [[1]], "uint16"), _encoded(2, 0, True, [[2]], "uint16")])
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []
    with pytest.raises(ZeroDivisionError), ShardSink(layout, 0) as sink:  # a failure mid-shard: no file either
        sink.add(_encoded(0, 0, True, [[1]], "uint16"))
        _ = 1 / 0
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []


def _units(tmp_path):
    from tests.conftest import data_path

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(f'{{"text": "document {i} " }}\n' for i in range(300)))
    tok, ref = open_tokenizer(str(data_path("tiktoken", "r50k_base.tiktoken")))
    plan = plan_corpus([InputSpec(str(corpus))], CorpusSpec("jsonl"), range_bytes=2000)
    layout = ShardLayout(str(tmp_path / "out"), "t", 3, "parquet", "uint16", ref.digest, "fp",
                         range_to_shard=assign_shards(plan.ranges, 3000))  # fmt: skip
    layout = dataclasses.replace(layout, num_shards=layout.range_to_shard[-1] + 1)
    return plan, layout, ShardOutput(ref, EncodePolicy(), layout)


def test_the_stage_writes_one_unit_per_shard_and_a_retried_unit_only_reports_it(tmp_path):
    plan, layout, output = _units(tmp_path)
    units = shard_units(plan.ranges, [layout], [set(range(layout.num_shards))])
    assert [u.index for u in units] == list(range(layout.num_shards)) and layout.num_shards >= 3
    assert [r.index for u in units for r in u.ranges] == [r.index for r in plan.ranges]
    with TestPipeline(runner="FnApiRunner") as p:
        written = p | WriteShards(units, [output], CorpusSpec("jsonl"))
        assert_that(written | beam.Map(lambda w: w.stats["documents"]) | beam.CombineGlobally(sum), equal_to([300]))
    fn = EncodeShardFn([output], CorpusSpec("jsonl"))
    name = tmp_path / "out" / f"{layout.name(1)}.parquet"
    mtime = name.stat().st_mtime_ns
    (again,) = list(fn.process(units[1]))  # a retried unit: the shard is complete, it is only reported
    assert again.stats == read_stats(layout, 1) and name.stat().st_mtime_ns == mtime
    docs = [t for i in range(layout.num_shards) for t in pq.read_table(tmp_path / "out" / f"{layout.name(i)}.parquet")
            .column("doc_id").to_pylist()]  # fmt: skip
    assert len(docs) == 300 and docs == sorted(docs, key=lambda d: int(d.rsplit("@", 1)[1]))


def test_writing_dofns_and_layout_pickle(tmp_path):
    layout = ShardLayout(str(tmp_path), "t", 4, "megatron", "uint16", "s" * 64, "fp")
    fn = EncodeShardFn([ShardOutput(None, EncodePolicy(), layout, fail_at_shard=3)], CorpusSpec("jsonl"))
    for dumps, loads in ((pickle.dumps, pickle.loads), (cloudpickle.dumps, cloudpickle.loads)):
        assert loads(dumps(fn)).outputs[0].layout == layout


# ------------------------------------------------------------------ Megatron MMIDIDX
def test_megatron_index_bytes_follow_the_format():
    index = MegatronIndex.from_lengths(np.uint16, [3, 0, 2])
    data = index.to_bytes()
    assert data[:9] == b"MMIDIDX\x00\x00"
    assert struct.unpack_from("<QBQQ", data, 9) == (
        1,
        8,
        3,
        4,
    )  # version 1, uint16 = code 8, 3 sequences, 4 doc indices
    body = 9 + 25
    assert np.frombuffer(data, "<i4", 3, body).tolist() == [3, 0, 2]
    assert np.frombuffer(data, "<i8", 3, body + 12).tolist() == [0, 6, 6]  # byte offsets: uint16 is 2 bytes
    assert np.frombuffer(data, "<i8", 4, body + 36).tolist() == [0, 1, 2, 3]
    assert len(data) == body + 12 * 3 + 8 * 4
    back = MegatronIndex.from_bytes(data)
    assert back.dtype is np.uint16 and back.lengths.tolist() == [3, 0, 2] and back.num_tokens == 5
    assert MegatronIndex.from_lengths(np.int32, [2, 5]).pointers.tolist() == [0, 8]


def test_megatron_dtype_threshold_and_bad_files():
    assert (token_dtype(65499), token_dtype(65500), token_dtype(200_000)) == (np.uint16, np.int32, np.int32)
    assert FORMATS["megatron"].dtype(65_536) == "int32" and FORMATS["parquet"].dtype(65_536) == "uint16"
    good = MegatronIndex.from_lengths(np.int32, [1, 2]).to_bytes()
    for bad, message in (
        (b"MMIDIDY" + good[7:], "not a Megatron index"),
        (good[:9] + struct.pack("<Q", 2) + good[17:], "version 2"),
        (good[:-1], "truncated"),
        (good[:17] + b"\x09" + good[18:], "unknown dtype code 9"),
    ):
        with pytest.raises(ShardFileError, match=message):
            MegatronIndex.from_bytes(bad, "x.idx")


def test_an_empty_megatron_shard_is_still_a_mappable_pair(tmp_path):
    layout = ShardLayout(str(tmp_path), "e", 1, "megatron", "uint16", "", "fp")
    _write(layout, 0, [_encoded(0, 0, True, [], "uint16", dead=[DeadLetter("s", 0, "offset", "bad")])])
    reader = MegatronReader(str(tmp_path / "e-00000-of-00001"))
    assert len(reader) == 0 and list(reader) == [] and (tmp_path / "e-00000-of-00001.bin").stat().st_size == 2
