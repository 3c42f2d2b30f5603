"""Lookup tables of a vocabulary, built and validated once per Tokenizer."""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from bpe_core.model.merges import NO_MERGE, merge_ids


@dataclass
class Tables:
    bytes_to_id: dict[bytes, int]
    id_to_bytes: list[bytes | None]
    byte_ids: list[int]
    merge_values: dict[int, int]


class VocabularyError(ValueError):
    """A vocabulary is inconsistent (duplicate token, merge of a missing token, clashing special token)."""


def build_tables(
    vocab: Mapping[int, bytes],
    merges: Sequence[tuple[int, int]] | None,
    special_tokens: Mapping[str, int],
    added_tokens: Mapping[str, int],
    unreachable: AbstractSet[int] = frozenset(),
) -> Tables:
    """The tables of a vocabulary. ``unreachable`` ids keep their bytes for decoding but own none: BPE never
    produces them (a file spells them as raw text, not in byte-level form), so their bytes may repeat another
    token's. The empty token (Whisper's rank 50256) owns nothing either: no piece of text is empty."""
    bytes_to_id = _owners(vocab, unreachable)
    strays = sorted(i for i in unreachable if i not in vocab)
    if strays:
        raise VocabularyError(f"unreachable ids {strays[:10]} are not tokens of the vocabulary")
    extra = _extra_tokens(vocab, special_tokens, added_tokens)
    size = max([*vocab, *extra, -1]) + 1
    _check_id_range(size, len(vocab) + len(extra))
    id_to_bytes: list[bytes | None] = list(map(vocab.get, range(size)))
    for tid, data in extra.items():
        id_to_bytes[tid] = data
    byte_ids = [bytes_to_id.get(bytes([b]), -1) for b in range(256)]
    merge_values = {} if merges is None else _merge_values(vocab, bytes_to_id, merges)
    return Tables(bytes_to_id, id_to_bytes, byte_ids, merge_values)


def _owners(vocab: Mapping[int, bytes], unreachable: AbstractSet[int]) -> dict[bytes, int]:
    """bytes -> id of the tokens that own their bytes."""
    bytes_to_id: dict[bytes, int] = {}
    for tid, data in vocab.items():
        if not isinstance(tid, int) or tid < 0:
            raise VocabularyError(f"token id {tid!r} is not a non-negative integer")
        if not isinstance(data, bytes):
            raise VocabularyError(f"token {tid} is {data!r}, not bytes")
        if tid in unreachable or not data:
            continue
        if data in bytes_to_id:
            raise VocabularyError(f"duplicate token {data!r}: ids {bytes_to_id[data]} and {tid}")
        bytes_to_id[data] = tid
    return bytes_to_id


MAX_ID = (1 << 31) - 1  # the native core, Megatron (int32) and Parquet shards hold ids in 32 bits
SPARSE_SLACK = 1 << 20  # real vocabularies leave a few gaps (cl100k: 15 ids below its specials), never millions


def _check_id_range(size: int, tokens: int) -> None:
    """Refuse ids that would make the id table huge: a file declaring id 10**12 for its second token must be an
    error naming the id, not a MemoryError (or an 8 GB table for id 10**9)."""
    if size - 1 > MAX_ID:
        raise VocabularyError(f"token id {size - 1} is larger than {MAX_ID}: ids are 32-bit in every output")
    if size > 8 * tokens + SPARSE_SLACK:
        raise VocabularyError(
            f"token id {size - 1} for only {tokens} tokens: the ids of a vocabulary are dense (gaps of more than "
            f"{SPARSE_SLACK} ids are refused); the file is corrupt or not a vocabulary"
        )


def _extra_tokens(
    vocab: Mapping[int, bytes], special_tokens: Mapping[str, int], added_tokens: Mapping[str, int]
) -> dict[int, bytes]:
    """Special and added tokens by id; an id may repeat a vocabulary entry only with the same bytes."""
    extra: dict[int, bytes] = {}
    for kind, table in (("special", special_tokens), ("added", added_tokens)):
        for text, tid in table.items():
            data = text.encode("utf-8")
            if not isinstance(tid, int) or tid < 0:
                raise VocabularyError(f"{kind} token {text!r} has an invalid id {tid!r}")
            if not text:
                raise VocabularyError(f"{kind} token with id {tid} is the empty string")
            clash = extra.get(tid, vocab.get(tid))
            if clash is not None and clash != data:
                raise VocabularyError(f"{kind} token {text!r} takes id {tid}, which is already {clash!r}")
            extra[tid] = data
    both = special_tokens.keys() & added_tokens.keys()
    if both:
        raise VocabularyError(f"tokens listed both as special and as added: {sorted(both)}")
    return extra


def _merge_values(
    vocab: Mapping[int, bytes], bytes_to_id: Mapping[bytes, int], merges: Sequence[tuple[int, int]]
) -> dict[int, int]:
    """(left << 32 | right) -> rank << 32 | merged id: by the native core where it loaded and every merge is two
    tokens that make a token, none listed twice (Qwen 3.5's 151,387 merges: 0.10-0.12 s here, 0.06 s there); otherwise
    here, naming the first problem."""
    values = _native_merge_values(vocab, bytes_to_id, merges)
    return values if values is not None else _merge_values_one_by_one(vocab, bytes_to_id, merges)


def _native_merge_values(
    vocab: Mapping[int, bytes], bytes_to_id: Mapping[bytes, int], merges: Sequence[tuple[int, int]]
) -> dict[int, int] | None:
    """_merge_values by the native core, or None where it did not load, the tables are not plain dicts, or the
    merges have a problem (which the loop then names)."""
    from bpe_core import native

    if (
        type(vocab) is dict
        and type(bytes_to_id) is dict
        and native.available()
        and hasattr(native._core, "merge_values")
    ):
        return native._core.merge_values(vocab, bytes_to_id, merges)
    return None


def _merge_values_one_by_one(
    vocab: Mapping[int, bytes], bytes_to_id: Mapping[bytes, int], merges: Sequence[tuple[int, int]]
) -> dict[int, int]:
    values: dict[int, int] = {}
    for rank, (left, right) in enumerate(merges):
        if left not in vocab or right not in vocab:
            missing = left if left not in vocab else right
            raise VocabularyError(f"merge {rank} ({left}, {right}) references id {missing}, which is not a token")
        merged = vocab[left] + vocab[right]
        new_id = bytes_to_id.get(merged)
        if new_id is None:
            raise VocabularyError(
                f"merge {rank} ({vocab[left]!r}, {vocab[right]!r}) makes {merged!r}, which is not a token"
            )
        key = left << 32 | right
        if key in values:
            raise VocabularyError(f"merge {rank} ({vocab[left]!r}, {vocab[right]!r}) is listed twice")
        values[key] = rank << 32 | new_id
    return values


def merges_from_ranks(
    vocab: Mapping[int, bytes], bytes_to_id: Mapping[bytes, int], pairs: Mapping[int, int]
) -> list[tuple[int, int]]:
    """Recover the merge list of a rank-only vocabulary (tiktoken's ``_educational.py`` does the same).

    For each multi-byte token in rank order, BPE its bytes using only lower ranks: a BPE vocabulary leaves
    exactly two parts, the merged pair. Tokens that do not reduce to two parts are not merges and are skipped.
    """
    byte_ids = [bytes_to_id.get(bytes([b]), -1) for b in range(256)]
    out: list[tuple[int, int]] = []
    for rank in sorted(vocab):
        data = vocab[rank]
        if len(data) < 2 or min(byte_ids[b] for b in data) < 0:
            continue

        def lookup(key: int, rank: int = rank) -> int:
            value = pairs[key]
            return value if (value >> 32) < rank else NO_MERGE

        parts = merge_ids([byte_ids[b] for b in data], lookup)
        if len(parts) == 2:
            out.append((parts[0], parts[1]))
    return out


def unmade_tokens(
    vocab: Mapping[int, bytes], merges: Sequence[tuple[int, int]], bytes_to_id: Mapping[bytes, int]
) -> set[int]:
    """Ids of a merge-list vocabulary that BPE without whole-piece lookup can never output: tokens without bytes
    of their own, and multi-byte tokens that no merge of two producible tokens makes. Single bytes are producible
    (a piece starts as one token per byte); a merge's result is, where both its parts are (whatever their ranks:
    a part made later can still meet a lower-ranked merge). Listed tokens are certainly never output; a token
    not listed may still be unreachable for subtler reasons (another merge always winning).

    Each merge's result is the native core's (merge_values) where it loaded and the merges are a tokenizer's
    (valid, none listed twice): one pass in rank order, then a worklist for the merges whose parts come later.
    The launcher runs this for every encode job's manifest, after the workers are done: Qwen 3.5's 151,387 merges
    took 0.41-0.48 s of CPU (a bytes concatenation and lookup per merge, a dict of lists by part), 0.078 s so."""
    values = _native_merge_values(vocab, bytes_to_id, merges)
    if values is not None:
        return _unmade(vocab, merges, [v & 0xFFFFFFFF for v in values.values()], bytes_to_id)
    return _unmade_one_by_one(vocab, merges, bytes_to_id)


def _unmade(
    vocab: Mapping[int, bytes], merges: Sequence[tuple[int, int]], made: list[int], bytes_to_id: Mapping[bytes, int]
) -> set[int]:
    """unmade_tokens with ``made[rank]`` the id merge ``rank`` makes."""
    reached = bytearray(max([*vocab, -1]) + 1)
    for data, tid in bytes_to_id.items():
        if len(data) == 1:
            reached[tid] = 1
    waiting: dict[int, list[tuple[int, int, int]]] = {}  # part -> merges that wait for it
    for (left, right), new_id in zip(merges, made, strict=True):
        if reached[left] and reached[right]:
            reached[new_id] = 1
        else:
            for part in {left, right}:
                waiting.setdefault(part, []).append((left, right, new_id))
    todo = [part for part in waiting if reached[part]]
    while todo:
        for left, right, new_id in waiting.get(todo.pop(), ()):
            if reached[left] and reached[right] and not reached[new_id]:
                reached[new_id] = 1
                todo.append(new_id)
    return {tid for tid in vocab if not reached[tid]}


def _unmade_one_by_one(
    vocab: Mapping[int, bytes], merges: Sequence[tuple[int, int]], bytes_to_id: Mapping[bytes, int]
) -> set[int]:
    by_part: dict[int, list[tuple[int, int]]] = {}
    for pair in merges:
        for part in set(pair):
            by_part.setdefault(part, []).append(pair)
    reached = {tid for data, tid in bytes_to_id.items() if len(data) == 1}
    todo = list(reached)
    while todo:
        for left, right in by_part.get(todo.pop(), ()):
            if left in reached and right in reached:
                made = bytes_to_id.get(vocab[left] + vocab[right])
                if made is not None and made not in reached:
                    reached.add(made)
                    todo.append(made)
    return set(vocab) - reached


def as_token_id(value):
    """``value`` as a Python int where it is an integer of any kind (a model's ids are often numpy ints), else
    unchanged, for the caller's error message."""
    try:
        return operator.index(value)
    except TypeError:
        return value
