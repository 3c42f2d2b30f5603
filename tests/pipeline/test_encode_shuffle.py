"""``encode --shuffle SEED`` (issue 34 item 3): the same documents as a plain run, in the seeded order over the whole
corpus that the spec defines (recomputed here with hashlib, not with the code under test), the same shard bytes at
another ``--range-bytes`` and with ``--workers 2``, another order for another seed; refusals; a stopped run resumed;
``beam-bpe verify`` on a shuffled output (and what it finds in one put out of order); packs over it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import corpus
from pipeline_testlib import write_jsonl
from test_encode_e2e import encode_cli, files_of, manifest, r50k_file, read_back  # noqa: F401 - a fixture

from pipeline.corpus.plan import InputSpec
from pipeline.encode.audit import audit_output
from pipeline.encode.job import run_encode
from pipeline.encode.pack_plan import ffd_rows
from pipeline.encode.packing import PackSettings, build_pack, iter_sequences
from pipeline.encode.readback import find_document
from pipeline.encode.settings import EncodeJob, EncodeSettings

BAD_LINE = b'{"text": "a line cut short'


@pytest.fixture(scope="session")
def tok(r50k_file) -> str:  # noqa: F811 - the fixture
    return r50k_file


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> list[Path]:
    """About 300 documents of four shared corpora over three JSONL files (the second gzip: one whole-file range),
    one malformed line (a dead letter)."""
    docs = (
        corpus("en_bible_kjv", 40)
        + corpus("fortunes_multi", 230)
        + [d for d in corpus("multi_udhr", 60) if len(d) < 9000][:12]
        + corpus("code_cpython", 4)
    )
    assert len(docs) > 250
    root = tmp_path_factory.mktemp("shuffle-inputs")
    third = -(-len(docs) // 3)
    return [
        write_jsonl(root / "a.jsonl", docs[:third], extra=[BAD_LINE]),
        write_jsonl(root / "b.jsonl.gz", docs[third : 2 * third]),
        write_jsonl(root / "c.jsonl", docs[2 * third :]),
    ]


def _run(tok, inputs, out: Path, *extra) -> Path:
    assert encode_cli(tok, inputs, out, "--eos", *extra) == 0
    return out


@pytest.fixture(scope="module")
def plain(tok, inputs, tmp_path_factory) -> Path:
    return _run(tok, inputs, tmp_path_factory.mktemp("plain") / "out")


@pytest.fixture(scope="module")
def shuffled(tok, inputs, tmp_path_factory) -> Path:
    return _run(tok, inputs, tmp_path_factory.mktemp("shuffled") / "out", "--shuffle", "7")


def spec_key(seed: int, doc_id: str) -> int:
    """The spec's key: the first 8 bytes, big-endian, of BLAKE2b over "{seed}:{doc_id}"."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{doc_id}".encode(), digest_size=8).digest(), "big")


def shard_files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("tokens-*"))}


def test_shuffle_writes_the_plain_documents_in_the_seeded_order(plain, shuffled):
    before, after = read_back(plain), read_back(shuffled)
    assert sorted(before) == sorted(after) and len(after) > 250
    expected = sorted((d for d, _ in before), key=lambda d: (spec_key(7, d), d))
    assert [d for d, _ in after] == expected
    moved = sum(a != b for (a, _), (b, _) in zip(before, after, strict=True))
    assert moved / len(after) > 0.9

    # consecutive documents from one input file: nearly always in a plain run, far less often shuffled
    def same_file(docs):
        files = [d.rsplit("@", 1)[0] for d, _ in docs]
        return sum(a == b for a, b in zip(files, files[1:], strict=False)) / (len(files) - 1)

    assert same_file(before) > 0.95 and same_file(after) < 0.7
    # each shard holds one slice of the key space, as the spec says
    m = manifest(shuffled)
    n = len(m["shards"])
    starts = np.cumsum([0] + [s["documents"] for s in m["shards"]])
    for i in range(n):
        for doc_id in expected[starts[i] : starts[i + 1]]:
            assert ((spec_key(7, doc_id) >> 32) * n) >> 32 == i
    assert m["settings"]["shuffle"] == 7 and "shuffle" not in manifest(plain)["settings"]
    for key in ("documents_read", "documents_written", "dead_letters", "tokens", "text_bytes"):
        assert m[key] == manifest(plain)[key], key
    assert m["dead_letters"] == 1 and m["sources"] == manifest(plain)["sources"]
    assert not (shuffled / "_tmp").exists()


def test_verify_passes_on_a_shuffled_output_and_names_a_document_out_of_order(shuffled, tmp_path):
    audit = audit_output(str(shuffled), sample=25, seed=3)
    assert audit.ok, audit.problems
    assert audit.checked["documents"] == manifest(shuffled)["documents_written"] and audit.checked["sampled"] == 25
    # two documents of shard 0 swapped, its receipt updated to the new bytes: only the order check can see it
    copy = Path(shutil.copytree(shuffled, tmp_path / "copy"))
    name = manifest(shuffled)["shards"][0]["name"] + ".parquet"
    table = pq.read_table(copy / name)
    order = list(range(table.num_rows))
    order[0], order[1] = 1, 0
    pq.write_table(table.take(order), copy / name)
    m = manifest(copy)
    record = {"bytes": (copy / name).stat().st_size, "sha256": hashlib.sha256((copy / name).read_bytes()).hexdigest()}
    m["shards"][0]["files"][name].update(record)
    m["receipts"]["shards"][0]["files"][name] = record
    (copy / "manifest.json").write_text(json.dumps(m))
    problems = audit_output(str(copy)).problems
    assert any("out of the seeded order" in p for p in problems), problems


def test_another_range_bytes_gives_the_same_shards_and_another_seed_another_order(tok, inputs, shuffled,
                                                                                   tmp_path):  # fmt: skip
    other_ranges = _run(tok, inputs, tmp_path / "r", "--shuffle", "7", "--range-bytes", "7000")
    assert len(manifest(other_ranges)["shards"]) == len(manifest(shuffled)["shards"])
    assert manifest(other_ranges)["receipts"]["planned_ranges"] > manifest(shuffled)["receipts"]["planned_ranges"]
    assert shard_files(other_ranges) == shard_files(shuffled)
    dead = sorted((shuffled / "dead_letters").glob("*.jsonl"))
    assert dead and [p.read_bytes() for p in dead] == [
        (other_ranges / "dead_letters" / p.name).read_bytes() for p in dead
    ]
    seed8 = _run(tok, inputs, tmp_path / "s8", "--shuffle", "8")
    a, b = read_back(shuffled), read_back(seed8)
    assert sorted(a) == sorted(b)
    assert sum(x != y for (x, _), (y, _) in zip(a, b, strict=True)) / len(a) > 0.9


@pytest.mark.slow
def test_two_workers_write_the_same_shuffled_shards(tok, inputs, shuffled, tmp_path):
    two = _run(tok, inputs, tmp_path / "w2", "--shuffle", "7", "--workers", "2")
    assert shard_files(two) == shard_files(shuffled) and files_of(two) == files_of(shuffled)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--shuffle", "seven"], "--shuffle takes an integer seed"),
        (["--shuffle", "1.5"], "--shuffle takes an integer seed"),
        (["--shuffle", "-1"], "--shuffle takes an integer seed"),
        (["--shuffle", str(1 << 63)], "--shuffle takes an integer seed"),
        (["--shuffle", "7", "--shard-format", "megatron"], "--shuffle with --shard-format megatron"),
    ],
)
def test_what_shuffle_cannot_do_is_refused_before_work(tok, inputs, tmp_path, capsys, extra, message):
    out = tmp_path / "out"
    assert encode_cli(tok, inputs, out, *extra) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_shuffle_with_two_tokenizers_is_refused(tok, inputs, tmp_path, capsys):
    out = tmp_path / "out"
    assert encode_cli(tok, inputs, out, "--tokenizer", tok, "--shuffle", "7") == 2
    assert "--shuffle encodes with one --tokenizer" in capsys.readouterr().err and not out.exists()


def test_another_seed_or_none_into_a_shuffled_output_is_refused_as_another_job(tok, inputs, shuffled, tmp_path,
                                                                                capsys):  # fmt: skip
    out = tmp_path / "out"
    _run(tok, inputs, out, "--shuffle", "7")
    before = files_of(out)
    capsys.readouterr()
    for extra in (["--shuffle", "8"], []):
        assert encode_cli(tok, inputs, out, "--eos", *extra) == 2
        err = capsys.readouterr().err
        assert "different encoding job" in err and "--shuffle" in err, err
    assert files_of(out) == before == files_of(shuffled)


def _job(tok, inputs, out: Path, **kw) -> EncodeJob:
    settings = EncodeSettings(eos="auto", shuffle=7)
    specs = tuple(InputSpec(str(p)) for p in inputs)
    return EncodeJob(tok, specs, str(out), settings=settings, range_bytes=20000, shard_size=40000, **kw)


def test_a_stopped_shuffled_run_keeps_its_finished_shards_and_resumes_to_the_same_bytes(tok, inputs, shuffled,
                                                                                        tmp_path):  # fmt: skip
    out = tmp_path / "out"
    job = _job(tok, inputs, out, fail_at_shard=1)
    with pytest.raises(Exception, match="test fault"):
        run_encode(job)
    assert not (out / "COMPLETED").exists() and not (out / "_tmp").exists()
    complete = {p.stem for p in (out / "_shards").glob("tokens-*.json")}
    assert manifest(shuffled)["shards"][1]["name"] not in complete
    assert {p.name.split(".")[0] for p in out.glob("tokens-*")} <= complete
    result = run_encode(dataclasses.replace(job, fail_at_shard=None))
    assert result["run"]["shards_skipped"] == len(complete)
    assert files_of(out) == files_of(shuffled)
    # a finished shard lost afterwards: the rerun reads every range again and writes only that shard
    lost = sorted(out.glob("tokens-00002-*"))
    for p in lost:
        p.unlink()
    result = run_encode(dataclasses.replace(job, fail_at_shard=None))
    assert result["run"]["shards_skipped"] == len(manifest(shuffled)["shards"]) - 1
    assert files_of(out) == files_of(shuffled)


def test_packs_over_a_shuffled_output(shuffled, tmp_path):
    shuffled = Path(shutil.copytree(shuffled, tmp_path / "copy"))  # the module's output stays without packs
    docs = read_back(shuffled)
    build_pack(str(shuffled), PackSettings(64, "concat"), overwrite=True)
    stream = np.concatenate([ids for ids, _ in iter_sequences(str(shuffled), 64)])
    assert stream.tolist() == [t for _, ids in docs for t in ids]  # the shuffled documents, in their order
    build_pack(str(shuffled), PackSettings(64, "ffd"), overwrite=True)
    got = [ids.tolist() for ids, _ in iter_sequences(str(shuffled), 64)]
    assert all(len(s) <= 64 for s in got)
    # the same sequences as ffd's plan over each shard's documents, in another order inside each shard
    planned, seq = [], 0
    m = manifest(shuffled)
    starts = np.cumsum([0] + [s["documents"] for s in m["shards"]])
    for i in range(len(m["shards"])):
        shard_docs = [ids for _, ids in docs[starts[i] : starts[i + 1]]]
        cols, _, seq = ffd_rows(shard=i, lengths=np.array([len(d) for d in shard_docs], np.int64), first_seq=seq,
                                length=64)  # fmt: skip
        sequences: dict[int, list[int]] = {}
        for s, d, off, n in zip(*(cols[k].tolist() for k in ("seq", "doc", "doc_offset", "length")), strict=True):
            sequences.setdefault(s, []).extend(shard_docs[d][off : off + n])
        planned += [sequences[s] for s in sorted(sequences)]
    assert sorted(got) == sorted(planned) and got != planned
    assert audit_output(str(shuffled)).ok


def test_an_input_changed_at_the_same_size_redoes_every_shuffled_shard(tok, inputs, shuffled, tmp_path):
    """Every shard holds documents of every input, so one input edited in place makes them all be redone."""
    copies = [Path(shutil.copy(p, tmp_path / p.name)) for p in inputs]
    out = _run(tok, copies, tmp_path / "out", "--shuffle", "7")
    before = shard_files(out)
    data = copies[2].read_bytes()
    copies[2].write_bytes(data)  # the same bytes and size, a new version (mtime)
    stat = copies[2].stat()
    os.utime(copies[2], ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    result = run_encode(_job(tok, copies, out))
    n = len(manifest(out)["shards"])
    assert result["run"]["inputs_changed"] == {str(copies[2]): list(range(n))}
    assert result["run"]["shards_skipped"] == 0 and shard_files(out) == before


def test_a_shuffled_npy_output_verifies_and_decodes_a_document_by_its_id(tok, inputs, plain, tmp_path):
    out = _run(tok, inputs, tmp_path / "npy", "--shuffle", "7", "--shard-format", "npy")
    audit = audit_output(str(out), sample=10, seed=1)
    assert audit.ok, audit.problems
    docs = read_back(out)
    assert sorted(docs) == sorted(read_back(plain))
    assert [d for d, _ in docs] == sorted((d for d, _ in docs), key=lambda d: (spec_key(7, d), d))
    doc_id, ids = read_back(plain)[-1]
    found_id, found = find_document(str(out), doc_id)
    assert found_id == doc_id and found.tolist() == ids
