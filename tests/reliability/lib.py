"""Helpers of the reliability suite: recording rows, running the CLI in a measured subprocess, comparing outputs."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

ROW_KEY = "reliability-row"
ROOT = Path(__file__).resolve().parents[2]
HOOKS = Path(__file__).resolve().parent / "hooks"  # sitecustomize.py: faults injected into worker processes
FULL = os.environ.get("BEAM_BPE_FULL") == "1"
MIB = 1 << 20


class Recorder:
    """Adds rows to a test's report (``user_properties``), which pytest-xdist carries to the controller."""

    def __init__(self, node) -> None:
        self.node = node

    def row(self, area: str, tried: str, promise: str, **figures) -> None:
        """One row: the area, the input tried or fault injected, the promise checked, and figures measured."""
        record = {"area": area, "tried": tried, "promise": promise, "test": self.node.nodeid, "figures": figures}
        self.node.user_properties.append((ROW_KEY, json.dumps(record, sort_keys=True)))


# ------------------------------------------------------------------ running the CLI, measured
MEASURED_CLI = """
import sys
from pipeline.cli import main
rc = main(sys.argv[1:])
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
print("RELIABILITY_PEAK_KB", int(status["VmHWM"].split()[0]), file=sys.stderr)
sys.exit(rc)
"""


class Run:
    def __init__(self, returncode: int, stderr: str, stdout: str) -> None:
        self.returncode, self.stderr, self.stdout = returncode, stderr, stdout
        peaks = [line.split()[1] for line in stderr.splitlines() if line.startswith("RELIABILITY_PEAK_KB")]
        self.peak_bytes = int(peaks[-1]) * 1024 if peaks else None


def run_cli_measured(*args, env: dict | None = None, timeout: float = 600) -> Run:
    """``beam-bpe ARGS`` in a fresh process (in-process runner: one process holds the whole job); returns its exit
    code, output and peak resident memory (VmHWM). A timeout fails the test: no input may make a job hang."""
    full_env = dict(os.environ, **(env or {}))
    proc = subprocess.run([sys.executable, "-c", MEASURED_CLI, *map(str, args)], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=ROOT)  # fmt: skip
    return Run(proc.returncode, proc.stderr, proc.stdout)


def with_hooks(env: dict) -> dict:
    """Environment that loads tests/reliability/hooks/sitecustomize.py in every new Python process (Beam's
    multi-process workers and Dask's worker processes included)."""
    path = os.pathsep.join([str(HOOKS), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return dict(env, PYTHONPATH=path)


# ------------------------------------------------------------------ inputs and outputs
def write_jsonl(path: Path, docs: list[str], *, extra: list[bytes] = ()) -> Path:
    lines = [json.dumps({"text": d}, ensure_ascii=False).encode("utf-8", "surrogatepass") for d in docs]
    data = b"\n".join(lines + list(extra)) + b"\n"
    return write_bytes(path, data)


def is_utf8(data: bytes) -> bool:
    """True if ``data`` decodes as UTF-8 (what the readers accept as text)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def write_bytes(path: Path, data: bytes) -> Path:
    if str(path).endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


TIME_KEYS = ("count_seconds", "wall_seconds", "train_seconds", "seconds")


def files_of(out: Path) -> dict[str, bytes]:
    """Every file of an output directory by relative path; timings are dropped from a training manifest (the one
    file that records wall time), so that equal outputs compare equal."""
    files = {}
    for p in sorted(out.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.name == "manifest.json":
                data = json.dumps(_without_times(json.loads(data)), sort_keys=True).encode()
            files[str(p.relative_to(out))] = data
    return files


def _without_times(value):
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if k not in TIME_KEYS}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def is_temporary(relative: str) -> bool:
    """A temporary name (``.tmp-*`` beside its target, or the part files under ``_tmp/``), never a final one."""
    parts = relative.split(os.sep)
    return parts[0] == "_tmp" or parts[-1].startswith(".tmp-")


def visible_final_files(out: Path) -> dict[str, bytes]:
    return {k: v for k, v in files_of(out).items() if not is_temporary(k)} if out.exists() else {}


def assert_no_partial_final_file(out: Path, reference: dict[str, bytes]) -> int:
    """Every file under a final name equals the undisturbed run's file of that name (the manifest too: a job killed
    between the manifest and the marker leaves a complete one), and there is no COMPLETED marker. Returns how many
    final files were visible."""
    visible = visible_final_files(out)
    assert "COMPLETED" not in visible, "an interrupted job left a COMPLETED marker"
    for name, data in visible.items():
        if name.startswith("_shards/job.json"):
            continue  # the job's identity, written before any work: the same in every run of the job
        if name == "_shards/lease.json":
            continue  # the killed run's lease: stale once its process is gone, taken over by the rerun
        assert name in reference, f"{name}: a file the undisturbed run does not have"
        assert data == reference[name], f"{name} is visible under its final name but differs from the complete file"
    return len(visible)


def peak_kb(run: Run) -> int:
    assert run.peak_bytes is not None, run.stderr[-2000:]
    return run.peak_bytes // 1024
