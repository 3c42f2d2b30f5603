"""The compiled pre-tokenizer matcher (bpe_core/pretokenize/compiler.py, bpe_core/_native/pretok_rx.cpp) against the
`regex` module, piece for piece: every pattern list of the llama.cpp table, Mistral's Tekken pattern and the presets'
own patterns, on the shared corpora, the adversarial cases (invalid UTF-8 included), every Unicode code point, all 64
alignments of a text and hypothesis' texts; the encoders through it against the Python backend; and what is not
compiled still splits through `regex`. The oracle is `regex` itself (PreTokenizer._split_normalized)."""

from __future__ import annotations

import pytest
from conftest import CORPORA, adversarial_cases, corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe_core import PreTokenizer, Tokenizer, native
from bpe_core.pretokenize.compiler import compile_patterns
from bpe_core.pretokenize.llamacpp import LLAMACPP_PRETOKENIZERS
from bpe_core.pretokenize.presets import PRESETS
from bpe_core.pretokenize.pretokenizer import native_name

pytestmark = pytest.mark.skipif(not native.available(), reason="the native core is not built")

TEKKEN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?"
    r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|"
    r"\s+(?!\S)|\s+",
)
PATTERN_LISTS = {name: patterns for name, (patterns, _) in LLAMACPP_PRETOKENIZERS.items()}
PATTERN_LISTS["tekken-file"] = TEKKEN
for _name in ("r50k", "cl100k", "o200k"):
    PATTERN_LISTS[f"preset-{_name}"] = PRESETS[_name].patterns
# One list per distinct pattern tuple (several llama.cpp names share one).
DISTINCT = {}
for _name, _patterns in PATTERN_LISTS.items():
    DISTINCT.setdefault(_patterns, _name)
NAMES = sorted(DISTINCT.values())


def patterns_of(name: str) -> tuple[str, ...]:
    return PATTERN_LISTS[name]


def expected(patterns: tuple[str, ...], data: bytes) -> list[bytes]:
    pre = PreTokenizer(patterns)
    text = data.decode("utf-8", "surrogateescape")
    return [p.encode("utf-8", "surrogateescape") for p in pre._split_normalized(text)]


def got(patterns: tuple[str, ...], data: bytes) -> list[bytes]:
    name = native_name(patterns)
    assert name is not None and name.startswith("rx:"), patterns
    return native._core.pretok_split(name, data)


def assert_same(patterns: tuple[str, ...], data: bytes, what: str = "") -> None:
    a, b = got(patterns, data), expected(patterns, data)
    if a != b:
        i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        raise AssertionError(f"{what}: piece {i} differs: native {a[i : i + 3]!r}, regex {b[i : i + 3]!r}")


def test_every_llamacpp_pattern_list_compiles():
    missing = [name for name, (patterns, _) in LLAMACPP_PRETOKENIZERS.items() if compile_patterns(patterns) is None]
    assert not missing and len(LLAMACPP_PRETOKENIZERS) >= 25
    assert all(native_name(patterns) for patterns in PATTERN_LISTS.values())


def test_native_kind_is_the_compiled_matcher_outside_the_hand_written_kinds():
    assert PreTokenizer.from_spec("deepseek-llm").native_kind.startswith("rx:")
    assert PreTokenizer.from_spec("falcon").native_kind == native_name(patterns_of("falcon"))
    assert PreTokenizer.from_spec("cl100k").native_kind == "cl100k"
    # Tekken and DeepSeek V3 have hand-written splitters now (tests/native/test_native_pretok.py)
    assert PreTokenizer(TEKKEN).native_kind == "o200k-family:UW-none-d1"
    assert PreTokenizer.from_spec("deepseek-v3").native_kind == "deepseek-v3"


@pytest.mark.parametrize("name", NAMES)
def test_corpora(name):
    patterns = patterns_of(name)
    for c in CORPORA:
        for doc in corpus(c, 30):
            assert_same(patterns, doc.encode("utf-8", "surrogatepass"), f"{name} on {c}")


@pytest.mark.parametrize("name", NAMES)
def test_adversarial_cases(name):
    patterns = patterns_of(name)
    for case, value in adversarial_cases():
        data = value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
        if len(data) > 20000:
            data = data[:20000]
        assert_same(patterns, data, f"{name} on {case}")
        assert_same(patterns, data + b"\xe2\x82", f"{name} on {case} + a cut sequence")


def code_point_blocks(step: int = 2048):
    for start in range(0, 0x110000, step):
        yield start, [chr(c) for c in range(start, min(start + step, 0x110000))]


@pytest.mark.parametrize("name", NAMES)
def test_every_code_point(name):
    patterns = patterns_of(name)
    for start, chars in code_point_blocks():
        assert_same(patterns, "".join(chars).encode("utf-8", "surrogatepass"), f"{name} near U+{start:04X}")


@pytest.mark.full
@pytest.mark.parametrize("name", NAMES)
def test_every_code_point_in_context(name):
    patterns = patterns_of(name)
    for start, chars in code_point_blocks():
        text = "".join(f"{c}a {c}'s1{c}\n {c}" for c in chars[::3])
        assert_same(patterns, text.encode("utf-8", "surrogatepass"), f"{name} near U+{start:04X}")


@pytest.mark.parametrize("name", NAMES)
def test_all_64_alignments(name):
    patterns = patterns_of(name)
    sample = "Don't  stop:\r\n  1234567 naïve CAFÉ's 日本語テキスト  \t\n\n x£y ́z   "
    for k in range(64):
        for pad in ("a" * k, " " * k, "1" * k):
            assert_same(patterns, (pad + sample + pad).encode(), f"{name} after {k} x {pad[:1]!r}")


ALPHABET = list("aZé'sStT  \t\r\n1234½٣.,!?/$+<=>^~|`-_()[]{}") + ["\u0301", "日", "ｱ", "가", "\u3000", "\U0001f600"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(NAMES), st.lists(st.sampled_from(ALPHABET), max_size=60), st.binary(max_size=6))
def test_hypothesis_texts(name, chars, tail):
    assert_same(patterns_of(name), "".join(chars).encode() + tail, name)


@pytest.mark.parametrize("name", ["deepseek-llm", "deepseek-coder", "falcon", "bloom", "viking"])
def test_encoder_through_the_matcher_equals_python_backend(name):
    """Long documents, so that the encoder's batched split (pretok_split_some) resumes inside first-level pieces."""
    from conftest import openai_encoding

    enc = openai_encoding("cl100k")
    docs = [d for c in ("code_cpython", "multi_udhr", "docs_python_rst") for d in corpus(c, 6)]
    native_tok = Tokenizer.from_tiktoken(enc["path"], pretokenizer=list(patterns_of(name)))
    assert native_tok.pretokenizer.native_kind.startswith("rx:")
    python_tok = Tokenizer.from_tiktoken(enc["path"], pretokenizer=list(patterns_of(name))).use_backend("python")
    assert native_tok.encode_ordinary_batch(docs) == python_tok.encode_ordinary_batch(docs)


@pytest.mark.parametrize(
    "pattern",
    [r"\w+?|\s", r"(a)\1|.", r"(?<=a)b|.", r"(?i)ab|.", r"a*|b", r"\bfoo|.", r"[[:alpha:]]+|.", r"(?:ab)+|."],
)
def test_outside_the_subset_splits_through_regex(pattern):
    pre = PreTokenizer((pattern,))
    assert compile_patterns((pattern,)) is None
    assert pre.native_kind is None
    assert pre.split_bytes(b"aab foo") == [p.encode() for p in pre.split("aab foo")]


# Stages of the shape A?C{m,M}$? (the core's loops instead of the interpreter) and cascades whose stages are a
# hand-written kind (the core runs that splitter on the pieces before it): made-up lists, so that no llama.cpp list's
# particular classes hide a case.
R50K = PRESETS["r50k"].patterns[0]
SIMPLE_STAGES = [
    r"\p{N}{1,3}",
    r"[0-9][0-9][0-9]",
    r"\p{N}{2}",
    r"a?a{2,3}",
    r"[a-z]?[a-z0-9]+",
    r" ?\p{L}+",
    r" ?+\p{L}+",
    r"[a-z ]?+[a-z]+",
    r"\s?\p{L}+",
    r"\p{L}+$",
    r"\s+$",
    r"[^\n]+$",
    r" ?\p{L}+$",
    r"\p{L}{2}$",
    r"[^\s\p{L}]?\p{P}{1,2}",
]
CASCADES = [
    (r"\p{N}{1,3}", r" ?\p{L}+$", R50K),
    (R50K, r"\p{N}"),
    (r"[\r\n]", R50K, r"\p{N}{1,3}"),
    (r"\s?\p{L}+", R50K, R50K),
    (r"[a-z]?[a-z0-9]+", r"\p{N}{2}", r"\s+$"),
    (r"\s+$", r"[a-z]?[a-z0-9]+", r"[a-z ]?+[a-z]+", r"\p{L}+$"),
    (r"[^\n]+$", r" ?\p{L}+$", r"[ a]?\p{L}+", R50K),
    (r"'s|'t| ?\p{L}+", r"\p{N}{1,3}", r"\s+$"),
    (r"\p{N}{1,3}", r"'s|'t| ?\p{L}+"),
    (r"\p{N}", r"\p{L}+$", r"[^\n]+$", r"[^\S\n]+$"),
]
SIMPLE_ALPHABET = list("aazZé1234 \n\n\t.,!?''sltevrdm") + ["\u0301", "日", "\u3000", "٣", "\x1c", "\xa0"]


@pytest.mark.parametrize("patterns", [(p,) for p in SIMPLE_STAGES] + CASCADES, ids=repr)
def test_simple_stages_and_hand_written_stages(patterns):
    assert compile_patterns(patterns) is not None
    fixed = ["", "\n", "aaa", "aaaa\n", "aaaa\n\n", " 12345 ab\n", "ab cd", "ab cd\n", "x" * 70 + "\n", "a1b22c333"]
    fixed += ["it's we'll they've I'm you're he'd don't ' 's ''s x'S 1's \n'll 'ver 're", "a  \t b\n\n  c \xa0d  "]
    for text in fixed:
        assert_same(patterns, text.encode(), repr(text))
    for c in ("multi_udhr", "code_cpython"):
        for doc in corpus(c, 8):
            data = doc.encode("utf-8", "surrogatepass")
            assert_same(patterns, data, c)
            assert_same(patterns, data.rstrip(b"\n") + b"\n", c + " ending in one newline")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([(p,) for p in SIMPLE_STAGES] + CASCADES),
    st.lists(st.sampled_from(SIMPLE_ALPHABET), max_size=40),
    st.sampled_from([b"", b"\n", b"\n\n", b" ", b"\xe2\x82"]),
)
def test_hypothesis_simple_stages(patterns, chars, tail):
    assert_same(patterns, "".join(chars).encode() + tail, repr(patterns))


def test_a_program_naming_no_hand_written_kind_is_refused():
    count = len(native._core.pretok_names())
    for program in ([1, -1, count], [1, -1, 1 << 20], [1, -1], [2, -1, 0]):
        with pytest.raises(ValueError):
            native._core.pretok_compile(program, [[10, 10]])
    assert native._core.pretok_compile([2, -1, 0, -1, 0], [[10, 10]], "two hand-written stages").startswith("rx:")


@pytest.mark.parametrize("name", ["deepseek-coder", "deepseek-llm", "falcon", "starcoder"])
def test_cascades_on_texts_longer_than_a_window(name):
    """The core splits a cascade a window (~8 KB of first-level pieces) at a time: texts of several windows, cut
    wherever the windows fall, and runs longer than a window (which make it grow)."""
    patterns = patterns_of(name)
    docs = [d for c in ("multi_udhr", "code_cpython", "docs_python_rst") for d in corpus(c, 10)]
    joined = "\n".join(docs)
    for size in (9000, 20000, 70000):
        assert_same(patterns, joined[:size].encode("utf-8", "surrogatepass"), f"{name}, {size} characters")
    for run in ("a" * 20000, "日" * 9000, " " * 17000, "1" * 12000, "." * 9000, "ab " * 6000):
        assert_same(patterns, (run + "\n" + joined[:3000] + run).encode(), f"{name}, a run of {run[:3]!r}")


def test_cascades_in_turn_on_one_thread():
    """The window's buffers are the thread's, kept between texts and programs (an ASCII window leaves its offsets
    for the next): programs with and without a hand-written stage, on ASCII and non-ASCII texts, in turn."""
    texts = ["plain ascii, words and 123 numbers.\n" * 300, "naïve café 日本語 — ünïcode\n" * 300, "short", "é"]
    lists = [patterns_of("falcon"), patterns_of("deepseek-coder"), patterns_of("starcoder"), CASCADES[0]]
    for _ in range(2):
        for text in texts:
            for patterns in lists:
                assert_same(patterns, text.encode(), f"{patterns[0]!r}.. on {text[:12]!r}")


def cpu_has_avx2() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return " avx2" in f.read()
    except OSError:
        return False


@pytest.fixture(params=["auto", "avx2", "sse2"])
def window_tier(request):
    """The cascades' window in each tier (``auto``: VBMI where this CPU has it, else AVX2), set back afterwards."""
    before = native._core.pretok_rx_tier()
    if request.param == "avx2" and not cpu_has_avx2():
        pytest.skip("this CPU has no AVX2")
    native._core.pretok_rx_tier(request.param)
    yield native._core.pretok_rx_tier()
    native._core.pretok_rx_tier("auto" if before == "vbmi" else before)


@pytest.mark.parametrize("name", ["deepseek-coder", "deepseek-llm", "falcon", "starcoder", "bloom"])
def test_window_tiers_give_the_same_pieces(window_tier, name):
    """Each tier of the window's classification against `regex`: ASCII and mixed windows, texts of several windows,
    every cut of a 64-byte block (the VBMI tier takes 64 ASCII bytes at a time, AVX2 32)."""
    patterns = patterns_of(name)
    docs = [d for c in ("multi_udhr", "code_cpython") for d in corpus(c, 6)]
    joined = "\n".join(docs)
    assert_same(patterns, joined[:40000].encode("utf-8", "surrogatepass"), f"{name} in {window_tier}")
    sample = "it's 12 naïve  words\n\t日本 x'll " * 3
    for k in range(0, 130, 7):
        assert_same(patterns, ("a" * k + sample).encode(), f"{name} in {window_tier}, {k} letters first")
    assert native._core.pretok_rx_tier() == window_tier


def test_a_tier_that_does_not_exist_is_refused():
    with pytest.raises(ValueError, match="auto, avx2 .* or sse2"):
        native._core.pretok_rx_tier("avx9")


@pytest.mark.parametrize("stage", [r"\s+$", r"[ a]+$", r"\p{L}+$"])
def test_end_runs_reaching_back_over_words(window_tier, stage):
    """C+$ on a cascade's window: the run that ends a fragment is found back to its start a 64-character word at a
    time; runs of 1-200 characters from every offset, starting at the fragment's start or after another character,
    and ending the text, before its final newline or before another fragment, in each tier."""
    for lead in ("", "x", "xy.", "日"):
        for length in (1, 2, 63, 64, 65, 127, 128, 129, 200):
            for offset in range(0, 70, 23):
                run = ("a " if "a" in stage else " a" if "L" in stage else " \t")[: 2 if length > 1 else 1] * length
                run = run[:length]
                for tail in ("", "\n", "\n\n", "\nb"):
                    text = "z" * offset + "\n" + lead + run + tail + "\r" + lead + run
                    assert_same((r"[\r\n]", stage), text.encode(), f"{stage} {lead!r} {length} {offset} {tail!r}")


def test_a_first_stage_split_piece_by_piece_leaves_the_window_its_eight_classes():
    """A first stage that is not one of the window's local forms (here C{1,3}) is split piece by piece and takes no
    window class: the eight classes of the later stages still make a cascade, split as `regex` splits it, across
    windows and at every offset of a 64-character word."""
    patterns = (r"\p{N}{1,3}", *(f"[{a}-{b}]+" for a, b in ("ac", "df", "gi", "jl", "mo", "pr", "su", "vx")))
    assert compile_patterns(patterns) is not None
    text = "abc1234defghi 56 jklmnopq rstuvwx yz 7890 " * 40 + "é日 12ab\n"
    for k in range(0, 70, 9):
        assert_same(patterns, ("q" * k + text).encode(), f"{k} letters first")
    assert_same(patterns, (text * 30).encode(), "several windows")
