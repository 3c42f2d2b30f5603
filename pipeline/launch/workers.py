"""Local worker processes that a Ctrl-C does not reach: the launcher stops them itself, and prints one line.

A terminal's Ctrl-C sends SIGINT to its whole foreground process group. Beam's multi-process runner starts its SDK
workers (``local_job_service.SubprocessSdkWorker``: ``subprocess.Popen(command, shell=True)``) in that group, so
each worker died of its own KeyboardInterrupt, mid-import or mid-bundle, and printed its traceback: about 150
lines and 8 tracebacks before the launcher's one summary line (issue 33). While a pipeline runs here, the workers
are started with SIGINT ignored (``trap '' INT; exec ...`` in their shell; Python keeps an ignored SIGINT ignored),
so only the launcher sees the Ctrl-C; its handler kills every worker it started (their whole process tree), as it
does when it leaves the run by any exception, so none goes on writing after the summary line. They stay in the
launcher's process group: a SIGKILL of that group (a preempted machine, a job scheduler) still ends them all.

A worker that dies on its own (killed by the kernel's OOM killer, a SIGKILL) is not noticed by Beam 2.77's
multi-process runner when its bundle was writing shards: the launcher waits on that bundle for ever (measured: still
waiting after 10 minutes). A watcher thread polls the workers twice a second; the first that exits with a non-zero
code wakes the launcher (a SIGINT to itself), whose handler kills the rest and fails the run with one line naming it.

Workers that start in milliseconds: each of Beam's workers was a new interpreter (``python -m
apache_beam.runners.worker.sdk_worker_main``) that imported Beam, gRPC, NumPy, pyarrow and our stages before its
first bundle: 2.5-3 s after the runner asked for it, with two of them importing at once on a 2-core machine, while
a 300 MB cl100k encode does ~3.5 s of work. A command that will run the multi-process runner starts a fork server
(the standard library's ``multiprocessing`` forkserver) as soon as its flags are parsed; it imports those modules
once, beside the launcher's own imports, and each worker Beam asks for is forked from it, ready. The server makes
no gRPC channel or thread before it forks (gRPC supports a fork only then). A command line other than Beam's own
worker's, or a command that did not start the server, gets the plain ``Popen``.

>>> with workers_ignore_ctrl_c():  # doctest: +SKIP
...     pipeline.run().wait_until_finish()
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence

_LOCK = threading.Lock()
_SERVER: dict = {}  # "context": the forkserver context, once start_worker_server has run
BEAM_WORKER_MODULE = "apache_beam.runners.worker.sdk_worker_main"
# The module the server imports last to load the job's tokenizers, and the variable it reads them from (JSON), named
# as strings: the launcher does not import a stage (tests/pipeline/test_worker_server.py checks they are its own).
PRELOAD_MODULE = "pipeline.encode.preload"
PRELOAD_ENV = "BEAM_BPE_PRELOAD_TOKENIZERS"
WORKER_MODULES = {  # per command, the modules its workers unpickle their stages from (imported once, by the server)
    "encode": ("pipeline.encode.job",),
    "train": ("pipeline.train.job",),
    "count-tokens": ("pipeline.encode.count_tokens",),
}


def uses_local_workers(workers: int | None, beam_args: Sequence[str]) -> bool:
    """Whether the command will run Beam's multi-process runner here: ``--workers N`` or ``--direct_running_mode
    multi_processing`` (either spelling).

    >>> uses_local_workers(None, ["--direct_running_mode", "multi_processing"]), uses_local_workers(None, [])
    (True, False)
    """
    if workers is not None:
        return True
    args = list(beam_args)
    for i, arg in enumerate(args):
        if arg == "--direct_running_mode=multi_processing":
            return True
        if arg == "--direct_running_mode" and args[i + 1 : i + 2] == ["multi_processing"]:
            return True
    return False


def start_worker_server(command: str, tokenizers: Sequence[tuple[str, str | None]] = ()) -> None:
    """Start the fork server that this command's local Beam workers are forked from (once per process); it
    imports Beam's worker and the command's stages, and loads ``tokenizers`` (``(absolute path or URL,
    pretokenizer)``, as the job's ``TokenizerRef`` names them), while the launcher goes on. Where the platform has
    no fork server, the workers start as before."""
    import multiprocessing

    if _SERVER or "forkserver" not in multiprocessing.get_all_start_methods() or not _main_is_import_safe():
        return
    from multiprocessing import forkserver

    context = multiprocessing.get_context("forkserver")
    modules = [BEAM_WORKER_MODULE, "pipeline.cli.app", *WORKER_MODULES.get(command, ())]
    if tokenizers:
        modules.append(PRELOAD_MODULE)  # last: it reads the variable set below, in the server only
    context.set_forkserver_preload(modules)
    before = os.environ.get(PRELOAD_ENV)
    os.environ[PRELOAD_ENV] = json.dumps([list(t) for t in tokenizers])
    try:
        forkserver.ensure_running()  # the server starts with this environment
    finally:
        if before is None:
            os.environ.pop(PRELOAD_ENV, None)
        else:
            os.environ[PRELOAD_ENV] = before
    _SERVER["context"] = context


def _main_is_import_safe() -> bool:
    """Whether a forked worker may import this process's main module, as multiprocessing does in every child (to
    unpickle what ``__main__`` defines): safe for ``python -m pipeline.cli`` (and any ``-m pkg`` run as
    ``pkg.__main__``, which multiprocessing skips), ``python -c``, and the ``beam-bpe`` console script (its call is
    under ``if __name__ == "__main__"``). A user's own script might call the pipeline at its top level, which the
    worker would run again: its workers start as new interpreters instead."""
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name is not None:
        return name == "__main__" or name.endswith(".__main__")
    path = getattr(main, "__file__", None)
    return path is None or os.path.basename(path) == "beam-bpe"


def _run_beam_worker(env: dict) -> None:
    """A forked worker: Beam's ``sdk_worker_main`` with the environment the runner gave its command line."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the launcher stops its workers itself (above)
    os.environ.clear()
    os.environ.update(env)
    from apache_beam.runners.worker import sdk_worker_main

    sdk_worker_main.main([])


class _ForkedWorker:
    """A forked worker as ``subprocess.Popen`` looks to Beam and to the launcher: pid, poll, wait, kill, returncode.
    One thread joins the process (multiprocessing's sentinel must have one reader)."""

    def __init__(self, process) -> None:
        self._process = process
        self.pid = process.pid
        self.args = BEAM_WORKER_MODULE
        self.returncode: int | None = None
        self._done = threading.Event()
        threading.Thread(target=self._join, name=f"beam-bpe-worker-{self.pid}", daemon=True).start()

    def _join(self) -> None:
        self._process.join()
        self.returncode = self._process.exitcode
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def _fork_worker(command, kwargs: dict):
    """The forked worker for Beam's own worker command line, when the fork server runs; else None."""
    context = _SERVER.get("context")
    if context is None or command != f"{sys.executable} -m {BEAM_WORKER_MODULE}" or set(kwargs) - {"shell", "env"}:
        return None
    process = context.Process(target=_run_beam_worker, args=(dict(kwargs.get("env") or os.environ),), daemon=True)
    process.start()
    return _ForkedWorker(process)


class _Subprocess:
    """``subprocess`` as Beam's local job service sees it: its ``Popen`` starts a worker that ignores SIGINT and
    is remembered, everything else is the module's own."""

    def __init__(self, started: list) -> None:
        self._started = started

    def __getattr__(self, name: str):
        return getattr(subprocess, name)

    def Popen(self, command, *args, **kwargs):  # noqa: N802 - the name Beam calls
        forked = None if args else _fork_worker(command, kwargs)
        if forked is not None:
            self._started.append(forked)
            return forked
        if kwargs.get("shell") and isinstance(command, str):
            # the shell ignores SIGINT and execs the worker, which inherits the ignored signal (no preexec_fn: it
            # may deadlock a child forked from a launcher with gRPC threads)
            command = f"trap '' INT; exec {command}"
        process = subprocess.Popen(command, *args, **kwargs)
        self._started.append(process)
        return process


@contextlib.contextmanager
def workers_ignore_ctrl_c() -> Iterator[list]:
    """While the block runs, Beam's local SDK workers start with SIGINT ignored; on the way out by an exception
    (Ctrl-C included) every one still running is killed with its children. Yields the list of processes started."""
    try:
        from apache_beam.runners.portability import local_job_service
    except ImportError:  # pragma: no cover - Beam is a dependency of every pipeline
        yield []
        return
    started: list = []
    with _LOCK:
        previous = local_job_service.subprocess
        local_job_service.subprocess = _Subprocess(started)
    handler, dead, done = None, [], threading.Event()
    if threading.current_thread() is threading.main_thread():
        # Ctrl-C: the workers go first (Beam's own shutdown joins each worker's thread, which waits for a worker
        # that no longer stops by itself), then the launcher's KeyboardInterrupt as usual
        def stop(signum, frame):
            done.set()  # the watcher must not take the workers killed here for deaths
            _quiet_beam_shutdown()
            kill_trees(started)
            if dead:
                raise WorkerDiedError(dead[0])
            raise KeyboardInterrupt

        handler = signal.signal(signal.SIGINT, stop)
        threading.Thread(target=_watch, args=(started, dead, done), name="beam-bpe-workers", daemon=True).start()
    try:
        yield started
    except BaseException:
        done.set()
        kill_trees(started)
        raise
    finally:
        done.set()
        _stop_worker_server(started)
        if handler is not None:
            signal.signal(signal.SIGINT, handler)
        with _LOCK:
            local_job_service.subprocess = previous


def _stop_worker_server(started: list) -> None:
    """After a run that forked workers: wait for them (Beam has stopped them), then stop the fork server and reap it,
    so that the workers' CPU time and memory count as this process's children (``time``, a batch scheduler's
    accounting, ``getrusage``). A server started for a run that forked none (it failed or stopped first) is stopped
    too. A later run in this process starts a server again when it forks a worker."""
    forked = [p for p in started if isinstance(p, _ForkedWorker)]
    if not forked and not _SERVER:
        return
    for process in forked:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
    from multiprocessing import forkserver

    stop = getattr(forkserver._forkserver, "_stop", None)  # noqa: SLF001 - the standard library's own stop
    if stop is not None:
        with contextlib.suppress(OSError):
            stop()


class WorkerDiedError(RuntimeError):
    """A local Beam worker process ended on its own while the run needed it."""

    def __init__(self, death: tuple[int, int]) -> None:
        pid, code = death
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        if code in (137, -9):
            how += " (SIGKILL: the kernel's OOM killer, or another process)"
        super().__init__(
            f"a local Beam worker process died (pid {pid}, {how}) and the multi-process runner does not redo its "
            "work: rerun the same command (finished shards are kept), with fewer --workers if memory ran out"
        )


def _watch(started: list, dead: list, done: threading.Event) -> None:
    """Wake the launcher when a worker exits with a non-zero code before the run is over."""
    while not done.wait(0.5):
        for process in list(started):
            code = process.poll()
            if code not in (None, 0) and not done.is_set():
                dead.append((process.pid, code))
                os.kill(os.getpid(), signal.SIGINT)
                return


def _quiet_beam_shutdown() -> None:
    """The run is stopping: the launcher's Beam threads that lose their workers now log ERROR lines ("Failed to
    read inputs in the data plane", "Error closing worker_handler") between the progress bar and the one summary
    line. Unless --log-level asked for Beam's lines (a level below error), they are dropped."""
    import logging

    beam = logging.getLogger("apache_beam")
    if beam.getEffectiveLevel() >= logging.ERROR:
        beam.setLevel(logging.CRITICAL + 1)


def kill_trees(processes: list) -> None:
    """SIGKILL each process still running and everything it started (the shell's python child)."""
    import psutil

    for process in processes:
        if process.poll() is not None:
            continue
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(process.pid)
            for child in root.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    child.kill()
            root.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
