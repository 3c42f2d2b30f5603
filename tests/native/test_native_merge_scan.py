"""The native short-piece merge kernel (merge_kernels.h merge_scan, pieces of up to 64 bytes) against the Python
reference and tiktoken on pieces made to stress its argmin and its shifts."""

from __future__ import annotations

import pickle
import random

import pytest
from conftest import CORPORA, adversarial_cases, corpus, ours_openai, tiktoken_openai
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe_core

SCAN_LIMIT = 64  # encoder.h kScanLimit: longer pieces take the heap kernel


def fresh(tok: bpe_core.Tokenizer, backend: str = "native") -> bpe_core.Tokenizer:
    """A copy with empty caches (every piece misses once, so the merge kernel runs)."""
    return pickle.loads(pickle.dumps(tok)).use_backend(backend)


def adversarial_pieces(preset: str) -> list[bytes]:
    """Pieces of at most SCAN_LIMIT bytes: the adversarial cases' pre-tokens, cut to length, and pieces made to
    stress the argmin and the shifts: one byte repeated (equal values of the same pair, leftmost first), short
    periods, every length up to the limit, multi-byte characters, random bytes."""
    tok = ours_openai(preset)
    pieces: set[bytes] = set()
    for _, value in adversarial_cases():
        errors = "surrogatepass" if isinstance(value, str) else "surrogateescape"  # lone surrogates; raw bytes
        text = value if isinstance(value, str) else value.decode("utf-8", errors)
        for piece in tok.pretokenizer.split(text):
            data = piece.encode("utf-8", errors)
            pieces.update(data[i : i + SCAN_LIMIT] for i in range(0, max(1, len(data)), SCAN_LIMIT))
    units = b"a ab aab abc 0 12 \xe4\xb8\x80 \xf0\x9f\x98\x80 \x00 \xff".split() + [b" ", b"\n", b"  \n"]
    for unit in units:
        for n in range(1, SCAN_LIMIT // len(unit) + 1):
            pieces.add((unit * n)[:SCAN_LIMIT])
    rng = random.Random(37)
    for n in range(2, SCAN_LIMIT + 1):
        for _ in range(8):
            pieces.add(bytes(rng.randrange(256) for _ in range(n)))
            pieces.add(bytes(rng.choice(b"aeinst ") for _ in range(n)))
    return sorted(pieces)


_PYTHON: dict[str, bpe_core.Tokenizer] = {}


def _python(preset: str) -> bpe_core.Tokenizer:
    if preset not in _PYTHON:
        _PYTHON[preset] = fresh(ours_openai(preset), "python")
    return _PYTHON[preset]


@pytest.mark.parametrize("preset", ["cl100k", "o200k"])
def test_short_pieces_merge_as_the_reference(preset):
    ours, ref = ours_openai(preset), _python(preset)
    pieces = adversarial_pieces(preset)
    assert len(pieces) > 2000
    assert max(map(len, pieces)) == SCAN_LIMIT
    for data in pieces:
        assert ours.encode_piece_bytes(data) == ref.encode_piece_bytes(data), (preset, data)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(min_size=2, max_size=SCAN_LIMIT))
def test_random_bytes_merge_as_the_reference(data):
    assert ours_openai("cl100k").encode_piece_bytes(data) == _python("cl100k").encode_piece_bytes(data)


def test_a_merge_list_vocabulary_merges_as_the_reference():
    """A trained vocabulary (merge ranks, not token ids: the value's rank and id differ) on its own text."""
    docs = corpus("en_bible_kjv", 60) + corpus("multi_udhr", 60)
    tok = bpe_core.train(bpe_core.count_chunks(docs, "cl100k"), 600, pretokenizer="cl100k")
    ours, ref = fresh(tok), fresh(tok, "python")
    pieces = {p.encode("utf-8")[:SCAN_LIMIT] for d in docs for p in tok.pretokenizer.split(d)}
    pieces.update(b"th" * n for n in range(1, 33))
    for data in sorted(pieces):
        assert ours.encode_piece_bytes(data) == ref.encode_piece_bytes(data), data


@pytest.mark.parametrize("preset", ["cl100k", "o200k"])
def test_cold_texts_encode_as_tiktoken(preset):
    """Whole texts through the piece table, cold (a fresh cache: every new piece goes through the kernel)."""
    ours = fresh(ours_openai(preset))
    texts = [t if isinstance(t, str) else t.decode("utf-8", "replace") for _, t in adversarial_cases()]
    texts += [d for name in CORPORA for d in corpus(name, 20)]
    texts += ["a" * n + " " + "ab" * n + " " + "\u4e00" * n for n in (7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65)]
    assert ours.encode_ordinary_batch(texts) == tiktoken_openai(preset).encode_ordinary_batch(texts, num_threads=1)
