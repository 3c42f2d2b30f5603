"""Shared test fixtures: where the shared data lives, the reference encoders built from it offline, and the gate of
optional test peers.

What is cached here is shared by every test of a process, in whatever order pytest-randomly runs them: it is handed
out as an immutable value (tuples, a fresh copy of a dict, a read-only tokenizer), so that no test can change it for
the tests after it (``use_backend("python")`` on the cached cl100k once made the native decode tests compare Python
with Python when they ran later; tests/tools/test_shared_fixtures.py holds that pair).
"""

from __future__ import annotations

import base64
import copy
import copyreg
import gzip
import importlib
import json
import os
import socket
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("BEAM_BPE_TEST_DATA", ROOT.parent / "shared" / "data"))
REQUIRE_DATA = os.environ.get("BEAM_BPE_REQUIRE_DATA") == "1"
FULL = os.environ.get("BEAM_BPE_FULL") == "1"
CORPORA = ("en_bible_kjv", "docs_python_rst", "multi_udhr", "code_cpython", "fortunes_multi")
OPENAI = {"r50k": "r50k_base", "p50k": "p50k_base", "cl100k": "cl100k_base", "o200k": "o200k_base"}


def require_module(name: str, *, flag: str, install: str) -> ModuleType:
    """Import an optional test peer (Dask, megatron-core, Beam's GCP extra ...), or skip naming the command that
    installs it; under ``flag=1`` (``make test`` and ``.ci/run`` set every such flag, having installed the peers) its
    absence is a failure, so that CI never counts a skipped test as passing. Usable at module level."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        message = f"{name} is not installed ({exc}); to run this test: {install}"
        if os.environ.get(flag) == "1":
            pytest.fail(f"{message}; {flag}=1 makes its absence an error", pytrace=False)
        pytest.skip(message, allow_module_level=True)


DASK = dict(flag="BEAM_BPE_REQUIRE_DASK", install="pip install -e '.[test]' (dask[distributed] is in the test extra)")


def require_extra(extra: str, *, flag: str, install: str) -> None:
    """Every distribution of one of our extras (pyproject.toml), or a skip naming the command that installs them; a
    failure under ``flag=1``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    requirements = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][extra]
    missing = []
    for requirement in requirements:
        name = requirement.split(";")[0].split("[")[0]
        for stop in "<>=!~ ":
            name = name.split(stop)[0]
        try:
            version(name)
        except PackageNotFoundError:
            missing.append(name)
    if missing:
        message = f"the {extra} extra is not installed (missing: {', '.join(missing)}); to run this test: {install}"
        if os.environ.get(flag) == "1":
            pytest.fail(f"{message}; {flag}=1 makes its absence an error", pytrace=False)
        pytest.skip(message)


def require_gcp_extra() -> None:
    """Beam's GCP extra (what DataflowRunner and its launch checks need), or a skip naming the pinned install; a
    failure under BEAM_BPE_REQUIRE_GCP=1 (make test installs it)."""
    from importlib.metadata import version

    install = f"pip install 'apache-beam[gcp]=={version('apache-beam')}' (make test installs it)"
    for name in ("google.cloud.storage", "apache_beam.runners.dataflow.internal.apiclient"):
        require_module(name, flag="BEAM_BPE_REQUIRE_GCP", install=install)


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


def openai_encoding(preset: str) -> dict:
    """pat_str, special_tokens and the rank file path of an OpenAI encoding (a fresh copy: the caller may change it)."""
    return copy.deepcopy(_openai_encoding(preset))


@cache
def _openai_encoding(preset: str) -> dict:
    name = OPENAI[preset]
    table = json.loads(data_path("tiktoken", "encodings.json").read_text())
    entry = dict(table[name])
    entry["path"] = str(data_path("tiktoken", entry["rank_file"]))
    entry["name"] = name
    return entry


def ours_openai(preset: str):
    """Our tokenizer of an OpenAI encoding, built once per process and shared: read-only (see :func:`shared`); a test
    that needs another backend or attribute takes a copy, ``pickle.loads(pickle.dumps(tok)).use_backend("python")``."""
    return _ours_openai(preset)


@cache
def _ours_openai(preset: str):
    import bpe_core

    enc = openai_encoding(preset)
    tok = bpe_core.Tokenizer.from_tiktoken(enc["path"], pretokenizer=preset, special_tokens=enc["special_tokens"])
    return shared(tok)


class SharedTokenizerError(AttributeError):
    """A test tried to change a tokenizer that every test shares."""


def shared(tok):
    """``tok`` made read-only in place, for a cache that tests share: ``use_backend`` and setting a public attribute
    raise :class:`SharedTokenizerError` (the lazily built native tables, private, still fill in). A copy (pickle,
    cloudpickle, ``copy.copy``: a Beam DoFn's too) is an ordinary, mutable Tokenizer."""
    object.__setattr__(tok, "__class__", _shared_class(type(tok)))
    return tok


_COPY_IT = "copy it first: pickle.loads(pickle.dumps(tok)).use_backend(...)"


@cache
def _shared_class(base: type) -> type:
    def use_backend(self, backend):
        raise SharedTokenizerError(
            f"use_backend({backend!r}) on a tokenizer that tests/conftest.py shares with every test "
            f"would change it for the tests after this one; {_COPY_IT}"
        )

    def __setattr__(self, name, value):
        if not name.startswith("_"):
            raise SharedTokenizerError(
                f"setting {name!r} on a tokenizer that tests/conftest.py shares with every test "
                f"would change it for the tests after this one; {_COPY_IT}"
            )
        object.__setattr__(self, name, value)

    def __reduce_ex__(self, protocol):  # copies are ordinary, mutable tokenizers of the tokenizer's own class
        return copyreg._reconstructor, (base, object, None), self.__getstate__()

    methods = {"use_backend": use_backend, "__setattr__": __setattr__, "__reduce_ex__": __reduce_ex__}
    return type(f"Shared{base.__name__}", (base,), {**methods, "__module__": __name__})


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


def pytest_terminal_summary(terminalreporter, config):
    """The reliability suite's figures in the log (also from xdist workers), and RELIABILITY.md under
    `make reliability`: see tests/reliability/report.py. Last, the random order's seed (pytest-randomly prints it in
    the header, which -q hides), to run that order again."""
    from reliability.report import summarize

    summarize(terminalreporter)
    if config.pluginmanager.hasplugin("randomly"):
        seed = config.getoption("randomly_seed")
        terminalreporter.write_line(
            f"random test order: --randomly-seed={seed} (again: make test TEST_SEED={seed}; "
            "the files' order: TEST_SEED=off, or -p no:randomly)"
        )


@pytest.fixture
def listening():
    """``host:port`` of a loopback socket that accepts connections while the test runs (a stand-in job server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield f"127.0.0.1:{s.getsockname()[1]}"
