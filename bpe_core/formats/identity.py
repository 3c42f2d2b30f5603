"""A tokenizer's identity and description: ``Tokenizer.digest`` (the sha256 of what decides the ids, the same for
every file format holding the same tokenizer) and ``Tokenizer.describe`` (what ``beam-bpe info`` prints), both
read through the Tokenizer's public attributes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

Tokenizer = Any  # bpe_core.tokenizer.Tokenizer, which imports this module (no import back: no circle)


def tokenizer_digest(tok: Tokenizer, *, unreachable: Iterable[int] = ()) -> str:
    """sha256 (hex) of vocabulary, merges, special and added tokens (and their flags), pre-tokenizer and
    normalizer, the ``unreachable`` ids the file marked (only where there are some) and the supermerges (likewise),
    so that every earlier digest stays as it was."""
    import numpy as np

    digest = hashlib.sha256()
    vocab = tok.vocab
    ids = sorted(vocab)
    digest.update(np.asarray(ids, dtype="<i8").tobytes())
    digest.update(np.asarray([len(vocab[i]) for i in ids], dtype="<i8").tobytes())
    digest.update(b"".join(vocab[i] for i in ids))
    if tok.kind == "merges":
        digest.update(np.asarray(tok.merge_ids, dtype="<i8").tobytes())
    pre = tok.pretokenizer
    meta = {
        "kind": tok.kind,
        "ignore_merges": tok.ignore_merges,
        "special_tokens": tok.special_tokens,
        "added_tokens": tok.added_tokens,
        "token_flags": {t: f.as_dict() for t, f in tok.token_flags.items()},
        "pretokenizer": list(pre.patterns) if pre else None,
        "normalizer": pre.normalizer if pre else None,
    }
    unreachable = sorted(unreachable)
    if unreachable:
        meta["unreachable"] = unreachable
    if getattr(tok, "sentencepiece", None) is not None:  # likewise
        meta["sentencepiece"] = tok.sentencepiece.identity()
    if tok.superword is not None:  # likewise
        sw = tok.superword
        meta["superword"] = {"rule": sw.rule, "word_size": sw.word_size, "merges": [list(m) for m in sw.merges]}
    digest.update(json.dumps(meta, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def describe(tok: Tokenizer) -> dict:
    """What ``beam-bpe info`` prints."""
    pre = tok.pretokenizer
    sw = tok.superword
    return {
        "name": tok.name,
        "family": tok.family,
        "kind": "sentencepiece" if getattr(tok, "sentencepiece", None) is not None else tok.kind,
        "normalizer": pre.normalizer if pre else None,
        "pretokenizer": pre.describe() if pre else None,
        "patterns": list(pre.patterns) if pre else None,
        "ignore_merges": tok.ignore_merges,
        "n_vocab": tok.n_vocab,
        "bpe_tokens": len(tok.vocab),
        "merges": len(tok.merge_ids) if tok.kind == "merges" else None,
        "special_tokens": dict(sorted(tok.special_tokens.items(), key=lambda kv: kv[1])),
        "added_tokens": dict(sorted(tok.added_tokens.items(), key=lambda kv: kv[1])),
        "token_flags": {t: f.as_dict() for t, f in sorted(tok.token_flags.items())},
        "unreachable_tokens": len(tok.unreachable_tokens()),
        **({} if getattr(tok, "sentencepiece", None) is None else {"sentencepiece": tok.sentencepiece.describe()}),
        "superword": None
        if sw is None
        else {"rule": sw.rule, "word_model": sw.word_size, "supermerges": len(sw.merges)},
    }
