"""End-to-end: ``beam-bpe encode --input ...`` on tmp_path, read back and compared with bpe_core and tiktoken; reruns,
resume after an interruption, refusals, bad input, ``decode --shards`` and ``decode --stream``."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import random
import sys
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import corpus, openai_encoding, ours_openai, tiktoken_openai
from hypothesis import given, settings
from hypothesis import strategies as st
from pipeline_testlib import read_dead_letters, run_cli, write_bytes, write_jsonl

import bpe_core
from bpe_core import Tokenizer
from pipeline.corpus.plan import CorpusSpec, InputSpec
from pipeline.encode.formats.megatron import MegatronReader
from pipeline.encode.job import run_encode
from pipeline.encode.readback import find_document, iter_documents
from pipeline.encode.settings import EncodeJob, EncodeSettings

EOT = "<|endoftext|>"
SPELLS_SPECIAL = f"a document that spells {EOT} in its text"


# ------------------------------------------------------------------ helpers (also used by the Dask and Megatron tests)
def sample_docs() -> list[str]:
    """About 120 KB of shared corpora: English, 12 scripts, short multilingual docs, code, reST."""
    udhr = [d for d in corpus("multi_udhr", 60) if len(d) < 9000][:12]
    return (
        corpus("en_bible_kjv", 8)
        + udhr
        + corpus("fortunes_multi", 150)
        + corpus("code_cpython", 2)
        + [SPELLS_SPECIAL, ""]
    )


@pytest.fixture(scope="session")
def r50k_file(tmp_path_factory) -> str:
    """r50k_base with its special token, as our own artifact (uint16 ids)."""
    path = tmp_path_factory.mktemp("tok") / "r50k.bpe"
    ours_openai("r50k").save(str(path))
    return str(path)


def write_inputs(root: Path, docs: list[str], n: int = 3) -> list[Path]:
    """``docs`` over ``n`` JSONL files (the second one gzip: one whole-file range), in order."""
    size = -(-len(docs) // n)
    return [
        write_jsonl(root / f"part-{i}.jsonl{'.gz' if i == 1 else ''}", docs[i * size : (i + 1) * size])
        for i in range(n)
    ]


def encode_cli(tokenizer: str, inputs: list[Path], out: Path, *extra) -> int:
    args = ["encode", "--tokenizer", tokenizer, "--out", out, "--range-bytes", 20000, "--shard-size", 40000]
    for path in inputs:
        args += ["--input", path]
    return run_cli(*args, *extra)


def read_back(out: Path) -> list[tuple[str, list[int]]]:
    return [(doc_id, ids.tolist()) for doc_id, ids in iter_documents(str(out))]


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def read_jsonl_text(path: Path, offset: int) -> str:
    with open(path, "rb") as f:
        f.seek(offset)
        return json.loads(f.readline())["text"]


def files_of(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------ ids equal the library's and tiktoken's
@pytest.fixture(scope="module")
def docs() -> list[str]:
    return sample_docs()


@pytest.fixture(scope="module")
def inputs(docs, tmp_path_factory) -> list[Path]:
    return write_inputs(tmp_path_factory.mktemp("in"), docs)


@pytest.fixture(scope="module")
def parquet_run(r50k_file, inputs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("parquet") / "out"
    assert encode_cli(r50k_file, inputs, out, "--eos", "--verify") == 0
    return out


def test_parquet_shards_hold_the_library_ids_with_eos_in_input_order(parquet_run, docs, inputs, r50k_file):
    tok = ours_openai("r50k")
    got = read_back(parquet_run)
    assert [ids for _, ids in got] == [tok.encode_ordinary(d) + [50256] for d in docs]
    assert got[0][0] == f"{Path(inputs[0]).name}@0" and all("@" in doc_id for doc_id, _ in got)  # relative to the root
    assert tok.encode_ordinary(SPELLS_SPECIAL).count(50256) == 0  # ordinary by default: no injected control token
    m = manifest(parquet_run)
    assert m["documents_read"] == m["documents_written"] == m["verified"] == len(docs) and m["dead_letters"] == 0
    assert m["tokens"] == sum(len(ids) for _, ids in got) == sum(s["tokens"] for s in m["shards"])
    assert len(m["shards"]) >= 4 and (parquet_run / "COMPLETED").exists()
    stored = sum(r["end"] - r["start"] for s in m["shards"] for r in s["ranges"])  # --shard-size 40000: ranges grouped
    assert any(len(s["ranges"]) > 1 for s in m["shards"]) and abs(len(m["shards"]) - -(-stored // 40000)) <= 1
    assert [r["index"] for s in m["shards"] for r in s["ranges"]] == list(
        range(sum(len(s["ranges"]) for s in m["shards"]))
    )
    table = pq.read_table(parquet_run / m["shards"][0]["files"].popitem()[0])
    assert table.schema.field("tokens").type == pa.list_(pa.uint16()) and table.column_names == [
        "doc_id",
        "tokens",
        "num_tokens",
    ]
    assert table.column("num_tokens").to_pylist() == [len(t) for t in table.column("tokens").to_pylist()]
    assert all(s["bytes_per_token"] > 2 for s in m["sources"]) and len(m["sources"]) == 3
    assert m["tokenizer"]["sha256"] == hashlib.sha256(Path(r50k_file).read_bytes()).hexdigest()


def test_megatron_shards_from_a_tiktoken_file_equal_tiktoken(docs, inputs, tmp_path):
    enc = openai_encoding("cl100k")
    out = tmp_path / "out"
    assert encode_cli(enc["path"], inputs, out, "--pretokenizer", "cl100k", "--shard-format", "megatron") == 0
    m = manifest(out)
    assert (
        m["settings"]["dtype"] == "int32" and m["tokenizer"]["n_vocab"] == 100277
    )  # OpenAI's file brings tiktoken's special tokens
    expected = tiktoken_openai("cl100k").encode_ordinary_batch(docs)
    assert [ids for _, ids in read_back(out)] == expected
    first = MegatronReader(str(out / m["shards"][0]["name"]))
    assert first.index.dtype.__name__ == "int32" and first[0].tolist() == expected[0]
    doc_id, ids = find_document(str(out), f"{inputs[2]}@0")  # by id: the shard's positions sidecar finds it
    assert ids.tolist() == expected[docs.index(read_jsonl_text(inputs[2], 0))]
    assert sorted(p.suffix for p in out.glob("tokens-00000-*")) == [".bin", ".idx", ".npy"]


def test_special_tokens_allowed_and_bos_opt_in(r50k_file, tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [SPELLS_SPECIAL, "plain"])
    assert encode_cli(r50k_file, [path], tmp_path / "out", "--special-tokens", "allowed", "--bos", EOT) == 0
    tok = ours_openai("r50k")
    got = [ids for _, ids in read_back(tmp_path / "out")]
    assert got == [[50256] + tok.encode(SPELLS_SPECIAL, allowed_special="all"), [50256] + tok.encode_ordinary("plain")]
    assert got[0].count(50256) == 2


# ------------------------------------------------------------------ reruns, resume, refusal
def test_rerun_of_a_finished_output_changes_nothing(parquet_run, r50k_file, inputs, capsys):
    before = {p: p.stat().st_mtime_ns for p in parquet_run.rglob("*") if p.is_file()}
    assert encode_cli(r50k_file, inputs, parquet_run, "--eos", "--verify") == 0
    # every file as it was (the folder _shards/ changes: the rerun's lease passed through it)
    assert {p: p.stat().st_mtime_ns for p in parquet_run.rglob("*") if p.is_file()} == before
    assert "already complete" in capsys.readouterr().out


def test_resume_rewrites_only_the_missing_shards_byte_identically(parquet_run, r50k_file, inputs, tmp_path):
    reference = files_of(parquet_run)
    out = tmp_path / "out"
    assert encode_cli(r50k_file, inputs, out, "--eos", "--verify") == 0
    assert files_of(out) == reference  # a second, independent run: byte-identical
    names = [s["name"] for s in manifest(out)["shards"]]
    lost = [names[1], names[-1]]  # as if the job had been killed before these shards were complete
    for name in lost:
        (out / "_shards" / f"{name}.json").unlink()
        (out / f"{name}.parquet").write_bytes(b"half a file")
    (out / "COMPLETED").unlink()
    kept = {p: p.stat().st_mtime_ns for p in out.glob("*.parquet") if p.stem not in lost}
    manifest_out = run_encode(
        EncodeJob(
            r50k_file,
            tuple(InputSpec(str(p)) for p in inputs),
            str(out),
            CorpusSpec("jsonl"),
            EncodeSettings(eos="auto", verify=True),
            range_bytes=20000,
            shard_size=40000,
        )
    )
    assert manifest_out["run"]["shards_skipped"] == len(names) - 2
    assert {p: p.stat().st_mtime_ns for p in kept} == kept
    assert files_of(out) == reference


def test_a_job_interrupted_by_a_failing_shard_then_rerun_equals_an_uninterrupted_run(
    parquet_run, r50k_file, inputs, tmp_path
):
    out = tmp_path / "out"
    job = EncodeJob(
        r50k_file,
        tuple(InputSpec(str(p)) for p in inputs),
        str(out),
        settings=EncodeSettings(eos="auto", verify=True),
        range_bytes=20000,
        shard_size=40000,
        fail_at_shard=2,
    )
    with pytest.raises(Exception, match="test fault"):
        run_encode(job)
    assert not (out / "COMPLETED").exists() and not (out / "manifest.json").exists()
    complete = {p.stem for p in (out / "_shards").glob("tokens-*.json")}
    assert f"tokens-00002-of-{len(manifest(parquet_run)['shards']):05d}" not in complete
    visible = {p.name.split(".")[0] for p in out.glob("tokens-*")}
    assert visible <= complete, "a shard file is visible under its final name before the shard is complete"
    assert not list(out.rglob(".tmp-*"))
    job = dataclasses.replace(job, fail_at_shard=None)
    assert run_encode(job)["run"]["shards_skipped"] == len(complete)
    assert files_of(out) == files_of(parquet_run)


def test_a_different_job_into_the_same_directory_is_refused(parquet_run, r50k_file, inputs, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("a user's file")
    assert encode_cli(r50k_file, inputs, out) == 0
    before = files_of(out)
    capsys.readouterr()
    assert encode_cli(r50k_file, inputs, out, "--bos", EOT) == 2
    assert "different encoding job" in capsys.readouterr().err and files_of(out) == before
    assert encode_cli(r50k_file, inputs[:2], out) == 2
    assert "inputs differ" in capsys.readouterr().err
    assert encode_cli(r50k_file, inputs, out, "--max-document-bytes", "1000000") == 2  # part of the fingerprint
    assert "(--max-document-bytes differ)" in capsys.readouterr().err and files_of(out) == before
    enc = openai_encoding("r50k")
    assert encode_cli(enc["path"], inputs, out, "--pretokenizer", "cl100k") == 2  # the same ranks, another tokenizer
    assert "tokenizer" in capsys.readouterr().err and files_of(out) == before
    assert encode_cli(r50k_file, inputs, out, "--eos", "--verify", "--overwrite") == 0
    assert {k: v for k, v in files_of(out).items() if k != "keep.txt"} == files_of(parquet_run)
    assert (out / "keep.txt").read_text() == "a user's file"


# ------------------------------------------------------------------ bad input, bad tokenizer
def test_bad_records_become_dead_letters_and_counts_reconcile(r50k_file, tmp_path):
    good = ["first", "second", "third"]
    jsonl = write_jsonl(tmp_path / "a.jsonl", good, extra=[b"{not json", b'{"text": 7}', b'{"text": "ok"}'])
    text = write_bytes(tmp_path / "b.txt", b"fine line\n\xc3\x28 broken utf-8\nlast line\n")
    pq.write_table(pa.table({"text": ["row zero", None, "row two"]}), tmp_path / "c.parquet", row_group_size=2)
    pq.write_table(pa.table({"body": ["wrong schema"]}), tmp_path / "d.parquet")
    out = tmp_path / "out"
    assert encode_cli(r50k_file, [jsonl], out / "jsonl", "--verify") == 0
    assert encode_cli(r50k_file, [text], out / "text", "--format", "text", "--shard-format", "megatron") == 0
    assert encode_cli(r50k_file, [tmp_path / "*.parquet"], out / "parquet", "--format", "parquet") == 0
    tok = ours_openai("r50k")
    expected = {"jsonl": good + ["ok"], "text": ["fine line", "last line"], "parquet": ["row zero", "row two"]}
    dead_reasons = {"jsonl": ["malformed JSON", "field 'text' is int"], "text": ["undecodable bytes"],
                    "parquet": ["null value", "wrong schema"]}  # fmt: skip
    for name, texts in expected.items():
        m = manifest(out / name)
        assert [ids for _, ids in read_back(out / name)] == [tok.encode_ordinary(t) for t in texts]
        dead = read_dead_letters(out / name)
        assert [d["reason"][: len(r)] for d, r in zip(dead, dead_reasons[name], strict=True)] == dead_reasons[name]
        assert m["documents_read"] == m["documents_written"] + m["dead_letters"] and m["dead_letters"] == len(dead)
    assert read_back(out / "parquet")[1][0] == "c.parquet#2"  # relative to the inputs' root
    assert read_dead_letters(out / "text")[0]["offset"] == len(b"fine line\n")


@pytest.mark.parametrize("verify", [[], ["--verify"]], ids=["plain", "verify"])
def test_a_lone_surrogate_escape_is_the_same_dead_letter_with_and_without_verify(r50k_file, tmp_path, verify):
    # it used to be encoded (as U+FFFD) without --verify and a "round trip differs" dead letter with it
    lone = "x" * 10 + "\ud800" + "tail"
    path = write_bytes(
        tmp_path / "s.jsonl", (json.dumps({"text": "fine"}) + "\n" + json.dumps({"text": lone}) + "\n").encode()
    )
    assert encode_cli(r50k_file, [path], tmp_path / "out", *verify) == 0
    (dead,) = read_dead_letters(tmp_path / "out")  # valid UTF-8 JSON: the line is excerpted as it is in the file
    assert dead["reason"].startswith("lone surrogate \\ud800 at character 10 of field 'text'")
    assert dead["offset"] == len(json.dumps({"text": "fine"})) + 1
    m = manifest(tmp_path / "out")
    assert (m["documents_written"], m["dead_letters"]) == (1, 1) and m.get("verified", 0) == (1 if verify else 0)


def test_a_tokenizer_failing_its_hash_or_version_check_stops_before_any_work(r50k_file, inputs, tmp_path, capsys):
    data = Path(r50k_file).read_bytes()
    line = data.index(b"\n1000 ") + 1
    tampered = tmp_path / "tampered.bpe"
    tampered.write_bytes(data[:line] + b"1000 QUJD" + data[data.index(b"\n", line) :])
    old = tmp_path / "old.bpe"
    old.write_bytes(data.replace(b"format_version 1\n", b"format_version 7\n", 1))
    for bad, message in ((tampered, "sha256"), (old, "format version 7")):
        assert encode_cli(str(bad), inputs, tmp_path / "out") == 2
        assert message in capsys.readouterr().err
        assert not (tmp_path / "out").exists(), "the job started work before checking the tokenizer"


# ------------------------------------------------------------------ CLI: single text, decode --shards, decode --stream
def test_single_text_encode_still_works(r50k_file, capsys):
    assert run_cli("encode", "--tokenizer", r50k_file, "--text", "hello world") == 0
    assert capsys.readouterr().out.split() == ["31373", "995"]
    assert run_cli("encode", "--tokenizer", r50k_file, "--out", "somewhere") == 2
    assert "beam-bpe encode: error: --out DIR needs --input" in capsys.readouterr().err
    assert run_cli("encode", "--tokenizer", r50k_file, "--text", "x", "--runner", "DaskRunner") == 2
    assert "unrecognized arguments: --runner" in capsys.readouterr().err


def test_decode_one_document_from_shards(parquet_run, r50k_file, docs, inputs, capsys, monkeypatch):
    m = manifest(parquet_run)
    doc_id, _ = read_back(parquet_run)[20]
    monkeypatch.chdir(inputs[0].parent)
    relative = doc_id.replace(str(inputs[0].parent) + "/", "")
    for ref in (doc_id, "20", relative):
        capsys.readouterr()
        assert run_cli("decode", "--tokenizer", r50k_file, "--shards", parquet_run, "--doc", ref, "--skip-special") == 0
        assert capsys.readouterr().out == docs[20] + "\n"
    assert run_cli("decode", "--tokenizer", r50k_file, "--shards", parquet_run, "--doc", f"{inputs[0]}@1") == 2
    assert "no such document" in capsys.readouterr().err
    enc = openai_encoding("r50k")
    assert (
        run_cli("decode", "--tokenizer", enc["path"], "--pretokenizer", "cl100k", "--shards", parquet_run, "--doc", "0")
        == 2
    )
    assert "not the tokenizer" in capsys.readouterr().err and m["tokenizer"]["path"] == r50k_file


def _stream(tokenizer: str, text: str) -> str:
    stdin, out = sys.stdin, io.StringIO()
    sys.stdin = io.StringIO(text)
    try:
        with contextlib.redirect_stdout(out):
            assert run_cli("decode", "--tokenizer", tokenizer, "--stream") == 0
    finally:
        sys.stdin = stdin
    return out.getvalue()


@pytest.fixture(scope="session")
def tiny_file(tmp_path_factory) -> str:
    """A 300-token vocabulary: most characters outside ASCII span several tokens, so chunks cut inside them."""
    path = tmp_path_factory.mktemp("tiny") / "tiny.bpe"
    bpe_core.train(bpe_core.count_chunks(corpus("multi_udhr", 20), "cl100k"), 300, special_tokens=[EOT]).save(str(path))
    return str(path)


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12), as_json=st.booleans())
def test_streaming_decode_cli_equals_decode_for_any_chunking(tiny_file, cuts, as_json):
    tok = Tokenizer.load(tiny_file)
    text = "naïve café 日本語 ☕ 🤷🏽‍♀️ " + corpus("multi_udhr", 3)[2][:200]
    ids = tok.encode_ordinary(text)
    bounds = sorted({0, len(ids), *(c % (len(ids) + 1) for c in cuts)})
    chunks = [ids[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    lines = [json.dumps(c) if as_json else " ".join(map(str, c)) for c in chunks]
    assert _stream(tiny_file, "\n".join(lines) + "\n") == tok.decode(ids) == text


def test_streaming_decode_of_shards_equals_the_source(parquet_run, r50k_file, docs):
    rng = random.Random(5)
    for doc_id, ids in [read_back(parquet_run)[i] for i in (9, 14, 17)]:  # three scripts of the UDHR
        ids = ids[:-1]  # without the EOS
        cut = sorted(rng.sample(range(len(ids) + 1), min(4, len(ids) + 1)))
        lines = [" ".join(map(str, ids[a:b])) for a, b in zip([0, *cut], [*cut, len(ids)], strict=True)]
        assert _stream(r50k_file, "\n".join(lines) + "\n") in docs, doc_id


def test_the_multi_process_runner_writes_the_same_files(parquet_run, r50k_file, inputs, tmp_path):
    multi = ("--direct_running_mode", "multi_processing", "--direct_num_workers", "2")
    assert encode_cli(r50k_file, inputs, tmp_path / "out", "--eos", "--verify", *multi) == 0
    assert files_of(tmp_path / "out") == files_of(parquet_run)


def test_an_object_store_like_filesystem_in_one_process(r50k_file):
    """memory:// stands for gs:// and s3:// here (objects are written in place, published when complete)."""
    with fsspec.open("memory://enc-corpus/a.jsonl", "wb") as f:
        f.write(b'{"text": "hello world"}\n{"text": "second doc"}\n{bad\n')
    with fsspec.open("memory://enc-tok/r50k.bpe", "wb") as f:
        f.write(Path(r50k_file).read_bytes())
    for fmt in ("parquet", "megatron"):
        args = ["encode", "--tokenizer", "memory://enc-tok/r50k.bpe", "--input", "memory://enc-corpus/*.jsonl", "--eos"]
        assert run_cli(*args, "--out", f"memory://enc-out-{fmt}", "--shard-format", fmt) == 0
        got = [(doc_id, ids.tolist()) for doc_id, ids in iter_documents(f"memory://enc-out-{fmt}")]
        assert got == [
            ("a.jsonl@0", [31373, 995, 50256]),  # relative to the inputs' root, memory:///enc-corpus
            ("a.jsonl@24", [12227, 2205, 50256]),
        ]
        assert find_document(f"memory://enc-out-{fmt}", "memory://enc-corpus/a.jsonl@24")[1].tolist() == got[1][1]
