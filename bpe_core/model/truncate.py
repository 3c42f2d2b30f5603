"""The smaller tokenizers inside a larger one: BPE's merges are a prefix of each other.

A trainer that stops at ``n`` new tokens has made exactly the first ``n`` merges of a longer run on the same counts
(every step depends on the counts and the tie-break, never on the budget), and a tiktoken rank file cut at rank
``m`` is the rank-only tokenizer of its first ``m`` tokens. So one run to the largest size holds every smaller size
exactly. That holds only where ids follow merge order: bytes first, then one new id per merge, in order (trained
tokenizers, rank files). Vocabularies whose ids were assigned otherwise (added tokens, tokens no merge makes, ids
out of merge order) are refused: cutting them by id would not give the tokenizer a shorter training would make.

>>> import bpe_core
>>> counts = bpe_core.count_chunks(["low lower lowest newer"] * 5, "cl100k")
>>> bpe_core.train(counts, 266).truncated(262).merges == bpe_core.train(counts, 262).merges
True
"""

from __future__ import annotations

import dataclasses
from typing import Any

# A bpe_core.Tokenizer, read through its public attributes (typed Any: this module imports neither it nor
# model/data.py, whose annotations name superword.reference, which re-exports word_model_arguments from here).
Tokenizer = Any


def truncated_arguments(tok: Tokenizer, n_vocab: int) -> dict | None:
    """The ``Tokenizer(...)`` arguments of the tokenizer of ``n_vocab`` ids (special tokens included, renumbered to
    follow the kept tokens in their order) that a training stopped earlier would have made; None when
    ``n_vocab == tok.n_vocab`` (``tok`` itself). Plain data: ``Tokenizer.truncated`` builds it. A superword
    tokenizer is cut level by level (``_truncated_superword``)."""
    if tok.sentencepiece is not None:
        raise ValueError(
            "truncated() cuts byte-level merge lists; a SentencePiece-style vocabulary merges by piece score, "
            "and its ids do not follow merge order (control and byte pieces first): it cannot be truncated"
        )
    if tok.superword is not None:
        return _truncated_superword(tok, n_vocab)
    if isinstance(n_vocab, bool) or not isinstance(n_vocab, int):
        raise TypeError(f"n_vocab must be an integer, got {n_vocab!r}")
    specials = sorted(tok.special_tokens.items(), key=lambda kv: kv[1])
    if n_vocab == tok.n_vocab:
        return None
    vocab = tok.vocab
    keep = n_vocab - len(specials)
    if n_vocab > tok.n_vocab or keep > len(vocab):
        raise ValueError(
            f"truncated({n_vocab}): this tokenizer has n_vocab {tok.n_vocab} ({len(vocab)} BPE tokens and "
            f"{len(specials)} special tokens); a truncation can only make it smaller: pass at most "
            f"{len(vocab) + len(specials)}"
        )
    if keep < 256:
        raise ValueError(
            f"truncated({n_vocab}): n_vocab must hold the 256 byte tokens and the {len(specials)} special tokens: "
            f"pass at least {256 + len(specials)}"
        )
    merges = _check_merge_order(tok, vocab)
    if merges is not None:
        merges = merges[: _merges_making(tok, merges, keep)]
    return dict(
        vocab={i: vocab[i] for i in range(keep)},
        merges=merges,
        pretokenizer=tok.pretokenizer,
        special_tokens={text: keep + i for i, (text, _) in enumerate(specials)},
        ignore_merges=tok.ignore_merges,
        name=tok.name,
        backend=tok.backend,
        token_flags=tok.token_flags,
        family=tok.family,
    )


def _refuse(why: str) -> ValueError:
    return ValueError(
        f"truncated(): {why}; only a tokenizer whose ids follow its merge order (bytes first, then one id per merge, "
        "as trained tokenizers and tiktoken rank files have) can be cut to a smaller exact tokenizer"
    )


def _check_merge_order(tok: Tokenizer, vocab: dict[int, bytes]) -> list[tuple[int, int]] | None:
    """The merge list (None for a rank-only vocabulary) once the ids are known to follow merge order."""
    if tok.added_tokens:
        raise _refuse(f"it has {len(tok.added_tokens)} added tokens, whose ids no merge order gives")
    if sorted(vocab) != list(range(len(vocab))):
        raise _refuse("its BPE ids are not contiguous from 0")
    if any(len(vocab[i]) != 1 for i in range(min(256, len(vocab)))) or len(vocab) < 256:
        raise _refuse("ids 0-255 are not the 256 single bytes")
    unreachable = [i for i in sorted(vocab) if vocab[i] and tok.token_id(vocab[i]) != i]  # spelled as raw text
    if unreachable:
        raise _refuse(f"{len(unreachable)} of its tokens are made by no merge (e.g. id {min(unreachable)})")
    if tok.kind == "ranks":
        return None  # rank order is merge order
    merges = tok.merge_ids
    made = 256
    for rank, (a, b) in enumerate(merges):
        result = tok.token_id(tok.token_bytes(a) + tok.token_bytes(b))
        if result is None or result > made:
            raise _refuse(f"merge {rank} makes id {result}, where merge order gives {made}")
        made += result == made
    if made != len(vocab):
        raise _refuse(f"ids {made} and up are made by no merge")
    return merges


def _merges_making(tok: Tokenizer, merges: list[tuple[int, int]], keep: int) -> int:
    """How many merges a trainer stopped at ``keep`` tokens made: up to the one that makes id ``keep - 1``."""
    if keep == 256:
        return 0
    for rank, (a, b) in enumerate(merges):
        if tok.token_id(tok.token_bytes(a) + tok.token_bytes(b)) == keep - 1:
            return rank + 1
    raise AssertionError("unreachable: _check_merge_order found every id made by a merge")


def word_model_arguments(tok: Tokenizer) -> dict:
    """The word model (the first level) of a superword tokenizer as Tokenizer arguments: its word tokens, its
    merges, the same pre-tokenizer, special and added tokens (at their ids)."""
    size = tok.superword.word_size
    return dict(
        vocab={i: b for i, b in tok.vocab.items() if i < size},
        merges=tok.merge_ids,
        pretokenizer=tok.pretokenizer,
        special_tokens=tok.special_tokens,
        added_tokens=tok.added_tokens,
        token_flags=tok.token_flags,
        ignore_merges=tok.ignore_merges,
        backend=tok.backend,
    )


def _truncated_superword(tok: Tokenizer, n_vocab: int) -> dict | None:
    """The superword tokenizer of ``n_vocab`` ids that phase 2 with fewer supermerges gives: the supermerges up to
    the one that made the last kept token (the loop stops right after its budget's last new token); at or below
    the word model's size, the word model cut to ``n_vocab`` (the first level alone). Special tokens follow, in
    their order."""
    from bpe_core.model.vocab import as_token_id

    n_vocab = as_token_id(n_vocab)
    specials = sorted(tok.special_tokens.items(), key=lambda kv: kv[1])
    if not isinstance(n_vocab, int) or n_vocab < 256 + len(specials):
        raise ValueError(
            f"n_vocab must be an integer of at least 256 + {len(specials)} special tokens, got {n_vocab!r}"
        )
    if n_vocab >= tok.n_vocab:
        return None
    if tok.added_tokens:
        raise ValueError("a superword tokenizer with added tokens cannot be truncated: their ids sit among the cut")
    sup = tok.superword
    cut = n_vocab - len(specials)
    arguments = word_model_arguments(tok)
    if cut <= sup.word_size:
        word = type(tok)(arguments.pop("vocab"), **arguments)
        return truncated_arguments(word, n_vocab) or word_model_arguments(tok)
    keep = next(r for r, result in enumerate(sup.results) if result == cut - 1) + 1
    arguments.update(
        vocab={i: b for i, b in tok.vocab.items() if i < cut},
        special_tokens={text: cut + i for i, (text, _) in enumerate(specials)},
        superword=dataclasses.replace(sup, merges=sup.merges[:keep], results=sup.results[:keep]),
        name=tok.name,
    )
    return arguments
