"""Pre-tokenizers: an optional Unicode normalizer, then an ordered list of regexes (module ``regex``).

Each regex splits every piece left by the previous one; the matches and the text between them both become pieces,
so no character is ever dropped. This is the model of tiktoken (one regex), of Hugging Face ``Split`` with the
``Isolated`` behaviour and of llama.cpp (several regexes in turn).

The built-in presets (r50k, cl100k, o200k, llama3, qwen2) also have a hand-written C++ matcher
(``bpe_core/_native/pretok.cpp``: 150-300 MB/s of CPU time on the shared corpora, 30-80x ``regex`` findall's
4-8 MB/s; through ``split_bytes``, which builds a bytes object per piece, about 7x) with exactly the same pieces:
``PreTokenizer.native_kind`` says when it applies, ``split_bytes`` uses it.
"""

from __future__ import annotations

import difflib
import time
import unicodedata
import warnings
from collections.abc import Sequence
from typing import Literal, Union, cast

import regex

from bpe_core import native
from bpe_core.pretokenize.presets import Preset, lookup_preset, native_preset_for, preset_names

NORMALIZERS = ("NFC", "NFKC")
# Seconds a text may take through the regexes (all of them, Python path): a pattern read from a tokenizer file can
# backtrack catastrophically ("(a+)+$" on 40 a's and a b runs for hours); the presets' native matcher cannot.
REGEX_TIMEOUT = 10.0


class PreTokenizeTimeout(TimeoutError):
    """A pre-tokenizer regex ran over its time on one text (catastrophic backtracking, usually): names the pattern."""


class PreTokenizer:
    """Normalize, then split text into pieces with an ordered list of regexes.

    >>> PreTokenizer.from_spec("cl100k").split("Hello world!")
    ['Hello', ' world', '!']
    """

    def __init__(
        self,
        patterns: Sequence[str],
        *,
        normalizer: str | None = None,
        name: str | None = None,
        timeout: float | None | Literal["default"] = "default",
    ) -> None:
        if isinstance(patterns, str):
            patterns = (patterns,)
        if not patterns:
            raise ValueError("a pre-tokenizer needs at least one regex; pass e.g. 'cl100k' or r'\\S+|\\s+'")
        if normalizer is not None and normalizer not in NORMALIZERS:
            raise ValueError(f"unknown normalizer {normalizer!r}: use one of {NORMALIZERS} or None")
        self.patterns: tuple[str, ...] = tuple(patterns)
        self.normalizer = normalizer
        self.name = name
        self.timeout = timeout  # seconds per text through the regexes; None: no limit; "default": REGEX_TIMEOUT
        self._compiled = [_compile(p) for p in self.patterns]

    @classmethod
    def from_spec(cls, spec: PreTokenizerSpec, *, normalizer: str | None = None) -> PreTokenizer:
        """Build from a preset name, a regex, a list of regexes, or return a PreTokenizer unchanged."""
        if isinstance(spec, PreTokenizer):
            if normalizer is not None and normalizer != spec.normalizer:
                return spec.with_normalizer(normalizer)
            return spec
        if isinstance(spec, str):
            preset = lookup_preset(spec)
            if preset is not None:
                return cls.from_preset(preset, normalizer=normalizer)
            _refuse_unknown_name(spec)
            return cls((spec,), normalizer=normalizer)
        if isinstance(spec, (list, tuple)) and all(isinstance(p, str) for p in spec):
            return cls(tuple(spec), normalizer=normalizer)
        raise TypeError(
            f"pretokenizer must be a preset name ({', '.join(preset_names()[:7])}, ...), a regex, a list of "
            f"regexes or a PreTokenizer, not {type(spec).__name__}"
        )

    @classmethod
    def from_preset(cls, preset: Preset, *, normalizer: str | None = None) -> PreTokenizer:
        return cls(preset.patterns, normalizer=normalizer, name=preset.name)

    def with_normalizer(self, normalizer: str | None) -> PreTokenizer:
        return PreTokenizer(self.patterns, normalizer=normalizer, name=self.name, timeout=self.timeout)

    def normalize(self, text: str) -> str:
        if not self.normalizer:
            return text
        return unicodedata.normalize(cast(Literal["NFC", "NFKC"], self.normalizer), text)

    def split(self, text: str) -> list[str]:
        """The pieces of ``text`` (normalized first); their concatenation is the normalized text."""
        return self._split_normalized(self.normalize(text)) if text else []

    @property
    def native_kind(self) -> str | None:
        """The native pre-tokenizer that splits exactly as these regexes do, or None (then `regex` splits).

        A hand-written one when the patterns are exactly one preset's (whatever the name or the normalizer: it runs
        before the split), the native core loaded, and its property tables come from the `regex` version imported
        now (else, with one RuntimeWarning saying why, the compiled matcher). Otherwise the compiled matcher
        (``bpe_core/pretokenize/compiler.py``, ``"rx:N"``) when every pattern is in its subset: every pattern of the
        llama.cpp table, and the same patterns read from a tokenizer.json or given by hand. Its classes are derived
        from the `regex` imported now, so no version check applies.
        """
        kind = native_preset_for(self.patterns)
        if kind is not None and _native_split_usable():
            return kind
        if not native.available():
            return None
        return native_name(self.patterns)

    def split_bytes(self, data: bytes) -> list[bytes]:
        """The pieces of UTF-8 ``data`` (normalized first), as bytes; their concatenation is the normalized data.

        Bytes that are not valid UTF-8 split as their surrogateescape characters do (one character per byte), so the
        pieces are those of ``split(data.decode("utf-8", "surrogateescape"))``, re-encoded.

        >>> PreTokenizer.from_spec("cl100k").split_bytes(b"Hello world!")
        [b'Hello', b' world', b'!']
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"split_bytes takes bytes, not {type(data).__name__}; use split() for str")
        data = bytes(data)
        text: str | None = None
        if self.normalizer:
            text = self.normalize(data.decode("utf-8", "surrogateescape"))
            data = text.encode("utf-8", "surrogateescape")
        kind = self.native_kind
        if kind is not None:
            return cast("list[bytes]", native._core.pretok_split(kind, data))
        if text is None:
            text = data.decode("utf-8", "surrogateescape")
        return [p.encode("utf-8", "surrogateescape") for p in self._split_normalized(text)]

    def _split_normalized(self, text: str) -> list[str]:
        """The pieces of ``text``, already normalized: one pass of ``finditer`` per regex over the pieces the one
        before left (the time limit is passed to `regex` only for pieces long enough to backtrack for long: on short
        ones its per-call setup cost more than the split itself, 6x a plain finditer loop on deepseek-llm's six)."""
        pieces = [text] if text else []
        timeout = getattr(self, "timeout", "default")  # pickles of older versions have no timeout
        timeout = REGEX_TIMEOUT if timeout == "default" else timeout
        deadline = time.monotonic() + timeout if timeout else None
        for pattern in self._compiled:
            try:
                if len(self._compiled) == 1 and pattern.groups == 0 and text:
                    # One regex (tiktoken's kind): its matches usually tile the text, and findall is faster.
                    found = pattern.findall(text, timeout=None if deadline is None else timeout)
                    if sum(map(len, found)) == len(text):
                        return [p for p in found if p] if "" in found else found
                out: list[str] = []
                for piece in pieces:
                    _split_into(pattern, piece, deadline, out)
                pieces = out
            except TimeoutError:
                raise PreTokenizeTimeout(
                    f"pre-tokenizer regex {pattern.pattern!r} ran over {timeout:g} s on one text of {len(text)} "
                    "characters (catastrophic backtracking?): fix the pattern, "
                    "or pass a larger timeout= to PreTokenizer"
                ) from None
        return pieces

    def describe(self) -> str:
        norm = f"{self.normalizer} + " if self.normalizer else ""
        if self.name:
            return f"{norm}{self.name}"
        return norm + " then ".join(repr(p) for p in self.patterns)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PreTokenizer) and (self.patterns, self.normalizer) == (
            other.patterns,
            other.normalizer,
        )

    def __hash__(self) -> int:
        return hash((self.patterns, self.normalizer))

    def __repr__(self) -> str:
        return f"PreTokenizer({self.describe()})"

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        del state["_compiled"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._compiled = [_compile(p) for p in self.patterns]


PreTokenizerSpec = Union[str, Sequence[str], PreTokenizer]


_native_split_state: list[bool] = []  # [usable], decided once per process


def _native_split_usable() -> bool:
    """True if the native core has the hand-written pre-tokenizers and its tables match the imported `regex`."""
    if not _native_split_state:
        _native_split_state.append(_check_native_split())
    return _native_split_state[0]


def _check_native_split() -> bool:
    if not native.available():
        return False  # native.resolve_backend already warns about that once
    core = native._core
    if not hasattr(core, "pretok_split"):
        warnings.warn(
            "beam-bpe: the native core has no hand-written pre-tokenizers (an older build); splitting with the "
            "regex module, which is slower. Rebuild with `pip install --force-reinstall beam-bpe`",
            RuntimeWarning,
            stacklevel=4,
        )
        return False
    info = core.unicode_tables_info()
    if info["regex_version"] == regex.__version__:
        return True
    # Another regex than the build's: its Unicode data may differ. Derive the tables again and compare (~3 s, once).
    from bpe_core.pretokenize import unicode_tables

    try:
        same = unicode_tables.digest(*unicode_tables.derive()) == info["digest"]
    except unicode_tables.TableError:
        same = False
    if not same:
        warnings.warn(
            f"beam-bpe: the native pre-tokenizers' Unicode tables were generated from regex {info['regex_version']}, "
            f"and regex {regex.__version__}, imported now, classes some characters differently; splitting with the "
            "compiled matcher (bpe_core/pretokenize/compiler.py), which is slower. Rebuild beam-bpe against this regex "
            "(`pip install --force-reinstall --no-binary beam-bpe beam-bpe`) "
            f"or install regex=={info['regex_version']}",
            RuntimeWarning,
            stacklevel=4,
        )
    return same


def _refuse_unknown_name(spec: str) -> None:
    """A string with no regex syntax at all is a misspelled preset name ("cl100kk", "O200K"), not a pattern that
    would split every text only at that literal word: refuse it, with the nearest names."""
    if not _NAME_LIKE.fullmatch(spec):
        return
    names = preset_names()
    near = [n for n in names if n.lower() == spec.lower()] or difflib.get_close_matches(spec.lower(), names, n=3)
    hint = f" Did you mean {' or '.join(map(repr, near))}?" if near else ""
    raise ValueError(
        f"unknown pre-tokenizer preset {spec!r}.{hint} Presets: {', '.join(names[:12])}, ... (see "
        f"bpe_core.preset_names()). To split on the literal text {spec!r} as a regex, pass it in a list: "
        f"[{spec!r}]"
    )


_NAME_LIKE = regex.compile(r"[A-Za-z0-9_.\-]+")


def _compile(pattern: str) -> regex.Pattern:
    try:
        return regex.compile(pattern)
    except regex.error as exc:
        raise ValueError(f"invalid pre-tokenizer regex {pattern!r}: {exc}") from None


# Pieces up to this many characters are split without a time limit: even an exponential pattern ("(a+)+$") takes
# milliseconds on them, and passing `timeout` costs `regex` ~1.5 us per call.
UNTIMED_CHARS = 16


def _split_one(pattern: regex.Pattern, text: str, deadline: float | None = None) -> list[str]:
    """Matches of ``pattern`` in ``text`` and the text between them, in order; TimeoutError after ``deadline``."""
    out: list[str] = []
    _split_into(pattern, text, deadline, out)
    return out


def _split_into(pattern: regex.Pattern, text: str, deadline: float | None, out: list[str]) -> None:
    """Append the pieces of ``text`` under ``pattern`` to ``out`` (see :func:`_split_one`)."""
    if deadline is None or len(text) <= UNTIMED_CHARS:
        matches = pattern.finditer(text)
    else:
        matches = pattern.finditer(text, timeout=max(deadline - time.monotonic(), 1e-6))
    pos = 0
    for match in matches:
        start, end = match.span()
        if start > pos:
            out.append(text[pos:start])
        if end > start:
            out.append(text[start:end])
        pos = end
    if pos < len(text):
        out.append(text[pos:])


def _hand_written_stages(patterns: tuple[str, ...], names: list[str]) -> tuple[tuple[int, int], ...]:
    """(stage, index in ``names``) of each stage of a list of several that a hand-written kind splits exactly, when
    the core's tables are those of the `regex` imported now (as for a preset)."""
    if len(patterns) < 2 or not _native_split_usable():
        return ()
    out = []
    for stage, pattern in enumerate(patterns):
        kind = native_preset_for((pattern,))
        if kind is not None and kind in names:
            out.append((stage, names.index(kind)))
    return tuple(out)


_registered: dict[tuple[str, ...], str | None] = {}


def native_name(patterns: tuple[str, ...]) -> str | None:
    """The name ('rx:N') of ``patterns``' program in the native core (bpe_core/pretokenize/compiler.py), registered
    on first use, its stages that a hand-written kind splits exactly run by that kind; None when the patterns are not
    compiled or the core has no matcher."""
    if patterns in _registered:
        return _registered[patterns]
    from bpe_core.pretokenize.compiler import class_ranges, compile_patterns

    name = None
    compiled = None
    if native.available() and hasattr(native._core, "pretok_compile"):
        compiled = compile_patterns(patterns, _hand_written_stages(patterns, list(native._core.pretok_names())))
    if compiled is not None:
        ranges = [list(class_ranges(c)) for c in compiled.classes]
        name = native._core.pretok_compile(list(compiled.program), ranges, repr(list(patterns)))
    _registered[patterns] = name
    return name
