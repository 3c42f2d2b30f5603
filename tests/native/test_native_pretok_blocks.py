"""The 64-byte block splitter (bpe_core/_native/pretok_blocks.cpp) against the scalar one (pretok.cpp), piece for piece.

The scalar splitter is the ground truth (tests/native/test_native_pretok.py proves it against `regex`); the block
splitter must give exactly its piece ends on every input, in each instruction tier (the best this CPU has, and SSE2),
and whatever batch size the caller asks for (it returns early when fewer than 64 slots are left). The inputs: every
document of every shared corpus, every Unicode code point in several contexts, the adversarial cases, random UTF-8
with invalid bytes and the characters the algebra treats specially, every start offset of a document over a block,
and cases built to put whitespace runs, contractions, digits and newlines across a block's edge.
"""

from __future__ import annotations

import os
import platform

import numpy as np
import pytest
from conftest import CORPORA, FULL, adversarial_cases, corpus
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_core import native

if not native.available() or not hasattr(native._core, "pretok_split_ends"):
    if os.environ.get(native.REQUIRE_ENV) == "1":
        raise ImportError(
            f"the native core has no pretok_split_ends ({native.load_error()}) and {native.REQUIRE_ENV}=1"
        )
    pytest.skip("the native core (with its block splitter) is not built", allow_module_level=True)

core = native._core
PRESETS = tuple(core.pretok_names())  # the five presets, deepseek-v3 and the cl100k family
TIERS = ("auto", "sse2")


def ends(name: str, data: bytes, tier: str, batch: int = 256) -> np.ndarray:
    return np.frombuffer(core.pretok_split_ends(name, data, tier, batch)[0], dtype=np.uintp)


def assert_same(name: str, data: bytes, tiers=TIERS, batch: int = 256) -> None:
    expected = ends(name, data, "scalar")
    assert expected.size == 0 or expected[-1] == len(data)
    for tier in tiers:
        got = ends(name, data, tier, batch)
        if not np.array_equal(got, expected):
            k = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b), None)
            k = min(got.size, expected.size) if k is None else k
            lo = int(expected[k - 2]) if k >= 2 else 0
            pytest.fail(
                f"{name} {tier} batch {batch}: piece {k} ends at {got[k] if k < got.size else 'none'} in the block "
                f"splitter, {expected[k] if k < expected.size else 'none'} in the scalar one, around "
                f"{data[lo : lo + 80]!r}"
            )


X86 = platform.machine() in ("x86_64", "AMD64")


def test_the_tier_is_named():
    # x86-64 has the vector code (SSE2 is its baseline); elsewhere the block splitter is the scalar one throughout.
    assert core.pretok_blocks_tier() in (("avx2", "sse2") if X86 else ("scalar",))


def test_bad_arguments_are_refused_naming_the_fix():
    with pytest.raises(ValueError, match="use a pretok_names"):
        core.pretok_split_ends("nope", b"x")
    with pytest.raises(ValueError, match="tier 'avx9'"):
        core.pretok_split_ends("cl100k", b"x", "avx9")
    with pytest.raises(ValueError, match="batch 0"):
        core.pretok_split_ends("cl100k", b"x", "auto", 0)


# The share of each corpus's bytes that the blocks split themselves (the rest goes to the scalar fallback): the
# differential tests would pass with no block at all, so this says they test the blocks. Measured on these 200
# documents: 0.97-1.00 for every corpus and preset; o200k on multi_udhr 0.99 (0.85 when each of its marks ended what a
# block knew, as now only a mark inside an O run's piece does).
MIN_COVERED = 0.95


@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("corpus_name", CORPORA)
def test_the_blocks_split_most_of_each_corpus(name, corpus_name):
    data = "\n".join(corpus(corpus_name, 200)).encode("utf-8", "surrogatepass")
    _, covered = core.pretok_split_ends(name, data)
    least = MIN_COVERED if X86 else 0
    assert covered / len(data) >= least, (name, corpus_name, covered / len(data))
    assert core.pretok_split_ends(name, data, "scalar")[1] == 0


@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("corpus_name", CORPORA)
def test_every_document_of_every_corpus(name, corpus_name):
    for text in corpus(corpus_name, 100_000 if FULL else 2000):
        assert_same(name, text.encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize("name", PRESETS)
def test_adversarial_cases(name):
    for _, case in adversarial_cases():
        data = case if isinstance(case, bytes) else case.encode("utf-8", "surrogatepass")
        assert_same(name, data)


# Contexts around each code point: after letters, a space, an apostrophe, digits, a newline and punctuation, so that
# whatever class the algebra would give it, each rule meets it on both sides.
CONTEXTS = (b"ab%s's  %s1%s\n%s.%s x", b"%s%s'll\t%s 12%s\r\n%s?")


@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("context", CONTEXTS)
def test_every_code_point(name, context):
    # Lone surrogates become invalid UTF-8 (surrogatepass): the splitters take each of those bytes as a character.
    step = 0x4000
    for start in range(0, 0x110000, step):
        chars = [chr(c).encode("utf-8", "surrogatepass") for c in range(start, min(start + step, 0x110000))]
        assert_same(name, b"".join(context % ((c,) * context.count(b"%s")) for c in chars))


@pytest.mark.parametrize("name", PRESETS)
def test_every_start_offset_and_batch_size(name):
    docs = [t.encode() for c in CORPORA for t in corpus(c, 3)]
    text = b"".join(docs)[:6000]
    for offset in range(64):
        assert_same(name, text[offset:], tiers=("auto",))
    for batch in (1, 2, 63, 64, 65, 100, 127, 128, 1000):
        assert_same(name, text, batch=batch)


# A text's last bytes, fewer than 64, are one block over a zero-padded copy (walk's tail block): every length of
# text from 0 to 130 bytes, cut from documents of each corpus and from the edge cases (so that the text ends inside
# every kind of piece and inside a character), and the share of a short text the tail blocks split themselves.
@pytest.mark.parametrize("name", PRESETS)
def test_every_text_length_up_to_two_blocks(name):
    texts = [t.encode("utf-8", "surrogatepass") for c in CORPORA for t in corpus(c, 4)]
    texts.append(b"".join(EDGE_TAILS) + b"a  b\t\t\nc's 1234 ")
    for text in texts:
        for length in range(131):
            assert_same(name, text[:length], tiers=("auto",))
    if X86:
        short = b"The quick brown fox, 12345 times: it's over the lazy dog!"
        assert 0.5 <= core.pretok_split_ends(name, short)[1] / len(short) < 1


# Blocks made of one lead byte's characters: the AVX2 tier classifies the leads of a family's uniform lead sets
# (Cyrillic's D0, CJK's E5-E8, ...) by a nibble lookup, the rest one by one. Every 2- and 3-byte lead's characters back
# to back (a run longer than a block), between spaces every few characters, and mixed with another lead's, at each
# offset of a block; the sets are built from the tables, so a wrong one shows as a wrong piece here.
def _lead_chars(lead: int) -> list[bytes]:
    first = (lead & 0x1F) << 6 if lead < 0xE0 else max((lead & 0x0F) << 12, 0x800)
    last = first + (64 if lead < 0xE0 else 0x1000)
    return [chr(c).encode("utf-8", "surrogatepass") for c in range(first, min(last, 0xD800 if lead == 0xED else last))]


@pytest.mark.parametrize("name", PRESETS)
def test_runs_of_one_lead_byte(name):
    for lead in range(0xC2, 0xF0):
        chars = _lead_chars(lead)
        step = max(1, len(chars) // 97)  # about a hundred characters of each lead, spread over its range
        some = chars[::step]
        other = _lead_chars(0xD0 if lead != 0xD0 else 0xE6)[::step][: len(some)]
        for pad in (0, 1, 2, 31, 63):
            assert_same(name, b"x" * pad + b"".join(some))
            assert_same(name, b"x" * pad + b" ".join(b"".join(some[i : i + 5]) for i in range(0, len(some), 5)))
            assert_same(name, b"x" * pad + b"".join(a + b for a, b in zip(some, other, strict=False)))


# Pieces that end where a block might: whitespace runs (with and without newlines) longer than a block, contractions
# and digit runs cut by the edge, newlines after punctuation, non-ASCII letters, digits and spaces just past it.
EDGE_TAILS = (b"'ll", b"'s", b"'S", b"'Re", b"'v", b"'", b"  x", b"\t\tx", b" \n x", b"\n\n", b".\n\n ", b".\r\n\tx",
              b"1234567", b"12 34", b"\xc3\xa9t\xc3\xa9", b" \xe2\x80\x80x", b"\xd9\xa2\xd9\xa31", b"a\xcc\x81b",
              b"\xff\xfe", b"\xe2\x80", b" .(", b"x\x0b\x0cy", b"\x1c\x1d")  # fmt: skip
EDGE_RUNS = (b" ", b"\n", b"\t", b"a", b"1", b".", b" \n")


@pytest.mark.parametrize("name", PRESETS)
def test_block_edges(name):
    filler = b"ab cd, ef's 12. " * 10
    for pad in range(0, 140):
        for tail in EDGE_TAILS:
            assert_same(name, filler[:pad] + tail + filler, tiers=("auto",))
            assert_same(name, filler[:pad] + tail, tiers=("auto",))  # the text ends there
    for run in EDGE_RUNS:
        for count in (62, 63, 64, 65, 127, 128, 129, 200):
            for after in (b"x", b".", b"1", b"\n", b"'s", b"\xc3\xa9", b""):
                assert_same(name, b"a" + run * count + after + b" tail of some words", tiers=("auto",))


# The o200k family's letter cases above ASCII (`U*W+|U+W*`, which backtracks over letters of both cases): every word
# of three characters from upper (Lu, Lt), lower (Ll), both (Lm, Lo), 2- and 3-byte, marks among them, after each
# prefix and a contraction, ended by each kind of character, at offsets that put it across a block's edge.
CASE_CHARS = ("A", "a", "Д", "д", "ǅ", "ʰ", "中", "ẞ", "ꞵ", "々", "\u0301")
CASE_PREFIXES = ("", " ", "-", "'s", "x's", "\u3001")
CASE_ENDS = ("", " ", ".", "1", "'s", "'S", "\n")


@pytest.mark.parametrize("name", [p for p in PRESETS if p.startswith("o200k")])
def test_letter_cases_of_the_o200k_family(name):
    import itertools

    words = ["".join(w) for w in itertools.product(CASE_CHARS, repeat=3)]
    for prefix in CASE_PREFIXES:
        for end in CASE_ENDS:
            text = " ".join(prefix + w + end for w in words).encode()
            for pad in (0, 1, 2, 5, 31, 62, 63):
                assert_same(name, b"." * pad + text, tiers=("auto",))


# The o200k family's marks (\p{M}): letters of both cases in `U*W+|U+W*`, but also in the prefix
# `[^\r\n\p{L}\p{N}]?` and in ` ?[^\s\p{L}\p{N}]+`, where they continue an O run's piece (`..\u0301` is one piece,
# `.\u0301a` another: the O starts the letters' piece as their prefix). Marks of each kind (Mn, Mc, Me; 2 and 3 bytes),
# one or two, after each kind of character and O run (alone, after a space, after letters, a newline's absorbed
# slashes), then each kind of character, at offsets that put them across a block's edge.
MARKS = ("\u0301", "\u0903", "\u20dd", "\u0301\u0308", "\u0903\u0301")
MARK_BEFORE = ("", "a", "A", "ʰ", "中", " ", "  ", "\t", "\n", "1", ".", "..", " .", "  .", "x.", "1.", "\n.",
               "、", "x、", " 、", ".、", "、.", "\x01", ".\n/", ".\n/.", ".\n//", "./", "/", "'", "x'", "x's", " '",
               "-", "--", "x--", "\u0301.")  # fmt: skip
MARK_AFTER = ("", "a", "A", "ʰ", "中", "д", ".", "..", " ", "\n", "1", "'s", "\u3000", "\uff11")


@pytest.mark.parametrize("name", [p for p in PRESETS if p.startswith("o200k")])
def test_marks_of_the_o200k_family(name):
    words = [b + m + a for b in MARK_BEFORE for m in MARKS for a in MARK_AFTER]
    for sep in (" ", "x", "."):
        text = sep.join(words).encode()
        for pad in (0, 1, 2, 31, 62, 63):
            assert_same(name, b"." * pad + text)


# Letter runs longer than a block (text written without spaces: Chinese, Japanese, Thai; long words), which the block
# splitter follows from block to block: each script's letters (2-, 3- and 4-byte, E0 and ED leads, marks joining them),
# after each kind of prefix, ended by each kind of character (ASCII and wide digits and spaces, punctuation, a change
# of deepseek-v3's CJK zone, an invalid byte, a contraction, a mark, the end of the text).
RUN_LETTERS = ("д", "Ω", "中", "あ", "ア", "한", "क", "\U00020000", "é", "a", "日本語のテキスト", "ab中д", "e\u0301",
               "ก", "\u05d0")  # fmt: skip
RUN_PREFIXES = ("", " ", "「", "-", "\n", "\u3000", "'", "1")
RUN_ENDS = ("", "1", "\u0662", "\uff11", " ", "\u3000", "\t", "、", ".", "д", "中", "あ", "\udcff", "'s", "\n",
            "\u0301", "\U0001f600", "-a")  # fmt: skip


def run_cases(lengths: tuple[int, ...]) -> list[bytes]:
    cases = []
    for letters in RUN_LETTERS:
        for length in lengths:
            for prefix in RUN_PREFIXES:
                for end in RUN_ENDS:
                    case = prefix + letters * (length // len(letters) + 1) + end
                    cases.append(case.encode("utf-8", "surrogateescape"))  # \udcff: the byte 0xFF
    return cases


@pytest.mark.parametrize("name", PRESETS)
def test_letter_runs_longer_than_a_block(name):
    cases = run_cases((21, 22, 23, 65, 130))
    for pad in (0, 1, 2, 33, 63):
        assert_same(name, b"x" * pad + b" ok. ".join(cases), tiers=("auto",))
    for case in cases[:: len(RUN_ENDS) * len(RUN_PREFIXES) - 1]:  # a run that ends the text, every alignment
        for pad in range(64):
            assert_same(name, b". " * (pad // 2) + b"." * (pad % 2) + case, tiers=("auto",))


PARTS = st.sampled_from(
    [b"a", b"Z", b"word", b"'", b"'s", b"'ll", b"'VE", b"'d", b" ", b"  ", b"\t", b"\n", b"\r", b"\r\n", b"\x0b",
     b"\x0c", b"\x1c", b"1", b"123", b"4567", b".", b"(", b"...", b"/", b"\xc3\xa9", b"\xc3\x89", b"\xc5\xbf",
     b"\xe2\x80\xa8", b"\xc2\xa0", b"\xe3\x80\x80", b"\xd9\xa2", b"\xcc\x81", b"\xe2\x84\xaa", b"\xf0\x9f\x98\x80",
     b"\xff", b"\x80", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x00", "中文".encode(), "あア".encode(),
     "한".encode(), "д".encode(), "क".encode(), "、".encode(), "\uff11".encode(), "\U00020000".encode(),
     b"\xe0\x80\xaf", b"\xc1\xbf", b"\xe0\xa4\x95", b"\xed\x9f\xbf", b"\xe4\xb8",
     # the o200k family's letter cases above ASCII: upper (Lu, Lt), lower (Ll), both (Lm, Lo), in 2 and 3 bytes
     "Д".encode(), "Σσς".encode(), "ǅ".encode(), "ʰ".encode(), "々".encode(), "ẞ".encode(), "ꞵ".encode(),
     "ᾈ".encode(), "ǅa".encode(), "Aʰ".encode(), "ʰA".encode(), "中A".encode(), "a中B".encode(), "é\u0301".encode()]
)  # fmt: skip


@pytest.mark.parametrize("name", PRESETS)
@settings(max_examples=1500 if FULL else 150, deadline=None)
@given(parts=st.lists(PARTS, min_size=1, max_size=160), pad=st.integers(0, 63), batch=st.sampled_from([64, 70, 256]))
def test_random_utf8_and_invalid_bytes(name, parts, pad, batch):
    assert_same(name, b"x " * (pad // 2) + b"." * (pad % 2) + b"".join(parts), batch=batch)


@pytest.mark.parametrize("name", PRESETS)
@settings(max_examples=500 if FULL else 60, deadline=None)
@given(data=st.binary(min_size=60, max_size=400))
def test_random_bytes(name, data):
    assert_same(name, data)
