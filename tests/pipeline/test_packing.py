"""Packed sequences (issue 34 item 2): the two algorithms on lengths (properties), then over real encode outputs
(parquet and megatron shards of the shared corpora, r50k with its EOS): every token in order exactly once, the
length rules, the pack an index that leaves every shard byte-identical, and each refusal."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_encode_e2e import encode_cli, r50k_file, read_back, sample_docs, write_inputs  # noqa: F401 - a fixture

from pipeline.cli import main as cli
from pipeline.encode.pack_plan import concat_rows, ffd_rows
from pipeline.encode.packing import PackSettings, build_pack, iter_sequences, load_pack
from pipeline.errors import OutputError, ShardFileError, UsageError

lengths_st = st.lists(st.integers(0, 40), min_size=0, max_size=60)


def _pieces(cols) -> list[tuple[int, int, int, int]]:
    return list(zip(*(cols[k].tolist() for k in ("seq", "doc", "doc_offset", "length")), strict=True))


@settings(max_examples=200, deadline=None)
@given(lengths_st, st.integers(1, 17), st.integers(0, 50))
def test_concat_cuts_the_stream_every_l_tokens(lengths, L, start):
    cols = concat_rows(shard=0, lengths=np.array(lengths, dtype=np.int64), start=start, length=L)
    # the pieces tile the stream: in order, contiguous, each inside one sequence
    offsets, sizes, seqs = cols["offset"].tolist(), cols["length"].tolist(), cols["seq"].tolist()
    assert offsets == sorted(offsets) and seqs == sorted(seqs)
    pos = 0
    for off, n, s in zip(offsets, sizes, seqs, strict=True):
        assert off == pos and (start + off) // L == s and (n == 0 or (start + off + n - 1) // L == s)
        pos += n
    assert pos == sum(lengths)
    # every document once, its pieces covering it in order
    for d, n in enumerate(lengths):
        mine = [(o, m) for s, doc, o, m in _pieces(cols) if doc == d]
        assert [o for o, _ in mine] == list(np.cumsum([0] + [m for _, m in mine])[:-1]) and sum(m for _, m in mine) == n


@settings(max_examples=200, deadline=None)
@given(lengths_st, st.integers(1, 17), st.integers(1, 9))
def test_ffd_fits_every_sequence_and_splits_only_long_documents(lengths, L, window):
    cols, cut, end = ffd_rows(shard=3, lengths=np.array(lengths, dtype=np.int64), first_seq=5, length=L, window=window)
    seqs = cols["seq"].tolist()
    assert seqs == sorted(seqs) and (not seqs or (seqs[0] == 5 and max(seqs) == end - 1))
    used = {}
    for s, _, _, n in _pieces(cols):
        used[s] = used.get(s, 0) + n
    assert all(v <= L for v in used.values())
    assert cut == sum(1 for n in lengths if n > L)
    for d, n in enumerate(lengths):
        mine = [(s, o, m) for s, doc, o, m in _pieces(cols) if doc == d]
        assert sum(m for _, _, m in mine) == n
        if n <= L:
            assert len(mine) == 1  # a document that fits is never split
    # a window never shares a sequence with another window
    for s in set(seqs):
        assert len({d // window for _, d, _, _ in [p for p in _pieces(cols) if p[0] == s]}) == 1


def test_first_fit_decreasing_on_a_known_case():
    # L = 10: sorted 7, 6, 5, 3, 2 -> bins [7, 3], [6, 2], [5] (first fit), pieces in document order per bin
    cols, cut, end = ffd_rows(shard=0, lengths=np.array([2, 7, 5, 3, 6]), first_seq=0, length=10)
    by_seq = {}
    for s, d, _, _ in _pieces(cols):
        by_seq.setdefault(s, []).append(d)
    assert by_seq == {0: [1, 3], 1: [0, 4], 2: [2]} and cut == 0 and end == 3


def _hashes(out: Path) -> dict[str, str]:
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file() and "packs" not in p.parts
    }


@pytest.fixture(scope="module", params=["parquet", "megatron"])
def encoded(request, r50k_file, tmp_path_factory):  # noqa: F811 - the fixture
    docs = sample_docs()
    inputs = write_inputs(tmp_path_factory.mktemp("in"), docs)
    out = tmp_path_factory.mktemp(request.param) / "out"
    assert encode_cli(r50k_file, inputs, out, "--eos", "--shard-format", request.param,
                      "--pack-length", "512") == 0  # fmt: skip
    assert len(json.loads((out / "manifest.json").read_text())["shards"]) > 1  # a sequence crosses shards
    return out


def test_encode_pack_concat_holds_every_document_with_its_eos_in_l_token_sequences(encoded):
    docs = [ids for _, ids in read_back(encoded)]
    seqs = list(iter_sequences(str(encoded), 512))
    assert all(ids.size == 512 for ids, _ in seqs[:-1]) and 0 < seqs[-1][0].size <= 512
    assert np.concatenate([ids for ids, _ in seqs]).tolist() == [t for d in docs for t in d]
    assert all(d[-1] == 50256 for d in docs)
    # doc_starts: where each document begins, over the whole stream
    starts = [k * 512 + int(s) for k, (_, st_) in enumerate(seqs) for s in st_]
    assert starts == np.cumsum([0] + [len(d) for d in docs])[:-1].tolist()
    pack = load_pack(str(encoded), 512)
    assert pack["sequences"] == len(seqs) and pack["tokens"] == sum(map(len, docs))


def test_pack_ffd_afterwards_leaves_every_shard_byte_identical(encoded):
    before = _hashes(encoded)
    assert cli(["pack", str(encoded), "--length", "300", "--pack", "ffd", "--pack-rows"]) == 0
    assert _hashes(encoded) == before
    docs = [ids for _, ids in read_back(encoded)]
    seqs = list(iter_sequences(str(encoded), 300))
    assert all(ids.size <= 300 for ids, _ in seqs)
    pack = load_pack(str(encoded), 300)
    index = pa.concat_tables([pq.read_table(encoded / "packs" / "300" / f["name"]) for f in pack["files"]])
    rows_of = {}
    for doc_id, length in zip(index.column("doc_id").to_pylist(), index.column("length").to_pylist(), strict=True):
        rows_of.setdefault(doc_id, []).append(length)
    lengths = {doc_id: len(ids) for doc_id, ids in read_back(encoded)}
    assert set(rows_of) == set(lengths) and {d: sum(v) for d, v in rows_of.items()} == lengths
    assert all(len(rows_of[d]) == 1 for d, n in lengths.items() if n <= 300)  # a document that fits: one piece
    assert sorted(t for d in docs for t in d) == sorted(np.concatenate([ids for ids, _ in seqs]).tolist())
    assert pack["documents_cut"] == sum(1 for d in docs if len(d) > 300) > 0
    rows = pq.read_table(encoded / "packs" / "300" / pack["sequence_rows"][0]["name"])
    assert rows.column("input_ids")[0].as_py() == seqs[0][0].tolist()


def test_pack_refusals(encoded, tmp_path):
    with pytest.raises(OutputError, match="exists"):
        build_pack(str(encoded), PackSettings(length=512))
    with pytest.raises(UsageError, match="above 0"):
        PackSettings(length=0)
    with pytest.raises(UsageError, match="one of"):
        PackSettings(length=8, method="best")
    (tmp_path / "half").mkdir()
    with pytest.raises(ShardFileError, match="no finished"):
        build_pack(str(tmp_path / "half"), PackSettings(length=8))
    assert cli(["pack", str(encoded), "--length", "-3"]) == 2
    assert cli(["pack", str(encoded), "--pack", "ffd"]) == 2


def test_encode_refuses_concat_without_eos_and_pack_without_a_length(r50k_file, tmp_path, capsys):  # noqa: F811
    inputs = write_inputs(tmp_path / "in", sample_docs()[:5], n=1)
    assert encode_cli(r50k_file, inputs, tmp_path / "a", "--pack-length", "64") == 2
    assert "--eos" in capsys.readouterr().err
    assert encode_cli(r50k_file, inputs, tmp_path / "b", "--pack", "ffd") == 2
    assert "--pack-length" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_concat_takes_the_eos_an_npy_output_adds_by_itself(r50k_file, tmp_path):  # noqa: F811
    inputs = write_inputs(tmp_path / "in", sample_docs()[:20], n=1)
    out = tmp_path / "out"
    assert encode_cli(r50k_file, inputs, out, "--shard-format", "npy", "--pack-length", "64") == 0
    docs = [ids for _, ids in read_back(out)]
    assert len(docs) == 20 and all(d[-1] == 50256 for d in docs)
    seqs = list(iter_sequences(str(out), 64))
    assert np.concatenate([ids for ids, _ in seqs]).tolist() == [t for d in docs for t in d]


def test_ffd_pack_without_eos_on_parquet(r50k_file, tmp_path):  # noqa: F811
    inputs = write_inputs(tmp_path / "in", sample_docs()[:40], n=2)
    out = tmp_path / "out"
    assert encode_cli(r50k_file, inputs, out, "--pack-length", "128", "--pack", "ffd") == 0
    docs = [ids for _, ids in read_back(out)]
    seqs = list(iter_sequences(str(out), 128))
    assert sum(starts.size for _, starts in seqs) == len(docs)  # each document starts exactly once
    assert all(ids.size <= 128 for ids, _ in seqs)
    assert Path(out / "packs" / "128" / "COMPLETED").exists()


def test_verify_checks_the_pack_files(encoded, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(encoded, copy)
    assert cli(["verify", str(copy)]) == 0
    index = sorted((copy / "packs" / "512").glob("index-*.parquet"))[0]
    data = bytearray(index.read_bytes())
    data[len(data) // 2] ^= 1
    index.write_bytes(bytes(data))
    assert cli(["verify", str(copy)]) == 4
