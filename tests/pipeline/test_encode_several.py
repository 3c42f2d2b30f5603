"""encode with several tokenizers in one read (pipeline/encode/several.py): each OUT/<stem>/ byte-identical to a
separate run, resumed on its own, and two tokenizers of one name refused."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import corpus, data_path
from pipeline_testlib import run_cli, write_jsonl

from pipeline.corpus.plan import CorpusSpec, InputSpec
from pipeline.encode.job import run_encode
from pipeline.encode.settings import EncodeJob, EncodeSettings
from pipeline.encode.several import run_encode_several, tokenizer_folders
from pipeline.errors import OutputError, UsageError
from pipeline.storage.lease import Lease

FORMATS = ["megatron", "parquet"]


def _files(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _job(tmp_path, out, fmt: str) -> EncodeJob:
    inputs = tmp_path / "in"
    if not inputs.exists():
        write_jsonl(inputs / "a.jsonl", corpus("fortunes_multi", 400))
        write_jsonl(inputs / "b.jsonl.gz", corpus("en_bible_kjv", 10), extra=[b"not json"])
    return EncodeJob(
        "unused", (InputSpec(str(inputs / "*")),), str(out), CorpusSpec("jsonl"),
        EncodeSettings(shard_format=fmt), range_bytes=20_000, shard_size=60_000,
    )  # fmt: skip


@pytest.mark.parametrize("fmt", FORMATS)
def test_two_tokenizers_one_read_equal_two_separate_runs(tmp_path, fmt):
    """Same folder names for both (megatron_data_path.txt holds absolute paths): the one-read output is moved
    aside before the separate runs write theirs."""
    r50k, cl100k = (str(data_path("tiktoken", f"{n}_base.tiktoken")) for n in ("r50k", "cl100k"))
    out = tmp_path / "out"
    manifests = run_encode_several(_job(tmp_path, out, fmt), [r50k, cl100k])
    assert set(manifests) == {"r50k_base", "cl100k_base"}
    out.rename(tmp_path / "one")
    for name, path in (("r50k_base", r50k), ("cl100k_base", cl100k)):
        run_encode(dataclasses.replace(_job(tmp_path, out / name, fmt), tokenizer=path))
        one, two = _files(tmp_path / "one" / name), _files(out / name)
        assert len(one) > 4 and one.keys() == two.keys()
        assert [f for f in one if one[f] != two[f]] == []
        assert manifests[name]["tokens"] > 0
    assert _files(tmp_path / "one" / "r50k_base") != _files(tmp_path / "one" / "cl100k_base")


def test_each_folder_resumes_on_its_own(tmp_path):
    r50k, cl100k = (str(data_path("tiktoken", f"{n}_base.tiktoken")) for n in ("r50k", "cl100k"))
    job = _job(tmp_path, tmp_path / "out", "megatron")
    first = run_encode_several(job, [r50k, cl100k])
    before = _files(tmp_path / "out")
    sorted((tmp_path / "out" / "cl100k_base").glob("*.bin"))[1].unlink()  # one shard of one folder lost
    kept = _mtimes(tmp_path / "out" / "r50k_base")
    again = run_encode_several(job, [r50k, cl100k])
    assert _files(tmp_path / "out") == before and again["cl100k_base"]["tokens"] == first["cl100k_base"]["tokens"]
    assert _mtimes(tmp_path / "out" / "r50k_base") == kept  # not rewritten (its data-path file: the same bytes)


def _mtimes(folder) -> dict:
    """The files of a folder but the one finish_encode rewrites for a moved folder, by their mtime."""
    return {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file() and p.name != "megatron_data_path.txt"}


def test_two_tokenizers_of_one_name_are_refused_naming_both():
    with pytest.raises(UsageError, match="a/tok.bpe and --tokenizer b/tok.json"):
        tokenizer_folders(["a/tok.bpe", "b/tok.json"])
    assert tokenizer_folders(["x/cl100k.bpe", "y/o200k_base.tiktoken", "z/llama3"]) == [
        "cl100k",
        "o200k_base",
        "llama3",
    ]


def test_one_lease_covers_out(tmp_path):
    """A second job into OUT is refused while the first holds OUT's lease, naming it; nothing is written."""
    r50k, cl100k = (str(data_path("tiktoken", f"{n}_base.tiktoken")) for n in ("r50k", "cl100k"))
    job = _job(tmp_path, tmp_path / "out", "megatron")
    with Lease(str(tmp_path / "out"), command="encode"):
        with pytest.raises(OutputError, match="lease|running|another"):
            run_encode_several(job, [r50k, cl100k])
    assert not list((tmp_path / "out").glob("*/COMPLETED"))
    assert set(run_encode_several(job, [r50k, cl100k])) == {"r50k_base", "cl100k_base"}  # once it is released


def test_encode_command_with_two_tokenizers(tmp_path, capsys):
    r50k, cl100k = (str(data_path("tiktoken", f"{n}_base.tiktoken")) for n in ("r50k", "cl100k"))
    job = _job(tmp_path, tmp_path / "unused", "parquet")
    out = tmp_path / "out"
    args = ["encode", "--tokenizer", r50k, "--tokenizer", cl100k, "--input", job.inputs[0].pattern, "--out", out]
    assert run_cli(*args, "--no-progress") == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.rsplit(" -> ", 1)[1] for line in lines] == [str(out / "r50k_base"), str(out / "cl100k_base")]
    for name in ("r50k_base", "cl100k_base"):
        assert (out / name / "COMPLETED").exists() and (out / name / "manifest.json").exists()
    assert run_cli("encode", "--tokenizer", r50k, "--tokenizer", cl100k, "--text", "hello") == 2
    assert "--text takes one tokenizer" in capsys.readouterr().err
