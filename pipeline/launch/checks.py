"""Launch-time checks of the runner options: a wrong or missing option fails here, naming the option and the fix,
before any file is planned or written and before any worker starts.

Beam itself finds most of these late or never: without ``--temp_location`` the DataflowRunner tries to create a
default bucket and retries for two minutes before a stack trace; an unreachable Flink or Spark job endpoint waits
for ``--job_server_timeout`` (300 s); an SDK container of another Beam or Python version starts workers that crash
in a loop (Dataflow retries such a job for an hour); a wheel built for another Python is installed on every worker
and fails there; a local path given to a remote runner is read by workers that cannot see it.

>>> check_launch(["--runner", "DataflowRunner"], paths={"--input": ["gs://b/c/*.jsonl"]})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
pipeline.errors.UsageError: DataflowRunner needs --project: pass --project=YOUR_GCP_PROJECT ...
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import socket
import sys
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

import apache_beam
from apache_beam.options.pipeline_options import (
    FlinkRunnerOptions,
    GoogleCloudOptions,
    PipelineOptions,
    PortableOptions,
    SetupOptions,
    SparkRunnerOptions,
    StandardOptions,
    WorkerOptions,
)

import bpe_core
from pipeline.errors import UsageError

BEAM_VERSION = apache_beam.__version__
PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
SKIP_IMAGE_CHECK_ENV = "BEAM_BPE_SKIP_IMAGE_CHECK"
CONNECT_TIMEOUT = 3.0  # seconds: a job endpoint on the network answers a TCP connect in milliseconds
OFFICIAL_IMAGE = re.compile(r"(^|/)beam_python(?P<py>\d+\.\d+)_sdk$")
# deploy/build_container.sh tags images {beam-bpe version}-beam{Beam version}-py{Python}, e.g. 0.1.0-beam2.78.0-py3.11
OWN_TAG = re.compile(r"^(?P<bpe>[0-9][^-]*)-beam(?P<beam>[0-9][^-]*)-py(?P<py>\d+\.\d+)$")


def runner_kind(runner: str | None) -> str:
    """``dataflow``, ``flink``, ``spark``, ``portable``, ``dask`` or ``local`` from a ``--runner`` value."""
    name = (runner or "").rsplit(".", 1)[-1].lower().removesuffix("runner")
    return name if name in ("dataflow", "flink", "spark", "portable", "dask") else "local"


def check_launch(beam_args: Sequence[str], *, paths: Mapping[str, Sequence[str]] | None = None) -> None:
    """Raise UsageError for a runner option that cannot work; ``paths`` maps the job's flags to the paths that
    workers read or write (``{"--input": [...], "--out": [...]}``).

    >>> check_launch(["--runner=DataflowRunner", "--project=p1", "--region=us-central1"])  # doctest: +SKIP
    UsageError: DataflowRunner needs --temp_location: pass --temp_location=gs://YOUR_BUCKET/tmp (...)
    """
    options = PipelineOptions(list(beam_args))
    kind = runner_kind(options.view_as(StandardOptions).runner)
    if kind == "dataflow":
        _check_dataflow(options)
    elif kind == "flink":
        _check_flink(options)
    elif kind == "spark":
        _check_spark(options)
    elif kind == "portable":
        _check_job_endpoint(options, required=True)
    elif kind == "dask":
        address = _dask_address(options)
        if address:
            _check_reachable(
                "--dask_client_address", address, "start the scheduler (dask scheduler) or fix the address"
            )
    _check_images(options)
    _check_packages(options)
    if _workers_are_remote(options, kind):
        _check_shared_paths(kind, paths or {})


# ------------------------------------------------------------------ runners
def _check_dataflow(options: PipelineOptions) -> None:
    if not _importable("google.cloud.storage") or not _importable("apache_beam.runners.dataflow.internal.apiclient"):
        raise UsageError(f"DataflowRunner needs Beam's GCP extra: pip install 'apache-beam[gcp]=={BEAM_VERSION}'")
    gcp = options.view_as(GoogleCloudOptions)
    if not gcp.project:
        raise UsageError(
            "DataflowRunner needs --project: pass --project=YOUR_GCP_PROJECT (deploy/dataflow/*.options do)"
        )
    if not gcp.region:
        raise UsageError(
            "DataflowRunner needs --region: pass --region=us-central1 (or your region; deploy/dataflow/*.options do)"
        )
    for flag, value in (("--temp_location", gcp.temp_location), ("--staging_location", gcp.staging_location)):
        if value and not re.match(r"^gs://[a-z0-9][-a-z0-9_.]{1,220}[a-z0-9](/|$)", value):
            raise UsageError(
                f"{flag}={value} is not a gs://BUCKET/PATH URL with a valid bucket name (3 to 63 of a-z 0-9 - _ .): "
                "DataflowRunner stages and writes temporary files there"
            )
    if not gcp.temp_location:
        raise UsageError(
            "DataflowRunner needs --temp_location: pass --temp_location=gs://YOUR_BUCKET/tmp (a bucket in the job's "
            "region; without it Beam tries to create a default bucket, retries for minutes and fails)"
        )


def _check_flink(options: PipelineOptions) -> None:
    if _check_job_endpoint(options, required=False):
        return
    flink = options.view_as(FlinkRunnerOptions)
    master = flink.flink_master
    if master not in ("[auto]", "[local]"):
        _check_reachable(
            "--flink_master", master, "start the Flink cluster, or pass its JobManager REST address (host:8081)"
        )
    if not flink.flink_submit_uber_jar or master in ("[auto]", "[local]"):
        _check_job_server_jar("--flink_job_server_jar", flink.flink_job_server_jar, "--flink_submit_uber_jar")


def _check_spark(options: PipelineOptions) -> None:
    if _check_job_endpoint(options, required=False):
        return
    spark = options.view_as(SparkRunnerOptions)
    if spark.spark_submit_uber_jar:
        if not spark.spark_rest_url:
            raise UsageError(
                "--spark_submit_uber_jar needs --spark_rest_url=http://SPARK_MASTER:6066 "
                "(the master's REST submission port)"
            )
        _check_reachable(
            "--spark_rest_url",
            spark.spark_rest_url,
            "enable spark.master.rest.enabled on the master, or fix the address",
        )
        return
    if not re.match(r"^local(\[.+\])?$", spark.spark_master_url):
        _check_reachable(
            "--spark_master_url",
            spark.spark_master_url,
            "start the Spark master, or fix the address (spark://HOST:7077)",
        )
    _check_job_server_jar(
        "--spark_job_server_jar", spark.spark_job_server_jar, "--spark_submit_uber_jar --spark_rest_url"
    )


def _check_job_endpoint(options: PipelineOptions, *, required: bool) -> bool:
    endpoint = options.view_as(PortableOptions).job_endpoint
    if not endpoint:
        if required:
            raise UsageError(
                "PortableRunner needs --job_endpoint=HOST:PORT: start a job server "
                "(deploy/flink/README.md, deploy/spark/README.md)"
            )
        return False
    if endpoint != "embed":
        _check_reachable(
            "--job_endpoint",
            endpoint,
            "start the job server (deploy/flink/README.md, deploy/spark/README.md) or fix the address",
        )
    return True


def _check_job_server_jar(flag: str, jar: str | None, alternative: str) -> None:
    """Without a job endpoint, Beam runs a Java job server here: a jar from Maven Central and a JRE."""
    if jar and "://" not in jar and not os.path.isfile(jar):
        raise UsageError(
            f"{flag}={jar}: no such file: download the job server jar, or drop {flag} to let Beam fetch it"
        )
    if shutil.which("java") is None:
        raise UsageError(
            f"this runner starts a Java job server on this machine, and no `java` is on PATH: install a JRE 11+ "
            f"(apt-get install default-jre-headless), or pass {alternative}, or run the job server container and pass "
            "--job_endpoint=HOST:8099"
        )


def _dask_address(options: PipelineOptions) -> str | None:
    try:
        from apache_beam.runners.dask.dask_runner import DaskOptions
    except ImportError:
        raise UsageError(f"the DaskRunner needs dask: pip install 'apache-beam[dask]=={BEAM_VERSION}'") from None
    return options.view_as(DaskOptions).address


def _check_reachable(flag: str, address: str, fix: str) -> None:
    host, port = _host_port(flag, address)
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as exc:
        raise UsageError(f"{flag}={address}: cannot connect to {host}:{port} ({exc.strerror or exc}): {fix}") from None


def _host_port(flag: str, address: str) -> tuple[str, int]:
    parts = urlsplit(address if "://" in address else "//" + address)
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None:
        raise UsageError(f"{flag}={address}: expected HOST:PORT (or a URL with a port), e.g. localhost:8099")
    return parts.hostname, port


# ------------------------------------------------------------------ what the workers run
def _images(options: PipelineOptions) -> list[tuple[str, str]]:
    """(flag, image) for every container image the options name."""
    found = []
    worker = options.view_as(WorkerOptions)
    for flag, image in (
        ("--sdk_container_image", worker.sdk_container_image),
        ("--worker_harness_container_image", worker.worker_harness_container_image),
    ):
        if image:
            found.append((flag, image))
    portable = options.view_as(PortableOptions)
    if (portable.environment_type or "").upper() == "DOCKER" and portable.environment_config:
        found.append(("--environment_config", portable.environment_config))
    for item in portable.environment_options or []:
        key, _, value = item.partition("=")
        if key == "docker_container_image" and value:
            found.append(("--environment_option docker_container_image", value))
    return found


def _check_images(options: PipelineOptions) -> None:
    for flag, image in _images(options):
        _check_image(flag, image)


def _check_image(flag: str, image: str) -> None:
    name, tag = _split_image(image)
    official = OFFICIAL_IMAGE.search(name)
    own = OWN_TAG.match(tag or "")
    if official:
        found = {"Beam": tag or "latest", "Python": official["py"]}
    elif own:
        found = {"beam-bpe": own["bpe"], "Beam": own["beam"], "Python": own["py"]}
    elif os.environ.get(SKIP_IMAGE_CHECK_ENV) == "1":
        return
    else:
        raise UsageError(
            f"{flag}={image}: cannot tell which Beam and Python versions the image has: tag it "
            f"{name}:{bpe_core.__version__}-beam{BEAM_VERSION}-py{PYTHON} (deploy/build_container.sh does), or set "
            f"{SKIP_IMAGE_CHECK_ENV}=1 after checking that it has apache-beam {BEAM_VERSION} and Python {PYTHON}"
        )
    wanted = {"beam-bpe": bpe_core.__version__, "Beam": BEAM_VERSION, "Python": PYTHON}
    wrong = [f"{k} {v} (this launcher has {wanted[k]})" for k, v in found.items() if v != wanted[k]]
    if wrong:
        raise UsageError(
            f"{flag}={image} does not match this launcher: {', '.join(wrong)}; workers would fail to start or run "
            "other code: rebuild the image with deploy/build_container.sh "
            f"(FROM apache/beam_python{PYTHON}_sdk:{BEAM_VERSION}), "
            f"or launch from an environment with those versions"
        )


def _split_image(image: str) -> tuple[str, str | None]:
    ref = image.split("@", 1)[0]
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    return (ref[:colon], ref[colon + 1 :]) if colon > slash else (ref, None)


def _check_packages(options: PipelineOptions) -> None:
    setup = options.view_as(SetupOptions)
    for path in setup.extra_packages or []:
        if path.endswith(".whl"):
            check_wheel(path)
        elif "://" not in path and not os.path.isfile(path):
            raise UsageError(f"--extra_package={path}: no such file")
    if setup.setup_file:
        _check_setup_file(setup.setup_file)


def check_wheel(path: str, *, python: str = PYTHON) -> None:
    """A wheel for ``--extra_package``: it exists, is built for this Python on Linux, and (ours) is this version."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    flag = "--extra_package"
    if "://" not in path and not os.path.isfile(path):
        raise UsageError(f"{flag}={path}: no such file: build it with deploy/build_wheel.sh")
    try:
        name, version, _, tags = parse_wheel_filename(os.path.basename(path))
    except InvalidWheelFilename as exc:
        raise UsageError(f"{flag}={path}: not a wheel file name ({exc})") from None
    cp = "cp" + python.replace(".", "")
    pythons = {t.interpreter for t in tags}
    if not pythons & {cp, "py3", "py" + python.replace(".", "")} and not any(t.abi == "abi3" for t in tags):
        raise UsageError(
            f"{flag}={path} is built for {', '.join(sorted(pythons))}, but workers run Python {python} (the launcher's "
            f"version, which picks the SDK container): rebuild it with deploy/build_wheel.sh using python{python}"
        )
    platforms = {t.platform for t in tags}
    if not any(p == "any" or re.match(r"^(many|musl)?linux", p) for p in platforms):
        raise UsageError(
            f"{flag}={path} is built for {', '.join(sorted(platforms))}, but Beam workers run Linux: build it on "
            f"Linux, or in the SDK image (deploy/build_wheel.sh --in-sdk-image)"
        )
    if name == "beam-bpe" and str(version) != bpe_core.__version__:
        raise UsageError(
            f"{flag}={path} is beam-bpe {version}, but this launcher runs beam-bpe {bpe_core.__version__}: workers "
            "would run other code; rebuild the wheel with deploy/build_wheel.sh"
        )


def _check_setup_file(path: str) -> None:
    if not os.path.isfile(path):
        raise UsageError(
            f"--setup_file={path}: no such file: pass the repository's pyproject.toml (--setup_file=./pyproject.toml)"
        )
    if os.path.basename(path) == "pyproject.toml":
        missing = [m for m in ("build", "scikit_build_core", "nanobind") if not _importable(m)]
        if not missing and not _importable("build.__main__"):  # a build/ folder on sys.path is not pypa's build
            missing = ["build"]
        if missing:
            raise UsageError(
                f"--setup_file={path}: Beam builds the sdist with `python -m build --no-isolation`, which needs "
                f"{', '.join(missing) or 'build'} here: pip install build scikit-build-core nanobind"
            )


# ------------------------------------------------------------------ paths
def _workers_are_remote(options: PipelineOptions, kind: str) -> bool:
    if kind == "dataflow":
        return True
    if kind not in ("flink", "spark", "portable"):
        return False
    env = (options.view_as(PortableOptions).environment_type or "").upper()
    if env == "LOOPBACK":
        return False
    if not env and kind == "flink":
        return options.view_as(FlinkRunnerOptions).flink_master not in ("[auto]", "[local]")
    if not env and kind == "spark":
        return not re.match(r"^local(\[.+\])?$", options.view_as(SparkRunnerOptions).spark_master_url)
    return True


def _check_shared_paths(kind: str, paths: Mapping[str, Sequence[str]]) -> None:
    for flag, values in paths.items():
        for path in values:
            scheme = path.split("://", 1)[0] if "://" in path else ""
            if scheme in ("", "memory"):
                raise UsageError(
                    f"{flag} {path} is on this machine, but the {kind} workers run elsewhere and cannot read or write "
                    f"it: use a URL they share ({'gs://BUCKET/...' if kind == 'dataflow' else 's3://, gs://, hdfs://'}"
                    f"), or file:///PATH for a filesystem mounted at the same path on every worker"
                )


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
