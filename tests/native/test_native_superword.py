"""Phase 2 of superword tokenizers: the native merge loop over runs against the slow reference, merge for merge."""

from __future__ import annotations

import warnings

import pytest
from conftest import CORPORA, FULL, corpus
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe_core
from bpe_core.constants import TIE_BREAKS
from bpe_core.superword import reference as sw
from bpe_core.train.trainer import superword_from_runs

# An alphabet with multi-byte tokens whose concatenations are also tokens (b"a" + b"b" = b"ab", b"ab" + b"ab" =
# b"abab"), so that merges reusing an existing id, repeated pairs and ties are all common.
EXTRA = [b"ab", b"abab", b" the", b" cat", b"aa", b" the cat", b"ba"]
ALPHABET = [bytes([b]) for b in range(256)] + EXTRA
SYMBOLS = [97, 98, 32, *range(256, 256 + len(EXTRA))]
runs = st.lists(st.sampled_from(SYMBOLS), min_size=0, max_size=9).map(sw.run_key)
run_dicts = st.dictionaries(runs, st.integers(min_value=0, max_value=1 << 40), max_size=30)


@settings(max_examples=1000 if FULL else 150, deadline=None)
@given(run_dicts, st.integers(0, 24), st.sampled_from(TIE_BREAKS), st.integers(0, 3))
def test_hypothesis_runs_same_merges(run_counts, n_tokens, tie_break, min_frequency):
    kwargs = dict(min_frequency=min_frequency, tie_break=tie_break)
    ref = sw.train_supermerges_reference(run_counts, ALPHABET, n_tokens, **kwargs)
    ours = sw.train_supermerges(run_counts, ALPHABET, n_tokens, backend="native", **kwargs)
    assert ours == ref
    assert len(ref[1]) - len(ALPHABET) <= n_tokens


def test_reused_bytes_make_no_new_token():
    """(a, b) gives the bytes of the existing token "ab" and (ab, ab) those of "abab": both merges reuse the ids,
    neither is a new token, and the loop runs out of pairs before its one new token."""
    counts = {sw.run_key([97, 98]): 5, sw.run_key([256, 97, 98]): 3}
    for backend in ("python", "native"):
        merges, vocab = sw.train_supermerges(counts, ALPHABET, 1, backend=backend)
        assert merges == [(97, 98), (256, 256)]
        assert vocab == ALPHABET


def test_runs_with_an_id_outside_the_word_model_are_refused():
    with pytest.raises(ValueError, match="not a token of the word model"):
        sw.train_supermerges({sw.run_key([97, 10_000]): 2}, ALPHABET, 3, backend="native")
    with pytest.raises(ValueError, match="outside the word model"):
        sw.train_supermerges({sw.run_key([97, 10_000]): 2}, ALPHABET, 3, backend="python")


SIZES = [(600, 60), (900, 30)] if not FULL else [(600, 60), (900, 30), (2000, 300)]


@pytest.mark.parametrize("tie_break", TIE_BREAKS)
@pytest.mark.parametrize("name", CORPORA)
def test_corpus_runs_same_merges(name, tie_break):
    """Runs counted on a sample of each shared corpus (1 MB under BEAM_BPE_FULL=1), several N."""
    docs, size = [], 0
    for doc in corpus(name, 5000):
        docs.append(doc)
        size += len(doc)
        if size >= (1 << 20 if FULL else 60_000):
            break
    for word_size, n_tokens in SIZES[:1] if tie_break != "ids" else SIZES:
        word = bpe_core.train(bpe_core.count_chunks(docs, "cl100k"), word_size, tie_break=tie_break)
        alphabet = [word.token_bytes(i) for i in range(len(word.vocab))]
        run_counts = sw.count_runs(docs, word)
        ref = sw.train_supermerges_reference(run_counts, alphabet, n_tokens, tie_break=tie_break)
        assert sw.train_supermerges(run_counts, alphabet, n_tokens, tie_break=tie_break, backend="native") == ref


def _superword(docs, word_size, n_tokens, rule, tie_break="ids"):
    """(word model, superword tokenizer on it, run counts): phase 2 trained on the runs of docs."""
    word = bpe_core.train(bpe_core.count_chunks(docs, "cl100k"), word_size, tie_break=tie_break)
    run_counts = sw.count_runs(docs, word, rule)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (fewer supermerges than asked for on tiny texts)
        tok = superword_from_runs(word, run_counts, n_tokens, rule=rule, tie_break=tie_break)
    return word, tok, run_counts


def _lists(ids, offsets):
    return [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


def _reference(word, tok, docs):
    supermerges = tok.superword
    return [sw.encode_reference(word, supermerges, d) for d in docs]


@pytest.mark.parametrize("rule", sw.RULES)
@pytest.mark.parametrize("name", CORPORA)
def test_native_pass_equals_reference(name, rule):
    """The runs counted natively, and the encoder with the second level attached (runs merged as the word ids are
    written), against the reference on documents of each corpus: trained on the first 60, checked on the next 60
    (every document under BEAM_BPE_FULL=1), on one thread and on three."""
    docs = corpus(name, 100_000 if FULL else 120)
    word, tok, run_counts = _superword(docs[:60], 700, 150, rule)
    plain_pass = sw.SuperwordPass(word, None, rule)
    assert plain_pass.native_pass is not None
    assert plain_pass.count_runs(docs[:60]) == run_counts
    check = docs[60:]
    assert tok._encoder().has_superword
    expected = _reference(word, tok, check)
    assert _lists(*tok.encode_ordinary_flat(check, num_threads=1)) == expected
    assert _lists(*tok.encode_ordinary_flat(check, num_threads=3)) == expected
    assert tok.encode_ordinary_batch(check) == expected
    assert sum(map(len, expected)) < len(word.encode_ordinary_flat(check)[0])  # the supermerges fire


def test_long_run_merges_by_rank():
    """A run longer than the scan limit (the heap path) gives the reference's ids."""
    docs = ["the cat sat on the mat " * 40, "a b a b a b a b " * 30]
    word, tok, _ = _superword(docs, 300, 40, "letter-run")
    assert _lists(*tok.encode_ordinary_flat(docs, num_threads=1)) == _reference(word, tok, docs)


def test_runs_close_at_added_tokens_the_core_cuts_at():
    """A word model whose added tokens the core finds itself (literals): a run ends at each added token, in the
    tagged batches and in texts cut into many short segments, as in the reference."""
    docs = ["the cat sat on the mat and the cat sat on the hat " * 20]
    _, tok, _ = _superword(docs, 300, 40, "letter-run")
    state = tok.__getstate__()
    added = {"<sep>": len(tok.vocab) + 10, "  ": len(tok.vocab) + 11}
    tok2 = bpe_core.Tokenizer(
        state["_vocab"], merges=tok.merge_ids, pretokenizer=tok.pretokenizer, added_tokens=added,
        superword=tok.superword,
    )  # fmt: skip
    arguments = sw.word_model_arguments(tok2)
    word2 = bpe_core.Tokenizer(arguments.pop("vocab"), **arguments)
    assert tok2._encoder().has_superword and tok2._backend._word._literals  # the core cuts at the added tokens
    texts = ["the cat<sep>sat on the mat", "the cat  sat on<sep><sep>the mat " * 50, "<sep>the cat", "x" * 3000]
    supermerges = tok2.superword
    expected = [sw.encode_reference(word2, supermerges, t) for t in texts]
    assert _lists(*tok2.encode_ordinary_flat(texts, num_threads=1)) == expected
    assert [tok2.encode_ordinary(t) for t in texts] == expected
    assert any(added["<sep>"] in e for e in expected)


WORDS = [" the", " cat", " a", " b", " ab", " ba", " sat", ".", ",", " 12", "\n"]
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map("".join)


@settings(max_examples=300 if FULL else 60, deadline=None)
@given(st.lists(texts, min_size=1, max_size=12), st.lists(texts, min_size=1, max_size=6), st.sampled_from(sw.RULES))
def test_hypothesis_texts_equal_the_reference(train_texts, check, rule):
    """Few words, many supermerges: tokens made two ways (the same bytes from different pairs, which reuse an id),
    tokens used by a merge before another merge makes them, long runs and runs without letters; the encoder's
    sub-runs (between boundaries no supermerge crosses) give the reference's ids."""
    word, tok, _ = _superword(train_texts * 3, 270, 60, rule)
    assert _lists(*tok.encode_ordinary_flat(check, num_threads=1)) == _reference(word, tok, check)
