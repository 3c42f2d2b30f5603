"""Decoding and the streaming decoder: output over any split equals decode(ids, errors="replace")."""

from __future__ import annotations

import pickle

import pytest
from conftest import ours_openai
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe_core
from bpe_core import StreamingDecoder


def test_decode_and_token_bytes():
    tok = ours_openai("cl100k")
    assert tok.decode([15339, 1917]) == "hello world"
    assert tok.decode_bytes([15339, 1917]) == b"hello world"
    assert tok.token_bytes(1917) == b" world"
    assert tok.token_bytes(100257) == b"<|endoftext|>"


@pytest.mark.parametrize("bad", [[-1], [10**9], [100256 + 100]])
def test_unknown_ids_raise_a_value_error_naming_them(bad):
    tok = ours_openai("cl100k")
    with pytest.raises(ValueError, match="not in this vocabulary"):
        tok.decode(bad)
    with pytest.raises(ValueError, match=str(bad[-1])):
        tok.token_bytes(bad[-1])


@pytest.mark.parametrize("backend", ["python", "native"])
def test_decode_names_non_integers_and_ids_without_a_token(backend):
    np = pytest.importorskip("numpy")
    tok = pickle.loads(pickle.dumps(ours_openai("cl100k"))).use_backend(backend)  # a copy: conftest shares its own
    for bad in ([1, "x"], ["1"], [2.0], [None]):
        with pytest.raises(TypeError, match="must be integers"):
            tok.decode(bad)
    with pytest.raises(ValueError, match=r"not in this vocabulary: \[100256\] \(id 100256 has no token"):
        tok.decode([15339, 100256])  # cl100k's hole: inside the range of ids
    assert tok.decode_bytes([np.int64(15339), np.uint32(1917)]) == b"hello world"
    assert tok.decode_bytes(iter([np.int32(15339), 1917])) == b"hello world"
    with pytest.raises(ValueError, match=r"not in this vocabulary: \[-1\]"):
        tok.decode_bytes([np.int64(15339), np.int64(-1)])  # the numpy id is valid, the negative one named


def test_gaps_in_ids_are_unknown():
    tok = ours_openai("cl100k")  # cl100k leaves 100261..100275 free
    with pytest.raises(ValueError, match="100261"):
        tok.decode([100261])


def _split_points(draw_list, n):
    return sorted({p for p in draw_list if 0 < p < n})


byte_soup = st.lists(
    st.sampled_from(
        [
            b"\xe6",
            b"\x97",
            b"\xa5",
            b"a",
            b"\xef\xbf\xbd",
            b"\xf0\x9f",
            b"\x98\x80",
            b"\xc3",
            b"\xa9",
            b"\xff",
            b" ",
            b"\xed\xa0\x80",
        ]
    ),
    max_size=30,
)


@settings(max_examples=400, deadline=None)
@given(
    text=st.text(max_size=60),
    soup=byte_soup,
    cuts=st.lists(st.integers(0, 200), max_size=10),
    preset=st.sampled_from(["cl100k", "o200k", "r50k"]),
)
def test_streaming_output_over_any_split_equals_decode(text, soup, cuts, preset):
    tok = ours_openai(preset)
    ids = tok.encode_ordinary(text) + tok.encode_ordinary(b"".join(soup))
    ids += [tok.special_tokens["<|endoftext|>"]]
    expected = tok.decode(ids, errors="replace")
    points = [0, *_split_points(cuts, len(ids)), len(ids)]
    dec = StreamingDecoder(tok)
    out = "".join(dec.feed(ids[a:b]) for a, b in zip(points, points[1:], strict=False)) + dec.flush()
    assert out == expected
    one_by_one = StreamingDecoder(tok)
    assert "".join(one_by_one.step(i) for i in ids) + one_by_one.flush() == expected


def test_streaming_holds_back_incomplete_utf8_and_emits_as_soon_as_complete():
    tok = ours_openai("cl100k")
    euro = [tok.token_id(bytes([b])) for b in "€".encode()]  # three single-byte tokens
    dec = StreamingDecoder(tok)
    assert dec.step(euro[0]) == "" and dec.step(euro[1]) == ""
    assert dec.pending == "€".encode()[:2]
    assert dec.step(euro[2]) == "€"
    # A sequence that can no longer complete becomes U+FFFD at once, not at flush.
    assert dec.step(euro[0]) == ""
    assert dec.step(tok.token_id(b"a")) == "\ufffda"
    # A real U+FFFD in the text passes through untouched.
    assert dec.feed(tok.encode("x\ufffdy")) == "x\ufffdy"
    assert dec.step(euro[0]) == "" and dec.flush() == "\ufffd"


def test_streaming_can_skip_special_tokens():
    tok = ours_openai("cl100k")
    ids = tok.encode("a<|endoftext|>b", allowed_special="all")
    assert StreamingDecoder(tok).feed(ids) == "a<|endoftext|>b"
    dec = StreamingDecoder(tok, skip_special=True)
    assert dec.feed(ids[:2]) + dec.step(ids[2]) + dec.flush() == "ab"


def test_streaming_rejects_unknown_ids():
    with pytest.raises(ValueError, match="not in this vocabulary"):
        StreamingDecoder(ours_openai("r50k")).step(10**7)


def test_top_level_api_is_small_and_explicit():
    for name in ("Tokenizer", "StreamingDecoder", "train", "count_chunks", "PreTokenizer", "TokenizerFileError"):
        assert hasattr(bpe_core, name)
