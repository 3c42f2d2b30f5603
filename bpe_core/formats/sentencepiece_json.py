"""Hugging Face ``tokenizer.json`` for SentencePiece-style BPE: written from a ``.model`` or GGUF vocabulary so that
``tokenizers`` gives the same ids, and read back (any file of that shape: a BPE model with ``byte_fallback``, and
``Metaspace`` or ``Prepend`` + ``Replace("▁")`` for the spaces).

Written as ``transformers``' Llama converter writes them: the merges are every split of a piece into two pieces,
best score first (a merge list rule then gives the score rule's merges; sentencepiece breaks equal scores by
position, which a list cannot say: the rare pairs that differ are tested by ``convert``'s read-back). The dummy
prefix is a ``Metaspace`` with ``prepend_scheme="first"`` (``.model``: at the start of the text only) or a
``Prepend`` normalizer (llama.cpp: also after each token found in the text). What the format cannot hold is
refused with the reason: a ``precompiled_charsmap`` or whitespace collapsing (no exact Hugging Face equivalent
here), USER_DEFINED pieces matched after normalization, UNUSED pieces, whitespace as a suffix.
"""

from __future__ import annotations

import json

from bpe_core.errors import TokenizerFileError
from bpe_core.model.data import TokenizerData
from bpe_core.model.sentencepiece import (
    BYTE,
    CONTROL,
    NORMAL,
    SPACE,
    UNKNOWN,
    UNUSED,
    USER_DEFINED,
    SpmModel,
    byte_of_piece,
)

FAMILY = "Hugging Face tokenizer.json (SentencePiece-style BPE)"


def refuse_unsaid(model: SpmModel, target: str) -> None:
    """ValueError naming what ``target`` cannot hold of ``model``."""
    lost = []
    if model.charsmap:
        lost.append("the precompiled_charsmap normalizer")
    if model.remove_extra_whitespaces and model.rules == "sentencepiece":
        lost.append("remove_extra_whitespaces")
    if model.treat_whitespace_as_suffix:
        lost.append("treat_whitespace_as_suffix")
    if not model.escape_whitespaces:
        lost.append("unescaped whitespace")
    if model.rules == "sentencepiece" and UNUSED in model.types:
        lost.append("UNUSED pieces")
    if lost:
        raise ValueError(
            f"{target} cannot hold {', '.join(lost)} of this SentencePiece model, so it would give other ids; keep "
            "the .model file"
        )


def merge_list(model: SpmModel) -> list[tuple[int, int]]:
    """Every (left, right) whose concatenation is a mergeable piece, best merged score first."""
    if model.rules == "merges":
        return list(model.merges)
    table = model.mergeable
    out = []
    for piece, merged in table.items():
        for k in range(1, len(piece)):
            left, right = table.get(piece[:k]), table.get(piece[k:])
            if left is not None and right is not None:
                out.append((-model.scores[merged], merged, k, left, right))
    out.sort()
    return [(a, b) for *_, a, b in out]


def dumps_spm_huggingface(tok) -> bytes:
    model: SpmModel = tok.sentencepiece
    refuse_unsaid(model, "a tokenizer.json")
    pieces = model.pieces
    added = [
        {
            "id": i,
            "content": p,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": t == USER_DEFINED and model.user_matcher is not None,  # found in the normalized text
            "special": t in (CONTROL, UNKNOWN),
        }
        for i, (p, t) in enumerate(zip(pieces, model.types, strict=True))
        if t in (CONTROL, UNKNOWN, USER_DEFINED)
    ]
    # Prepend, not Metaspace: Metaspace adds no "▁" to a text that starts with a space (sentencepiece does).
    steps = [{"type": "Replace", "pattern": {"String": " "}, "content": SPACE}]
    if model.add_dummy_prefix:
        steps.insert(0, {"type": "Prepend", "prepend": SPACE})
    normalizer = {"type": "Sequence", "normalizers": steps}
    pre_tokenizer = None
    if model.split_newlines:
        pre_tokenizer = {"type": "Split", "pattern": {"Regex": "[^\\n]+|\\n+"}, "behavior": "Isolated", "invert": False}
    decoders = [
        {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
    ]
    if model.strips_prefix():
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    unk = pieces[model.unk_id] if model.unk_id is not None else None
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": unk,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": True,
            "ignore_merges": model.split_newlines,
            "vocab": {p: i for i, p in enumerate(pieces)},
            "merges": [[pieces[a], pieces[b]] for a, b in merge_list(model)],
        },
    }
    return json.dumps(spec, ensure_ascii=False, indent=1).encode("utf-8")


def is_spm_json(spec: dict) -> bool:
    """A BPE model with byte_fallback, or spaces as ``▁`` (Metaspace, Prepend/Replace): ours to read."""
    model = spec.get("model") or {}
    text = json.dumps([spec.get("normalizer"), spec.get("pre_tokenizer")])
    return model.get("type") == "BPE" and (model.get("byte_fallback") is True or SPACE in text)


def spm_json_data(spec: dict, path: str) -> TokenizerData:
    """The vocabulary of such a tokenizer.json; other normalizers and pre-tokenizers are refused by name."""
    from bpe_core.formats.sentencepiece import spm_tokenizer_data

    model = spec["model"]
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not all(isinstance(v, int) for v in vocab.values()):
        raise TokenizerFileError(path, "model.vocab is not an object of integer ids")
    size = max(vocab.values(), default=-1) + 1
    added = {t["content"]: t for t in spec.get("added_tokens") or [] if isinstance(t, dict) and "content" in t}
    size = max([size, *(t["id"] + 1 for t in added.values())])
    pieces = [""] * size
    for p, i in vocab.items():
        pieces[i] = p
    for p, t in added.items():
        pieces[t["id"]] = p
    holes = [i for i, p in enumerate(pieces) if not p]
    if holes:
        raise TokenizerFileError(path, f"ids {holes[:5]} have no token")
    unk = model.get("unk_token")
    types = []
    for p in pieces:
        t = added.get(p)
        if p == unk:
            types.append(UNKNOWN)
        elif t is not None and t.get("special"):
            types.append(CONTROL)
        elif t is not None:
            types.append(USER_DEFINED)  # normalized=true: frozen in the normalized text; else an added token
        elif byte_of_piece(p) is not None and model.get("byte_fallback"):
            types.append(BYTE)
        else:
            types.append(NORMAL)
    merges = _merges(model.get("merges") or [], vocab, path)
    prefix, after_special, split_newlines = _spaces(spec, path)
    spm = SpmModel(
        tuple(pieces),
        tuple(0.0 for _ in pieces),
        tuple(types),
        rules="merges",
        merges=tuple(merges),
        byte_fallback=bool(model.get("byte_fallback")),
        unk_id=vocab.get(unk) if unk is not None else None,
        add_dummy_prefix=prefix,
        remove_extra_whitespaces=False,
        escape_whitespaces=True,
        prefix_after_special=after_special,
        split_newlines=split_newlines,
        frozen_users=any(t.get("normalized") and not t.get("special") for t in added.values()),
    )
    specials = {p: t["id"] for p, t in added.items() if t.get("special")}
    users = {p: t["id"] for p, t in added.items() if not t.get("special") and not t.get("normalized")}
    return spm_tokenizer_data(spm, path, FAMILY, special_tokens=specials, added_tokens=users)


def _merges(entries: list, vocab: dict, path: str) -> list[tuple[int, int]]:
    out = []
    for rank, entry in enumerate(entries):
        parts = entry.split(" ", 1) if isinstance(entry, str) else entry
        if not isinstance(parts, list | tuple) or len(parts) != 2 or any(p not in vocab for p in parts):
            raise TokenizerFileError(path, f"merge {rank} {entry!r} is not two tokens of the vocabulary")
        out.append((vocab[parts[0]], vocab[parts[1]]))
    return out


def _spaces(spec: dict, path: str) -> tuple[bool, bool, bool]:
    """(dummy prefix, prefix after each found token, newline runs) from the normalizer and pre-tokenizer."""
    norm, pre = spec.get("normalizer"), spec.get("pre_tokenizer")
    steps = norm.get("normalizers", []) if isinstance(norm, dict) and norm.get("type") == "Sequence" else [norm]
    prefix = after = False
    for step in steps:
        if step is None:
            continue
        kind = step.get("type")
        if kind == "Prepend" and step.get("prepend") == SPACE:
            prefix = after = True
        elif kind == "Replace" and step.get("pattern") == {"String": " "} and step.get("content") == SPACE:
            pass
        else:
            raise TokenizerFileError(path, f"normalizer {kind} is not one this version reproduces exactly")
    newline = False
    if isinstance(pre, dict) and pre.get("type") == "Metaspace":
        if pre.get("split") or pre.get("replacement", SPACE) != SPACE:
            raise TokenizerFileError(path, "a Metaspace pre-tokenizer with split=true is not reproduced here")
        scheme = pre.get("prepend_scheme", "always" if pre.get("add_prefix_space", True) else "never")
        prefix, after = scheme != "never", scheme == "always"
    elif isinstance(pre, dict) and pre.get("type") == "Split" and pre.get("pattern") == {"Regex": "[^\\n]+|\\n+"}:
        newline = True
    elif pre is not None:
        raise TokenizerFileError(path, f"pre-tokenizer {pre.get('type')} is not one this version reproduces exactly")
    return prefix, after, newline


__all__ = ["dumps_spm_huggingface", "is_spm_json", "merge_list", "refuse_unsaid", "spm_json_data"]
