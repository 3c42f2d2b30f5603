"""The streaming decoder fed what a serving process may see: random ids, ids out of range or not ids at all, and ids
that split 4-byte characters at every position. Promise: output over any split equals ``decode(ids,
errors="replace")``, nothing is emitted before its character is complete, a bad id raises ValueError naming it and
leaves the decoder as it was. Both backends."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from conftest import ours_openai
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe_core import StreamingDecoder, Tokenizer

from .lib import FULL

AREA = "streaming decoder"
BACKENDS = ("native", "python")
FOUR_BYTE = ["😀", "𝄞", "\U00010000", "\U0010ffff", "🤷🏽\u200d♀️", "a😀b", "日本😀語", "😀😀😀"]


def tokenizer(backend: str) -> Tokenizer:
    return pickle.loads(pickle.dumps(ours_openai("cl100k"))).use_backend(backend)


def byte_ids(tok: Tokenizer, data: bytes) -> list[int]:
    """One single-byte token per byte: the finest split a model can produce."""
    return [tok.token_id(bytes([b])) for b in data]


def complete_prefix(data: bytes) -> str:
    """The text of the longest prefix that ends on a complete character (what may have been emitted)."""
    for cut in range(len(data), max(-1, len(data) - 4), -1):
        try:
            return data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    raise AssertionError(f"not a prefix of valid UTF-8: {data!r}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_ids_splitting_four_byte_characters_at_every_position(backend, reliability):
    tok = tokenizer(backend)
    splits = 0
    for text in FOUR_BYTE:
        data = text.encode()
        ids = byte_ids(tok, data)
        dec = StreamingDecoder(tok)  # one id at a time: output so far == the complete characters so far
        out = ""
        for k, token in enumerate(ids, start=1):
            out += dec.step(token)
            assert out == complete_prefix(data[:k]) and dec.pending == data[len(out.encode()) : k]
        assert out + dec.flush() == text
        for i in range(len(ids) + 1):  # every split in two and in three parts
            for j in range(i, len(ids) + 1):
                dec = StreamingDecoder(tok)
                parts = [dec.feed(ids[:i]), dec.feed(ids[i:j]), dec.feed(ids[j:]), dec.flush()]
                assert "".join(parts) == text and "\ufffd" not in "".join(parts)
                assert parts[0] == complete_prefix(data[:i])
                splits += 1
        for cut in range(1, len(data)):  # the stream ends inside a character: U+FFFD at flush, not before
            dec = StreamingDecoder(tok)
            head = dec.feed(ids[:cut])
            assert head == complete_prefix(data[:cut]) and dec.flush() == tok.decode(ids[:cut])[len(head) :]
            assert dec.pending == b"" and dec.feed(byte_ids(tok, b"ok")) == "ok"  # flushed: ready for a new stream
            splits += 1
    reliability.row(AREA, f"{backend}: {len(FOUR_BYTE)} texts of 4-byte characters as one token per byte, split in "
                    "1, 2 and 3 parts at every position, and cut inside each character",
                    "output equals the text; nothing is emitted before its character completes (checked after "
                    "every id); a stream ending inside a character gives U+FFFD at flush, then the decoder is "
                    "reusable", inputs=splits)  # fmt: skip


BAD_IDS = [-1, 100_256 + 21, 100_261, 2**31, 2**32 + 5, 2**63, 2**64, 1.0, "1", None, b"1", np.uint64(2**63)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_ids_raise_naming_them_and_leave_the_decoder_as_it_was(backend, reliability):
    tok = tokenizer(backend)
    euro = byte_ids(tok, "€".encode())
    for bad in BAD_IDS:
        for call in ("step", "feed"):
            dec = StreamingDecoder(tok)
            assert dec.step(euro[0]) == ""
            before = dec.pending
            integer = isinstance(bad, (int, np.integer))  # a non-integer is a TypeError, a missing id a ValueError
            expected = (ValueError, "not in this vocabulary") if integer else (TypeError, "must be integers")
            with pytest.raises(expected[0], match=expected[1]) as err:
                dec.step(bad) if call == "step" else dec.feed([euro[1], bad, euro[2]])
            if call == "step":
                assert str(bad) in str(err.value) or repr(bad) in str(err.value), err.value
            assert dec.pending == before, f"{call}({bad!r}) changed the decoder's state"
            assert dec.feed(euro[1:]) + dec.flush() == "€"
    numpy_ids = np.asarray(tok.encode("naïve ☕"), dtype=np.int64)
    dec = StreamingDecoder(tok)
    assert "".join(dec.step(i) for i in numpy_ids) + dec.flush() == "naïve ☕"  # a model's ids are numpy ints
    reliability.row(
        AREA,
        f"{backend}: {len(BAD_IDS)} bad ids (negative, in a gap of the vocabulary, past its end, "
        "2^31, 2^63, 2^64, a float, strings, None, numpy uint64) fed by step() and inside feed()",
        "ValueError naming the id (TypeError for a non-integer); the decoder keeps its held-back bytes "
        "and goes on as if the call never happened; numpy integer ids are ids",
        inputs=2 * len(BAD_IDS),
    )


def _is_token(tok: Tokenizer, token_id: int) -> bool:
    try:
        tok.token_bytes(token_id)
    except ValueError:
        return False
    return True


def test_random_ids_over_random_splits_equal_decode(reliability):
    """Random valid ids (specials included) of three vocabularies, cut at random points and fed with step() and
    feed(): the same text as decode(errors='replace'), on both backends."""
    budget = 1500 if FULL else 150
    ran = []
    vocabularies = {p: ours_openai(p) for p in ("cl100k", "o200k", "r50k")}
    valid = {p: [i for i in range(t.n_vocab) if _is_token(t, i)] for p, t in vocabularies.items()}
    copies = {(p, b): pickle.loads(pickle.dumps(t)).use_backend(b) for p, t in vocabularies.items() for b in BACKENDS}

    @settings(max_examples=budget, deadline=None, derandomize=not FULL, suppress_health_check=[HealthCheck.too_slow])
    @given(preset=st.sampled_from(sorted(vocabularies)), data=st.data(), cuts=st.lists(st.integers(0, 400), max_size=8))
    def run(preset, data, cuts):
        ran.append(1)
        ids = data.draw(st.lists(st.sampled_from(valid[preset]), max_size=120))
        for backend in BACKENDS:
            tok = copies[preset, backend]
            expected = tok.decode(ids, errors="replace")
            points = sorted({0, len(ids), *(c % (len(ids) + 1) for c in cuts)})
            dec = StreamingDecoder(tok)
            fed = "".join(dec.feed(ids[a:b]) for a, b in zip(points, points[1:], strict=False)) + dec.flush()
            stepped = StreamingDecoder(tok)
            assert fed == "".join(stepped.step(i) for i in ids) + stepped.flush() == expected

    run()
    assert len(ran) >= budget // 2
    reliability.row(AREA, "random valid ids (specials included) of cl100k, o200k and r50k, cut at random points",
                    "feed() over any split and step() one by one both equal decode(ids, errors='replace'), "
                    "native and python", examples=len(ran), budget=budget, inputs=len(ran))  # fmt: skip
