"""The C++ decoder and streaming byte state against the pure-Python reference."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from conftest import FULL, corpus, ours_openai
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe_core

_TWINS: dict[str, bpe_core.Tokenizer] = {}


def pair(preset: str = "cl100k") -> tuple[bpe_core.Tokenizer, bpe_core.Tokenizer]:
    if preset not in _TWINS:
        _TWINS[preset] = pickle.loads(pickle.dumps(ours_openai(preset))).use_backend("python")
    return ours_openai(preset), _TWINS[preset]


# Ids of cl100k, special ids included; 100256 and the gap 100261-100275 are no tokens (bad ids are tested apart).
token_ids = st.integers(min_value=0, max_value=100_255) | st.sampled_from([100_257, 100_258, 100_276])


@settings(max_examples=1000 if FULL else 200, deadline=None)
@given(st.lists(token_ids, max_size=60))
def test_decode_bytes_equal(ids):
    ours, ref = pair()
    assert ours.decode_bytes(ids) == ref.decode_bytes(ids)
    assert ours.decode_bytes(tuple(ids)) == ref.decode_bytes(iter(ids))
    assert ours.decode(ids) == ref.decode(ids)


def test_decode_corpus_and_numpy_ids():
    ours, ref = pair("o200k")
    docs = corpus("multi_udhr", 40)
    for doc in docs:
        ids = ours.encode_ordinary(doc)
        assert ours.decode_bytes(ids) == ref.decode_bytes(ids) == doc.encode()
        assert ours.decode_bytes(np.asarray(ids, dtype=np.int64)) == doc.encode()


@pytest.mark.parametrize("bad", [[5, -1], [100_261], [1 << 40], [3, "x"], [2.0], [None]])
def test_bad_ids_raise_as_the_reference(bad):
    ours, ref = pair()
    error = ValueError if all(isinstance(i, int) for i in bad) else TypeError
    with pytest.raises(error) as theirs:
        ref.decode_bytes(bad)
    with pytest.raises(error) as mine:
        ours.decode_bytes(bad)
    assert str(mine.value) == str(theirs.value)


@settings(max_examples=600 if FULL else 120, deadline=None)
@given(
    st.lists(token_ids, max_size=40),
    st.data(),
    st.booleans(),
    st.sampled_from(["replace", "ignore", "surrogateescape"]),
)
def test_streaming_equal_step_by_step(ids, data, skip_special, errors):
    # Same text out of every call (not only in total), same pending bytes, over any split of the stream.
    ours, ref = pair()
    a = bpe_core.StreamingDecoder(ours, skip_special=skip_special, errors=errors)
    b = bpe_core.StreamingDecoder(ref, skip_special=skip_special, errors=errors)
    assert a._native is not None and b._native is None
    pos, out = 0, []
    while pos < len(ids):
        n = data.draw(st.integers(min_value=1, max_value=len(ids) - pos))
        if n == 1 and data.draw(st.booleans()):
            got, want = a.step(ids[pos]), b.step(ids[pos])
        else:
            got, want = a.feed(ids[pos : pos + n]), b.feed(ids[pos : pos + n])
        assert got == want
        assert a.pending == b.pending
        assert a.feed([]) == b.feed([]) == ""
        out.append(got)
        pos += n
    tail_a, tail_b = a.flush(), b.flush()
    assert tail_a == tail_b and a.pending == b"" == b.pending
    if not skip_special and errors == "replace":
        assert "".join(out) + tail_a == ours.decode(ids, errors="replace")


def test_streaming_errors_match_the_reference():
    ours, ref = pair()
    for tok in (ours, ref):
        dec = bpe_core.StreamingDecoder(tok)
        assert dec.step(9468) == ""  # the first bytes of a multi-byte character: held back
        with pytest.raises(ValueError, match="not in this vocabulary"):
            dec.step(100_261)
        fresh = bpe_core.StreamingDecoder(tok)
        assert fresh.step(np.int64(5)) == tok.decode([5])  # numpy ids (a model's output) are ids
        with pytest.raises(ValueError, match="not in this vocabulary"):
            dec.feed([1, -3])
    strict = [bpe_core.StreamingDecoder(tok, errors="strict") for tok in (ours, ref)]
    for dec in strict:
        dec.feed(ours.encode("ok"))
        with pytest.raises(UnicodeDecodeError):
            dec.feed([ours.encode_piece_bytes(b"\xff")[0]])
        assert dec.pending == b""
