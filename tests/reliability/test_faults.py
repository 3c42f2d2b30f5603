"""Faults: a stage raising at a chosen element, a job killed (SIGKILL) between and inside its writes, a worker process
killed under multi_processing, a worker killed on a Dask LocalCluster.

The local runners do not retry bundles, so the promise there is: the job fails with an error that says what
failed, no file is visible under a final name unless it is byte-identical to that file of an undisturbed run (no
partial file; no COMPLETED marker, no manifest), and a rerun of the same command gives output byte-identical to an
undisturbed run (the training manifest compared without its timings). On Dask, which retries the tasks of a lost
worker, the output after a killed worker is identical to the in-process output.

tests/pipeline/test_encode_e2e.py has the original interrupted-rerun test (EncodeShardFn's ``fail_at_shard``
hook, reused here) and a resume after deleted stats files; this module sweeps the stages, the kill points and the
runners with one promise."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DASK, corpus, require_module

import bpe_core
import pipeline.corpus.read
import pipeline.encode.write
from bpe_core.train.sorted_counts import SortedChunkCounter
from pipeline.cli import main
from pipeline.corpus.plan import CorpusSpec, InputSpec
from pipeline.encode import documents as encode_documents
from pipeline.encode.job import run_encode
from pipeline.encode.settings import EncodeJob, EncodeSettings
from pipeline.encode.shards import ShardSink

from .lib import (
    FULL,
    ROOT,
    assert_no_partial_final_file,
    files_of,
    is_temporary,
    visible_final_files,
    with_hooks,
    write_jsonl,
)

AREA = "faults"
FAULT = "test fault"
KILL_DOC = "this document kills the worker that reads it: KILL-ME-a (only when tests/reliability/hooks is loaded)"


# ------------------------------------------------------------------ the corpus and the undisturbed runs
@pytest.fixture(scope="module")
def docs() -> list[str]:
    return corpus("fortunes_multi", 500) + corpus("en_bible_kjv", 4) + [KILL_DOC] + corpus("multi_udhr", 3)


@pytest.fixture(scope="module")
def inputs(docs, tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("in")
    third = len(docs) // 3
    return [
        write_jsonl(root / "a.jsonl", docs[:third]),
        write_jsonl(root / "b.jsonl.gz", docs[third : 2 * third]),
        write_jsonl(root / "c.jsonl", docs[2 * third :]),
    ]


def train_args(inputs: list[Path], out: Path) -> list[str]:
    args = ["train", "--vocab-size", "400", "--special-token", "<|endoftext|>", "--count-shards", "2",
            "--range-bytes", "20000", "--out", str(out)]  # fmt: skip
    return args + [a for p in inputs for a in ("--input", str(p))]


def encode_args(tokenizer: str, inputs: list[Path], out: Path) -> list[str]:
    args = [
        "encode",
        "--tokenizer",
        tokenizer,
        "--eos",
        "--verify",
        "--range-bytes",
        "20000",
        "--shard-size",
        "20000",
        "--out",
        str(out),
    ]
    return args + [a for p in inputs for a in ("--input", str(p))]


@pytest.fixture(scope="module")
def reference(inputs, r50k_artifact, tmp_path_factory) -> dict[str, dict[str, bytes]]:
    """The undisturbed runs' files, and the number of files each publishes (renames into its output)."""
    root = tmp_path_factory.mktemp("reference")
    refs = {}
    for name, args in (
        ("train", train_args(inputs, root / "train")),
        ("encode", encode_args(r50k_artifact, inputs, root / "encode")),
    ):
        assert main(args) == 0
        refs[name] = files_of(root / name)
    return refs


def run_args(name: str, inputs, r50k_artifact, out: Path) -> list[str]:
    return train_args(inputs, out) if name == "train" else encode_args(r50k_artifact, inputs, out)


def rerun_is_identical(name: str, inputs, r50k_artifact, out: Path, reference) -> None:
    assert main(run_args(name, inputs, r50k_artifact, out)) == 0
    after = files_of(out)
    leftovers = [k for k in after if is_temporary(k)]
    assert not leftovers, f"temporary files left after the rerun: {leftovers}"
    ref = reference[name]
    assert after == ref, (
        f"files differ: {sorted(set(after) ^ set(ref))[:5] or [k for k in after if after[k] != ref.get(k)][:5]}"
    )


# ------------------------------------------------------------------ a stage raising at a chosen element
def failing_run(args: list[str], capsys) -> str:
    """Run the CLI expecting the injected fault: the error it raised (a pipeline failure) or printed (exit code 2:
    the CLI's own report of OSError, ValueError, MemoryError)."""
    capsys.readouterr()
    try:
        code = main(args)
    except Exception as exc:  # noqa: BLE001 - the fault, as the runner re-raises it
        message = f"{type(exc).__name__}: {exc}"
    else:
        assert code == 2, f"the job did not fail (exit code {code})"
        message = capsys.readouterr().err.strip().split("error: ", 1)[-1]
        message = f"error printed, exit code 2: {message}"
    assert FAULT in message, message
    return message


def _raise_at_range(index: int, module=pipeline.corpus.read):
    real = module.read_range

    def read_range(rng, spec):
        if rng.index == index:
            raise RuntimeError(f"{FAULT}: ReadCorpus raises at range {index}")
        return real(rng, spec)

    return module, "read_range", read_range


def _raise_at_document(doc: str, module, attribute: str):
    real = getattr(module, attribute)

    def wrapper(*args, **kwargs):
        texts = list(args[0] if module is bpe_core else args[1])
        if doc in texts:
            raise RuntimeError(f"{FAULT}: {attribute} raises at the document {doc[:30]!r}")
        return real(*((texts, *args[1:]) if module is bpe_core else (args[0], texts, *args[2:])), **kwargs)

    return module, attribute, wrapper


def _raise_at_publish(name_part: str):
    """os.replace raising when publishing a file whose name contains ``name_part``: a crash after the temporary
    file is complete, before it gets its final name (every writer of both pipelines renames)."""
    real = os.replace

    def replace(src, dst, *args, **kwargs):
        if name_part in os.fspath(dst):
            raise OSError(f"{FAULT}: crash while publishing {os.path.basename(os.fspath(dst))}")
        return real(src, dst, *args, **kwargs)

    return os, "replace", replace


def _raise_in_encode_batch(index: int):
    real = encode_documents.encode_batch

    def encode_batch(tok, batch, *args, **kwargs):
        if batch.range_index == index:
            raise MemoryError(f"{FAULT}: EncodeDocuments fails on the batches of range {index}")
        return real(tok, batch, *args, **kwargs)

    return pipeline.encode.write, "encode_batch", encode_batch


def _raise_in_shard(index: int):
    real = ShardSink.add

    def add(self, batch):
        if self.index == index:
            raise OSError(f"{FAULT}: the shard writer fails writing a batch of shard {index}")
        return real(self, batch)

    return ShardSink, "add", add


STAGE_FAULTS = {
    "train": {
        "ReadCorpus raises at range 2": lambda d: _raise_at_range(2),
        "PreTokenizeAndCount raises at document 123": lambda d: _raise_at_document(d[123], SortedChunkCounter, "add"),
        "WriteCounts crashes publishing counts shard 1": lambda d: _raise_at_publish("counts-00001-of-00002"),
        "the driver's merge loop raises": lambda d: (bpe_core, "train", _fail(f"{FAULT}: the merge loop raises")),
        "the driver crashes publishing tokenizer.json": lambda d: _raise_at_publish("tokenizer.json"),
    },
    "encode": {
        "ReadCorpus raises at range 2": lambda d: _raise_at_range(2, pipeline.encode.write),
        "EncodeDocuments fails on range 3 (not a per-document error)": lambda d: _raise_in_encode_batch(3),
        "the shard writer fails on a batch of shard 1": lambda d: _raise_in_shard(1),
        "WriteShards crashes publishing shard 4's Parquet file": lambda d: _raise_at_publish("tokens-00004-of-"),
        "WriteShards crashes publishing shard 3's stats (its data file already complete)": lambda d: _raise_at_publish(
            "_shards/tokens-00003-of-"
        ),
        "the driver crashes publishing manifest.json": lambda d: _raise_at_publish("manifest.json"),
    },
}


def _fail(message: str):
    def fail(*args, **kwargs):
        raise RuntimeError(message)

    return fail


CASES = [(name, fault) for name, faults in STAGE_FAULTS.items() for fault in faults] + [("encode", "fail_at_shard=2")]


@pytest.mark.parametrize(("name", "fault"), CASES, ids=[f"{n}: {f}" for n, f in CASES])
def test_a_stage_raising_at_a_chosen_element(
    name, fault, docs, inputs, r50k_artifact, reference, tmp_path, monkeypatch, capsys, reliability
):
    out = tmp_path / "out"
    if fault == "fail_at_shard=2":  # the pipeline's own test-only hook (EncodeShardFn)
        job = EncodeJob(
            r50k_artifact,
            tuple(InputSpec(str(p)) for p in inputs),
            str(out),
            CorpusSpec("jsonl"),
            EncodeSettings(eos="auto", verify=True),
            range_bytes=20000,
            shard_size=20000,
            fail_at_shard=2,
        )
        with pytest.raises(Exception, match=FAULT) as err:
            run_encode(job)
        error = f"{type(err.value).__name__}: {err.value}"
    else:
        with monkeypatch.context() as patch:
            patch.setattr(*STAGE_FAULTS[name][fault](docs))
            error = failing_run(run_args(name, inputs, r50k_artifact, out), capsys)
    visible = assert_no_partial_final_file(out, reference[name])
    assert "manifest.json" not in visible_final_files(out), "a failed job wrote its manifest"
    temporaries = sum(1 for k in files_of(out) if is_temporary(k)) if out.exists() else 0
    rerun_is_identical(name, inputs, r50k_artifact, out, reference)
    reliability.row(AREA, f"{name} pipeline: {fault}", "the job fails with the stage's error "
                    f"({error.split(':')[0]}: '{FAULT}: ...'); every file visible under a final name equals the "
                    "undisturbed run's, no manifest, no COMPLETED; a rerun of the same command gives byte-identical "
                    "output and leaves no temporary file", final_files_visible=visible,
                    temporary_files_left=temporaries, reruns_compared=1)  # fmt: skip


def test_a_document_the_tokenizer_rejects_is_a_dead_letter_not_a_failed_job(
    docs, inputs, r50k_artifact, reference, tmp_path, monkeypatch, reliability
):
    from bpe_core import Tokenizer

    poison = docs[200]
    real = Tokenizer.encode_ordinary_flat  # what the encode stage calls, once per batch (an Arrow column)

    def encode_ordinary_flat(self, texts, **kwargs):
        if poison in (texts.to_pylist() if hasattr(texts, "to_pylist") else list(texts)):
            raise ValueError(f"{FAULT}: the tokenizer rejects one document")
        return real(self, texts, **kwargs)

    monkeypatch.setattr(Tokenizer, "encode_ordinary_flat", encode_ordinary_flat)
    out = tmp_path / "out"
    assert main(encode_args(r50k_artifact, inputs, out)) == 0
    import json

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dead_letters"] == 1 and manifest["documents_written"] == len(docs) - 1
    dead = [json.loads(line) for p in (out / "dead_letters").glob("*.jsonl") for line in p.read_text().splitlines()]
    assert [d["reason"] for d in dead] == [f"encode failed: ValueError: {FAULT}: the tokenizer rejects one document"]
    assert dead[0]["excerpt"] == poison[:120]
    reliability.row(AREA, "encode pipeline: the tokenizer raises on one document of a batch",
                    "only that document fails: a dead letter with the error, its file and offset; the others of the "
                    "batch are encoded (the batch is re-run document by document); the job completes")  # fmt: skip


# ------------------------------------------------------------------ a job killed (SIGKILL) at a chosen write
KILLER = """
import os, signal, sys
out, at, when = os.environ["KILL_OUT"], int(os.environ["KILL_AT"]), os.environ["KILL_WHEN"]
real, seen = os.replace, [0]
def replace(src, dst, *args, **kwargs):
    if not os.fspath(dst).startswith(out):
        return real(src, dst, *args, **kwargs)
    seen[0] += 1
    if seen[0] == at and when == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    result = real(src, dst, *args, **kwargs)
    if seen[0] == at and when == "after":
        os.kill(os.getpid(), signal.SIGKILL)
    return result
os.replace = replace
from pipeline.cli import main
sys.exit(main(sys.argv[1:]))
"""


def publishes(name: str, inputs, r50k_artifact, tmp_path: Path, monkeypatch) -> list[str]:
    """The files a run publishes (renames into its output), in order."""
    out = tmp_path / "count"
    seen, real = [], os.replace

    def replace(src, dst, *args, **kwargs):
        if os.fspath(dst).startswith(str(out)):
            seen.append(os.path.relpath(os.fspath(dst), out))
        return real(src, dst, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", replace)
        assert main(run_args(name, inputs, r50k_artifact, out)) == 0
    return seen


def kill_points(count: int) -> list[tuple[int, str]]:
    if FULL:  # after the last rename (COMPLETED) the job is done: not a kill between writes
        return [(k, when) for k in range(1, count + 1) for when in ("before", "after") if (k, when) != (count, "after")]
    return [(1, "before"), (count // 2, "after"), (count - 1, "after")]


@pytest.mark.parametrize("name", ["train", "encode"])
def test_a_job_killed_between_and_inside_its_writes(
    name, inputs, r50k_artifact, reference, tmp_path, monkeypatch, reliability
):
    names = publishes(name, inputs, r50k_artifact, tmp_path, monkeypatch)
    assert names[-1] == "COMPLETED" and len(names) > 5
    points = kill_points(len(names))
    for k, when in points:
        out = tmp_path / f"killed-{k}-{when}"
        env = dict(os.environ, KILL_OUT=str(out), KILL_AT=str(k), KILL_WHEN=when)
        proc = subprocess.run([sys.executable, "-c", KILLER, *run_args(name, inputs, r50k_artifact, out)],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)  # fmt: skip
        assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-2000:])
        assert_no_partial_final_file(out, reference[name])
        rerun_is_identical(name, inputs, r50k_artifact, out, reference)
    where = ", ".join(f"{when} publishing {names[k - 1]}" for k, when in points)
    reliability.row(AREA, f"{name} pipeline killed with SIGKILL at {len(points)} of its {len(names)} renames "
                    f"({'all, before and after each but the last' if FULL else where})",
                    "no file under a final name differs from the undisturbed run's (a complete shard may be there "
                    "without its stats: the rerun rewrites it), no COMPLETED; the rerun (resume) is byte-identical "
                    "and removes the temporary files of the killed run", inputs=len(points),
                    reruns_compared=len(points))  # fmt: skip


# ------------------------------------------------------------------ a worker process killed
@pytest.mark.parametrize("name", ["train", "encode"])
def test_a_worker_killed_under_multi_processing(name, inputs, r50k_artifact, reference, tmp_path, reliability):
    """tests/reliability/hooks/sitecustomize.py, loaded by the worker processes, kills (SIGKILL) the worker that
    reads KILL_DOC, once. Measured: the FnApiRunner does not retry; the job fails within the timeout (no hang)."""
    out, kills = tmp_path / "out", tmp_path / "kills"
    kills.mkdir()
    env = with_hooks(dict(os.environ, BEAM_BPE_TEST_KILL_DIR=str(kills)))
    args = run_args(name, inputs, r50k_artifact, out) + [
        "--direct_running_mode",
        "multi_processing",
        "--direct_num_workers",
        "2",
    ]
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)  # fmt: skip
    assert (kills / "a").exists(), "no worker read the document that kills it"
    assert proc.returncode != 0, "the job succeeded although a worker died"
    error = [line for line in proc.stderr.splitlines() if line.strip()][-1]
    assert "Channel closed" in error or "worker" in error.lower(), error
    assert_no_partial_final_file(out, reference[name])
    rerun_is_identical(name, inputs, r50k_artifact, out, reference)
    reliability.row(AREA, f"{name} pipeline, --direct_running_mode multi_processing with 2 workers: the worker that "
                    "reads one chosen document is killed (SIGKILL)", "measured: no retry; the job fails and exits "
                    f"(exit code {proc.returncode}, last line '{error[:80]}'), within the timeout; no file under a "
                    "final name differs from the undisturbed run's; the rerun is byte-identical",
                    exit_code=proc.returncode, reruns_compared=1)  # fmt: skip


def test_a_worker_killed_on_a_dask_cluster(inputs, r50k_artifact, reference, tmp_path, monkeypatch, reliability):
    """The same kill on a dask.distributed LocalCluster (2 worker processes, spawned with the hook loaded). Dask
    recomputes the tasks of the lost worker: the job succeeds and the output equals the in-process output."""
    distributed = require_module("distributed", **DASK)  # a failure under BEAM_BPE_REQUIRE_DASK=1
    kills = tmp_path / "kills"
    kills.mkdir()
    for key, value in with_hooks({"BEAM_BPE_TEST_KILL_DIR": str(kills)}).items():
        monkeypatch.setenv(key, value)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:  # fmt: skip
        dask = ["--runner", "DaskRunner", "--dask_client_address", cluster.scheduler_address]
        for name in ("train", "encode"):
            for marker in kills.iterdir():
                marker.unlink()  # re-arm: the first worker to read KILL_DOC in this run dies
            out = tmp_path / name
            assert main(run_args(name, inputs, r50k_artifact, out) + dask) == 0
            assert (kills / "a").exists(), "no worker was killed"
            got, expected = files_of(out), reference[name]
            if name == "train":  # the training manifest names the runner
                got["manifest.json"] = got["manifest.json"].replace(
                    b'"runner": "DaskRunner"', b'"runner": "FnApiRunner"'
                )
            assert got == expected, "the output after a killed worker differs from the undisturbed run's"
            reliability.row(AREA, f"{name} pipeline on a Dask LocalCluster (2 worker processes): the worker that reads "
                            "one chosen document is killed (SIGKILL)", "measured: Dask restarts the worker and "
                            "recomputes its tasks; the job succeeds and its files are byte-identical to the in-process "
                            "run's", workers_killed=1, reruns_compared=1)  # fmt: skip
