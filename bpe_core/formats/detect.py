"""Recognise a tokenizer file by its content and load it.

Recognised: the own artifact (``tokenizer.bpe``), GGUF (``GGUF`` magic), Hugging Face ``tokenizer.json`` (a JSON
object with a ``model``), Mistral's Tekken files (a JSON object with a ``config`` object and a ``vocab`` list), GPT-2
``vocab.json`` (a JSON object of integer ids, with ``merges.txt`` beside it) or ``merges.txt`` (with ``vocab.json``
beside it), and ``.tiktoken`` rank files. A folder is searched for ``tokenizer.json``, ``tokenizer.bpe``, then
``vocab.json``. Only the first 4 KiB decide, so a multi-gigabyte GGUF model file is never read whole.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

import fsspec

from bpe_core._io import read_bytes
from bpe_core.errors import TokenizerFileError

if TYPE_CHECKING:
    from bpe_core.model.data import TokenizerData
    from bpe_core.pretokenize.pretokenizer import PreTokenizerSpec

HEAD_BYTES = 4096
_BASE64 = re.compile(rb"[A-Za-z0-9+/]*={0,2}")  # "format_version 1" (an artifact without its first line) is not one
FOLDER_FILES = ("tokenizer.json", "tokenizer.bpe", "vocab.json")
KINDS = ("artifact", "gguf", "json", "gpt2-merges", "tiktoken", "sentencepiece")


def sniff(data: bytes) -> str:
    """One of :data:`KINDS` or ``"unknown"`` from the first bytes of a file (``"json"``: parse to tell
    ``tokenizer.json`` from ``vocab.json``)."""
    from bpe_core.formats.artifact import MAGIC

    head = data[:HEAD_BYTES]
    if head.startswith(MAGIC.encode() + b"\n"):
        return "artifact"
    if head.startswith(b"GGUF"):
        return "gguf"
    if head.lstrip()[:1] == b"{":
        return "json"
    if head.startswith(b"#version"):
        return "gpt2-merges"
    if _looks_like_model_proto(head):
        return "sentencepiece"
    first = head.split(b"\n", 1)[0].split()
    if len(first) == 2 and first[1].isdigit() and _BASE64.fullmatch(first[0]):  # 'base64 rank'
        return "tiktoken"
    if len(first) == 2 and b"\x00" not in head:
        return "gpt2-merges"
    return "unknown"


def load_any(path: str, *, pretokenizer: PreTokenizerSpec | None = None) -> TokenizerData:
    """Load any supported file; ``pretokenizer`` is required for ``.tiktoken`` files, overrides the one of GGUF
    and GPT-2 files, and is refused for files that carry their own (artifact, ``tokenizer.json``)."""
    path = _resolve_folder(str(path))
    kind = sniff(_read_head(path))
    if kind == "gguf":
        from bpe_core.formats.gguf_file import load_gguf

        return load_gguf(path, pretokenizer=pretokenizer)
    if kind == "gpt2-merges":
        from bpe_core.formats.gpt2_files import load_gpt2_files, sibling

        return load_gpt2_files(sibling(path, "vocab.json"), path, pretokenizer=pretokenizer)
    if kind == "sentencepiece":
        from bpe_core.formats.sentencepiece import load_sentencepiece

        _refuse_override(path, pretokenizer, "a SentencePiece model")
        return load_sentencepiece(path)
    data = read_bytes(path)
    if kind == "artifact":
        from bpe_core.formats.artifact import loads_artifact

        _refuse_override(path, pretokenizer, "a beam-bpe artifact")
        return dataclasses.replace(loads_artifact(data, path), family="beam-bpe artifact")
    if kind == "json":
        return _load_json(data, path, pretokenizer)
    if kind == "tiktoken":
        return _load_tiktoken(path, pretokenizer)
    raise TokenizerFileError(
        path,
        "not a tokenizer file this version recognises (beam-bpe artifact, tokenizer.json, Tekken .json, "
        "vocab.json + merges.txt, GGUF, SentencePiece .model or .tiktoken rank file)",
    )


def _looks_like_model_proto(head: bytes) -> bool:
    from bpe_core.formats.sentencepiece import looks_like_model_proto

    return looks_like_model_proto(head)


def _load_json(data: bytes, path: str, pretokenizer: PreTokenizerSpec | None) -> TokenizerData:
    from bpe_core.formats.gpt2_files import load_gpt2_files
    from bpe_core.formats.huggingface import loads_huggingface, parse_json
    from bpe_core.formats.tekken import is_tekken, tekken_data

    spec = parse_json(data, path)
    if isinstance(spec, dict) and spec and all(isinstance(v, int) for v in spec.values()):
        return load_gpt2_files(path, pretokenizer=pretokenizer)
    if isinstance(spec, dict) and isinstance(spec.get("model"), dict):
        _refuse_override(path, pretokenizer, "a Hugging Face tokenizer.json")
        from bpe_core.formats.sentencepiece_json import is_spm_json, spm_json_data

        if is_spm_json(spec):  # SentencePiece-style BPE (byte_fallback, ▁ spaces)
            return spm_json_data(spec, path)
        return loads_huggingface(data, path)
    if is_tekken(spec):
        _refuse_override(path, pretokenizer, "a Mistral Tekken file")
        return tekken_data(spec, path)
    raise TokenizerFileError(
        path,
        "a JSON file that is none of a tokenizer.json (no 'model'), a Tekken file (no 'config' and 'vocab' list) "
        "and a GPT-2 vocab.json",
    )


def _load_tiktoken(path: str, pretokenizer: PreTokenizerSpec | None) -> TokenizerData:
    from bpe_core.formats.tiktoken_file import load_tiktoken

    data = load_tiktoken(path, pretokenizer=pretokenizer)
    return dataclasses.replace(data, family=data.family or "tiktoken rank file")


def _refuse_override(path: str, pretokenizer: PreTokenizerSpec | None, what: str) -> None:
    if pretokenizer is not None:
        raise ValueError(
            f"{path} is {what}, which carries its own pre-tokenizer; a pretokenizer argument applies to .tiktoken, "
            "GGUF and vocab.json/merges.txt files only"
        )


def _read_head(path: str) -> bytes:
    try:
        with fsspec.open(path, "rb") as f:
            return f.read(HEAD_BYTES)
    except IsADirectoryError:
        raise TokenizerFileError(path, f"is a folder without any of {', '.join(FOLDER_FILES)}") from None


def _resolve_folder(path: str) -> str:
    """A folder stands for the first tokenizer file found in it."""
    fs, local = fsspec.core.url_to_fs(path)
    if not fs.isdir(local):
        return path
    for name in FOLDER_FILES:
        if fs.exists(f"{local.rstrip('/')}/{name}"):
            return f"{path.rstrip('/')}/{name}"
    raise TokenizerFileError(path, f"is a folder without any of {', '.join(FOLDER_FILES)}")
