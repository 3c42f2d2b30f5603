"""The str -> UTF-8 transcoder of the native encoder (_native/transcode.cpp, batch.h's transcode): CPython stores a str
as UCS-1, UCS-2 or UCS-4 code units, and the encoder turns them into UTF-8 itself, 16 or 32 units at a time in the
VBMI2 tier. Its bytes are checked against CPython's own encoder: the ids of a str decode to exactly
``str.encode("utf-8")`` (byte-level BPE round-trips), in both tiers, for every code point, at every alignment."""

from __future__ import annotations

import random

import pytest
from conftest import corpus, ours_openai

from bpe_core import native


@pytest.fixture(params=["auto", "scalar"])
def transcode_tier(request):
    """The transcoder in each tier (``auto``: VBMI2 where this CPU has it), set back afterwards."""
    before = native._core.transcode_tier()
    native._core.transcode_tier(request.param)
    yield native._core.transcode_tier()
    native._core.transcode_tier("auto" if before == "vbmi2" else before)


def bmp_text(lo: int, hi: int) -> str:
    return "".join(chr(c) for c in range(lo, hi) if not 0xD800 <= c <= 0xDFFF)


def mixed_texts() -> list[str]:
    """Texts of every width and mix: Latin-1 (UCS-1) with ASCII between, every BMP code point (UCS-2) in runs and
    mixed with ASCII at each offset of a 16- and 32-unit step, astral characters (UCS-4), real multilingual text."""
    rng = random.Random(7)
    texts = []
    latin1 = bmp_text(0x80, 0x100)
    for k in range(40):  # UCS-1: accented letters among ASCII, each step offset
        texts.append("a" * k + "".join(rng.choice(latin1 + "abc ") for _ in range(300)))
    texts.append(latin1 * 3)
    for lo in range(0x80, 0x10000, 0x1000):  # UCS-2: every code point, 4096 at a time
        texts.append(bmp_text(lo, lo + 0x1000))
    pools = ["абв где", "日本語のテキスト。", "αβγ ὀδύσσεια", "한국어 문장", "x\u07ff\u0800\uffff\u0080 "]
    for k in range(34):  # mixes of 1-, 2- and 3-byte characters, every offset of a step, every length near one
        pool = pools[k % len(pools)]
        texts.append("z" * (k % 17) + "".join(rng.choice(pool) for _ in range(k * 7 + 1)))
    texts.append("🙂 ok абв 日本" * 50)  # UCS-4 (the scalar loop in both tiers)
    texts += [d[:20_000] for d in corpus("multi_udhr", 60)]
    return texts


def test_str_ids_decode_to_cpythons_utf8_in_each_tier(transcode_tier):
    tok = ours_openai("cl100k")
    texts = mixed_texts()
    ids, offsets = tok.encode_ordinary_flat(texts, num_threads=1)
    bounds = offsets.tolist()
    for i, text in enumerate(texts):
        got = tok.decode_bytes(ids[bounds[i] : bounds[i + 1]].tolist())
        assert got == text.encode("utf-8"), f"{transcode_tier}: text {i} ({text[:20]!r}...)"


def test_tiers_give_the_same_ids_as_the_utf8_bytes(transcode_tier):
    """A str and its UTF-8 bytes give the same ids (bytes are read as they are, never transcoded)."""
    tok = ours_openai("o200k")
    texts = mixed_texts()[::3]
    from_str = tok.encode_ordinary_flat(texts, num_threads=1)
    from_bytes = tok.encode_ordinary_flat([t.encode("utf-8") for t in texts], num_threads=1)
    assert from_str[0].tolist() == from_bytes[0].tolist()
    assert from_str[1].tolist() == from_bytes[1].tolist()


def test_surrogates_keep_their_rules_in_each_tier(transcode_tier):
    """A lone surrogate in a whole text is replaced as tiktoken does, wherever it falls in a wide step; a surrogate
    escape (U+DC80..U+DCFF) in a segment is its byte."""
    tok = ours_openai("cl100k")
    for at in (0, 1, 15, 16, 17, 31, 32, 40):
        base = "日本語" * 20
        text = base[:at] + "\ud800" + base[at:]
        want = tok.encode_ordinary(base[:at] + "\ufffd" + base[at:])
        assert tok.encode_ordinary(text) == want, (transcode_tier, at)
        # bytes with a special token are searched as their surrogateescape decoding: a str segment holding U+DCFF
        head = base[:at].encode() + b"\xff" + base[at:].encode()
        got = tok.encode(head + b"<|endoftext|>" + b"\xfe x", allowed_special="all")
        want = tok.encode_ordinary(head) + [tok.special_tokens["<|endoftext|>"]] + tok.encode_ordinary(b"\xfe x")
        assert got == want, (transcode_tier, at)


def test_a_refused_tier():
    with pytest.raises(ValueError, match="scalar"):
        native._core.transcode_tier("avx9")
