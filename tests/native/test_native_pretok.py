"""The hand-written C++ pre-tokenizers against the `regex` module: the same pieces, on every input.

The contract (bpe_core/_native/pretok.h): bytes in, and the pieces are those of the preset's regex on the
surrogateescape-decoded text, re-encoded. So every reference here is `regex.findall` on
``data.decode("utf-8", "surrogateescape")``, never a value the code under test produced.
"""

from __future__ import annotations

import os
import warnings
from functools import cache

import pytest
import regex
from conftest import CORPORA, FULL, adversarial_cases, corpus
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_core import native
from bpe_core._versions import regex_unicode_version
from bpe_core.pretokenize import pretokenizer as pretokenize
from bpe_core.pretokenize.presets import (
    NATIVE_KINDS,
    NATIVE_PRESETS,
    PRESETS,
    lookup_preset,
    native_aliases,
    native_kind_patterns,
)
from bpe_core.pretokenize.pretokenizer import PreTokenizer

if not native.available() or not hasattr(native._core, "pretok_split"):
    if os.environ.get(native.REQUIRE_ENV) == "1":
        raise ImportError(f"the native core has no pretok_split ({native.load_error()}) and {native.REQUIRE_ENV}=1")
    pytest.skip("the native core (with its pre-tokenizers) is not built", allow_module_level=True)

core = native._core
# Per corpus and preset, the sample split by both (the whole corpus under BEAM_BPE_FULL=1).
SAMPLE_BYTES = 1 << 20


@cache
def reference(kind: str):
    """`regex` on the kind's patterns: findall for one without groups, else finditer passes (PreTokenizer's, pure
    regex)."""
    patterns = native_kind_patterns(kind)
    if len(patterns) == 1 and regex.compile(patterns[0]).groups == 0:
        return regex.compile(patterns[0]).findall
    return PreTokenizer(patterns, timeout=None)._split_normalized  # findall would give llama.cpp's groups


def expected_pieces(kind: str, data: bytes) -> list[bytes]:
    text = data.decode("utf-8", "surrogateescape")
    return [p.encode("utf-8", "surrogateescape") for p in reference(kind)(text)]


def as_bytes(text: str | bytes) -> bytes:
    # surrogatepass: a lone surrogate of a str case becomes 3 invalid bytes, which both sides then see as 3 characters
    return text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")


def assert_same_pieces(kind: str, data: bytes, label: object = "") -> None:
    got = core.pretok_split(kind, data)
    want = expected_pieces(kind, data)
    if got != want:
        first = next((k for k, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want)))
        raise AssertionError(
            f"{kind} {label!r}: piece {first} differs: native {got[max(0, first - 2) : first + 3]!r} vs regex "
            f"{want[max(0, first - 2) : first + 3]!r} ({len(got)} vs {len(want)} pieces)"
        )


def test_names_and_tables_info():
    assert core.pretok_names() == list(NATIVE_KINDS)
    assert core.pretok_names()[: len(NATIVE_PRESETS)] == list(NATIVE_PRESETS)
    assert core.unicode_tables_info() == {
        "regex_version": regex.__version__,
        "unicode_version": regex_unicode_version(),  # the tables come from regex: its Unicode, not unicodedata's
        "digest": core.unicode_tables_info()["digest"],
    }
    with pytest.raises(ValueError, match="gpt-2.*use one of r50k"):
        core.pretok_split("gpt-2", b"x")


def spread_sample(docs: list[str], budget: int) -> list[str]:
    """Documents taken evenly over the corpus until about `budget` bytes (all of them under FULL)."""
    total = sum(map(len, docs))
    if FULL or total <= budget:
        return docs
    return docs[:: -(-total // budget)]


@pytest.mark.parametrize("name", CORPORA)
@pytest.mark.parametrize("kind", NATIVE_KINDS)
def test_corpora(kind, name):
    docs = corpus(name, 10**9)
    sample = spread_sample(docs, SAMPLE_BYTES)
    assert sample
    for doc in sample:
        assert_same_pieces(kind, as_bytes(doc), (name, doc[:40]))


@pytest.mark.parametrize("kind", NATIVE_KINDS)
def test_adversarial_cases(kind):
    cases = adversarial_cases()
    assert len(cases) > 3000
    for case_id, value in cases:
        assert_same_pieces(kind, as_bytes(value), case_id)


# Where the lookaheads, contractions and prefixes live: whitespace of every kind, apostrophes, the contraction
# letters in both cases (and U+017F, which regex's (?i) takes for s, and U+212A, the Kelvin sign), digits of two
# scripts, "/" (o200k), marks, Lm/Lt/Lu/Lo letters, a surrogateescape byte.
EDGE_ALPHABET = list(" \t\r\n\x0b\x0c\x1c\x85\xa0\u2028\u3000'sdmtlvreSDMTLVREaxKQ019/.,!-_") + [
    "\u017f", "\u212a", "\u0301", "\u02b0", "\u01c5", "\u01c4", "\u00e9", "\u4e00", "\u0663", "\u2167", "\udc80",
    "\U0001f600", "\u0130", "\u0131",
]  # fmt: skip
CATEGORIES = ("Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf",
              "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn")  # fmt: skip
any_char = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
# a category first, then a character of it: the rare categories (Lt, Me, Zl, Zp) come up as often as the others
char_by_category = st.sampled_from(CATEGORIES).flatmap(lambda cat: st.characters(categories=(cat,)))
edge_text = st.text(st.sampled_from(EDGE_ALPHABET), max_size=40)
unicode_text = st.text(st.one_of(any_char, char_by_category, st.sampled_from(EDGE_ALPHABET)), max_size=40)
raw_bytes = st.lists(st.one_of(st.binary(max_size=4), edge_text.map(as_bytes)), max_size=12).map(b"".join)
fuzz = settings(max_examples=3000 if FULL else 300, deadline=None, derandomize=not FULL, database=None)


@fuzz
@given(edge_text)
def test_hypothesis_edge_text(text):
    for kind in NATIVE_KINDS:
        assert_same_pieces(kind, as_bytes(text), text)


@fuzz
@given(unicode_text)
def test_hypothesis_all_categories(text):
    for kind in NATIVE_KINDS:
        assert_same_pieces(kind, as_bytes(text), text)


@fuzz
@given(raw_bytes)
def test_hypothesis_invalid_utf8(data):
    for kind in NATIVE_KINDS:
        assert_same_pieces(kind, data, data)


# Code points in several contexts at once: after a lower-case letter and before "'s", alone between "\n" and a
# space, after a space and before a digit, starting a piece before "Aa" (o200k's U* then W+), after an apostrophe
# and before "e" (the case-insensitive contractions). Under BEAM_BPE_FULL=1 every code point that bytes can carry
# (all but the surrogates; U+DC80..U+DCFF stand for the invalid bytes); else all of planes 0-3 and 14 (every
# assigned code point) and every 61st of the rest, so at least two of each 256-code-point block of the tables.
SWEEP_CONTEXT = "a{c}'s\n{c} {c}1 {c}Aa'{c}e"


def sweep_points() -> list[int]:
    def carried(cp: int) -> bool:
        return not 0xD800 <= cp < 0xE000 or 0xDC80 <= cp < 0xDD00

    if FULL:
        return [cp for cp in range(0x110000) if carried(cp)]
    dense = [*range(0x40000), *range(0xE0000, 0xE1000)]
    sparse = [cp for cp in range(0x40000, 0x110000, 61) if not 0xE0000 <= cp < 0xE1000]
    return [cp for cp in dense + sparse if carried(cp)]


@cache
def sweep_bytes() -> bytes:
    text = "".join(SWEEP_CONTEXT.replace("{c}", chr(cp)) for cp in sweep_points())
    return text.encode("utf-8", "surrogateescape")


@pytest.mark.parametrize("kind", NATIVE_KINDS)
def test_every_code_point(kind):
    data = sweep_bytes()
    assert len(data) > 0x40000 * len(SWEEP_CONTEXT)
    assert_same_pieces(kind, data, SWEEP_CONTEXT)


# ------------------------------------------------------------------------------------------ PreTokenizer


def test_native_kind_follows_the_patterns_not_the_name():
    assert PreTokenizer.from_spec("gpt2").native_kind == "r50k"
    assert PreTokenizer.from_spec("cl100k_base").native_kind == "cl100k"
    assert PreTokenizer.from_spec("cl100k", normalizer="NFKC").native_kind == "cl100k"
    # llama.cpp's names for the same regexes (as read from a GGUF file's tokenizer.ggml.pre)
    assert PreTokenizer.from_spec("llama-bpe").native_kind == "llama3"
    assert PreTokenizer.from_spec(list(lookup_preset("qwen2").patterns)).native_kind == "qwen2"
    assert PreTokenizer.from_spec(PRESETS["o200k"].patterns[0]).native_kind == "o200k"
    # llama.cpp's gpt-2 is another spelling of r50k's split (test_alias_patterns_split_as_their_preset)
    assert PreTokenizer.from_spec("gpt-2").native_kind == "r50k"
    # Not a preset's patterns, whatever the name: the compiled matcher (tests/native/test_native_pretok_rx.py) splits
    # them.
    assert PreTokenizer((PRESETS["cl100k"].patterns[0], r"\S+")).native_kind.startswith("rx:")
    assert PreTokenizer(r"\S+|\s+", name="cl100k").native_kind.startswith("rx:")


def test_another_regex_version_keeps_the_fast_path_when_its_tables_are_the_same(monkeypatch):
    monkeypatch.setattr(pretokenize, "_native_split_state", [])
    monkeypatch.setattr(regex, "__version__", "0.0.test")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert PreTokenizer.from_spec("cl100k").native_kind == "cl100k"  # derived again: same digest


def test_native_kind_refused_when_regex_classes_differently_from_the_tables(monkeypatch):
    from bpe_core.pretokenize import unicode_tables

    monkeypatch.setattr(pretokenize, "_native_split_state", [])
    monkeypatch.setattr(regex, "__version__", "0.0.test")
    monkeypatch.setattr(unicode_tables, "derive", lambda: (bytearray(b"x"), {}))  # as a regex with other data
    with pytest.warns(RuntimeWarning, match=r"generated from regex .* and regex 0\.0\.test, imported now, classes"):
        assert PreTokenizer.from_spec("cl100k").native_kind.startswith("rx:")  # the compiled matcher instead
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process, not per call
        assert PreTokenizer.from_spec("o200k").native_kind.startswith("rx:")
        assert PreTokenizer.from_spec("o200k").split_bytes(b"a b") == [b"a", b" b"]


def test_the_built_digest_is_the_digest_of_the_running_regex():
    from bpe_core.pretokenize import unicode_tables

    assert core.unicode_tables_info()["digest"] == unicode_tables.digest(*unicode_tables.derive())


ALIASES = sorted(native_aliases().items())


def test_the_known_aliases():
    kinds = [kind for _, kind in ALIASES]
    assert kinds.count("r50k") == 3 and kinds.count("cl100k") == 1  # HF's and llama.cpp's GPT-2, tokenizer.json trips


@pytest.mark.parametrize("patterns, kind", ALIASES, ids=[f"{k}-{i}" for i, (_, k) in enumerate(ALIASES)])
def test_alias_patterns_split_as_their_preset(patterns, kind):
    """Another spelling gets the preset's native split only if `regex` on that spelling gives the same pieces."""
    pre = PreTokenizer(patterns)
    assert pre.native_kind == kind
    texts = [as_bytes(v) for _, v in adversarial_cases()]
    for name in CORPORA:
        texts += [as_bytes(d) for d in spread_sample(corpus(name, 10**9), SAMPLE_BYTES // 8)]
    for data in texts:
        want = [
            p.encode("utf-8", "surrogateescape") for p in pre._split_normalized(data.decode("utf-8", "surrogateescape"))
        ]
        assert core.pretok_split(kind, data) == want, data[:60]


@fuzz
@given(st.one_of(edge_text, unicode_text))
def test_hypothesis_alias_patterns(text):
    data = as_bytes(text)
    for patterns, kind in ALIASES:
        pre = PreTokenizer(patterns)
        want = [
            p.encode("utf-8", "surrogateescape") for p in pre._split_normalized(data.decode("utf-8", "surrogateescape"))
        ]
        assert core.pretok_split(kind, data) == want, (patterns, text)


@pytest.mark.parametrize("spec", ["cl100k", "o200k", "gpt-2", "deepseek-llm"])
@pytest.mark.parametrize("normalizer", [None, "NFKC"])
def test_split_bytes_equals_split(spec, normalizer):
    pre = PreTokenizer.from_spec(spec, normalizer=normalizer)
    for _, value in adversarial_cases()[::7]:
        data = as_bytes(value)
        text = data.decode("utf-8", "surrogateescape")
        assert pre.split_bytes(data) == [p.encode("utf-8", "surrogateescape") for p in pre.split(text)]
    with pytest.raises(TypeError, match="use split"):
        pre.split_bytes("text")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ the cl100k family

# Spellings found in files users have (Hugging Face tokenizer.json, llama.cpp's table) and by hand, with the kind the
# structure gives. Each is then checked piece for piece against `regex` on that spelling itself.
QWEN35_HF = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"  # noqa: E501
CL100K_HF = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"  # noqa: E501
SPELLINGS = [
    (QWEN35_HF, "family:ci-d1-LM-llama"),
    (lookup_preset("qwen35").patterns[0], "family:ascii-d1-LM-llama"),
    (CL100K_HF, "family:ci-d3-L-llama"),
    # the same classes written otherwise, the contraction group without its brackets, possessive where it changes
    # nothing, cl100k's tail with `\s+$` and `[\r\n]+`
    (QWEN35_HF.replace(r"[\p{L}\p{M}]+", r"[\p{M}\p{Lu}\p{Ll}\p{Lt}\p{Lm}\p{Lo}]++"), "family:ci-d1-LM-llama"),
    (QWEN35_HF.replace(r"\p{N}|", r"[\p{Nd}\p{Nl}\p{No}]|"), "family:ci-d1-LM-llama"),
    (r"'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]" + lookup_preset("qwen2").patterns[0].split(")", 1)[1],
     "qwen2"),
    (PRESETS["cl100k"].patterns[0].replace(r"\s++$", r"\s+$").replace(r"\s*[\r\n]|", r"\s*[\r\n]+|"), "cl100k"),
    (PRESETS["cl100k"].patterns[0].replace("++", "+").replace("?+", "?").replace("*+", "*").replace(r"\s+$", r"\s++$"),
     "cl100k"),
]  # fmt: skip
# Near misses: one class, bound or alternative changed; none is a hand-written kind.
NEAR_MISSES = [
    QWEN35_HF.replace(r"\p{N}|", r"\p{N}{1,2}|"),
    QWEN35_HF.replace(r"[\p{L}\p{M}]+", r"[\p{L}\p{M}\p{N}]+"),
    QWEN35_HF.replace(r"(?i:'s|'t|", r"(?i:'s|'x|"),
    QWEN35_HF.replace(r"[\r\n]*|", r"[\r\n/]*|"),
    QWEN35_HF.replace(r"|\s+(?!\S)", ""),
    CL100K_HF.replace(r"]?\p{L}+", r"]?+\p{L}*"),
    lookup_preset("deepseek-v3").patterns[-1],
]


def test_the_spellings_of_the_family_are_known_by_their_structure():
    for pattern, kind in SPELLINGS:
        assert PreTokenizer(pattern, name="anything").native_kind == kind, pattern
        assert core.pretok_split(kind, b"x")  # a kind the core splits
    assert PreTokenizer.from_spec("qwen35").native_kind == "family:ascii-d1-LM-llama"
    for pattern in NEAR_MISSES:
        assert PreTokenizer(pattern).native_kind not in NATIVE_KINDS, pattern  # the compiled matcher, or regex


@pytest.mark.parametrize("pattern, kind", SPELLINGS, ids=[f"{k}-{i}" for i, (_, k) in enumerate(SPELLINGS)])
def test_each_spelling_splits_as_regex_on_that_spelling(pattern, kind):
    compiled = regex.compile(pattern)
    texts = [as_bytes(v) for _, v in adversarial_cases()]
    for name in CORPORA:
        texts += [as_bytes(d) for d in spread_sample(corpus(name, 10**9), SAMPLE_BYTES // 8)]
    texts.append(sweep_bytes()[: 1 << 20])
    for data in texts:
        want = [p.encode("utf-8", "surrogateescape") for p in compiled.findall(data.decode("utf-8", "surrogateescape"))]
        assert core.pretok_split(kind, data) == want, data[:60]


DEEPSEEK_V3 = lookup_preset("deepseek-v3").patterns
CASCADE_SPELLINGS = [
    (DEEPSEEK_V3, "deepseek-v3"),
    # as a tokenizer.json could write it: the ranges escaped, possessive digits, the punctuation in another order
    ((r"\p{N}{1,3}+", r"[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+", DEEPSEEK_V3[2].replace("!\"#$%&'", "\"!#$%&'")),
     "deepseek-v3"),
    (lookup_preset("starcoder").patterns, "r50k-digits"),
    ((r"[\p{Nd}\p{Nl}\p{No}]", PRESETS["r50k"].patterns[0]), "r50k-digits"),
    ((r"\p{N}", r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"), "r50k-digits"),
]  # fmt: skip
CASCADE_NEAR_MISSES = [
    (r"\p{N}{1,2}", *DEEPSEEK_V3[1:]),
    (DEEPSEEK_V3[0], r"[\u4e00-\u9fa5\u3040-\u309f]+", DEEPSEEK_V3[2]),
    DEEPSEEK_V3[1:],
    (DEEPSEEK_V3[1], DEEPSEEK_V3[0], DEEPSEEK_V3[2]),
    (r"\p{N}{1,3}", lookup_preset("starcoder").patterns[1]),
    (r"\d", lookup_preset("starcoder").patterns[1]),
    lookup_preset("starcoder").patterns[::-1],
]


O200K_SPELLINGS = [
    (lookup_preset("gpt-4o").patterns, "o200k-family:L-ascii-d3"),  # llama.cpp's, its letters not o200k's classes
    (lookup_preset("tekken").patterns, "o200k-family:L-none-d1"),
    # mistral-common's tekken.json: o200k's classes, no contractions, one digit
    ((r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?"
      r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|"
      r"\s+(?!\S)|\s+",), "o200k-family:UW-none-d1"),
]  # fmt: skip


@pytest.mark.parametrize("patterns, kind", O200K_SPELLINGS)
def test_the_o200k_family_is_known_by_its_structure_and_splits_as_regex(patterns, kind):
    pre = PreTokenizer(patterns, name="anything", timeout=None)
    assert pre.native_kind == kind
    assert PreTokenizer((patterns[0].replace(r"\p{N}", r"\p{Nd}"),)).native_kind not in NATIVE_KINDS
    texts = [as_bytes(v) for _, v in adversarial_cases()]
    for name in CORPORA:
        texts += [as_bytes(d) for d in spread_sample(corpus(name, 10**9), SAMPLE_BYTES // 8)]
    for data in texts:
        text = data.decode("utf-8", "surrogateescape")
        want = [p.encode("utf-8", "surrogateescape") for p in pre._split_normalized(text)]
        assert core.pretok_split(kind, data) == want, data[:60]


def test_the_cascades_are_known_by_their_structure():
    for patterns, kind in CASCADE_SPELLINGS:
        assert PreTokenizer(patterns, name="anything").native_kind == kind, patterns
    for patterns in CASCADE_NEAR_MISSES:
        assert PreTokenizer(patterns).native_kind not in NATIVE_KINDS, patterns


@pytest.mark.parametrize("patterns, kind", CASCADE_SPELLINGS)
def test_each_cascade_spelling_splits_as_regex_on_that_spelling(patterns, kind):
    pre = PreTokenizer(patterns, timeout=None)
    texts = [as_bytes(v) for _, v in adversarial_cases()]
    for name in CORPORA:
        texts += [as_bytes(d) for d in spread_sample(corpus(name, 10**9), SAMPLE_BYTES // 8)]
    for data in texts:
        text = data.decode("utf-8", "surrogateescape")
        assert core.pretok_split(kind, data) == [
            p.encode("utf-8", "surrogateescape") for p in pre._split_normalized(text)
        ]
