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


def naive_train_runs(
    run_words: dict[tuple[int, ...], int],
    alphabet: list[bytes],
    n_tokens: int,
    *,
    min_frequency: int = 2,
    tie_break: str = "ids",
) -> tuple[list[tuple[int, int]], list[bytes]]:
    """Phase 2 of a superword tokenizer by recounting every pair at every step, over ``alphabet`` (the word model's
    tokens by id; words are runs of its ids): the supermerges as id pairs in rank order and the extended vocabulary.
    A merge whose bytes are already a token reuses that id; a pair merged again later is listed once."""
    vocab = list(alphabet)
    bytes_to_id = {b: i for i, b in enumerate(vocab)}
    hf_base = {b: i for i, b in enumerate(huggingface_base_order())}
    words = [(list(w), n) for w, n in sorted(run_words.items()) if n > 0 and len(w) >= 2]
    merges: list[tuple[int, int]] = []
    made = 0
    while made < n_tokens:
        pairs: dict[tuple[int, int], int] = {}
        for word, n in words:
            for pair in zip(word, word[1:], strict=False):
                pairs[pair] = pairs.get(pair, 0) + n
        if not pairs:
            break

        def order(pair, pairs=pairs):
            a, b = pair
            if tie_break == "ids":
                tie = (a, b)
            elif tie_break == "huggingface":
                tie = (hf_base.get(a, a), hf_base.get(b, b))
            else:
                tie = (vocab[a], vocab[b])
            return (-pairs[pair], tie)

        best = min(pairs, key=order)
        if pairs[best] < max(1, min_frequency):
            break
        data = vocab[best[0]] + vocab[best[1]]
        new_id = bytes_to_id.get(data)
        if new_id is None:
            new_id = len(vocab)
            vocab.append(data)
            bytes_to_id[data] = new_id
            made += 1
        if best not in merges:
            merges.append(best)
        words = [(_merge(word, best, new_id), n) for word, n in words]
    return merges, vocab


def naive_apply_merges(run: list[int], ranked: list[tuple[int, int]], results: list[int]) -> list[int]:
    """BPE over one run by a scan per step: the lowest-ranked adjacent pair (its first rank), the leftmost on ties."""
    table: dict[tuple[int, int], tuple[int, int]] = {}
    for rank, pair in enumerate(ranked):
        table.setdefault(pair, (rank, results[rank]))
    run = list(run)
    while len(run) >= 2:
        best, at = None, -1
        for i in range(len(run) - 1):
            hit = table.get((run[i], run[i + 1]))
            if hit is not None and (best is None or hit[0] < best[0]):
                best, at = hit, i
        if best is None:
            break
        run[at : at + 2] = [best[1]]
    return run
