"""Shared test fixtures: where the shared data lives, and the reference encoders built from it offline."""

from __future__ import annotations

import base64
import gzip
import json
import os
import socket
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("BEAM_BPE_TEST_DATA", ROOT.parent / "shared" / "data"))
REQUIRE_DATA = os.environ.get("BEAM_BPE_REQUIRE_DATA") == "1"
FULL = os.environ.get("BEAM_BPE_FULL") == "1"
CORPORA = ("en_bible_kjv", "docs_python_rst", "multi_udhr", "code_cpython", "fortunes_multi")
OPENAI = {"r50k": "r50k_base", "p50k": "p50k_base", "cl100k": "cl100k_base", "o200k": "o200k_base"}


def data_path(*parts: str) -> Path:
    """A file of the shared data, or a skip (a failure under BEAM_BPE_REQUIRE_DATA=1) where it is absent."""
    path = DATA.joinpath(*parts)
    if not path.exists():
        message = f"shared test data not found: {path} (set BEAM_BPE_TEST_DATA to the shared data folder)"
        if REQUIRE_DATA:
            pytest.fail(message + "; BEAM_BPE_REQUIRE_DATA=1 makes missing data an error")
        pytest.skip(message)
    return path


REFERENCE = Path(os.environ.get("BEAM_BPE_REFERENCE_FILES", ROOT / ".cache" / "reference-files"))
FETCH_COMMAND = "python tests/tools/fetch_reference_files.py"


def reference_path(sdist: str, member: str) -> Path:
    """A file of a pinned PyPI sdist in the reference-file cache (``sdist`` as ``"llama-cpp-python-0.3.36"``), or a
    skip naming the command that fills the cache (a failure under BEAM_BPE_REQUIRE_DATA=1)."""
    path = REFERENCE / sdist / member
    if not path.exists():
        message = f"reference file not found: {path} (fill the cache with `{FETCH_COMMAND}`)"
        if REQUIRE_DATA:
            pytest.fail(message + "; BEAM_BPE_REQUIRE_DATA=1 makes missing data an error")
        pytest.skip(message)
    return path


@cache
def _corpus(name: str, limit: int) -> tuple[str, ...]:
    docs = []
    with gzip.open(data_path("corpora", f"{name}.jsonl.gz"), "rt", encoding="utf-8") as f:
        for line in f:
            docs.append(json.loads(line)["text"])
            if len(docs) >= limit:
                break
    return tuple(docs)


def corpus(name: str, limit: int = 2000) -> list[str]:
    """The first ``limit`` documents of a shared corpus."""
    return list(_corpus(name, limit))


@cache
def _adversarial() -> tuple[tuple[str, str | bytes], ...]:
    cases = []
    with open(data_path("adversarial", "cases.jsonl"), encoding="utf-8") as f:
        for line in f:
            case = json.loads(line)
            value = case["text"] if case["kind"] == "str" else base64.b64decode(case["b64"])
            cases.append((case["id"], value))
    return tuple(cases)


def adversarial_cases() -> list[tuple[str, str | bytes]]:
    """(id, text or bytes) for every case of adversarial/cases.jsonl."""
    return list(_adversarial())


@cache
def openai_encoding(preset: str) -> dict:
    """pat_str, special_tokens and the rank file path of an OpenAI encoding."""
    name = OPENAI[preset]
    table = json.loads(data_path("tiktoken", "encodings.json").read_text())
    entry = dict(table[name])
    entry["path"] = str(data_path("tiktoken", entry["rank_file"]))
    entry["name"] = name
    return entry


@cache
def ours_openai(preset: str):
    import bpe_core

    enc = openai_encoding(preset)
    return bpe_core.Tokenizer.from_tiktoken(enc["path"], pretokenizer=preset, special_tokens=enc["special_tokens"])


@cache
def tiktoken_openai(preset: str):
    import tiktoken  # a test dependency (the `test` extra): missing means a broken set-up, not a skip
    from tiktoken.load import load_tiktoken_bpe

    enc = openai_encoding(preset)
    return tiktoken.Encoding(
        enc["name"],
        pat_str=enc["pat_str"],
        mergeable_ranks=load_tiktoken_bpe(enc["path"]),
        special_tokens=enc["special_tokens"],
    )


def pytest_terminal_summary(terminalreporter):
    """The reliability suite's figures in the log (also from xdist workers), and RELIABILITY.md under
    `make reliability`: see tests/reliability/report.py."""
    from reliability.report import summarize

    summarize(terminalreporter)


@pytest.fixture
def listening():
    """``host:port`` of a loopback socket that accepts connections while the test runs (a stand-in job server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield f"127.0.0.1:{s.getsockname()[1]}"
