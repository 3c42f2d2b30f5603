"""The naive BPE trainer: recount every pair before every merge. Slow and obviously correct: the oracle."""

from __future__ import annotations

from bpe_core.model.bytelevel import huggingface_base_order


def naive_train(
    chunk_counts: dict[bytes, int],
    vocab_size: int,
    *,
    n_special: int = 0,
    min_frequency: int = 2,
    tie_break: str = "ids",
) -> list[tuple[bytes, bytes]]:
    """Merges as (left bytes, right bytes), by the rules documented on bpe_core.train."""
    token_bytes = [bytes([b]) for b in range(256)]
    ids_of = {t: i for i, t in enumerate(token_bytes)}
    hf_base = {b: i for i, b in enumerate(huggingface_base_order())}
    words = [(list(chunk), n) for chunk, n in chunk_counts.items() if n > 0]
    merges: list[tuple[bytes, bytes]] = []
    new_tokens = 0
    while new_tokens < vocab_size - 256 - n_special:
        counts: dict[tuple[int, int], int] = {}
        for word, n in words:
            for pair in zip(word, word[1:], strict=False):
                counts[pair] = counts.get(pair, 0) + n
        if not counts:
            break

        def order(pair, counts=counts):
            a, b = pair
            if tie_break == "ids":
                tie = (a, b)
            elif tie_break == "huggingface":
                tie = (hf_base.get(a, a), hf_base.get(b, b))
            else:
                tie = (token_bytes[a], token_bytes[b])
            return (-counts[pair], tie)

        best = min(counts, key=order)
        if counts[best] < max(1, min_frequency):
            break
        data = token_bytes[best[0]] + token_bytes[best[1]]
        if data not in ids_of:
            ids_of[data] = len(token_bytes)
            token_bytes.append(data)
            new_tokens += 1
        new_id = ids_of[data]
        if (token_bytes[best[0]], token_bytes[best[1]]) not in merges:
            merges.append((token_bytes[best[0]], token_bytes[best[1]]))
        words = [(_merge(word, best, new_id), n) for word, n in words]
    return merges


def _merge(word: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out
