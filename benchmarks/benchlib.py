"""What the benchmarks share: where the shared data is, which documents they time, and how a phase is run and timed.

Each benchmark runs every measured phase in a fresh subprocess that prints one JSON line (so that its peak memory
and its caches are its own); the parent interleaves the phases and prints ratios against peers measured in the
same run. Scripts in this folder import this module by name (``python benchmarks/x.py`` puts the folder on the path).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("BEAM_BPE_TEST_DATA", ROOT.parent / "shared" / "data"))
CORPORA = ("en_bible_kjv", "docs_python_rst", "multi_udhr", "code_cpython", "fortunes_multi")
OPENAI = {"r50k": "r50k_base", "cl100k": "cl100k_base", "o200k": "o200k_base"}

T = TypeVar("T")


def data_file(*parts: str) -> Path:
    """A file of the shared data; a clear exit where it is absent (benchmarks are not tests: nothing to skip)."""
    path = DATA.joinpath(*parts)
    if not path.exists():
        raise SystemExit(f"shared data not found: {path} (set BEAM_BPE_TEST_DATA to the shared data folder)")
    return path


def iter_records(name: str) -> Iterator[dict]:
    """The JSON records of one shared corpus, in file order, read lazily (a few documents cost a few lines)."""
    with gzip.open(data_file("corpora", f"{name}.jsonl.gz"), "rt", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def load_records(mb: float, corpora: tuple[str, ...] = CORPORA) -> list[tuple[str, dict]]:
    """(corpus, record) taken from every corpus in turn (one from each, then the next one from each) until ``mb``
    MB of UTF-8 text: every run of a benchmark times the same documents, of every kind of text."""
    readers = [(name, iter_records(name)) for name in corpora]
    out: list[tuple[str, dict]] = []
    size, limit = 0, mb * 1e6
    while size < limit and readers:
        for name, reader in list(readers):
            record = next(reader, None)
            if record is None:
                readers.remove((name, reader))
            elif size < limit:
                out.append((name, record))
                size += utf8_len(record["text"])
    return out


def load_docs(mb: float) -> list[str]:
    """The texts of :func:`load_records`."""
    return [record["text"] for _, record in load_records(mb)]


def text_mb(texts: list[str]) -> float:
    return sum(map(utf8_len, texts)) / 1e6


def prepare_jsonl(work: Path, corpora: list[str]) -> float:
    """Decompress the named corpora to ``work/<name>.jsonl`` (so that the pipelines cut files into ranges); MB of
    text they hold."""
    size = 0
    for name in corpora:
        with gzip.open(data_file("corpora", f"{name}.jsonl.gz"), "rb") as f, open(work / f"{name}.jsonl", "wb") as out:
            shutil.copyfileobj(f, out)
        with open(work / f"{name}.jsonl", encoding="utf-8") as f:
            size += sum(utf8_len(json.loads(line)["text"]) for line in f)
    return size / 1e6


def pipeline_parser(doc: str) -> argparse.ArgumentParser:
    """The options of the pipeline benchmarks: ``--corpora``, and ``--phase``/``--work`` for a phase's process."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--corpora", default=",".join(CORPORA), help="comma-separated shared corpora")
    return parser


@contextmanager
def jsonl_workdir(prefix: str, corpora: str) -> Iterator[tuple[Path, float]]:
    """A temporary folder holding the comma-separated ``corpora`` as JSONL (:func:`prepare_jsonl`), and their MB."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        work = Path(tmp)
        yield work, prepare_jsonl(work, corpora.split(","))


# ----------------------------------------------------------------------------------------------- timing


def usage() -> tuple[float, int]:
    """CPU seconds of this process and its finished children, and the larger peak RSS of the two (KiB)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, max(me.ru_maxrss, kids.ru_maxrss)


def memory(field: str) -> int:
    """A byte count from /proc/self/status (``VmRSS``, ``VmHWM``); 0 where there is none."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def timed(fn: Callable[[], T], repeat: int = 1, clock: Callable[[], float] = time.perf_counter) -> tuple[float, T]:
    """Best time of ``repeat`` runs (on a shared machine the best run is the least disturbed) and the last result.

    The previous result is freed before the next run, so that two results are never held at once (peak memory).
    """
    best, result = float("inf"), None
    for _ in range(repeat):
        result = None
        start = clock()
        result = fn()
        best = min(best, clock() - start)
    return best, result  # type: ignore[return-value]


def spread(values: list[float]) -> tuple[float, float, float]:
    """(min, median, max) of the runs of one measurement."""
    return min(values), statistics.median(values), max(values)


def run_json(cmd: list[str], env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run a phase in its own process; the JSON of the last line it prints, or ``{"error": <end of its stderr>}``."""
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=dict(env or os.environ))
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"error": proc.stderr.strip()[-3000:] or f"exit status {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_phase(script: str, args: list[str]) -> dict[str, Any]:
    """:func:`run_json` of ``python script args``, exiting with the phase's stderr where it failed."""
    result = run_json([sys.executable, script, *args])
    if "error" in result:
        raise SystemExit(f"phase {args} failed:\n{result['error']}")
    return result


def tiktoken_encoding(preset: str):
    """tiktoken's reference Encoding of an OpenAI preset, built offline from the shared rank file."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    name = OPENAI[preset]
    entry = json.loads(data_file("tiktoken", "encodings.json").read_text())[name]
    ranks = load_tiktoken_bpe(str(data_file("tiktoken", entry["rank_file"])))
    return tiktoken.Encoding(
        name, pat_str=entry["pat_str"], mergeable_ranks=ranks, special_tokens=entry["special_tokens"]
    )
