"""Stage tests: WriteShards (TestPipeline + assert_that) in both formats, part ordering, retries; the Megatron
MMIDIDX writer and reader against the format's bytes."""

from __future__ import annotations

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

from pipeline.corpus.records import DeadLetter
from pipeline.encode.documents import EncodedBatch
from pipeline.encode.formats import FORMATS
from pipeline.encode.formats.megatron import MegatronIndex, MegatronReader, token_dtype
from pipeline.encode.layout import ShardLayout
from pipeline.encode.parts import read_part
from pipeline.encode.shards import read_stats
from pipeline.encode.write import FinalizeShardFn, PartInfo, WritePartFn, WriteShards
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


@pytest.mark.parametrize(
    "shard_format,vocab", [("parquet", 50257), ("megatron", 50257), ("parquet", 100277), ("megatron", 100277)]
)
def test_write_shards_stage_writes_one_shard_per_range_with_documents_in_order(tmp_path, shard_format, vocab):
    dtype = FORMATS[shard_format].dtype(vocab)
    layout = ShardLayout(str(tmp_path), "tok", 3, shard_format, dtype, "ab" * 32, "fp")
    batches = {(r, b): _docs(10 * r + b, 7, vocab) for r in range(3) for b in range(3 if r == 1 else 1)}
    dead = DeadLetter("/data/src-1.jsonl", 10_050, "offset", "malformed JSON")
    elements = [_encoded(r, b, b == (2 if r == 1 else 0), docs, dtype, dead=[dead] if (r, b) == (1, 1) else ())
                for (r, b), docs in batches.items()]  # fmt: skip
    random.Random(0).shuffle(elements)  # the stage must not depend on the order batches arrive in
    with TestPipeline(runner="FnApiRunner") as p:
        written = p | beam.Create(elements) | WriteShards(layout)
        summary = written | beam.Map(
            lambda w: (w.index, w.stats["documents"], w.stats["dead_letters"], w.stats["batches"])
        )
        assert_that(summary, equal_to([(0, 7, 0, 1), (1, 21, 1, 3), (2, 7, 0, 1)]))
    for r in range(3):
        expected = [d for b in range(3 if r == 1 else 1) for d in batches[(r, b)]]
        assert _read(tmp_path, layout, r) == expected
        assert read_stats(layout, r)["tokens"] == sum(map(len, expected))
    assert not list(tmp_path.rglob("*.arrow")), "part files are removed once their shard is complete"
    assert (tmp_path / "dead_letters" / "tok-00001-of-00003.jsonl").read_text().count("\n") == 1


@pytest.mark.parametrize("shard_format", ["parquet", "megatron"])
def test_a_shard_of_several_ranges_holds_them_in_input_order_and_names_each(tmp_path, shard_format):
    dtype = FORMATS[shard_format].dtype(50257)
    layout = ShardLayout(str(tmp_path), "tok", 2, shard_format, dtype, "ab" * 32, "fp", range_to_shard=(0, 0, 0, 1))
    batches = {(r, b): _docs(10 * r + b, 5, 50257) for r in range(4) for b in range(2 if r == 1 else 1)}
    elements = [_encoded(r, b, b == (1 if r == 1 else 0), docs, dtype) for (r, b), docs in batches.items()]
    random.Random(1).shuffle(elements)
    with TestPipeline(runner="FnApiRunner") as p:
        written = p | beam.Create(elements) | WriteShards(layout)
        assert_that(written | beam.Map(lambda w: (w.index, w.stats["documents"])), equal_to([(0, 20), (1, 5)]))
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


def _read(root, layout: ShardLayout, index: int) -> list[list[int]]:
    name = layout.name(index)
    if layout.shard_format == "parquet":
        table = pq.read_table(root / f"{name}.parquet")
        assert str(table.schema.field("tokens").type.value_type) == layout.dtype
        return table.column("tokens").to_pylist()
    reader = MegatronReader(str(root / name))
    assert reader.index.dtype.__name__ == layout.dtype
    return [seq.tolist() for seq in reader]


def test_finalizer_is_idempotent_and_refuses_missing_parts(tmp_path):
    layout = ShardLayout(str(tmp_path), "t", 1, "parquet", "uint16", "", "fp")
    batch = _encoded(0, 0, True, [[1, 2], [3]], "uint16")
    ((key, info),) = list(WritePartFn(layout).process(batch))
    assert read_part(info.path).column("tokens").to_pylist() == [[1, 2], [3]]
    fn = FinalizeShardFn(layout)
    (first,) = list(fn.process((key, [info])))
    mtime = (tmp_path / "t-00000-of-00001.parquet").stat().st_mtime_ns
    (again,) = list(fn.process((key, [info])))  # a retried bundle: the part files are gone, the shard is complete
    assert again == first and (tmp_path / "t-00000-of-00001.parquet").stat().st_mtime_ns == mtime
    other = ShardLayout(str(tmp_path / "o"), "t", 1, "parquet", "uint16", "", "fp")
    stray = PartInfo(0, 1, True, "s", "offset", 0, 0, 0, 0, 0, [], "")
    with pytest.raises(RuntimeError, match=r"range 0: got the parts \[1\]"):
        list(FinalizeShardFn(other).process((0, [stray])))


def test_writing_dofns_and_layout_pickle(tmp_path):
    layout = ShardLayout(str(tmp_path), "t", 4, "megatron", "uint16", "s" * 64, "fp")
    for fn in (WritePartFn(layout), FinalizeShardFn(layout, fail_at_shard=3)):
        for dumps, loads in ((pickle.dumps, pickle.loads), (cloudpickle.dumps, cloudpickle.loads)):
            assert loads(dumps(fn)).layout == layout


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
    with TestPipeline(runner="FnApiRunner") as p:
        _ = (
            p
            | beam.Create([_encoded(0, 0, True, [], "uint16", dead=[DeadLetter("s", 0, "offset", "bad")])])
            | WriteShards(layout)
        )
    reader = MegatronReader(str(tmp_path / "e-00000-of-00001"))
    assert len(reader) == 0 and list(reader) == [] and (tmp_path / "e-00000-of-00001.bin").stat().st_size == 2
