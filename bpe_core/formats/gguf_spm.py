"""llama.cpp GGUF vocabularies of SentencePiece-style BPE: ``tokenizer.ggml.model`` = ``llama`` (scores) or
``gemma4`` (an explicit merge list over ``▁``-escaped text, cut into runs of newlines and of other characters).

As llama.cpp applies them: control (and unknown) tokens are special tokens, parsed only when allowed; user-defined
tokens are matched in the raw text first, longest first (added tokens), and the space prefix
(``tokenizer.ggml.add_space_prefix``, default true for ``llama``) goes before the text and after each such token.
"""

from __future__ import annotations

import math

from bpe_core.errors import TokenizerFileError
from bpe_core.model.data import TokenizerData
from bpe_core.model.sentencepiece import CONTROL, UNKNOWN, USER_DEFINED, SpmModel

FAMILY = "llama.cpp GGUF (SentencePiece-style BPE)"


def load_gguf_spm(meta: dict, path: str) -> TokenizerData:
    """The vocabulary of a GGUF whose ``tokenizer.ggml.model`` is ``llama`` or ``gemma4``."""
    from bpe_core.formats.sentencepiece import spm_tokenizer_data

    model_name = meta["tokenizer.ggml.model"]
    tokens = meta.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise TokenizerFileError(path, "tokenizer.ggml.tokens is missing or not an array of strings")
    scores = _numbers(meta, "tokenizer.ggml.scores", len(tokens), path, required=model_name == "llama")
    types = _types(meta.get("tokenizer.ggml.token_type"), len(tokens), path)
    merges: tuple[tuple[int, int], ...] = ()
    if model_name == "gemma4":
        merges = _merges(meta.get("tokenizer.ggml.merges"), tokens, path)
    for b in range(256) if model_name == "llama" else ():
        if f"<0x{b:02X}>" not in tokens:
            raise TokenizerFileError(path, f"has no byte token <0x{b:02X}>, which llama.cpp's byte fallback needs")
    prefix = meta.get("tokenizer.ggml.add_space_prefix", model_name == "llama")
    model = SpmModel(
        tuple(tokens),
        tuple(scores),
        tuple(types),
        rules="llama.cpp" if model_name == "llama" else "merges",
        merges=merges,
        byte_fallback=True,
        unk_id=_token_id(meta, "tokenizer.ggml.unknown_token_id", len(tokens)),
        bos_id=_token_id(meta, "tokenizer.ggml.bos_token_id", len(tokens)),
        eos_id=_token_id(meta, "tokenizer.ggml.eos_token_id", len(tokens)),
        add_dummy_prefix=bool(prefix),
        remove_extra_whitespaces=False,
        escape_whitespaces=True,
        prefix_after_special=True,
        split_newlines=model_name == "gemma4",
    )
    specials = {t: i for i, (t, k) in enumerate(zip(tokens, types, strict=True)) if k in (CONTROL, UNKNOWN)}
    added = {t: i for i, (t, k) in enumerate(zip(tokens, types, strict=True)) if k == USER_DEFINED}
    name = meta.get("general.name")
    return spm_tokenizer_data(
        model,
        path,
        f"{FAMILY}, model={model_name}",
        special_tokens=specials,
        added_tokens=added,
        name=name if isinstance(name, str) else None,
    )


def _numbers(meta: dict, key: str, count: int, path: str, *, required: bool) -> list[float]:
    values = meta.get(key)
    if values is None and not required:
        return [0.0] * count
    if not isinstance(values, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise TokenizerFileError(
            path,
            f"{key} is missing or not an array of numbers (tokenizer.ggml.model 'llama', SentencePiece-style BPE, "
            "merges by score: one score per token)",
        )
    if len(values) != count:
        raise TokenizerFileError(path, f"{count} tokens but {len(values)} scores in {key}")
    bad = next((i for i, v in enumerate(values) if not math.isfinite(v)), None)
    if bad is not None:
        raise TokenizerFileError(path, f"{key}[{bad}] is {values[bad]}, not a finite number")
    return [float(v) for v in values]


def _types(types: object, count: int, path: str) -> list[int]:
    if types is None:
        return [1] * count
    if not isinstance(types, list) or not all(isinstance(t, int) for t in types):
        raise TokenizerFileError(path, "tokenizer.ggml.token_type is not an array of integers")
    if len(types) != count:
        raise TokenizerFileError(path, f"{count} tokens but {len(types)} token types")
    bad = next((i for i, t in enumerate(types) if t not in range(1, 7)), None)
    if bad is not None:
        raise TokenizerFileError(path, f"token {bad} has unknown token type {types[bad]}")
    return types


def _merges(entries: object, tokens: list[str], path: str) -> tuple[tuple[int, int], ...]:
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise TokenizerFileError(path, "tokenizer.ggml.merges is missing or not an array of strings")
    text_to_id = {t: i for i, t in enumerate(tokens)}
    out = []
    for rank, entry in enumerate(entries):
        cut = entry.find(" ", 1)  # llama.cpp: the first space after the first character
        left, right = (entry[:cut], entry[cut + 1 :]) if cut > 0 else (entry, "")
        if left not in text_to_id or right not in text_to_id:
            missing = left if left not in text_to_id else right
            raise TokenizerFileError(path, f"merge {rank} {entry!r} references {missing!r}, which is not a token")
        out.append((text_to_id[left], text_to_id[right]))
    return tuple(out)


def _token_id(meta: dict, key: str, count: int) -> int | None:
    value = meta.get(key)
    return value if isinstance(value, int) and 0 <= value < count else None


__all__ = ["load_gguf_spm"]
