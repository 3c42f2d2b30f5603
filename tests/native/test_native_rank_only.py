"""The native encoder's merges for a rank-only vocabulary (found by sorting the tokens, not by table lookups)
against a brute force over every split of every token, on random vocabularies with the corner cases: tokens with
the same bytes under several ids, an empty token, ids not in byte order, dict order not id order."""

from __future__ import annotations

import random

import pytest

from bpe_core import native

pytestmark = pytest.mark.skipif(not native.available(), reason="the native core is not built")


def random_vocab(rng: random.Random) -> dict[int, bytes]:
    tokens = [bytes([b]) for b in range(256)]
    alphabet = [bytes([b]) for b in b"abcde "]
    parts = list(alphabet)
    while len(tokens) < 700:
        roll = rng.random()
        if roll < 0.05:
            tokens.append(rng.choice(tokens))  # the same bytes again
        else:
            token = rng.choice(parts) + rng.choice(parts)
            parts.append(token)
            tokens.append(token)
    tokens.append(b"")
    ids = rng.sample(range(5000), len(tokens))
    items = list(zip(ids, tokens, strict=True))
    rng.shuffle(items)
    return dict(items)


def brute_force_pairs(vocab: dict[int, bytes]) -> dict[tuple[int, int], int]:
    """As the native table: parts are the first id of their bytes (dict order), a later token overwrites."""
    first: dict[bytes, int] = {}
    for i, data in vocab.items():
        first.setdefault(data, i)
    pairs = {}
    for i, data in vocab.items():
        for k in range(1, len(data)):
            left, right = first.get(data[:k]), first.get(data[k:])
            if left is not None and right is not None:
                pairs[(left, right)] = i
    return pairs


def brute_force_merge(vocab: dict[int, bytes], pairs: dict[tuple[int, int], int], data: bytes) -> list[int]:
    first: dict[bytes, int] = {}
    for i, token in vocab.items():
        first.setdefault(token, i)
    ids = [first[bytes([b])] for b in data]
    while True:
        found = [(pairs[key], i) for i, key in enumerate(zip(ids, ids[1:], strict=False)) if key in pairs]
        if not found:
            return ids
        rank, i = min(found)  # the lowest rank, leftmost
        ids[i : i + 2] = [rank]


@pytest.mark.parametrize("seed", range(6))
def test_rank_only_merges_match_a_brute_force(seed):
    rng = random.Random(seed)
    vocab = random_vocab(rng)
    pairs = brute_force_pairs(vocab)
    encoder = native.make_encoder(vocab, None, False)
    assert encoder.pair_count == len(pairs)
    for _ in range(40):
        data = bytes(rng.choice(b"abcde ") for _ in range(rng.randrange(1, 120)))  # the heap from 65 bytes
        got, _, _ = encoder.merge_bytes(data, False)
        assert got == brute_force_merge(vocab, pairs, data), data
