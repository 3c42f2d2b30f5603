"""Both pipelines translated into a Dataflow job description, with nothing submitted and no network used
(pipeline/cli/dataflow.py: the DataflowRunner with --dry_run, then the job file written with --dataflow_job_file).

Needs apache-beam[gcp]: skipped with a message where it is missing, except under BEAM_BPE_REQUIRE_GCP=1 (set by
.ci/run, which installs it), where that is a failure. GCS is replaced by an in-memory fsspec filesystem registered
for gs:// in this process (planning lists the inputs); anything that opens a socket is recorded and fails the test.
"""

from __future__ import annotations

import json
import os
import socket

import apache_beam
import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import bpe_core
from pipeline.cli import dataflow as dataflow_job
from pipeline.errors import UsageError
from pipeline.launch.checks import PYTHON

BEAM = apache_beam.__version__
REQUIRE_GCP = os.environ.get("BEAM_BPE_REQUIRE_GCP") == "1"
BUCKET = "gs://example-bucket"
IMAGE = f"us-docker.pkg.dev/example-project/beam/beam-bpe:{bpe_core.__version__}-beam{BEAM}-py{PYTHON}"
WHEEL = f"beam_bpe-{bpe_core.__version__}-cp{PYTHON.replace('.', '')}-cp{PYTHON.replace('.', '')}-linux_x86_64.whl"
DATAFLOW = [
    "--runner",
    "DataflowRunner",
    "--project",
    "example-project",
    "--region",
    "us-central1",
    "--temp_location",
    f"{BUCKET}/tmp",
    "--staging_location",
    f"{BUCKET}/staging",
    "--job_name",
    "beam-bpe-check",
    "--sdk_container_image",
    IMAGE,
    "--sdk_location",
    "container",
]
READ_STEPS = {"ReadCorpus", "ReadCorpus/CreateRanges", "ReadCorpus/SpreadRanges", "ReadCorpus/ReadRanges"}
TRAIN_STEPS = READ_STEPS | {
    "PreTokenizeAndCount", "PreTokenizeAndCount/CountChunks", "PreTokenizeAndCount/SumCounts",
    "PreTokenizeAndCount/ToRecords", "SelectDeadLetters", "SelectDeadLetters/SelectDeadLetters", "FlattenResults",
    "WriteCounts", "WriteCounts/WriteFiles",
}  # fmt: skip
ENCODE_STEPS = {"WriteShards", "WriteShards/CreateShards", "WriteShards/SpreadShards", "WriteShards/EncodeShards"}


@pytest.fixture(autouse=True)
def gcp_extra():
    try:
        import google.cloud.storage  # noqa: F401
        from apache_beam.runners.dataflow.internal import apiclient  # noqa: F401
    except ImportError as exc:
        message = f"apache-beam[gcp] is not installed ({exc}): pip install 'apache-beam[gcp]=={BEAM}'"
        if REQUIRE_GCP:
            pytest.fail(message + "; BEAM_BPE_REQUIRE_GCP=1 (set by .ci/run) makes this an error")
        pytest.skip(message)


class FakeGCS(MemoryFileSystem):
    """gs:// in memory, for this process only (its own store, apart from memory://)."""

    protocol = ("gs", "gcs")
    store: dict = {}
    pseudo_dirs = [""]

    @classmethod
    def _strip_protocol(cls, path):
        for prefix in ("gs://", "gcs://"):
            if path.startswith(prefix):
                path = path[len(prefix) :]
        return super()._strip_protocol(path)


@pytest.fixture
def gcs(monkeypatch):
    from fsspec.registry import _registry

    FakeGCS.store.clear()
    FakeGCS.pseudo_dirs[:] = [""]
    FakeGCS.clear_instance_cache()
    monkeypatch.setitem(_registry, "gs", FakeGCS)
    monkeypatch.setitem(_registry, "gcs", FakeGCS)
    fs = fsspec.filesystem("gs")
    docs = [{"text": f"document {i}: the quick brown fox jumps over the lazy dog"} for i in range(400)]
    for part in range(3):
        fs.pipe(f"{BUCKET}/corpus/part-{part}.jsonl", "".join(json.dumps(d) + "\n" for d in docs).encode())
    tok = bpe_core.train(
        bpe_core.count_chunks([d["text"] for d in docs], "cl100k"), 300, special_tokens=["<|endoftext|>"]
    )
    tok.save(f"{BUCKET}/tok/tokenizer.bpe")
    return fs


@pytest.fixture
def no_network(monkeypatch):
    """Record (and refuse) every connect and name lookup: a dry run must not need the network."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args[1:] if args else kwargs)
        raise OSError("network use in a test that must not use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: refuse(None, *a))
    yield attempts
    assert attempts == [], f"the translation tried to use the network: {attempts}"


@pytest.fixture
def wheel(tmp_path):
    """A file with the wheel's name: staging copies bytes, and the launch check reads the name (the real wheel is
    built and installed by test_deploy_wheel.py)."""
    path = tmp_path / "dist" / WHEEL
    path.parent.mkdir()
    path.write_bytes(b"wheel bytes " * 100)
    return path


def check_description(summary: dict, tmp_path, wheel, steps: set[str]) -> dict:
    description = json.loads((tmp_path / "job.json").read_text())
    assert description["name"] == "beam-bpe-check" and description["type"] == "JOB_TYPE_BATCH"
    assert steps <= set(summary["steps"]), f"missing steps: {sorted(steps - set(summary['steps']))}"
    packages = {p["name"]: p for p in summary["packages"]}
    assert WHEEL in packages and "pickled_main_session" in packages, packages
    # the API's form of gs://example-bucket/staging/JOB_NAME.TIME/NAME
    where = "storage.googleapis.com/example-bucket/staging/beam-bpe-check."
    assert all(p["location"].startswith(where) for p in packages.values()), packages
    copy = packages[WHEEL]["copy"]
    assert open(copy, "rb").read() == wheel.read_bytes(), "the staged wheel differs from --extra_package"
    assert os.path.getsize(os.path.join(os.path.dirname(copy), "pipeline.pb")) > 1000
    assert summary["container_images"] == [IMAGE]
    assert "use_runner_v2" in summary["experiments"]
    options = description["environment"]["sdkPipelineOptions"]["options"]
    assert options["temp_location"].startswith(f"{BUCKET}/tmp/") and options["sdk_container_image"] == IMAGE
    return description


def test_train_translates_to_a_dataflow_job(gcs, no_network, wheel, tmp_path):
    argv = [
        "--input",
        f"{BUCKET}/corpus/*.jsonl",
        "--vocab-size",
        512,
        "--out",
        f"{BUCKET}/out/tok",
        "--range-bytes",
        8192,
        *DATAFLOW,
        "--extra_package",
        wheel,
        "--dataflow_job_file",
        tmp_path / "job.json",
    ]
    summary = dataflow_job.translate("train", argv, staged_copy=str(tmp_path / "staged"))
    check_description(summary, tmp_path, wheel, TRAIN_STEPS)
    assert summary["ranges"] >= 6  # 3 files cut into 8 KiB ranges
    assert not gcs.exists(f"{BUCKET}/out"), "a translation must not write the output"


def test_encode_translates_to_a_dataflow_job_through_the_module_command(gcs, no_network, wheel, tmp_path, capsys):
    argv = ["encode", "--tokenizer", f"{BUCKET}/tok/tokenizer.bpe", "--input", f"{BUCKET}/corpus/*.jsonl",
            "--out", f"{BUCKET}/ids", "--shard-format", "megatron", "--eos", "--staged_copy", tmp_path / "staged",
            *DATAFLOW, "--extra_package", wheel, "--dataflow_job_file", tmp_path / "job.json"]  # fmt: skip
    assert dataflow_job.main([str(a) for a in argv]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["command"] == "encode" and printed["steps"] >= len(ENCODE_STEPS)
    summary = dataflow_job.summarize(
        json.loads((tmp_path / "job.json").read_text()), _staged_proto(printed), str(tmp_path / "staged")
    )
    check_description(summary, tmp_path, wheel, ENCODE_STEPS)
    assert not gcs.exists(f"{BUCKET}/ids")


SHUFFLE_STEPS = {"WriteShuffledShards", "WriteShuffledShards/EncodeAndPartition", "WriteShuffledShards/GroupByShard",
                 "WriteShuffledShards/WriteShuffledShard"}  # fmt: skip


def test_a_shuffled_encode_translates_to_its_own_stages(gcs, no_network, wheel, tmp_path, capsys):
    argv = ["encode", "--tokenizer", f"{BUCKET}/tok/tokenizer.bpe", "--input", f"{BUCKET}/corpus/*.jsonl",
            "--out", f"{BUCKET}/ids", "--shuffle", "7", "--staged_copy", tmp_path / "staged",
            *DATAFLOW, "--extra_package", wheel, "--dataflow_job_file", tmp_path / "job.json"]  # fmt: skip
    assert dataflow_job.main([str(a) for a in argv]) == 0
    printed = json.loads(capsys.readouterr().out)
    summary = dataflow_job.summarize(
        json.loads((tmp_path / "job.json").read_text()), _staged_proto(printed), str(tmp_path / "staged")
    )
    check_description(summary, tmp_path, wheel, SHUFFLE_STEPS)
    assert not gcs.exists(f"{BUCKET}/ids")


def _staged_proto(printed: dict):
    from apache_beam.portability.api import beam_runner_api_pb2

    wheel_copy = next(p["copy"] for p in printed["packages"] if p["name"] == WHEEL)
    with open(os.path.join(os.path.dirname(wheel_copy), "pipeline.pb"), "rb") as f:
        return beam_runner_api_pb2.Pipeline.FromString(f.read())


def test_translation_runs_the_launch_checks(gcs, no_network, tmp_path):
    argv = ["--input", "/local/corpus.jsonl", "--vocab-size", 300, "--out", f"{BUCKET}/out", *DATAFLOW,
            "--dataflow_job_file", tmp_path / "job.json"]  # fmt: skip
    with pytest.raises(UsageError, match=r"--input /local/corpus.jsonl is on this machine"):
        dataflow_job.translate("train", argv)
    with pytest.raises(UsageError, match=r"pass --dataflow_job_file=PATH"):
        dataflow_job.translate("train", argv[:-2])
    remote = [
        "--input",
        f"{BUCKET}/corpus/*.jsonl",
        "--out",
        f"{BUCKET}/out",
        *DATAFLOW,
        "--dataflow_job_file",
        tmp_path / "job.json",
    ]
    with pytest.raises(ValueError, match=r"--vocab-size is required to train"):  # the job's own checks, as at launch
        dataflow_job.translate("train", remote)
    with pytest.raises(UsageError, match=r"--from-counts trains from existing counts with no pipeline"):
        dataflow_job.translate("train", ["--from-counts", f"{BUCKET}/tok", "--vocab-size", 300, *remote[2:]])
    assert not (tmp_path / "job.json").exists()
