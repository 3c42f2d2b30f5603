"""The doors of issue 25: ``--workers N``, decode's byte-exact and streaming output, ``decode --shards`` without
``--tokenizer``, ``convert`` by suffix, one flag per concept, a clean stop and portable outputs."""

from __future__ import annotations

import argparse

import pytest
from conftest import corpus, ours_openai
from pipeline_testlib import run_cli, write_jsonl

from pipeline.cli import build_parser
from pipeline.errors import UsageError
from pipeline.launch.options import with_workers


@pytest.fixture(scope="module")
def r50k_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("tok") / "r50k.bpe"
    ours_openai("r50k").save(str(path))
    return str(path)


def docs() -> list[str]:
    return corpus("fortunes_multi", 120) + corpus("en_bible_kjv", 4)


# ------------------------------------------------------------------ --workers N
def test_workers_is_beams_multi_process_runner():
    assert with_workers(3, ["--temp_location=/tmp/x"]) == [
        "--temp_location=/tmp/x",
        "--direct_running_mode=multi_processing",
        "--direct_num_workers=3",
    ]
    assert with_workers(2, ["--runner", "FnApiRunner"])[-1] == "--direct_num_workers=2"


@pytest.mark.parametrize(
    ("beam", "named"),
    [
        (["--runner", "DaskRunner"], "--runner DaskRunner"),
        (["--direct_num_workers=4"], "--direct_num_workers"),
        (["--direct_running_mode", "multi_threading"], "--direct_running_mode"),
    ],
)
def test_workers_is_refused_beside_another_runner_or_direct_option(beam, named):
    with pytest.raises(UsageError, match=named):
        with_workers(2, beam)


@pytest.mark.parametrize("command", ["train", "encode", "report"])
def test_help_lists_workers(command):
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    assert "--workers" in sub.choices[command].format_help()


@pytest.mark.parametrize("bad", ["0", "-2", "two"])
def test_workers_needs_a_whole_number(bad, capsys, tmp_path, r50k_file):
    with pytest.raises(SystemExit):
        run_cli("encode", "--tokenizer", r50k_file, "--input", tmp_path / "a.jsonl", "--out", tmp_path / "o",
                "--workers", bad)  # fmt: skip
    assert "number of workers" in capsys.readouterr().err


def test_workers_with_runner_is_refused_before_any_work(capsys, tmp_path, r50k_file):
    write_jsonl(tmp_path / "a.jsonl", ["one", "two"])
    with pytest.raises(SystemExit):
        run_cli("encode", "--tokenizer", r50k_file, "--input", tmp_path / "a.jsonl", "--out", tmp_path / "o",
                "--workers", "2", "--runner", "DaskRunner")  # fmt: skip
    assert "--runner DaskRunner" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_encode_with_workers_runs_two_processes_and_writes_the_same_files(tmp_path, r50k_file, monkeypatch):
    import pipeline.encode.job as job

    seen = []

    def spy(beam_args, **kw):
        seen.append(list(beam_args))
        return original(beam_args, **kw)

    original = job.pipeline_options
    monkeypatch.setattr(job, "pipeline_options", spy)
    texts = docs()
    write_jsonl(tmp_path / "a.jsonl", texts[:60])
    write_jsonl(tmp_path / "b.jsonl", texts[60:])
    common = ["encode", "--tokenizer", r50k_file, "--input", tmp_path / "*.jsonl", "--range-bytes", 4096,
              "--shard-size", "8KB", "--no-progress"]  # fmt: skip
    assert run_cli(*common, "--out", tmp_path / "one") == 0
    assert run_cli(*common, "--out", tmp_path / "two", "--workers", "2") == 0
    assert seen[0] == []
    assert seen[1][-2:] == ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
    one = {p.relative_to(tmp_path / "one") for p in (tmp_path / "one").glob("*.parquet")}
    assert len(one) > 1
    for name in one:
        assert (tmp_path / "two" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()


def test_encode_text_refuses_workers(capsys, r50k_file):
    assert run_cli("encode", "--tokenizer", r50k_file, "--text", "hi", "--workers", "2") == 2
    assert "--workers belongs to the encoding pipeline" in capsys.readouterr().err
