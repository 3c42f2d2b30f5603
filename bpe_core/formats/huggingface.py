"""Hugging Face ``tokenizer.json`` files of byte-level BPE tokenizers (GPT-2, Llama 3, Qwen2, DeepSeek, ...).

What is read: the BPE model (vocabulary in GPT-2 byte-to-unicode form, merges spelled ``"a b"`` or ``["a", "b"]``,
``ignore_merges``), the normalizer (NFC, NFKC), the pre-tokenizer (see :mod:`bpe_core.formats.hf_components`) and
the added tokens with their flags. What is ignored, because it never changes the ids of ``encode`` with
``add_special_tokens=False``: the decoder (ByteLevel or none), the post-processor (it adds BOS/EOS ids; the encode
pipeline has ``--bos``/``--eos``), truncation and padding. Anything else that would change ids is refused with
a message naming the component and the file.
"""

from __future__ import annotations

import json
import warnings

from bpe_core._io import read_bytes, write_bytes_atomic
from bpe_core.errors import TokenizerFileError
from bpe_core.formats.hf_components import (
    UnsupportedComponent,
    normalizer_from_hf,
    normalizer_to_hf,
    pretokenizer_from_hf,
    pretokenizer_to_hf,
)
from bpe_core.model.added_tokens import AddedTokenFlags
from bpe_core.model.bytelevel import bytes_to_token_string, token_string_to_bytes
from bpe_core.model.data import TokenizerData, TokenizerLike, refuse_superword, text_spelled_ids
from bpe_core.pretokenize.pretokenizer import PreTokenizer

FAMILY = "huggingface tokenizer.json (byte-level BPE)"
_DECODERS = (None, "ByteLevel")


def load_huggingface(path: str) -> TokenizerData:
    return loads_huggingface(read_bytes(path), str(path))


def loads_huggingface(data: bytes, path: str = "<bytes>") -> TokenizerData:
    """Parse a ``tokenizer.json``; raises TokenizerFileError naming the file and the problem."""
    spec = parse_json(data, path)
    if not isinstance(spec, dict) or not isinstance(spec.get("model"), dict):
        raise TokenizerFileError(path, "no 'model' object: not a Hugging Face tokenizer.json")
    model = spec["model"]
    _check_model(model, path)
    try:
        normalizer = normalizer_from_hf(spec.get("normalizer"))
        patterns = pretokenizer_from_hf(spec.get("pre_tokenizer"))
        _check_decoder(spec.get("decoder"))
    except UnsupportedComponent as exc:
        raise TokenizerFileError(path, f"{exc}; this file cannot be loaded with the same ids") from None
    except (TypeError, AttributeError) as exc:  # a component of the wrong JSON type deep inside (e.g. a number)
        raise TokenizerFileError(path, f"malformed normalizer, pre_tokenizer or decoder entry: {exc}") from None
    added = _added_tokens(_list(spec, "added_tokens", path), path)
    text_to_id = _model_vocab(model.get("vocab"), path)
    _check_added_ids(added, text_to_id, path)
    merges = _merges(_list(model, "merges", path), text_to_id, path)
    vocab, textual = byte_vocab(text_to_id, {t["id"] for t in added}, merge_token_ids(merges, text_to_id), path)
    try:
        pre = PreTokenizer(patterns, normalizer=normalizer)
    except ValueError as exc:
        raise TokenizerFileError(path, str(exc)) from None
    return TokenizerData(
        vocab,
        merges=merges,
        pretokenizer=pre,
        special_tokens={t["content"]: t["id"] for t in added if t.get("special")},
        added_tokens={t["content"]: t["id"] for t in added if not t.get("special")},
        token_flags={t["content"]: _flags(t) for t in added},
        ignore_merges=bool(model.get("ignore_merges", False)),
        family=FAMILY,
        unreachable=frozenset(textual),
        source=str(path),
    )


def parse_json(data: bytes, path: str):
    """JSON with duplicate object keys refused (a later key would silently replace an earlier token)."""

    def no_duplicates(pairs):
        seen = {}
        for key, value in pairs:
            if key in seen:
                raise TokenizerFileError(path, f"key {key!r} appears twice in one JSON object (duplicate token?)")
            seen[key] = value
        return seen

    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=no_duplicates)
    except UnicodeDecodeError as exc:
        raise TokenizerFileError(path, f"not UTF-8 at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise TokenizerFileError(path, f"not valid JSON: {exc.msg}", line=exc.lineno) from None


def _list(spec: dict, key: str, path: str) -> list:
    value = spec.get(key) or []
    if not isinstance(value, list):
        raise TokenizerFileError(path, f"{key} is {value!r:.60}, not a list")
    return value


def _check_model(model: dict, path: str) -> None:
    kind = model.get("type", "BPE" if "merges" in model else None)
    if kind != "BPE":
        raise TokenizerFileError(
            path,
            f"model type {kind!r} is not supported: only byte-level BPE is (WordPiece, Unigram and WordLevel "
            "tokenizers split words differently)",
        )
    if not isinstance(model.get("ignore_merges", False), bool):
        raise TokenizerFileError(path, f"model.ignore_merges is {model['ignore_merges']!r}, not true or false")
    if model.get("dropout") not in (None, 0, 0.0):
        raise TokenizerFileError(path, f"BPE dropout {model['dropout']} makes ids random; set it to null")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise TokenizerFileError(path, f"BPE {key} {model[key]!r} is not supported (byte-level BPE has none)")


def _check_decoder(decoder: dict | None) -> None:
    kind = None if decoder is None else decoder.get("type")
    if kind not in _DECODERS:
        raise UnsupportedComponent(f"decoder {kind!r} is not supported (supported: ByteLevel or none)")


def _added_tokens(entries: list, path: str) -> list[dict]:
    seen_text: dict[str, int] = {}
    seen_id: dict[int, str] = {}
    out = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str) or not _is_id(entry.get("id")):
            raise TokenizerFileError(path, f"added token {entry!r} needs a string 'content' and an integer 'id'")
        text, tid = entry["content"], entry["id"]
        flags = [
            k
            for k in ("special", "lstrip", "rstrip", "single_word", "normalized")
            if not isinstance(entry.get(k, False), bool)
        ]
        if flags:  # bool("no") is True: a string flag would silently match differently
            raise TokenizerFileError(
                path, f"added token {text!r}: {flags[0]} is {entry[flags[0]]!r}, not true or false"
            )
        if not text:
            continue  # tokenizers ignores empty added tokens
        if text in seen_text:
            raise TokenizerFileError(path, f"added token {text!r} is listed twice (ids {seen_text[text]} and {tid})")
        if tid in seen_id:
            raise TokenizerFileError(path, f"added tokens {seen_id[tid]!r} and {text!r} share the id {tid}")
        seen_text[text], seen_id[tid] = tid, text
        out.append(entry)
    return out


def _flags(entry: dict) -> AddedTokenFlags:
    # tokenizers' defaults when a flag is absent: normalized is true for non-special tokens only.
    return AddedTokenFlags(
        lstrip=bool(entry.get("lstrip", False)),
        rstrip=bool(entry.get("rstrip", False)),
        single_word=bool(entry.get("single_word", False)),
        normalized=bool(entry.get("normalized", not entry.get("special", False))),
    )


def _is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _model_vocab(vocab, path: str) -> dict[str, int]:
    if not isinstance(vocab, dict) or not vocab:
        raise TokenizerFileError(path, "model.vocab is missing or empty")
    by_id: dict[int, str] = {}
    for text, tid in vocab.items():
        if not _is_id(tid):
            raise TokenizerFileError(path, f"vocab entry {text!r} has id {tid!r}, not a non-negative integer")
        if tid in by_id:
            raise TokenizerFileError(path, f"vocab entries {by_id[tid]!r} and {text!r} share the id {tid}")
        by_id[tid] = text
    return vocab


def _check_added_ids(added: list[dict], text_to_id: dict[str, int], path: str) -> None:
    """Refuse ids that ``tokenizers`` would not give: it takes a token's id from the model vocabulary when the
    token is there, and otherwise numbers added tokens consecutively after the vocabulary, ignoring the file."""
    assigned: dict[str, int] = {}
    size = len(text_to_id)
    for entry in added:
        text = entry["content"]
        if text in text_to_id:
            tid = text_to_id[text]
        elif not assigned or (max(assigned.values()) < size and size > 0):
            tid = size
        else:
            tid = max(assigned.values()) + 1
        if tid != entry["id"]:
            raise TokenizerFileError(
                path,
                f"added token {text!r} is listed with id {entry['id']}, but tokenizers gives it id {tid} "
                "(ids after the vocabulary must follow on without gaps); correct the id in the file",
            )
        assigned[text] = tid


def merge_token_ids(merges: list[tuple[int, int]], text_to_id: dict[str, int]) -> set[int]:
    """Every id a merge uses or makes (such tokens stay in the BPE vocabulary even when also added tokens)."""
    id_to_text = {i: t for t, i in text_to_id.items()}
    used = {i for pair in merges for i in pair}
    for left, right in merges:
        made = text_to_id.get(id_to_text[left] + id_to_text[right])
        if made is not None:
            used.add(made)
    return used


def byte_vocab(
    text_to_id: dict[str, int], owned: set[int], used: set[int], path: str
) -> tuple[dict[int, bytes], list[int]]:
    """Token bytes by id, and the ids spelled as raw text rather than in GPT-2 byte-level form. An id that an added
    or special token owns (``<|endoftext|>`` is often in both lists) is left to that token unless a merge needs it,
    so ordinary text can never produce a special id by BPE. A token with a character outside the byte-level
    alphabet (Command-R's emoji and symbols) is kept: no merge makes it (the ByteLevel pre-tokenizer hands BPE
    byte-level text only), and its bytes are the UTF-8 of its text, as the ByteLevel decoder gives it."""
    vocab: dict[int, bytes] = {}
    textual: list[int] = []
    for text, tid in text_to_id.items():
        if tid in owned and tid not in used:
            continue
        try:
            vocab[tid] = token_string_to_bytes(text)
        except KeyError:
            vocab[tid] = text.encode("utf-8", "surrogatepass")
            textual.append(tid)
    _warn_unmade(vocab, owned | used | set(textual), path)
    return vocab, sorted(textual)


def _warn_unmade(vocab: dict[int, bytes], reached: set[int], path: str) -> None:
    """Warn where multi-byte tokens above every merged id are made by no merge: the sign of a merge list cut short
    (cut at a line boundary, merges.txt still parses and would load as a smaller tokenizer giving other ids).
    Unmade tokens below that (special tokens first in the vocabulary, say) are left alone."""
    last_reached = max((tid for tid in reached if len(vocab.get(tid, b"")) > 1), default=-1)
    unmade = sorted(tid for tid, b in vocab.items() if len(b) > 1 and tid not in reached and tid > last_reached)
    if unmade:  # only after the last token a merge makes or uses: where a cut list leaves them
        examples = ", ".join(f"{vocab[t]!r} (id {t})" for t in unmade[:3])
        warnings.warn(
            f"{path}: {len(unmade)} multi-byte token(s) of the vocabulary are made by no merge ({examples}); BPE "
            "never produces them. If the merge list was cut short, this tokenizer is not the one it was meant to be",
            UserWarning,
            stacklevel=4,
        )


def _merges(entries: list, text_to_id: dict[str, int], path: str) -> list[tuple[int, int]]:
    merges = []
    for rank, entry in enumerate(entries):
        if isinstance(entry, str):
            parts = entry.split(" ")
        elif isinstance(entry, list) and all(isinstance(p, str) for p in entry):
            parts = entry
        else:
            raise TokenizerFileError(path, f'merge {rank} is {entry!r}: expected "a b" or ["a", "b"]')
        if len(parts) != 2:
            raise TokenizerFileError(path, f"merge {rank} {entry!r} does not have exactly two parts")
        missing = [p for p in parts if p not in text_to_id]
        if missing:
            raise TokenizerFileError(
                path, f"merge {rank} {entry!r} references {missing[0]!r}, which is not in the vocab"
            )
        merges.append((text_to_id[parts[0]], text_to_id[parts[1]]))
    return merges


# ----------------------------------------------------------------------------------------------- export
def dumps_huggingface(tok: TokenizerLike) -> bytes:
    """A ``tokenizer.json`` equal to ``tok``: merges for rank-only vocabularies are derived (with
    ignore_merges, as Hugging Face's own tiktoken conversions do)."""
    refuse_superword(tok, "a tokenizer.json")
    if tok.pretokenizer is None:
        raise ValueError("this tokenizer has no pre-tokenizer; a tokenizer.json needs one (give pretokenizer=...)")
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": _export_added(tok),
        "normalizer": normalizer_to_hf(tok.pretokenizer.normalizer),
        "pre_tokenizer": pretokenizer_to_hf(tok.pretokenizer.patterns),
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": tok.ignore_merges,
            "vocab": _export_vocab(tok),
            "merges": [f"{bytes_to_token_string(a)} {bytes_to_token_string(b)}" for a, b in tok.merges],
        },
    }
    return (json.dumps(spec, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def _export_vocab(tok: TokenizerLike) -> dict[str, int]:
    """The BPE vocabulary in byte-level form (tokens spelled as raw text keep that spelling, which no merge makes),
    plus every added and special token under its own text: tokenizers takes an added token's id from the model
    vocabulary when it is there, so every id stays as it is."""
    vocab = tok.vocab
    textual = set(text_spelled_ids(tok))
    out: dict[str, int] = {}
    for i in sorted(vocab):
        text = vocab[i].decode("utf-8", "surrogatepass") if i in textual else bytes_to_token_string(vocab[i])
        if out.setdefault(text, i) != i:
            raise ValueError(f"tokens {out[text]} and {i} are both spelled {text!r}: a tokenizer.json cannot keep both")
    for text, tid in sorted({**tok.special_tokens, **tok.added_tokens}.items(), key=lambda kv: kv[1]):
        if out.setdefault(text, tid) != tid:
            raise ValueError(
                f"token {text!r} (id {tid}) is spelled like vocabulary token {out[text]} in byte-level form, so "
                "tokenizers would give it that id; a tokenizer.json cannot keep both"
            )
    return out


def _export_added(tok: TokenizerLike) -> list[dict]:
    out = []
    for special, table in ((True, tok.special_tokens), (False, tok.added_tokens)):
        for text, tid in table.items():
            flags = tok.token_flags.get(text, AddedTokenFlags())
            out.append({"id": tid, "content": text, **flags.as_dict(), "special": special})
    return sorted(out, key=lambda t: t["id"])


def save_huggingface(tok: TokenizerLike, path: str) -> None:
    write_bytes_atomic(path, dumps_huggingface(tok))
