"""What the atheris harnesses share: the shared data, the reference twins, the outcome oracle and the entry point.

Each harness (``fuzz_*.py`` beside this file) defines ``test_one_input(data: bytes)`` (plain Python, no atheris:
``tests/fuzz/test_fuzz_harnesses.py`` calls it on seeds and on the regression corpus) and ``seeds()`` (real inputs from
../shared/data that libFuzzer starts from and mutates), then calls :func:`main`. ``tests/fuzz/run.py`` runs them all
with a budget; see tests/fuzz/README.md.

Coverage: atheris instruments Python bytecode only (``bpe_core`` and the harnesses, see :func:`instrument`). The C++
core is compiled by gcc without libFuzzer's coverage hooks, so on the native side the search is blind: it relies on
seeds from real data, on libFuzzer's mutations of them and on the differential oracles, not on native coverage.
"""

from __future__ import annotations

import gc
import os
import pickle
import shutil
import sys
import types
from collections.abc import Callable, Iterable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DATA = Path(os.environ.get("BEAM_BPE_TEST_DATA", ROOT.parent / "shared" / "data"))
REGRESSIONS = HERE / "regressions"
# What the library documents (UnicodeError and TokenizerFileError are ValueErrors); anything else is a finding.
CLEAR_ERRORS = (ValueError, TypeError)


class MissingData(RuntimeError):
    """The shared data a harness needs is absent (pytest turns it into a skip, or a failure under REQUIRE_DATA)."""


def data_path(*parts: str) -> Path:
    path = DATA.joinpath(*parts)
    if not path.exists():
        raise MissingData(f"shared test data not found: {path} (set BEAM_BPE_TEST_DATA to the shared data folder)")
    return path


# ---------------------------------------------------------------------------------------------- reading inputs
class Reader:
    """Draws small decisions from the front of a fuzz input; what is left is the payload.

    atheris' FuzzedDataProvider does the same, but this keeps the harnesses importable without atheris (the pytest
    replay of the regression corpus runs in `make test`, where atheris is not installed)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def below(self, n: int) -> int:
        """An integer in [0, n) from one or two bytes."""
        value = self.byte() if n <= 256 else self.byte() | self.byte() << 8
        return value % n

    def take(self, n: int) -> bytes:
        out = self.data[self.pos : self.pos + n]
        self.pos += len(out)
        return out

    def rest(self) -> bytes:
        out = self.data[self.pos :]
        self.pos = len(self.data)
        return out


def code_points(data: bytes) -> str:
    """Three bytes per character, spread over every code point (surrogates included): random bytes alone are
    mostly invalid UTF-8 and would never reach the letters, marks and digits of other scripts."""
    chars = []
    for i in range(0, len(data) - 2, 3):
        value = int.from_bytes(data[i : i + 3], "little")
        plane = value % 0x110000 if value & 1 else value % 0x3000  # half of them in the busy first 12k code points
        chars.append(chr(plane))
    return "".join(chars)


def text_of(mode: int, payload: bytes) -> str | bytes:
    """The input as the library takes it: bytes, UTF-8 text (invalid bytes kept as surrogateescape), BMP text with
    lone surrogates (UTF-16), or text over all code points."""
    if mode == 0:
        return payload
    if mode == 1:
        return payload.decode("utf-8", "surrogateescape")
    if mode == 2:
        return payload[: len(payload) & ~1].decode("utf-16-le", "surrogatepass")
    return code_points(payload)


# ---------------------------------------------------------------------------------------------- oracles
def outcome(fn: Callable, *args, **kwargs) -> tuple:
    """("ok", result) or ("raise", exception type, message) for the library's documented exceptions; anything
    else (an IndexError, a SystemError from the binding, a crash) escapes and is a finding."""
    try:
        return ("ok", fn(*args, **kwargs))
    except CLEAR_ERRORS as exc:
        return ("raise", type(exc).__name__, str(exc))


def check_same(what: str, native: tuple, python: tuple, data: object, *, messages: bool = True) -> None:
    """Equal results, or the same exception type; with ``messages``, the same message too (else its words up
    to the first colon, for messages that list the offending values and may list them differently)."""
    if not messages and native[0] == python[0] == "raise":
        native, python = (
            (native[0], native[1], native[2].split(":")[0]),
            (python[0], python[1], python[2].split(":")[0]),
        )
    if native != python:
        raise AssertionError(f"{what}: native {_short(native)} != python {_short(python)} for input {_short(data)}")


def _short(value: object, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


# ---------------------------------------------------------------------------------------------- tokenizers
def python_twin(tok):
    """The same vocabulary on the reference backend (a fresh object: no shared caches)."""
    return pickle.loads(pickle.dumps(tok)).use_backend("python")


def openai_tokenizer(preset: str):
    """The real OpenAI vocabulary with its special tokens, from the shared rank files."""
    import json

    from bpe_core import Tokenizer

    names = {"r50k": "r50k_base", "cl100k": "cl100k_base", "o200k": "o200k_base"}
    table = json.loads(data_path("tiktoken", "encodings.json").read_text())[names[preset]]
    path = data_path("tiktoken", table["rank_file"])
    return Tokenizer.from_tiktoken(str(path), pretokenizer=preset, special_tokens=table["special_tokens"])


def adversarial_texts(limit_bytes: int | None = None) -> list[str | bytes]:
    """Every case of adversarial/cases.jsonl (str or bytes), cut to ``limit_bytes`` where given."""
    import base64
    import json

    out: list[str | bytes] = []
    with open(data_path("adversarial", "cases.jsonl"), encoding="utf-8") as f:
        for line in f:
            case = json.loads(line)
            value = case["text"] if case["kind"] == "str" else base64.b64decode(case["b64"])
            out.append(value[:limit_bytes] if limit_bytes else value)
    return out


def corpus_docs(name: str, limit: int, cut: int) -> list[str]:
    import gzip
    import json

    docs = []
    with gzip.open(data_path("corpora", f"{name}.jsonl.gz"), "rt", encoding="utf-8") as f:
        for line in f:
            docs.append(json.loads(line)["text"][:cut])
            if len(docs) >= limit:
                break
    return docs


def as_bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")


# ---------------------------------------------------------------------------------------------- running
def instrument(prefixes: Iterable[str] = ("bpe_core",), extra: Iterable[types.FunctionType] = ()) -> int:
    """atheris coverage for the Python functions of ``prefixes`` already imported (and ``extra``).

    Why not ``atheris.instrument_imports()``: the editable install loads ``bpe_core`` through scikit-build-core's own
    finder, whose modules atheris' import hook wraps without effect (0 coverage seen); patching the code objects of
    the loaded functions, as ``atheris.instrument_all()`` does but only for our packages, works (and takes 0.3 s
    where instrument_all takes 12 s)."""
    import atheris

    prefixes = tuple(prefixes)
    done = 0
    for obj in list(gc.get_objects()) + list(extra):
        if not isinstance(obj, types.FunctionType):
            continue
        module = getattr(obj, "__module__", None) or ""
        if obj in extra or module.split(".")[0] in prefixes or module.startswith("fuzz_"):
            try:
                atheris.instrument_func(obj)
                done += 1
            except Exception as exc:  # noqa: BLE001 - a function atheris cannot patch stays uninstrumented
                sys.stderr.write(f"fuzzlib: not instrumented {obj.__qualname__}: {exc}\n")
    return done


def write_seeds(folder: Path, seeds: Iterable[bytes]) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    n = 0
    for n, seed in enumerate(seeds, 1):
        (folder / f"seed-{n:05d}").write_bytes(seed)
    return n


def main(test_one_input: Callable[[bytes], None], seeds: Callable[[], Iterable[bytes]], target: str) -> None:
    """libFuzzer's command line (``-runs=N``, ``-max_total_time=S``, corpus folders ...), plus ours:
    ``-seed_corpus=DIR`` (default build/fuzz/TARGET/corpus, emptied first) receives the seeds and the inputs
    libFuzzer finds interesting; the target's regression corpus (tests/fuzz/regressions/TARGET) is replayed first
    and never written to."""
    import atheris

    args = [a for a in sys.argv if not a.startswith("-seed_corpus=")]
    given = [a.split("=", 1)[1] for a in sys.argv if a.startswith("-seed_corpus=")]
    corpus = Path(given[-1] if given else ROOT / "build" / "fuzz" / target / "corpus")
    shutil.rmtree(corpus, ignore_errors=True)
    n = write_seeds(corpus, seeds())
    sys.stderr.write(f"fuzzlib: {n} seeds written to {corpus}\n")
    regressions = REGRESSIONS / target
    argv = [args[0], str(corpus), *([str(regressions)] if regressions.is_dir() else []), *args[1:]]
    count = instrument()
    sys.stderr.write(f"fuzzlib: {count} Python functions instrumented; the C++ core is not (see fuzzlib.py)\n")
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()
