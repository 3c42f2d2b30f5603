"""Launch-time checks of runner options: each wrong or missing option fails with a message naming the option and the
fix, before anything is planned, written or started (pipeline/launch/checks.py)."""

from __future__ import annotations

import socket
import sys
import time

import apache_beam
import pytest
from pipeline_testlib import run_cli, write_jsonl

import bpe_core
from pipeline.errors import UsageError
from pipeline.launch import checks as launch_checks
from pipeline.launch.checks import check_launch, check_wheel

BEAM = apache_beam.__version__
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
CP = f"cp{sys.version_info[0]}{sys.version_info[1]}"
DATAFLOW = [
    "--runner=DataflowRunner",
    "--project=example-project",
    "--region=us-central1",
    "--temp_location=gs://example-bucket/tmp",
]
REMOTE_PATHS = {"--input": ["gs://example-bucket/corpus/*.jsonl"], "--out": ["gs://example-bucket/out"]}


@pytest.fixture(autouse=True)
def gcp_extra_present(monkeypatch):
    """The Dataflow checks below do not depend on apache-beam[gcp] being installed here (one test removes it)."""
    importable = launch_checks._importable
    monkeypatch.setattr(
        launch_checks, "_importable", lambda module: module.startswith("google.cloud") or importable(module)
    )


def closed_port() -> int:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fails(args, match, paths=None):
    with pytest.raises(UsageError, match=match) as info:
        check_launch(args, paths=paths)
    return str(info.value)


# ------------------------------------------------------------------ Dataflow
def test_dataflow_complete_options_pass():
    check_launch(DATAFLOW, paths=REMOTE_PATHS)


@pytest.mark.parametrize(
    "drop, match",
    [
        ("--temp_location", r"needs --temp_location: pass --temp_location=gs://YOUR_BUCKET/tmp"),
        ("--project", r"needs --project: pass --project="),
        ("--region", r"needs --region: pass --region="),
    ],
)
def test_dataflow_missing_option_is_named_with_its_fix(drop, match):
    fails([a for a in DATAFLOW if not a.startswith(drop)], match, REMOTE_PATHS)


def test_dataflow_temp_location_must_be_gcs():
    fails([*DATAFLOW[:3], "--temp_location=/tmp/x"], r"--temp_location=/tmp/x is not a gs://BUCKET/PATH URL")


def test_dataflow_without_gcp_extra_names_the_install(monkeypatch):
    monkeypatch.setattr(launch_checks, "_importable", lambda module: not module.startswith("google"))
    fails(DATAFLOW, rf"pip install 'apache-beam\[gcp\]=={BEAM}'")


@pytest.mark.parametrize("flag", ["--input", "--out", "--tokenizer"])
def test_remote_workers_refuse_local_paths(flag):
    paths = dict(REMOTE_PATHS, **{flag: ["/home/me/data/part-0.jsonl"]})
    message = fails(DATAFLOW, rf"{flag} /home/me/data/part-0.jsonl is on this machine", paths)
    assert "gs://BUCKET" in message


def test_local_runners_take_local_paths():
    for args in ([], ["--runner=FnApiRunner"], ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]):
        check_launch(args, paths={"--input": ["/data/x.jsonl"], "--out": ["/out"]})


# ------------------------------------------------------------------ Flink, Spark, portable job servers, Dask
def test_unreachable_job_endpoint_fails_fast():
    port = closed_port()
    started = time.perf_counter()
    fails(
        ["--runner=PortableRunner", f"--job_endpoint=127.0.0.1:{port}"],
        rf"--job_endpoint=127.0.0.1:{port}: cannot connect .*start the job server",
    )
    assert time.perf_counter() - started < launch_checks.CONNECT_TIMEOUT + 1


def test_reachable_job_endpoint_passes(listening):
    check_launch(["--runner=PortableRunner", f"--job_endpoint={listening}", "--environment_type=LOOPBACK"])
    check_launch(["--runner=FlinkRunner", f"--job_endpoint={listening}", "--environment_type=LOOPBACK"])


def test_portable_runner_needs_a_job_endpoint():
    fails(["--runner=PortableRunner"], r"needs --job_endpoint=HOST:PORT")


def test_flink_master_and_spark_master_must_answer():
    port = closed_port()
    fails(
        ["--runner=FlinkRunner", f"--flink_master=localhost:{port}", "--flink_submit_uber_jar"],
        rf"--flink_master=localhost:{port}: cannot connect",
    )
    fails(
        ["--runner=SparkRunner", f"--spark_master_url=spark://127.0.0.1:{port}"],
        rf"--spark_master_url=spark://127.0.0.1:{port}: cannot connect",
    )
    fails(
        ["--runner=SparkRunner", "--spark_submit_uber_jar", f"--spark_rest_url=http://127.0.0.1:{port}"],
        r"--spark_rest_url=.*cannot connect",
    )
    fails(["--runner=SparkRunner", "--spark_submit_uber_jar"], r"--spark_submit_uber_jar needs --spark_rest_url=")


def test_job_server_started_here_needs_java(monkeypatch, listening):
    monkeypatch.setattr(launch_checks.shutil, "which", lambda name: None)
    fails(["--runner=FlinkRunner"], r"no `java` is on PATH: install a JRE .* or pass --flink_submit_uber_jar")
    fails(["--runner=SparkRunner"], r"no `java` is on PATH")
    check_launch(["--runner=FlinkRunner", f"--flink_master={listening}", "--flink_submit_uber_jar"], paths=REMOTE_PATHS)


def test_dask_scheduler_must_answer():
    port = closed_port()
    fails(
        ["--runner=DaskRunner", f"--dask_client_address=127.0.0.1:{port}"],
        rf"--dask_client_address=127.0.0.1:{port}: cannot connect",
    )


# ------------------------------------------------------------------ container images and wheels
def own_tag(bpe=bpe_core.__version__, beam=BEAM, py=PY):
    return f"europe-docker.pkg.dev/p/r/beam-bpe:{bpe}-beam{beam}-py{py}"


@pytest.mark.parametrize(
    "image",
    [
        f"apache/beam_python{PY}_sdk:{BEAM}",
        own_tag(),
        f"localhost:5000/beam-bpe:{bpe_core.__version__}-beam{BEAM}-py{PY}@sha256:{'0' * 64}",
    ],
)
def test_matching_images_pass(image):
    check_launch([*DATAFLOW, f"--sdk_container_image={image}"], paths=REMOTE_PATHS)


@pytest.mark.parametrize(
    "flags, match",
    [
        ([f"--sdk_container_image=apache/beam_python{PY}_sdk:2.60.0"], rf"Beam 2.60.0 \(this launcher has {BEAM}\)"),
        ([f"--sdk_container_image=apache/beam_python3.9_sdk:{BEAM}"], rf"Python 3.9 \(this launcher has {PY}\)"),
        ([f"--sdk_container_image={own_tag(beam='2.70.0')}"], r"Beam 2.70.0"),
        ([f"--sdk_container_image={own_tag(bpe='0.0.9')}"], r"beam-bpe 0.0.9"),
        (
            ["--environment_type=DOCKER", f"--environment_config=apache/beam_python{PY}_sdk:2.61.0"],
            r"--environment_config=.*Beam 2.61.0",
        ),
        (
            [f"--environment_option=docker_container_image=apache/beam_python{PY}_sdk:2.62.0"],
            r"docker_container_image=.*Beam 2.62.0",
        ),
        (
            ["--sdk_container_image=registry/beam-bpe:latest"],
            r"cannot tell which Beam and Python versions .* tag it registry/beam-bpe:",
        ),
    ],
)
def test_mismatched_or_unknown_images_fail_naming_the_option(flags, match):
    message = fails([*DATAFLOW, *flags], match, REMOTE_PATHS)
    assert flags[-1].split("=", 1)[0] in message or "docker_container_image" in message


def test_unknown_image_passes_when_the_user_says_so(monkeypatch):
    monkeypatch.setenv(launch_checks.SKIP_IMAGE_CHECK_ENV, "1")
    check_launch([*DATAFLOW, "--sdk_container_image=registry/beam-bpe:latest"], paths=REMOTE_PATHS)


def wheel(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"not read: only the name's tags are checked")
    return str(path)


def test_matching_wheel_passes(tmp_path):
    ours = wheel(tmp_path, f"beam_bpe-{bpe_core.__version__}-{CP}-{CP}-linux_x86_64.whl")
    pure = wheel(tmp_path, "fsspec_extra-1.0-py3-none-any.whl")
    check_launch([*DATAFLOW, f"--extra_package={ours}", f"--extra_package={pure}"], paths=REMOTE_PATHS)


@pytest.mark.parametrize(
    "name, match",
    [
        (
            f"beam_bpe-{bpe_core.__version__}-cp39-cp39-linux_x86_64.whl",
            rf"built for cp39, but workers run Python {PY}.*python{PY}",
        ),
        (f"beam_bpe-{bpe_core.__version__}-{CP}-{CP}-macosx_11_0_arm64.whl", r"but Beam workers run Linux"),
        (
            f"beam_bpe-0.0.1-{CP}-{CP}-manylinux_2_28_x86_64.whl",
            rf"is beam-bpe 0.0.1, but this launcher runs beam-bpe {bpe_core.__version__}",
        ),
        ("not-a-wheel.whl", r"not a wheel file name"),
    ],
)
def test_wheel_for_another_python_platform_or_version_fails(tmp_path, name, match):
    path = wheel(tmp_path, name)
    message = fails([*DATAFLOW, f"--extra_package={path}"], match, REMOTE_PATHS)
    assert message.startswith(f"--extra_package={path}")


def test_missing_wheel_and_setup_file(tmp_path):
    fails([*DATAFLOW, f"--extra_package={tmp_path}/nope.whl"], r"no such file: build it with deploy/build_wheel.sh")
    fails([*DATAFLOW, f"--setup_file={tmp_path}/pyproject.toml"], r"--setup_file=.*no such file")
    check_wheel(wheel(tmp_path, f"beam_bpe-{bpe_core.__version__}-cp312-cp312-linux_x86_64.whl"), python="3.12")


# ------------------------------------------------------------------ through the command line
def test_cli_train_fails_before_writing_anything(tmp_path, capsys):
    corpus = write_jsonl(tmp_path / "c.jsonl", ["some text"] * 4)
    out = tmp_path / "out"
    code = run_cli(
        "train",
        "--input",
        corpus,
        "--vocab-size",
        300,
        "--out",
        out,
        "--runner",
        "DataflowRunner",
        "--project",
        "example-project",
        "--region",
        "us-central1",
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "beam-bpe train: error: DataflowRunner needs --temp_location" in err
    assert not out.exists()


def test_cli_encode_fails_on_unreachable_job_endpoint(tmp_path, capsys):
    tok = bpe_core.train(bpe_core.count_chunks(["hello world"] * 3, "cl100k"), 260)
    tok.save(str(tmp_path / "tok.bpe"))
    corpus = write_jsonl(tmp_path / "c.jsonl", ["hello world"])
    port = closed_port()
    code = run_cli("encode", "--tokenizer", tmp_path / "tok.bpe", "--input", corpus, "--out", tmp_path / "ids",
                   "--runner", "FlinkRunner", "--job_endpoint", f"localhost:{port}")  # fmt: skip
    assert code == 2
    assert f"--job_endpoint=localhost:{port}: cannot connect" in capsys.readouterr().err
    assert not (tmp_path / "ids").exists()
