"""A failed pipeline run, as the CLI reports it: one line saying what failed, in what state ``--out`` is and what a
rerun does (train: starts again; encode: resumes), exit code 2, and the traceback only with -v or BEAM_BPE_VERBOSE=1.

The promises the line makes (nothing partial under a final name, no manifest or COMPLETED, the rerun's output) are
swept over every stage in tests/reliability/test_faults.py; here the line itself, the rerun it tells the user to
make, and the worker-killed case of the review (multi_processing: "Channel closed prematurely" after 80 lines of
tracebacks before).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import corpus, ours_openai
from pipeline_testlib import manifest, run_cli, write_jsonl

import pipeline.corpus.read
from pipeline.cli.common import VERBOSE_ENV

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "tests" / "reliability" / "hooks"  # sitecustomize.py: kills the worker reading a KILL-ME document
FAULT = "test fault"
KILL_DOC = "this document kills the worker that reads it: KILL-ME-a"
RERUN = {
    "train": "rerun the same command to run it again from the start (training does not resume)",
    "encode": "rerun the same command to resume: the shards already complete are kept, the others written",
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> list[Path]:
    docs = corpus("fortunes_multi", 300)
    root = tmp_path_factory.mktemp("in")
    return [write_jsonl(root / "a.jsonl", docs[:150]), write_jsonl(root / "b.jsonl", docs[150:] + [KILL_DOC])]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("tok") / "r50k.bpe"
    ours_openai("r50k").save(str(path))
    return str(path)


def args_for(command: str, inputs: list[Path], tokenizer: str, out: Path) -> list[str]:
    flags = ["--range-bytes", "10000", "--out", str(out)] + [a for p in inputs for a in ("--input", str(p))]
    if command == "train":
        return ["train", "--vocab-size", "300", *flags]
    return ["encode", "--tokenizer", tokenizer, *flags]


def fail_at_range(monkeypatch, index: int, error: type[Exception]) -> None:
    real = pipeline.corpus.read.read_range

    def read_range(rng, spec):
        if rng.index == index:
            raise error(f"{FAULT}: ReadCorpus raises at range {index}")
        return real(rng, spec)

    monkeypatch.setattr(pipeline.corpus.read, "read_range", read_range)
    # encode reads its ranges inside the shard units (issue 33 item 3)
    monkeypatch.setattr(importlib.import_module("pipeline.encode.write"), "read_range", read_range)


def last_line(err: str) -> str:
    return [line for line in err.splitlines() if line.strip()][-1]


@pytest.mark.parametrize(("command", "error"), [("train", RuntimeError), ("encode", RuntimeError), ("encode", OSError)])
def test_a_step_failing_is_one_line_then_the_rerun_it_names_completes(
    command, error, inputs, tokenizer, tmp_path, monkeypatch, capsys
):
    out = tmp_path / "out"
    args = args_for(command, inputs, tokenizer, out)
    with monkeypatch.context() as patch:
        fail_at_range(patch, 2, error)
        capsys.readouterr()
        assert run_cli(*args) == 2
    err = capsys.readouterr().err
    line = last_line(err)
    assert line.startswith(
        f"beam-bpe {command}: error: the run failed: {error.__name__}: {FAULT}: ReadCorpus raises at range 2"
    ), line
    step = "ReadCorpus/ReadRanges" if command == "train" else "WriteShards/EncodeShards"  # encode reads per shard
    assert f"[while running '{step}']" in line, "the line names the step that failed"
    assert f"No file in {out} is partial and there is neither manifest.json nor COMPLETED" in line
    assert RERUN[command] in line and f"-v or {VERBOSE_ENV}=1 shows the traceback" in line
    assert "Traceback" not in err
    assert not (out / "COMPLETED").exists() and not (out / "manifest.json").exists()
    assert run_cli(*args) == 0, "the rerun the message names"
    assert (out / "COMPLETED").exists() and manifest(out)["documents_read"] == 301


@pytest.mark.parametrize("how", ["-v after the command", "-v before it", "--verbose", VERBOSE_ENV])
def test_verbose_adds_the_traceback(how, inputs, tokenizer, tmp_path, monkeypatch, capsys):
    args = args_for("train", inputs, tokenizer, tmp_path / "out")
    if how == "-v after the command":
        args.append("-v")
    elif how == "-v before it":
        args.insert(0, "-v")
    elif how == "--verbose":
        args.append("--verbose")
    else:
        monkeypatch.setenv(VERBOSE_ENV, "1")
    fail_at_range(monkeypatch, 1, RuntimeError)
    capsys.readouterr()
    assert run_cli(*args) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "in read_range" in err
    assert last_line(err).startswith("beam-bpe train: error: the run failed: RuntimeError: test fault")


def test_an_argument_error_is_not_reported_as_a_failed_run(inputs, tmp_path, capsys):
    out = tmp_path / "out"
    assert run_cli("train", "--input", str(inputs[0]), "--out", str(out)) == 2
    line = last_line(capsys.readouterr().err)
    assert line.startswith("beam-bpe train: error: --vocab-size is required") and "rerun" not in line


def test_a_library_command_keeps_its_traceback(tokenizer, monkeypatch):
    """Only the pipeline commands turn any exception into the one line: elsewhere an unexpected error is a bug."""
    from bpe_core import Tokenizer

    def describe(self):
        raise RuntimeError(FAULT)

    monkeypatch.setattr(Tokenizer, "describe", describe)
    with pytest.raises(RuntimeError, match=FAULT):
        run_cli("info", "--tokenizer", tokenizer)


FAILING_CLI = """
import sys
import pipeline.corpus.read as rc
from pipeline.cli import main
real = rc.read_range
def read_range(rng, spec):
    if rng.index == 1:
        raise RuntimeError("test fault: ReadCorpus raises at range 1")
    return real(rng, spec)
rc.read_range = read_range
sys.exit(main(sys.argv[1:]))
"""


def test_beams_logged_traceback_is_cut_to_its_message(inputs, tokenizer, tmp_path):
    """In a process of its own (no logging configured, as from the shell), Beam logs the step's error with its
    traceback (ERROR:apache_beam.runners.common): one line of it stays (-v keeps the traceback: tested above)."""
    args = args_for("train", inputs, tokenizer, tmp_path / "out")
    env = {k: v for k, v in os.environ.items() if k != VERBOSE_ENV}
    proc = subprocess.run(
        [sys.executable, "-c", FAILING_CLI, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    logged = [line for line in proc.stderr.splitlines() if line.startswith("ERROR:apache_beam.runners.common:")]
    assert logged and FAULT in logged[0], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert last_line(proc.stderr).startswith("beam-bpe train: error: the run failed: RuntimeError: test fault")


def test_a_worker_killed_under_multi_processing_is_one_line(inputs, tokenizer, tmp_path):
    kills = tmp_path / "kills"
    kills.mkdir()
    env = dict(
        os.environ,
        BEAM_BPE_TEST_KILL_DIR=str(kills),
        PYTHONPATH=os.pathsep.join([str(HOOKS), os.environ.get("PYTHONPATH", "")]),
    )
    env.pop(VERBOSE_ENV, None)
    out = tmp_path / "out"
    args = args_for("encode", inputs, tokenizer, out) + [
        "--direct_running_mode",
        "multi_processing",
        "--direct_num_workers",
        "2",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
    )
    assert (kills / "a").exists(), "no worker read the document that kills it"
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    line = last_line(proc.stderr)
    # pipeline/launch/workers.py notices the dead worker (Beam's runner waits for its bundle for ever)
    assert line.startswith("beam-bpe encode: error: the run failed: WorkerDiedError: a local Beam worker"), line
    assert "SIGKILL" in line, line
    assert RERUN["encode"] in line
