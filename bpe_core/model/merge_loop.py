"""The merge loop of one level of BPE in pure Python: the reference of the native ``run_merge_loop``.

Both levels train with it: phase 1 over the 256 bytes (words are pre-token chunks), phase 2 of a superword tokenizer
over the word model's tokens (words are runs of word-model ids). Each step merges the most frequent adjacent pair;
ties are broken by an explicit rule (``tie_break``), so the merges never depend on the order in which the words
arrive. The loop keeps pair counts, a pair -> words index and a heap with lazy invalidation, so a step costs the
words that contain the pair, never a recount. A merge whose bytes are already a token reuses that token's id (as
Hugging Face's BpeTrainer does), so token bytes stay unique; a pair merged again later is listed once.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Sequence

from bpe_core.model.bytelevel import huggingface_base_order


def byte_alphabet() -> list[bytes]:
    """Phase 1's alphabet: the 256 single bytes, by id."""
    return [bytes([b]) for b in range(256)]


def hf_rank() -> list[int]:
    """The rank of each byte in Hugging Face BpeTrainer's alphabet order (the ``"huggingface"`` tie-break)."""
    rank = [0] * 256
    for r, b in enumerate(huggingface_base_order()):
        rank[b] = r
    return rank


class MergeLoop:
    """Pair counts, pair -> word index and a heap with lazy invalidation over ``words`` (lists of ids of
    ``alphabet``, the tokens that exist before the first merge, by id). Pair keys are ``left << 32 | right``."""

    def __init__(
        self, words: list[list[int]], counts: list[int], tie_break: str, alphabet: Sequence[bytes] | None = None
    ) -> None:
        self.words, self.counts = words, counts
        self.token_bytes: list[bytes] = byte_alphabet() if alphabet is None else list(alphabet)
        self.bytes_to_id = {t: i for i, t in enumerate(self.token_bytes)}
        self.merges: list[tuple[int, int]] = []
        self.tie_break = tie_break
        self.hf_base = {b: i for i, b in enumerate(huggingface_base_order())}
        self.pair_counts: dict[int, int] = {}
        self.where: dict[int, set[int]] = {}
        for wi, word in enumerate(words):
            count = counts[wi]
            for key in _pair_keys(word):
                self.pair_counts[key] = self.pair_counts.get(key, 0) + count
                self.where.setdefault(key, set()).add(wi)
        self.heap = [(-n, self._tie(key), key) for key, n in self.pair_counts.items()]
        heapq.heapify(self.heap)

    def _tie(self, key: int):
        left, right = key >> 32, key & 0xFFFFFFFF
        if self.tie_break == "ids":
            return key
        if self.tie_break == "huggingface":
            hf = self.hf_base
            return hf.get(left, left) << 32 | hf.get(right, right) if left < 256 or right < 256 else key
        return (self.token_bytes[left], self.token_bytes[right])

    def run(self, budget: int, min_count: int, progress: Callable[[int, int], None] | None) -> None:
        """Merge until ``budget`` new tokens exist or no pair occurs ``min_count`` times; ``progress(new tokens,
        budget)`` after every 1000th merge."""
        new_tokens = 0
        merged: set[int] = set()
        while new_tokens < budget and self.heap:
            neg, tie, key = heapq.heappop(self.heap)
            current = self.pair_counts.get(key, 0)
            if current != -neg:
                if current > 0:
                    heapq.heappush(self.heap, (-current, tie, key))
                continue
            if current < min_count:
                break
            left, right = key >> 32, key & 0xFFFFFFFF
            data = self.token_bytes[left] + self.token_bytes[right]
            new_id = self.bytes_to_id.get(data)
            if new_id is None:
                new_id = len(self.token_bytes)
                self.token_bytes.append(data)
                self.bytes_to_id[data] = new_id
                new_tokens += 1
            if key not in merged:
                merged.add(key)
                self.merges.append((left, right))
            self._apply(key, left, right, new_id)
            if progress is not None and len(self.merges) % 1000 == 0:
                progress(new_tokens, budget)

    def _apply(self, key: int, left: int, right: int, new_id: int) -> None:
        """Merge the pair in every word that holds it, updating pair counts and pushing the pairs that grew."""
        pair_counts, where, words, counts = self.pair_counts, self.where, self.words, self.counts
        grown: set[int] = set()
        for wi in sorted(where.pop(key, ())):
            word = words[wi]
            new_word = _merge_word(word, left, right, new_id)
            if new_word is None:
                continue  # stale index entry: an earlier merge consumed the pair in this word
            count = counts[wi]
            delta = Counter(_pair_keys(new_word))
            delta.subtract(_pair_keys(word))
            for pkey, d in delta.items():
                if d:
                    pair_counts[pkey] = pair_counts.get(pkey, 0) + d * count
                    if d > 0:
                        where.setdefault(pkey, set()).add(wi)
                        grown.add(pkey)
            words[wi] = new_word
        pair_counts.pop(key, None)
        for pkey in sorted(grown):
            n = pair_counts.get(pkey, 0)
            if n > 0:
                heapq.heappush(self.heap, (-n, self._tie(pkey), pkey))


def run_merge_loop(
    words: list[list[int]],
    counts: list[int],
    budget: int,
    min_count: int,
    tie_break: str,
    alphabet: Sequence[bytes] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[tuple[int, int]], list[bytes]]:
    """(merges as id pairs in rank order, token bytes by id: the alphabet and the new tokens) of ``budget`` new
    tokens over ``words`` (``alphabet`` None: the 256 bytes). The native core's ``run_merge_loop`` gives the same."""
    loop = MergeLoop(words, counts, tie_break, alphabet)
    loop.run(budget, max(1, min_count), progress)
    return loop.merges, loop.token_bytes


def _pair_keys(word: list[int]) -> list[int]:
    return [word[i] << 32 | word[i + 1] for i in range(len(word) - 1)]


def _merge_word(word: list[int], left: int, right: int, new_id: int) -> list[int] | None:
    """Left-to-right, non-overlapping merge of (left, right); None if the pair does not occur."""
    out: list[int] = []
    i, n, hit = 0, len(word), False
    while i < n:
        if i + 1 < n and word[i] == left and word[i + 1] == right:
            out.append(new_id)
            i += 2
            hit = True
        else:
            out.append(word[i])
            i += 1
    return out if hit else None
