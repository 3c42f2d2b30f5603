"""The fork server that local Beam workers are forked from (pipeline/launch/workers.py): a forked worker looks to
Beam and to the launcher as a ``subprocess.Popen`` does, and only Beam's own worker command line is forked."""

from __future__ import annotations

import json
import multiprocessing
import os
import resource
import signal
import subprocess
import sys
import time

import pytest

from pipeline.launch import workers


def _exit_with(code: int) -> None:  # module level: the fork server's child unpickles it by name
    os._exit(code)


def _sleep() -> None:
    time.sleep(120)


def _burn(seconds: float) -> None:
    while time.process_time() < seconds:
        pass


@pytest.fixture
def context():
    assert "forkserver" in multiprocessing.get_all_start_methods(), "the fork server runs on every POSIX platform"
    return multiprocessing.get_context("forkserver")


def test_a_forked_worker_reports_its_exit_code_as_popen_does(context):
    process = context.Process(target=_exit_with, args=(3,), daemon=True)
    process.start()
    worker = workers._ForkedWorker(process)
    assert worker.wait(timeout=60) == 3
    assert worker.poll() == 3 and worker.returncode == 3 and worker.pid == process.pid


def test_a_forked_worker_times_out_and_is_killed_as_popen_is(context):
    process = context.Process(target=_sleep, daemon=True)
    process.start()
    worker = workers._ForkedWorker(process)
    assert worker.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        worker.wait(timeout=0.2)
    worker.kill()
    assert worker.wait(timeout=60) == -signal.SIGKILL  # the code the launcher's watcher names as a SIGKILL
    worker.kill()  # a second kill of an ended worker is a no-op


class _FakeProcess:
    pid, exitcode = 12345, 0

    def start(self) -> None:
        pass

    def join(self) -> None:
        pass


class _FakeContext:
    def __init__(self) -> None:
        self.envs: list[dict] = []

    def Process(self, target, args, daemon):  # noqa: N802 - multiprocessing's name
        assert target is workers._run_beam_worker and daemon
        self.envs.append(args[0])
        return _FakeProcess()


def test_only_beams_own_worker_command_line_is_forked(monkeypatch):
    fake = _FakeContext()
    monkeypatch.setitem(workers._SERVER, "context", fake)
    beam = f"{sys.executable} -m {workers.BEAM_WORKER_MODULE}"
    forked = workers._fork_worker(beam, {"shell": True, "env": {"CONTROL_API_SERVICE_DESCRIPTOR": "x"}})
    assert isinstance(forked, workers._ForkedWorker) and fake.envs == [{"CONTROL_API_SERVICE_DESCRIPTOR": "x"}]
    assert workers._fork_worker("/usr/bin/env python -m other.module", {"shell": True}) is None
    assert workers._fork_worker(beam, {"shell": True, "cwd": "/"}) is None  # an option the fork does not apply
    assert len(fake.envs) == 1
    monkeypatch.delitem(workers._SERVER, "context")
    assert workers._fork_worker(beam, {"shell": True}) is None  # no server started: Beam's Popen, as before


def test_the_hook_starts_other_command_lines_with_popen(monkeypatch):
    monkeypatch.setitem(workers._SERVER, "context", _FakeContext())
    started: list = []
    process = workers._Subprocess(started).Popen("sh -c 'exit 4'", shell=True)
    assert isinstance(process, subprocess.Popen) and process.wait(timeout=60) == 4 and started == [process]


@pytest.mark.parametrize(
    ("workers_flag", "beam_args", "expected"),
    [
        (2, [], True),
        (None, ["--direct_running_mode=multi_processing", "--direct_num_workers=2"], True),
        (None, ["--direct_running_mode", "multi_processing"], True),
        (None, ["--direct_running_mode", "in_memory"], False),
        (None, ["--direct_running_mode"], False),
        (None, ["--runner=DaskRunner"], False),
    ],
)
def test_which_commands_start_the_server(workers_flag, beam_args, expected):
    assert workers.uses_local_workers(workers_flag, beam_args) is expected


def test_after_a_run_the_server_is_reaped_and_its_workers_cpu_counts_as_ours(context):
    """``time beam-bpe ...``, a batch scheduler and bench_scale.py count the CPU of a process's children: the forked
    workers are the server's children, so the server is stopped and reaped at the end of a run (else it outlives
    the launcher, orphaned, and the workers' CPU is lost from every account)."""
    from multiprocessing import forkserver

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    process = context.Process(target=_burn, args=(0.5,), daemon=True)
    process.start()
    worker = workers._ForkedWorker(process)
    workers._stop_worker_server([worker])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert worker.returncode == 0 and forkserver._forkserver._forkserver_pid is None
    assert (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime) >= 0.4


def test_a_server_started_for_a_run_that_forked_no_worker_is_stopped(context, monkeypatch):
    """A run that fails or is stopped before Beam forks its first worker leaves no server behind either."""
    from multiprocessing import forkserver

    monkeypatch.setitem(workers._SERVER, "context", context)
    forkserver.ensure_running()
    assert forkserver._forkserver._forkserver_pid is not None
    workers._stop_worker_server([])
    assert forkserver._forkserver._forkserver_pid is None


def test_a_preloaded_tokenizer_is_the_one_a_worker_gets_and_a_bad_spec_is_left_to_the_workers(monkeypatch):
    """The fork server loads the job's tokenizer under the reference its workers look up (pipeline/encode/
    preload.py); the workers then inherit it instead of loading their own. A file that cannot be loaded there
    does not stop the server: the workers load it themselves and report what is wrong."""
    import importlib

    from pipeline.encode import preload
    from pipeline.encode import tokenizer as tokenizers
    from tests.conftest import data_path

    url = str(data_path("tiktoken", "r50k_base.tiktoken"))
    monkeypatch.setattr(tokenizers, "_CACHE", {})
    monkeypatch.setenv(preload.PRELOAD_ENV, json.dumps([[url, "r50k"], ["/no/such/tokenizer.bpe", None]]))
    monkeypatch.setattr("gc.freeze", lambda: None)  # the test process is not a worker
    importlib.reload(preload)
    assert preload.PRELOAD_ENV not in os.environ  # read once, not passed on to the workers' environment
    (ref,) = tokenizers._CACHE  # the file that loads, under the reference the launcher builds for it
    assert ref.url == url and ref.pretokenizer == "r50k"
    loaded = tokenizers.TokenizerRef(url, ref.digest, "r50k").load()
    assert loaded is tokenizers._CACHE[ref]


def test_the_launcher_names_the_preload_module_and_its_variable_as_the_module_does():
    """pipeline/launch may not import a stage (tests/pipeline/test_layers.py): it names the preload module and its
    environment variable as strings, which must be the module's own."""
    import importlib

    assert importlib.util.find_spec(workers.PRELOAD_MODULE) is not None
    from pipeline.encode import preload

    assert workers.PRELOAD_ENV == preload.PRELOAD_ENV and preload.__name__ == workers.PRELOAD_MODULE
