"""GPT-2 style ``vocab.json`` (byte-level token string -> id) + ``merges.txt`` (``"a b"`` per line, rank order).

The pair carries no pre-tokenizer, normalizer or added tokens. The defaults are GPT-2's as Hugging Face applies
them (``ByteLevel`` with its regex, no normalizer) and, as transformers' GPT2Tokenizer, ``<|endoftext|>`` as the
special token where the vocabulary has it; pass others explicitly for other models.
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Mapping
from typing import TYPE_CHECKING

from bpe_core._io import read_bytes, write_bytes_atomic
from bpe_core.errors import TokenizerFileError
from bpe_core.formats.huggingface import byte_vocab, merge_token_ids, parse_json
from bpe_core.model.bytelevel import bytes_to_token_string
from bpe_core.model.data import TokenizerData, TokenizerLike, refuse_superword, text_spelled_ids
from bpe_core.pretokenize.presets import GPT2_HF_PATTERN
from bpe_core.pretokenize.pretokenizer import PreTokenizer

if TYPE_CHECKING:
    from bpe_core.pretokenize.pretokenizer import PreTokenizerSpec

FAMILY = "GPT-2 vocab.json + merges.txt (byte-level BPE)"
MERGES_HEADER = "#version: 0.2"


def load_gpt2_files(
    vocab_path: str,
    merges_path: str | None = None,
    *,
    pretokenizer: PreTokenizerSpec | None = None,
    normalizer: str | None = None,
    special_tokens: Mapping[str, int] | None = None,
) -> TokenizerData:
    """What the two files hold (``merges_path`` defaults to ``merges.txt`` beside the vocabulary)."""
    vocab_path = str(vocab_path)
    merges_path = str(merges_path) if merges_path is not None else sibling(vocab_path, "merges.txt")
    text_to_id = parse_vocab_json(_read_partner(vocab_path, merges_path), vocab_path)
    merges = parse_merges_txt(_read_partner(merges_path, vocab_path), merges_path, text_to_id)
    if special_tokens is None:
        special_tokens = {t: i for t, i in text_to_id.items() if t == "<|endoftext|>"}
    owned = set(special_tokens.values())
    vocab, textual = byte_vocab(text_to_id, owned, merge_token_ids(merges, text_to_id), vocab_path)
    pre = PreTokenizer.from_spec(pretokenizer if pretokenizer is not None else GPT2_HF_PATTERN, normalizer=normalizer)
    return TokenizerData(
        vocab,
        merges=merges,
        pretokenizer=pre,
        special_tokens=special_tokens,
        family=FAMILY,
        unreachable=frozenset(textual),
        source=vocab_path,
        context=f"with {merges_path}: ",
    )


def _read_partner(path: str, other: str) -> bytes:
    try:
        return read_bytes(path)
    except FileNotFoundError:
        raise TokenizerFileError(
            other,
            f"its partner {path} does not exist: vocab.json and merges.txt belong together (pass both paths "
            "to Tokenizer.from_gpt2_files)",
        ) from None


def sibling(path: str, name: str) -> str:
    """``name`` in the folder of ``path`` (local paths and URLs alike)."""
    if "://" in path:
        return posixpath.join(posixpath.dirname(path), name)
    return os.path.join(os.path.dirname(os.path.abspath(path)), name)


def parse_vocab_json(data: bytes, path: str) -> dict[str, int]:
    vocab = parse_json(data, path)
    if not isinstance(vocab, dict) or not vocab:
        raise TokenizerFileError(path, "expected a non-empty JSON object mapping token strings to ids")
    by_id: dict[int, str] = {}
    for text, tid in vocab.items():
        if not isinstance(tid, int) or isinstance(tid, bool) or tid < 0:
            raise TokenizerFileError(path, f"token {text!r} has id {tid!r}, not a non-negative integer")
        if tid in by_id:
            raise TokenizerFileError(path, f"tokens {by_id[tid]!r} and {text!r} share the id {tid}")
        by_id[tid] = text
    return vocab


def parse_merges_txt(data: bytes, path: str, text_to_id: Mapping[str, int]) -> list[tuple[int, int]]:
    """Merges as id pairs; a ``#version`` first line is skipped, as are empty lines."""
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise TokenizerFileError(path, f"not UTF-8 at byte {exc.start}") from None
    merges = []
    for lineno, line in enumerate(lines, start=1):
        line = line.rstrip("\r")
        if not line or (lineno == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise TokenizerFileError(
                path, f"expected two tokens separated by one space, found {line[:60]!r}", line=lineno
            )
        for part in parts:
            if part not in text_to_id:
                raise TokenizerFileError(
                    path, f"merge {line!r} references {part!r}, which is not in vocab.json", line=lineno
                )
        merges.append((text_to_id[parts[0]], text_to_id[parts[1]]))
    return merges


def save_gpt2_files(tok: TokenizerLike, directory: str) -> tuple[str, str]:
    """Write ``vocab.json`` and ``merges.txt``. Special and added tokens go into ``vocab.json`` where their text is
    its own byte-level spelling (``<|endoftext|>``, as GPT-2's file has it); the normalizer, the pre-tokenizer and
    which tokens are special have no place in these files (``to_huggingface`` keeps them)."""
    refuse_superword(tok, "vocab.json + merges.txt")
    directory = str(directory)
    vocab = tok.vocab
    textual = set(text_spelled_ids(tok))  # spelled as their text, as the file they came from had them
    vocab_json = {
        vocab[i].decode("utf-8", "surrogatepass") if i in textual else bytes_to_token_string(vocab[i]): i
        for i in sorted(vocab)
    }
    for text, tid in sorted({**tok.special_tokens, **tok.added_tokens}.items(), key=lambda kv: kv[1]):
        if bytes_to_token_string(text.encode("utf-8")) == text:
            vocab_json.setdefault(text, tid)
    lines = [MERGES_HEADER] + [f"{bytes_to_token_string(a)} {bytes_to_token_string(b)}" for a, b in tok.merges]
    join = posixpath.join if "://" in directory else os.path.join
    if "://" not in directory:
        os.makedirs(directory, exist_ok=True)
    vocab_path, merges_path = join(directory, "vocab.json"), join(directory, "merges.txt")
    write_bytes_atomic(vocab_path, json.dumps(vocab_json, ensure_ascii=False).encode("utf-8"))
    write_bytes_atomic(merges_path, ("\n".join(lines) + "\n").encode("utf-8"))
    return vocab_path, merges_path
