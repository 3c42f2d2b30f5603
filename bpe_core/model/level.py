"""A level of BPE: what one round of byte-pair merging knows, and the one object every engine is built from.

A level is an alphabet of token bytes by id, ranked merges with their result ids (``pairs``: ``left << 32 | right``
-> ``rank << 32 | result``, the lookup of the merge kernel ``merges.merge_ids``), and where the tokens came from a
training, the tie-break it used. A plain tokenizer holds one level: bytes in, its merges (or, for a rank-only
vocabulary, the ranks) over them. A superword tokenizer holds two: its word model's level, and the supermerges over
the word model's tokens (``bpe_core.superword``). The model builds the levels (:func:`build_levels`); the Tokenizer
holds them; ``bpe_core.encode.engines`` encodes and decodes with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from bpe_core.model.merges import MergeTable, RankTable, merge_ids
from bpe_core.model.vocab import as_token_id, build_tables


class Level:
    """One level of BPE. ``token_bytes``: id -> bytes of every id this level can output or decode (None: no
    token; special and added tokens give their UTF-8 text); ``pairs``: the merge values; ``merges``: the ranked
    merges as (left id, right id), or None where the ranks of a rank-only vocabulary imply them; ``byte_ids``: the
    id of each byte (-1: none), where the level starts from bytes; ``bytes_to_id``: the tokens that own their
    bytes; ``vocab``: the BPE tokens (special and added excluded); ``special_ids``: the special tokens' ids."""

    def __init__(
        self,
        token_bytes: list[bytes | None],
        pairs: Mapping[int, int],
        *,
        merges: Sequence[tuple[int, int]] | None,
        vocab: Mapping[int, bytes],
        bytes_to_id: Mapping[bytes, int],
        byte_ids: Sequence[int],
        special_ids: AbstractSet[int] = frozenset(),
        ignore_merges: bool = False,
        tie_break: str | None = None,
    ) -> None:
        self.token_bytes = token_bytes
        self.pairs = pairs
        self.merges = merges
        self.vocab = vocab
        self.bytes_to_id = bytes_to_id
        self.byte_ids = byte_ids
        self.special_ids = frozenset(special_ids)
        self.ignore_merges = ignore_merges  # rank-only vocabularies and ignore_merges: whole-piece lookup first
        self.tie_break = tie_break  # the trainer's rule among equal counts, where known (files do not record it)

    @property
    def rank_only(self) -> bool:
        return self.merges is None

    def merge(self, ids: list[int], stats: list[int] | None = None) -> list[int]:
        """The merge kernel over this level's pairs: the lowest-ranked adjacent pair first, the leftmost on ties."""
        return merge_ids(ids, self.pairs.__getitem__, stats)

    def merge_bytes(self, data: bytes, stats: list[int] | None = None) -> list[int]:
        """BPE of one piece given as bytes (no whole-piece lookup); a byte without a token raises ValueError."""
        byte_ids = self.byte_ids
        ids = [byte_ids[b] for b in data]
        if ids and min(ids) < 0:
            missing = sorted({b for b in data if byte_ids[b] < 0})
            raise ValueError(f"this vocabulary has no token for the byte(s) {[hex(b) for b in missing]}")
        return merge_ids(ids, self.pairs.__getitem__, stats)

    def encode_bytes(self, data: bytes) -> list[int]:
        """The ids of one pre-token: its whole token where the level looks pieces up whole, else its merges."""
        if self.ignore_merges:
            whole = self.bytes_to_id.get(data)
            if whole is not None:
                return [whole]
        return self.merge_bytes(data)

    def encodable_vocab(self) -> Mapping[int, bytes]:
        """The tokens that own their bytes: all an encoder may output (the empty and unreachable ones are left out,
        so that no encoder can look them up)."""
        if len(self.bytes_to_id) == len(self.vocab):
            return self.vocab
        return {tid: data for data, tid in self.bytes_to_id.items()}

    def token(self, token_id: int) -> bytes:
        """The bytes of one id; an id without a token raises ValueError, a non-integer TypeError."""
        token_id = as_token_id(token_id)
        if not isinstance(token_id, int):
            raise TypeError(f"token ids must be integers, got {token_id!r} ({type(token_id).__name__})")
        table = self.token_bytes
        if 0 <= token_id < len(table):
            data = table[token_id]
            if data is not None:
                return data
        raise ValueError(f"token id {token_id!r} is not in this vocabulary (ids run from 0 to {len(table) - 1})")

    def decode(self, ids: Sequence) -> bytes:
        """Concatenated token bytes: integers of any kind (numpy's: operator.index) are ids; a non-integer is a
        TypeError, an id without a token a ValueError naming it (outside the range, or a hole in it: cl100k has no
        token 100256)."""
        table = self.token_bytes
        try:
            if ids and min(ids) < 0:
                raise IndexError
            return b"".join([table[i] for i in ids])  # type: ignore[misc]
        except (IndexError, TypeError):
            pass
        ids = [as_token_id(i) for i in ids]
        for i in ids:
            if not isinstance(i, int):
                raise TypeError(f"token ids must be integers, got {i!r} ({type(i).__name__})")
        bad = [i for i in ids if not (0 <= i < len(table) and table[i] is not None)]
        if not bad:
            return b"".join([table[i] for i in ids])  # type: ignore[misc]
        holes = [i for i in bad if 0 <= i < len(table)]
        detail = f"ids run from 0 to {len(table) - 1}"
        if holes:
            some = ", ".join(map(str, holes[:10])) + (" ..." if len(holes) > 10 else "")
            detail = (
                f"{'id' if len(holes) == 1 else 'ids'} {some} {'has' if len(holes) == 1 else 'have'} no token; {detail}"
            )
        raise ValueError(f"token ids not in this vocabulary: {bad[:10]}{' ...' if len(bad) > 10 else ''} ({detail})")


def build_level(
    vocab: Mapping[int, bytes],
    merges: Sequence[tuple[int, int]] | None,
    special_tokens: Mapping[str, int],
    added_tokens: Mapping[str, int],
    unreachable: AbstractSet[int] = frozenset(),
    *,
    ignore_merges: bool = False,
    tie_break: str | None = None,
) -> Level:
    """The level of a byte-level vocabulary: its tables, validated once (``vocab.build_tables``), and its merge
    values: the merge list's, or for a rank-only vocabulary (``merges`` None) the ranks' (``merges.RankTable``)."""
    tables = build_tables(vocab, merges, special_tokens, added_tokens, unreachable)
    pairs: Mapping[int, int]
    if merges is None:
        pairs = RankTable(tables.id_to_bytes, tables.bytes_to_id)
    else:
        pairs = MergeTable(tables.merge_values)
    return Level(
        tables.id_to_bytes,
        pairs,
        merges=None if merges is None else list(merges),
        vocab=vocab,
        bytes_to_id=tables.bytes_to_id,
        byte_ids=tables.byte_ids,
        special_ids=frozenset(special_tokens.values()),
        ignore_merges=bool(ignore_merges or merges is None),
        tie_break=tie_break,
    )


def build_levels(
    vocab: Mapping[int, bytes],
    merges: Sequence[tuple[int, int]] | None,
    special_tokens: Mapping[str, int],
    added_tokens: Mapping[str, int],
    unreachable: Iterable[int] = frozenset(),
    *,
    ignore_merges: bool = False,
    superword: Any = None,
) -> tuple[Level, ...]:
    """The levels of a tokenizer: ``(word,)``, or with ``superword`` (``bpe_core.superword.Supermerges``)
    ``(word, supermerges)``: the word model's level over its ids below ``superword.word_size``, then the supermerges
    over the whole vocabulary (whose tables decode every id)."""
    unreachable = frozenset(unreachable)
    top = build_level(vocab, merges, special_tokens, added_tokens, unreachable, ignore_merges=ignore_merges)
    if superword is None:
        return (top,)
    size = superword.word_size
    word_vocab = {i: b for i, b in vocab.items() if i < size}
    word_unreachable = frozenset(i for i in unreachable if i < size)
    word = build_level(word_vocab, merges, special_tokens, added_tokens, word_unreachable, ignore_merges=ignore_merges)
    top.pairs, top.merges = superword.pairs(), list(superword.merges)
    return (word, top)


def unreachable_ids(levels: Sequence[Level], merges: Sequence[tuple[int, int]] | None) -> list[int]:
    """Sorted ids of the first level's BPE vocabulary that encoding never outputs: the tokens that own no bytes (a
    file spells them as raw text; an empty token) and, for a merge list without whole-piece lookup, every multi-byte
    token that no merge of producible tokens makes. With whole-piece lookup (rank files, ``ignore_merges``) any other
    token is the whole of some piece. A superword tokenizer's supertokens are made by its second level."""
    from bpe_core.model.vocab import unmade_tokens

    word, top = levels[0], levels[-1]
    owned = set(top.bytes_to_id.values())
    ids = {tid for tid in top.vocab if tid not in owned}
    if merges is not None and not top.ignore_merges:
        ids |= unmade_tokens(top.vocab, merges, top.bytes_to_id)
    if len(levels) > 1:  # supertokens: made by supermerges, not by the word model's merges
        ids = {i for i in ids if i in word.vocab}
    return sorted(ids)
