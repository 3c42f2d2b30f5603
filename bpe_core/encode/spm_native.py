"""The tables of the native SentencePiece-style encoder (``bpe_core/_native/spm.cpp``), built from an SpmModel.

Pairs are (left id, right id) -> (priority, merged id): for score rules every split of a mergeable piece into two
mergeable halves, with the dense rank of the merged piece's score (higher score, lower priority); for a merge list
the list's rank. A character that is not a piece but is half of one gets a pseudo id above the vocabulary, so that
the merge still sees it (it falls back to bytes or ``<unk>`` if it stays alone). Returns None for what the core does
not run (sentencepiece's USER_DEFINED and UNUSED pieces, whitespace as suffix): the reference merge does those.
"""

from __future__ import annotations

from typing import Any

from bpe_core import native
from bpe_core.model.sentencepiece import SPACE, UNUSED, USER_DEFINED, SpmModel


def make_spm_encoder(model: SpmModel) -> Any:
    if model.rules == "sentencepiece" and (model.treat_whitespace_as_suffix or UNUSED in model.types):
        return None
    users = []
    if model.user_matcher is not None:
        users = [(p, i) for i, (p, t) in enumerate(zip(model.pieces, model.types, strict=True)) if t == USER_DEFINED]
        if any(" " in p for p, _ in users):
            return None  # the normalizer leaves a user piece's spaces alone: the reference does that
    n_vocab = len(model.pieces)
    table = model.mergeable
    ids: dict[str, int] = dict(table)
    keys, values = _merge_pairs(model, ids) if model.rules == "merges" else _score_pairs(model, ids, n_vocab)
    chars = [(ord(p), i) for p, i in ids.items() if len(p) == 1]
    cut = not any(_has_inner_space(p) for p in table)
    whole = {p: i for p, i in table.items() if p and set(p) == {"\n"}} if model.split_newlines else {}
    byte_ids = list(model.byte_ids)
    return native._core.SpmEncoder(
        n_vocab,
        model.byte_fallback,
        -1 if model.unk_id is None else model.unk_id,
        model.rules == "sentencepiece" and not model.byte_fallback,
        model.add_dummy_prefix,
        model.remove_extra_whitespaces and model.rules == "sentencepiece",
        model.escape_whitespaces,
        cut,
        model.split_newlines,
        chars,
        keys,
        values,
        byte_ids,
        whole,
        users,
    )


def _merge_pairs(model: SpmModel, ids: dict[str, int]) -> tuple[list[int], list[int]]:
    keys: list[int] = []
    values: list[int] = []
    pieces, table = model.pieces, model.mergeable
    for rank, (a, b) in enumerate(model.merges):
        merged = table.get(pieces[a] + pieces[b])
        if merged is not None:
            keys.append(a << 32 | b)
            values.append(rank << 32 | merged)
    return keys, values


def _score_pairs(model: SpmModel, ids: dict[str, int], n_vocab: int) -> tuple[list[int], list[int]]:
    """Every split of a mergeable piece into two symbols; ``ids`` gains pseudo ids for one-character halves."""
    table = model.mergeable
    ranks = {s: r for r, s in enumerate(sorted({model.scores[i] for i in table.values()}, reverse=True))}
    keys: list[int] = []
    values: list[int] = []
    seen: set[int] = set()
    for piece, merged in table.items():
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            for half in (left, right):
                if half not in ids and len(half) == 1:
                    ids[half] = n_vocab + len(ids)
            if left in ids and right in ids:
                key = ids[left] << 32 | ids[right]
                if key not in seen:
                    seen.add(key)
                    keys.append(key)
                    values.append(ranks[model.scores[merged]] << 32 | merged)
    return keys, values


def _has_inner_space(piece: str) -> bool:
    """A ``▁`` after another character: a merge could cross a cut made before it."""
    return any(c == SPACE and piece[k - 1] != SPACE for k, c in enumerate(piece) if k > 0)


__all__ = ["make_spm_encoder"]
