"""The incremental trainer against the naive oracle, Hugging Face's BpeTrainer and rustbpe."""

from __future__ import annotations

import json
import random

import pytest
from conftest import corpus
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_trainer import naive_train

import bpe_core
from bpe_core.model.bytelevel import token_string_to_bytes
from bpe_core.pretokenize.presets import GPT2_HF_PATTERN

chunks = st.dictionaries(st.binary(min_size=1, max_size=8), st.integers(min_value=0, max_value=50), max_size=25)
small_alphabet_chunks = st.dictionaries(
    st.text(alphabet="abc ", min_size=1, max_size=10).map(str.encode), st.integers(1, 9), max_size=20
)


@settings(max_examples=150, deadline=None)
@given(
    counts=st.one_of(chunks, small_alphabet_chunks),
    extra=st.integers(0, 40),
    tie_break=st.sampled_from(bpe_core.TIE_BREAKS),
    min_frequency=st.integers(0, 3),
)
def test_incremental_equals_naive(counts, extra, tie_break, min_frequency):
    tok = bpe_core.train(counts, 256 + extra, tie_break=tie_break, min_frequency=min_frequency)
    expected = naive_train(counts, 256 + extra, tie_break=tie_break, min_frequency=min_frequency)
    assert tok.merges == expected


@settings(max_examples=50, deadline=None)
@given(counts=small_alphabet_chunks, seed=st.integers(0, 2**32 - 1))
def test_result_does_not_depend_on_count_order(counts, seed):
    items = list(counts.items())
    random.Random(seed).shuffle(items)
    assert bpe_core.train(dict(items), 300).merges == bpe_core.train(counts, 300).merges


def test_ids_layout_bytes_then_merges_then_specials():
    counts = bpe_core.count_chunks(["low lower lowest newer wider"] * 4, "cl100k")
    tok = bpe_core.train(counts, 270, special_tokens=["<|endoftext|>", "<|pad|>"])
    assert [tok.token_bytes(i) for i in range(256)] == [bytes([b]) for b in range(256)]
    assert tok.n_vocab == 270
    assert tok.special_tokens == {"<|endoftext|>": 268, "<|pad|>": 269}
    for rank, (left, right) in enumerate(tok.merges):
        assert tok.token_bytes(256 + rank) == left + right


def test_stops_when_no_pair_reaches_min_frequency():
    tok = bpe_core.train({b"ab": 3, b"cd": 1}, 1000, min_frequency=2)
    assert tok.merges == [(b"a", b"b")]
    tok = bpe_core.train({b"ab": 3, b"cd": 1}, 1000, min_frequency=1)
    assert tok.merges == [(b"a", b"b"), (b"c", b"d")]


def test_counts_are_python_ints_and_never_overflow():
    huge = 2**70
    tok = bpe_core.train({b"ab": huge, b"bc": huge - 1}, 258)
    assert tok.merges == [(b"a", b"b"), (b"b", b"c")]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(vocab_size=100), "vocab_size"),
        (dict(vocab_size=300, tie_break="random"), "tie_break"),
        (dict(vocab_size=300, special_tokens="<|x|>"), "list of strings"),
        (dict(vocab_size=300, special_tokens=["a", "a"]), "distinct"),
        (dict(vocab_size=300, min_frequency=-1), "min_frequency"),
    ],
)
def test_bad_arguments_are_refused_with_a_message(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        bpe_core.train({b"ab": 2}, **kwargs)


def test_bad_counts_are_refused():
    with pytest.raises(TypeError, match="bytes"):
        bpe_core.train({"ab": 2}, 300)
    with pytest.raises(ValueError, match="non-negative"):
        bpe_core.train({b"ab": -2}, 300)


def test_pretokenizer_travels_with_the_counts_and_mismatch_is_refused():
    counts = bpe_core.count_chunks(["hello hello world"], "o200k")
    assert bpe_core.train(counts, 260).pretokenizer.patterns == bpe_core.PreTokenizer.from_spec("o200k").patterns
    with pytest.raises(ValueError, match="pre-tokenizer"):
        bpe_core.train(counts, 260, pretokenizer="r50k")
    plain = bpe_core.train(dict(counts), 260)
    with pytest.raises(ValueError, match="no pre-tokenizer"):
        plain.encode("hello")


def _docs_lines() -> list[str]:
    # Documents split on "\n" only: str.splitlines would also split on \x0b, \x1c, \u2028 ... unlike the peers.
    return [line for doc in corpus("docs_python_rst") for line in doc.split("\n")]


@pytest.fixture(scope="module")
def docs_counts():
    return bpe_core.count_chunks(_docs_lines(), GPT2_HF_PATTERN)


@pytest.mark.slow
def test_huggingface_tie_break_reproduces_bpetrainer(docs_counts):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=8192,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    hf.train_from_iterator(_docs_lines(), trainer)
    raw = json.loads(hf.to_str())["model"]["merges"]
    pairs = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in raw]
    expected = [(token_string_to_bytes(a), token_string_to_bytes(b)) for a, b in pairs]
    ours = bpe_core.train(docs_counts, 8192, min_frequency=2, tie_break="huggingface")
    assert len(expected) == 8192 - 256
    assert ours.merges == expected


@pytest.mark.slow
def test_ids_tie_break_reproduces_rustbpe(docs_counts):
    import rustbpe

    peer = rustbpe.Tokenizer()
    peer.train_from_iterator(iter(_docs_lines()), 8192, pattern=GPT2_HF_PATTERN)
    ranks = {bytes(token): rank for token, rank in dict(peer.get_mergeable_ranks()).items()}
    ours = bpe_core.train(docs_counts, 8192, min_frequency=1, tie_break="ids")
    assert len(ranks) == 8192
    assert {ours.token_bytes(i): i for i in range(8192)} == ranks


def test_a_vocabulary_smaller_than_asked_warns_saying_why():
    counts = bpe_core.count_chunks(["low lower lowest"] * 5, "cl100k")
    with pytest.warns(UserWarning, match=r"stopped at \d+ merges .* no pair of tokens occurs 2 times or more"):
        tok = bpe_core.train(counts, 400, min_frequency=2)
    assert tok.n_vocab < 400
