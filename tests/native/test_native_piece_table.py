"""The native encoder's piece table (bpe_core/_native/piece_table.h) against tiktoken and the Python reference: its
seed image (what the encoder gives each vocabulary entry of 1-15 bytes, merges included), growth, generational
resets under a tiny cache limit, spilled pieces (more than 4 tokens), pieces over 15 bytes, and pieces at the end of
a text (keyed without the 16-byte load)."""

from __future__ import annotations

import pickle
import random

import pytest
from conftest import corpus, ours_openai, tiktoken_openai

import bpe_core
from bpe_core import native


def private_copy(tok: bpe_core.Tokenizer) -> bpe_core.Tokenizer:
    """A tokenizer of its own (its own encoder and caches), on the native backend."""
    return pickle.loads(pickle.dumps(tok))


def python_twin(tok: bpe_core.Tokenizer) -> bpe_core.Tokenizer:
    return pickle.loads(pickle.dumps(tok)).use_backend("python")


def random_words(n: int, seed: int, alphabet: str = "abcdefghijklmnopqrstuvwxyz", lengths=(3, 15)) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(*lengths))) for _ in range(n)]


def test_seed_image_holds_every_short_token_of_cl100k():
    tok = ours_openai("cl100k")
    short = sorted({data for data in tok.vocab.values() if 1 <= len(data) <= 15})
    encoder = private_copy(tok)._encoder()
    assert encoder.seed_count == len(short) > 90_000
    # Every seeded piece gives its own token (the whole-piece rule of rank files), as tiktoken does: the first
    # request fills a worker's table from the seed image, the second reads the same entries again.
    enc = tiktoken_openai("cl100k")
    expected = [enc.encode_single_token(data) for data in short]
    for _ in range(2):
        assert encoder.encode(short, None) == expected
    assert encoder.cache_size == 0  # nothing beyond the seed image


def test_seed_of_a_merge_list_is_the_merge_result_not_the_token():
    # "abc" is a token no merge makes: a merge-list vocabulary encodes it as the merges give, [ab, c] (as the
    # reference and Hugging Face do); with ignore_merges the whole piece is the token.
    vocab = {i: bytes([i]) for i in range(256)}
    vocab[256], vocab[257] = b"ab", b"abc"
    for ignore_merges, expected in ((False, [256, ord("c")]), (True, [257])):
        tok = bpe_core.Tokenizer(vocab, merges=[(97, 98)], pretokenizer="cl100k", ignore_merges=ignore_merges)
        ref = python_twin(tok)
        assert tok.backend == "native" and tok._encoder().seed_count == 258
        for text in ("abc", "abc abc", "xabc", "ab"):
            assert tok.encode_ordinary(text) == ref.encode_ordinary(text), (ignore_merges, text)
        assert tok.encode_ordinary("abc") == expected
        assert tok.encode_batch(["abc"] * 3, num_threads=1) == [expected] * 3  # hits of the seeded entry


@pytest.mark.parametrize("limit", [None, 1])
def test_many_new_pieces_grow_or_reset_and_stay_exact(limit):
    # 120,000 distinct words: more than the seeded table of cl100k holds at 3/4 load, so it doubles (no limit) or,
    # under a limit below the seed image, is reset to the seed image again and again; the ids never change.
    tok = private_copy(ours_openai("cl100k"))
    encoder = tok._encoder()
    if limit is not None:
        encoder.cache_limit = limit
    words = random_words(120_000, seed=7)
    docs = [" ".join(words[i : i + 1000]) for i in range(0, len(words), 1000)]
    expected = tiktoken_openai("cl100k").encode_ordinary_batch(docs, num_threads=1)
    for _ in range(2):  # the second pass hits what the first inserted (or what survived the resets)
        ids, offsets = tok.encode_ordinary_flat(docs, num_threads=1)
        assert [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:], strict=True)] == expected
    if limit is None:
        assert encoder.cache_resets == 0 and encoder.cache_size > 60_000
    else:
        assert encoder.cache_resets >= 1 and encoder.cache_limit == 1


def test_resets_on_a_small_vocabulary_under_threads():
    counts = bpe_core.count_chunks(corpus("en_bible_kjv", 100), "cl100k")
    trained = bpe_core.train(counts, 600)
    tok = bpe_core.Tokenizer(trained.vocab, merges=trained.merge_ids, pretokenizer="cl100k")
    ref = python_twin(tok)
    tok._encoder().cache_limit = 1  # the seed image of 600 tokens: 2,048 slots, reset every ~1,000 new pieces
    docs = corpus("docs_python_rst", 60) + corpus("multi_udhr", 30)
    expected = [ref.encode_ordinary(d) for d in docs]
    assert tok.encode_ordinary_batch(docs, num_threads=2) == expected
    assert tok.encode_ordinary_batch(docs, num_threads=1) == expected
    assert [tok.encode_ordinary(d) for d in docs[:20]] == expected[:20]
    assert tok._encoder().cache_resets >= 2


def test_spilled_pieces_of_more_than_four_tokens():
    # Pieces of 5-15 bytes that are 5 or more tokens keep their ids outside the slot (the spill arena).
    tok = private_copy(ours_openai("cl100k"))
    enc = tiktoken_openai("cl100k")
    words = random_words(20_000, seed=11, alphabet="qxzjvkwfgb\u00e9\u00df", lengths=(5, 9))
    pieces = [w for w in words if len(w.encode()) <= 15]
    spilled = [w for w in pieces if len(enc.encode_ordinary(w)) > 4]
    assert len(spilled) > 1000
    docs = [" ".join(spilled[i : i + 200]) for i in range(0, len(spilled), 200)]
    expected = enc.encode_ordinary_batch(docs, num_threads=1)
    assert tok.encode_ordinary_batch(docs, num_threads=1) == expected
    assert tok.encode_ordinary_batch(docs, num_threads=1) == expected  # now from the spill arena
    assert [tok.encode_ordinary(" " + w) for w in spilled[:300]] == [
        enc.encode_ordinary(" " + w) for w in spilled[:300]
    ]


def test_pieces_over_fifteen_bytes_and_at_the_end_of_the_text():
    tok = private_copy(ours_openai("cl100k"))
    enc = tiktoken_openai("cl100k")
    long_words = random_words(3000, seed=5, lengths=(16, 40))
    texts = [" ".join(long_words[i : i + 50]) for i in range(0, len(long_words), 50)]
    # Every length of last piece near the end (keyed from loads inside the text), and texts shorter than 16 bytes.
    texts += [("hello " + w)[-k:] for w in random_words(200, seed=3, lengths=(1, 15)) for k in (1, 5, 15, 16, 17)]
    texts += ["-" * n for n in range(1, 40)] + ["1234567890" * n for n in range(1, 5)]
    expected = enc.encode_ordinary_batch(texts, num_threads=1)
    for _ in range(2):
        assert tok.encode_ordinary_batch(texts, num_threads=1) == expected
        assert [tok.encode_ordinary(t) for t in texts] == expected


def test_cache_limit_from_the_environment(monkeypatch):
    monkeypatch.setenv(native.CACHE_ENV, "64")
    assert native.cache_limit_bytes() == 64 << 20
    tok = private_copy(ours_openai("r50k"))
    assert tok._encoder().cache_limit == 64 << 20
    for bad in ("0", "-3", "lots"):
        monkeypatch.setenv(native.CACHE_ENV, bad)
        with pytest.raises(ValueError, match="BEAM_BPE_CACHE_MB must be a positive number of MiB"):
            native.cache_limit_bytes()
    monkeypatch.delenv(native.CACHE_ENV)
    assert native.cache_limit_bytes() is None
    assert private_copy(ours_openai("r50k"))._encoder().cache_limit == 256 << 20


def test_clear_cache_goes_back_to_the_seed_image():
    tok = private_copy(ours_openai("o200k"))
    enc = tiktoken_openai("o200k")
    docs = corpus("multi_udhr", 20)
    expected = enc.encode_ordinary_batch(docs, num_threads=1)
    encoder = tok._encoder()
    assert tok.encode_ordinary_batch(docs, num_threads=1) == expected
    assert encoder.cache_size > 0
    encoder.clear_cache()
    assert encoder.cache_size == 0
    assert tok.encode_ordinary_batch(docs, num_threads=1) == expected
