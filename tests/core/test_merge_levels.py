"""One merge loop and one merge kernel serve both levels of BPE: the Python loop (bpe_core.model.merge_loop) over a
word model's alphabet equals the naive recount of tests/reference_trainer.py, and the kernel (merge_ids) over
supermerges equals the naive scan per step."""

from __future__ import annotations

import random

import pytest
from conftest import corpus
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_trainer import naive_apply_merges, naive_train, naive_train_runs

import bpe_core
from bpe_core.constants import TIE_BREAKS
from bpe_core.model.merge_loop import run_merge_loop
from bpe_core.model.merges import merge_ids
from bpe_core.superword import reference as sw

EXTRA = [b"ab", b"abab", b" the", b" cat", b"aa", b" the cat", b"ba"]
ALPHABET = [bytes([b]) for b in range(256)] + EXTRA
SYMBOLS = [97, 98, 32, *range(256, 256 + len(EXTRA))]
run_words = st.dictionaries(
    st.lists(st.sampled_from(SYMBOLS), min_size=0, max_size=9).map(tuple), st.integers(0, 1 << 40), max_size=30
)


@settings(max_examples=150, deadline=None)
@given(run_words, st.integers(0, 24), st.sampled_from(TIE_BREAKS), st.integers(0, 3))
def test_the_loop_over_an_alphabet_equals_the_naive_recount(words, n_tokens, tie_break, min_frequency):
    expected = naive_train_runs(words, ALPHABET, n_tokens, min_frequency=min_frequency, tie_break=tie_break)
    counts = {sw.run_key(w): n for w, n in words.items() if w}
    got = sw.train_supermerges_reference(counts, ALPHABET, n_tokens, min_frequency=min_frequency, tie_break=tie_break)
    assert got == expected


@pytest.mark.slow
def test_phase_two_on_a_word_model_equals_the_naive_recount():
    docs = corpus("en_bible_kjv", 400)
    for tie_break in TIE_BREAKS:
        word = bpe_core.train(bpe_core.count_chunks(docs, "cl100k"), 600, tie_break=tie_break, backend="python")
        alphabet = [word.token_bytes(i) for i in range(len(word.vocab))]
        counts = sw.count_runs(docs, word)
        expected = naive_train_runs(
            {tuple(sw.run_ids(k)): n for k, n in counts.items()}, alphabet, 40, tie_break=tie_break
        )
        assert sw.train_supermerges_reference(counts, alphabet, 40, tie_break=tie_break) == expected
        assert len(expected[0]) >= 40  # the check ran on real merges


@pytest.mark.slow
def test_phase_one_is_the_same_loop_over_the_bytes():
    counts = bpe_core.count_chunks(corpus("docs_python_rst", 200), "cl100k")
    words = [list(c) for c in sorted(counts) if len(c) >= 2]
    merges, token_bytes = run_merge_loop(words, [counts[bytes(w)] for w in words], 120, 2, "ids")
    assert [(token_bytes[a], token_bytes[b]) for a, b in merges] == naive_train(dict(counts), 256 + 120)


def test_the_kernel_over_supermerges_equals_the_naive_scan():
    rng = random.Random(7)
    for _ in range(300):
        ranked = [(rng.randrange(6), rng.randrange(6)) for _ in range(rng.randrange(1, 12))]
        results = [100 + i for i in range(len(ranked))]
        sup = sw.Supermerges(tuple(ranked), tuple(results), 100)
        run = [rng.randrange(6) for _ in range(rng.randrange(0, 90))]  # past SCAN_LIMIT: the heap too
        assert merge_ids(list(run), sup.pairs().__getitem__) == naive_apply_merges(run, ranked, results)
