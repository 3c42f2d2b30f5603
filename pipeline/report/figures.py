"""The report's figures, from the summed measures of the sample and the tokenizers themselves (no Beam here)."""

from __future__ import annotations

import numpy as np

from bpe_core.model.bytelevel import bytes_to_token_string

LONGEST = 10
MERGES_SHOWN = 5


def unreachable_ids(tok) -> list[int]:
    """``Tokenizer.unreachable_tokens()`` where bpe_core has it; else the tokens that encoding their own bytes as
    one piece does not give back (what makes a token unreachable for a merge list)."""
    method = getattr(tok, "unreachable_tokens", None)
    if method is not None:
        return list(method())
    return [i for i, data in sorted(tok.vocab.items()) if data and tok.encode_piece_bytes(data) != [i]]


def _merge_text(left: bytes, right: bytes) -> str:
    b2u = bytes_to_token_string
    return f"{b2u(left)} + {b2u(right)} -> {b2u(left + right)}"


def tokenizer_figures(tok, measured: dict | None) -> dict:
    """One tokenizer's row of the report: compression on the sample, use of its vocabulary, what it holds."""
    vocab = tok.vocab
    m = measured or {"documents": 0, "bytes": 0, "words": 0, "tokens": 0, "multibyte_bytes": 0, "uses": None}
    ids = np.fromiter(sorted(vocab), np.int64, len(vocab))
    never_used = len(ids) if m["uses"] is None else int((m["uses"][ids] == 0).sum())
    merges = tok.merges
    longest = sorted(vocab.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:LONGEST]
    return {
        "n_vocab": tok.n_vocab,
        "bpe_tokens": len(vocab),
        "special_tokens": len(tok.special_tokens),
        "merges": len(merges),
        "documents": m["documents"],
        "bytes": m["bytes"],
        "words": m["words"],
        "tokens": m["tokens"],
        "bytes_per_token": round(m["bytes"] / m["tokens"], 4) if m["tokens"] else None,
        "tokens_per_word": round(m["tokens"] / m["words"], 4) if m["words"] else None,
        "multibyte_share": round(m["multibyte_bytes"] / m["bytes"], 4) if m["bytes"] else None,
        "never_used": never_used,
        "never_used_share": round(never_used / len(vocab), 4) if vocab else None,
        "unreachable": len(unreachable_ids(tok)),
        "longest_tokens": [{"id": i, "bytes": len(b), "token": bytes_to_token_string(b)} for i, b in longest],
        "first_merges": [_merge_text(a, b) for a, b in merges[:MERGES_SHOWN]],
        "last_merges": [_merge_text(a, b) for a, b in merges[-MERGES_SHOWN:]] if merges else [],
    }
