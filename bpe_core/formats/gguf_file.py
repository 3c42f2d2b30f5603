"""llama.cpp GGUF vocabularies (``tokenizer.ggml.model == "gpt2"``: byte-level BPE).

Keys read: ``tokenizer.ggml.tokens`` (GPT-2 byte-to-unicode strings), ``tokenizer.ggml.merges`` (``"a b"`` in rank
order), ``tokenizer.ggml.token_type`` (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte) and
``tokenizer.ggml.pre`` (the pre-tokenizer name, looked up in :mod:`bpe_core.pretokenize.llamacpp`). As llama.cpp does:
control (and unknown) tokens are special tokens, parsed only when allowed; user-defined tokens are matched in the
raw text before pre-tokenization, longest first, also by ``encode_ordinary``; unused tokens are never produced.

The metadata is read by :mod:`bpe_core.formats.gguf_reader`, not by ``gguf.GGUFReader``, which needs 26 s for the
Llama 3 vocabulary on this machine (a numpy view per string); the tests check both readers agree.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import TYPE_CHECKING

from bpe_core.errors import TokenizerFileError
from bpe_core.formats.gguf_reader import read_gguf_metadata
from bpe_core.model.bytelevel import token_string_to_bytes, token_strings_to_bytes
from bpe_core.model.data import TokenizerData
from bpe_core.pretokenize.llamacpp import LLAMACPP_PRETOKENIZERS

if TYPE_CHECKING:
    from bpe_core.pretokenize.pretokenizer import PreTokenizerSpec

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
FAMILY = "llama.cpp GGUF (byte-level BPE)"
_UNSUPPORTED_MODELS = {
    "bert": "WordPiece",
    "t5": "Unigram",
    "rwkv": "RWKV trie",
    "plamo2": "PLaMo-2 Aho-Corasick",
    "no_vocab": "no vocabulary",
}


def load_gguf(path: str, *, pretokenizer: PreTokenizerSpec | None = None) -> TokenizerData:
    """What the vocabulary of a GGUF file holds; ``pretokenizer`` overrides ``tokenizer.ggml.pre``."""
    with _collector_paused():
        return _load_gguf(path, pretokenizer)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while a vocabulary is read: its objects (strings, bytes, pairs of ints)
    hold no cycles, and the collections their ~350k allocations set off (Qwen 3.5: 196 young, 18 middle and one
    full collection, the full one over every object of the process: a launcher's Beam modules too) took 0.07-0.1 s
    of a 0.5-0.6 s load in a bare interpreter."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _load_gguf(path: str, pretokenizer: PreTokenizerSpec | None) -> TokenizerData:
    meta = read_gguf_metadata(path)
    model = meta.get("tokenizer.ggml.model")
    if model in ("llama", "gemma4"):
        from bpe_core.formats.gguf_spm import load_gguf_spm

        if pretokenizer is not None:
            raise ValueError(f"{path} is a SentencePiece-style GGUF ({model}); it takes no pretokenizer argument")
        return load_gguf_spm(meta, path)
    if model != "gpt2":
        kind = _UNSUPPORTED_MODELS.get(model, "unknown") if isinstance(model, str) else "missing"
        raise TokenizerFileError(
            path,
            f"tokenizer.ggml.model is {model!r} ({kind}); supported: 'gpt2' (byte-level BPE), 'llama' and 'gemma4' "
            "(SentencePiece-style BPE)",
        )
    tokens = _string_list(meta, "tokenizer.ggml.tokens", path)
    types = _token_types(meta.get("tokenizer.ggml.token_type"), len(tokens), path)
    vocab, specials, added, textual = _split_tokens(tokens, types, path)
    merges = _merges(_string_list(meta, "tokenizer.ggml.merges", path), tokens, vocab, path)
    patterns, ignore_merges, pre_name = _pretokenizer(meta.get("tokenizer.ggml.pre"), pretokenizer, path)
    name = meta.get("general.name")
    return TokenizerData(
        vocab,
        merges=merges,
        pretokenizer=patterns,
        special_tokens=specials,
        added_tokens=added,
        ignore_merges=ignore_merges,
        name=name if isinstance(name, str) else None,
        family=f"{FAMILY}, pre={pre_name}",
        unreachable=frozenset(textual),
        source=str(path),
        declared_tokens=declared_tokens(meta, {**specials, **added}),
    )


def declared_tokens(meta: dict, tokens: dict[str, int]) -> dict[str, int]:
    """``tokenizer.ggml.bos_token_id`` / ``eos_token_id`` where they name a special or added token."""
    ids = set(tokens.values())
    out = {}
    for kind in ("bos", "eos"):
        value = meta.get(f"tokenizer.ggml.{kind}_token_id")
        if isinstance(value, int) and value in ids:
            out[kind] = value
    return out


def _string_list(meta: dict, key: str, path: str) -> list[str]:
    value = meta.get(key)
    if not isinstance(value, list) or not set(map(type, value)) <= {str}:  # (the reader makes str, not subclasses)
        raise TokenizerFileError(path, f"{key} is missing or not an array of strings")
    return value


def _token_types(types: object, count: int, path: str) -> list[int]:
    if types is None:
        return [NORMAL] * count  # llama.cpp's default when the key is absent
    if not isinstance(types, list) or not set(map(type, types)) <= {int, bool}:
        raise TokenizerFileError(path, "tokenizer.ggml.token_type is not an array of integers")
    if len(types) != count:
        raise TokenizerFileError(path, f"{count} tokens but {len(types)} token types")
    return types


def _split_tokens(tokens: list[str], types: list[int], path: str):
    """BPE vocabulary (id -> bytes), special tokens and user-defined tokens (text -> id), and the ids of normal
    tokens spelled as raw text rather than in GPT-2 byte-level form (1,403 of Command-R's: emoji, symbols). As in
    llama.cpp, whose pre-tokenizer hands BPE byte-level text only, no merge ever makes those; they are kept, decoded
    as Hugging Face's ByteLevel decoder does (the UTF-8 of their text), and listed by ``unreachable_tokens()``.

    The BPE tokens are decoded in one pass where all are in byte-level form (Qwen 3.5: 0.075-0.083 s -> 0.058 s
    at load 4); a vocabulary with raw-text tokens goes token by token."""
    bpe_ids, other_ids = [], []
    for tid, kind in enumerate(types):
        (bpe_ids if kind == NORMAL or kind == BYTE or kind == UNUSED else other_ids).append(tid)
    data = token_strings_to_bytes([tokens[tid] for tid in bpe_ids])
    if data is None:  # some are raw text
        vocab, textual = _decode(tokens, types, bpe_ids)
    else:
        vocab, textual = dict(zip(bpe_ids, data, strict=True)), []
    specials: dict[str, int] = {}
    added: dict[str, int] = {}
    for tid in other_ids:
        kind = types[tid]
        if kind in (CONTROL, UNKNOWN):
            specials[tokens[tid]] = tid
        elif kind == USER_DEFINED:
            added[tokens[tid]] = tid
        else:
            raise TokenizerFileError(path, f"token {tid} {tokens[tid]!r} has unknown token type {kind}")
    return vocab, specials, added, textual


def _decode(tokens: list[str], types: list[int], bpe_ids: list[int]) -> tuple[dict[int, bytes], list[int]]:
    """The BPE tokens one by one, where some are raw text (their ids the second value)."""
    vocab: dict[int, bytes] = {}
    textual: list[int] = []
    for tid in bpe_ids:
        try:
            vocab[tid] = token_string_to_bytes(tokens[tid])
        except KeyError:
            if types[tid] == UNUSED:
                continue  # never produced; llama.cpp keeps it only as text
            vocab[tid] = tokens[tid].encode("utf-8", "surrogatepass")
            textual.append(tid)
    return vocab, textual


def _merges(entries: list[str], tokens: list[str], vocab: dict[int, bytes], path: str) -> list[tuple[int, int]]:
    """The merges as id pairs: by the native core where it loaded and every entry is two tokens (Qwen 3.5's
    151,387: 0.11-0.14 s of dict lookups here, 0.07 s there at load 4), else here, naming the first problem."""
    from bpe_core import native

    if native.available() and hasattr(native._core, "gguf_merge_pairs"):
        pairs = native._core.gguf_merge_pairs(tokens, list(vocab), entries)
        if pairs is not None:
            return pairs
    text_to_id = {tokens[i]: i for i in vocab}
    out = []
    for rank, entry in enumerate(entries):
        try:
            left, right = entry.split(" ")  # byte-level token strings never contain a space
            out.append((text_to_id[left], text_to_id[right]))
        except (ValueError, KeyError):
            raise TokenizerFileError(path, _merge_problem(rank, entry, text_to_id)) from None
    return out


def _merge_problem(rank: int, entry: str, text_to_id: dict[str, int]) -> str:
    parts = entry.split(" ")
    if len(parts) != 2:
        return f"merge {rank} {entry!r} is not two tokens separated by one space"
    missing = next(p for p in parts if p not in text_to_id)
    return f"merge {rank} {entry!r} references {missing!r}, which is not a token of the vocabulary"


def _pretokenizer(name, override: PreTokenizerSpec | None, path: str):
    """(patterns, ignore_merges, name): the override, else llama.cpp's entry for ``tokenizer.ggml.pre``."""
    if override is not None:
        from bpe_core.pretokenize.presets import lookup_preset

        preset = lookup_preset(override) if isinstance(override, str) else None
        ignore = preset.ignore_merges if preset is not None else False
        return override, ignore, override if isinstance(override, str) else "given"
    if name not in LLAMACPP_PRETOKENIZERS:
        known = ", ".join(sorted(LLAMACPP_PRETOKENIZERS))
        raise TokenizerFileError(
            path,
            f"tokenizer.ggml.pre is {name!r}, not a pre-tokenizer this version knows (known: {known}); pass one "
            "explicitly: Tokenizer.from_gguf(path, pretokenizer='llama-bpe' or a regex or a list of regexes)",
        )
    patterns, ignore_merges = LLAMACPP_PRETOKENIZERS[name]
    return _preset_pretokenizer(name, patterns), ignore_merges, name


def _preset_pretokenizer(name: str, patterns):
    from bpe_core.pretokenize.pretokenizer import PreTokenizer

    return PreTokenizer(patterns, name=name)
