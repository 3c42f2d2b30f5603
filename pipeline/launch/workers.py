"""Local worker processes that a Ctrl-C does not reach: the launcher stops them itself, and prints one line.

A terminal's Ctrl-C sends SIGINT to its whole foreground process group. Beam's multi-process runner starts its SDK
workers (``local_job_service.SubprocessSdkWorker``: ``subprocess.Popen(command, shell=True)``) in that group, so
each worker died of its own KeyboardInterrupt, mid-import or mid-bundle, and printed its traceback: about 150
lines and 8 tracebacks before the launcher's one summary line (issue 33). While a pipeline runs here, the workers
are started with SIGINT ignored (``trap '' INT; exec ...`` in their shell; Python keeps an ignored SIGINT ignored),
so only the launcher sees the Ctrl-C; its handler kills every worker it started (their whole process tree), as it
does when it leaves the run by any exception, so none goes on writing after the summary line. They stay in the
launcher's process group: a SIGKILL of that group (a preempted machine, a job scheduler) still ends them all.

>>> with workers_ignore_ctrl_c():  # doctest: +SKIP
...     pipeline.run().wait_until_finish()
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Iterator

_LOCK = threading.Lock()


class _Subprocess:
    """``subprocess`` as Beam's local job service sees it: its ``Popen`` starts a worker that ignores SIGINT and
    is remembered, everything else is the module's own."""

    def __init__(self, started: list) -> None:
        self._started = started

    def __getattr__(self, name: str):
        return getattr(subprocess, name)

    def Popen(self, command, *args, **kwargs):  # noqa: N802 - the name Beam calls
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
    handler = None
    if threading.current_thread() is threading.main_thread():
        # Ctrl-C: the workers go first (Beam's own shutdown joins each worker's thread, which waits for a worker
        # that no longer stops by itself), then the launcher's KeyboardInterrupt as usual
        def stop(signum, frame):
            kill_trees(started)
            raise KeyboardInterrupt

        handler = signal.signal(signal.SIGINT, stop)
    try:
        yield started
    except BaseException:
        kill_trees(started)
        raise
    finally:
        if handler is not None:
            signal.signal(signal.SIGINT, handler)
        with _LOCK:
            local_job_service.subprocess = previous


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
