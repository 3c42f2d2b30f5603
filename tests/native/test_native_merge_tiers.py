"""The short-piece merge kernel (merge_kernels.h merge_scan) in each instruction tier, forced: ids equal to the Python
reference and to tiktoken on adversarial pieces, whatever tier this CPU would choose by itself."""

from __future__ import annotations

import os
import pickle
import platform
import random

import pytest
from conftest import CORPORA, adversarial_cases, corpus, ours_openai, tiktoken_openai
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe_core
from bpe_core import native

core = native._core
TIERS = ("scalar", "avx2", "avx512")
X86 = platform.machine().lower() in ("x86_64", "amd64")
SCAN_LIMIT = 64  # encoder.h kScanLimit: longer pieces take the heap kernel


def reachable(tier: str) -> bool:
    return TIERS.index(tier) <= TIERS.index(core._merge_tier_best())


@pytest.fixture(params=TIERS)
def tier(request):
    """Each tier forced for one test, back to the CPU's best after it; a tier this CPU lacks is skipped, named."""
    if not reachable(request.param):
        pytest.skip(f"this CPU's best merge tier is {core._merge_tier_best()}: {request.param} cannot run here")
    core._set_merge_tier(request.param)
    assert core._merge_tier() == request.param
    yield request.param
    core._set_merge_tier("auto")


def test_the_best_tier_is_chosen_by_default_and_a_bad_one_is_refused():
    assert core._merge_tier_best() in (TIERS if X86 else ("scalar",))
    if not os.environ.get("BEAM_BPE_MERGE_TIER"):  # the override is for runs of a suite in one tier
        assert core._merge_tier() == core._merge_tier_best()
    core._set_merge_tier("auto")
    with pytest.raises(ValueError, match="tier 'sse9'"):
        core._set_merge_tier("sse9")
    assert core._merge_tier() == core._merge_tier_best()


def fresh(tok: bpe_core.Tokenizer, backend: str = "native") -> bpe_core.Tokenizer:
    """A copy with empty caches (every piece misses once, so the merge kernel runs)."""
    return pickle.loads(pickle.dumps(tok)).use_backend(backend)


def adversarial_pieces(preset: str) -> list[bytes]:
    """Pieces of at most SCAN_LIMIT bytes (the scan kernel's): the adversarial cases' pre-tokens, cut to length, and
    pieces made to stress the argmin and the shifts: one byte repeated (equal values of the same pair), short
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


@pytest.mark.parametrize("preset", ["cl100k", "o200k"])
def test_each_tier_merges_pieces_as_the_reference(tier, preset):
    ours, ref = ours_openai(preset), fresh(ours_openai(preset), "python")
    pieces = adversarial_pieces(preset)
    assert len(pieces) > 2000
    assert max(map(len, pieces)) == SCAN_LIMIT
    for data in pieces:
        assert ours.encode_piece_bytes(data) == ref.encode_piece_bytes(data), (tier, preset, data)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(min_size=2, max_size=SCAN_LIMIT))
def test_each_tier_merges_random_bytes_as_the_reference(data):
    ours, ref = ours_openai("cl100k"), _python("cl100k")
    expected = ref.encode_piece_bytes(data)
    for name in TIERS:
        if reachable(name):
            core._set_merge_tier(name)
            try:
                assert ours.encode_piece_bytes(data) == expected, (name, data)
            finally:
                core._set_merge_tier("auto")


_PYTHON: dict[str, bpe_core.Tokenizer] = {}


def _python(preset: str) -> bpe_core.Tokenizer:
    if preset not in _PYTHON:
        _PYTHON[preset] = fresh(ours_openai(preset), "python")
    return _PYTHON[preset]


def test_each_tier_merges_a_merge_list_vocabulary_as_the_reference(tier):
    """A trained vocabulary (merge ranks, not token ids: the value's rank and id differ) on its own text."""
    docs = corpus("en_bible_kjv", 60) + corpus("multi_udhr", 60)
    tok = bpe_core.train(bpe_core.count_chunks(docs, "cl100k"), 600, pretokenizer="cl100k")
    ours, ref = fresh(tok), fresh(tok, "python")
    pieces = {p.encode("utf-8")[:SCAN_LIMIT] for d in docs for p in tok.pretokenizer.split(d)}
    pieces.update(b"th" * n for n in range(1, 33))
    for data in sorted(pieces):
        assert ours.encode_piece_bytes(data) == ref.encode_piece_bytes(data), (tier, data)


@pytest.mark.parametrize("preset", ["cl100k", "o200k"])
def test_each_tier_encodes_as_tiktoken(tier, preset):
    """Whole texts through the piece table, cold (a fresh cache: every new piece goes through the kernel)."""
    ours = fresh(ours_openai(preset))
    texts = [t if isinstance(t, str) else t.decode("utf-8", "replace") for _, t in adversarial_cases()]
    texts += [d for name in CORPORA for d in corpus(name, 20)]
    texts += ["a" * n + " " + "ab" * n + " " + "\u4e00" * n for n in (7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65)]
    assert ours.encode_ordinary_batch(texts) == tiktoken_openai(preset).encode_ordinary_batch(texts, num_threads=1)
