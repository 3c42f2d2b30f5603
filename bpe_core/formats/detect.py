"""Recognise a tokenizer file by its content and load it: the table :data:`FILE_KINDS`, one line per kind.

Recognised: the own artifact (``tokenizer.bpe``), GGUF (``GGUF`` magic), Hugging Face ``tokenizer.json`` (a JSON
object with a ``model``), Mistral's Tekken files (a JSON object with a ``config`` object and a ``vocab`` list),
GPT-2 ``vocab.json`` (a JSON object of integer ids, with ``merges.txt`` beside it) or ``merges.txt`` (with
``vocab.json`` beside it), SentencePiece ``.model`` files (a ModelProto) and ``.tiktoken`` rank files. A folder is
searched for ``tokenizer.json``, ``tokenizer.bpe``, then ``vocab.json``. Only the first 4 KiB decide, so a
multi-gigabyte GGUF model file is never read whole.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from bpe_core._io import is_url, open_input, read_bytes
from bpe_core.errors import TokenizerFileError

if TYPE_CHECKING:
    from bpe_core.model.data import TokenizerData
    from bpe_core.pretokenize.pretokenizer import PreTokenizerSpec

HEAD_BYTES = 4096
_BASE64 = re.compile(rb"[A-Za-z0-9+/]*={0,2}")  # "format_version 1" (an artifact without its first line) is not one
FOLDER_FILES = ("tokenizer.json", "tokenizer.bpe", "vocab.json")
MAX_VOCAB = 1 << 21  # above every published vocabulary (the largest, about 262k ids, is an eighth of it)
MAX_VOCAB_ENV = "BEAM_BPE_MAX_VOCAB"


def max_vocab_limit(max_vocab: int | None = None) -> tuple[int, str]:
    """The vocabulary bound and the name to give it: ``max_vocab=`` if given, else ``$BEAM_BPE_MAX_VOCAB``, else
    2**21."""
    if max_vocab is not None:
        return int(max_vocab), "max_vocab"
    value = os.environ.get(MAX_VOCAB_ENV, "").strip()
    if not value:
        return MAX_VOCAB, f"the default limit (2**21; {MAX_VOCAB_ENV} changes it)"
    try:
        return int(value), MAX_VOCAB_ENV
    except ValueError:
        raise ValueError(f"{MAX_VOCAB_ENV} must be a whole number of tokens, got {value!r}") from None


def check_vocab_size(data: TokenizerData, path: str, max_vocab: int | None = None) -> TokenizerData:
    """Refuse a vocabulary of more ids than the bound (its tables would cost memory on every worker without
    limit: a 475k-token ``tokenizer.json`` cost 443 MiB per worker), naming its size and the limit."""
    limit, name = max_vocab_limit(max_vocab)
    ids = [*data.vocab, *data.special_tokens.values(), *data.added_tokens.values()]
    size = max(max(ids) + 1, len(ids)) if ids else 0
    if size > limit:
        raise TokenizerFileError(path, f"the vocabulary has {size:,} ids, above {name} of {limit:,}: pass "
                                 f"max_vocab= (or set {MAX_VOCAB_ENV}) to load a vocabulary this large")  # fmt: skip
    return data


class Source:
    """A tokenizer file being recognised: its path, its first :data:`HEAD_BYTES`, and (read once, when a kind asks)
    its whole bytes and its parsed JSON."""

    def __init__(self, path: str, head: bytes) -> None:
        self.path, self.head = path, head

    @functools.cached_property
    def data(self) -> bytes:
        return read_bytes(self.path)

    @functools.cached_property
    def json(self) -> object:
        from bpe_core.formats.huggingface import parse_json

        return parse_json(self.data, self.path)


@dataclasses.dataclass(frozen=True)
class FileKind:
    """One kind of tokenizer file: how its content is recognised and how it loads (a row of :data:`FILE_KINDS`).

    ``head`` decides on the first bytes; a JSON kind (``head=_is_json``) decides on the parsed document with
    ``json``. ``load(source, pretokenizer)`` returns the plain data; ``own_pretokenizer`` kinds carry theirs, so a
    pretokenizer argument is refused for them. ``suffix``: the suffix ``beam-bpe convert --out`` writes it under."""

    name: str
    label: str
    head: Callable[[bytes], bool]
    load: Callable[[Source, PreTokenizerSpec | None], TokenizerData]
    json: Callable[[object], bool] | None = None
    own_pretokenizer: bool = False
    suffix: str | None = None


def _is_artifact(head: bytes) -> bool:
    from bpe_core.formats.artifact import MAGIC

    return head.startswith(MAGIC.encode() + b"\n")


def _is_json(head: bytes) -> bool:
    return head.lstrip()[:1] == b"{"


def _is_rank_file(head: bytes) -> bool:
    first = head.split(b"\n", 1)[0].split()
    return len(first) == 2 and first[1].isdigit() and _BASE64.fullmatch(first[0]) is not None  # 'base64 rank'


def _is_merges(head: bytes) -> bool:
    """``merges.txt``: its ``#version`` line, or two columns on the first line (rank files are tried first)."""
    return head.startswith(b"#version") or (len(head.split(b"\n", 1)[0].split()) == 2 and b"\x00" not in head)


def _is_gpt2_vocab(spec: object) -> bool:
    return isinstance(spec, dict) and bool(spec) and all(isinstance(v, int) for v in spec.values())


def _is_tekken(spec: object) -> bool:
    from bpe_core.formats.tekken import is_tekken

    return is_tekken(spec)


def _load_artifact(src: Source, pretokenizer: PreTokenizerSpec | None) -> TokenizerData:
    from bpe_core.formats.artifact import loads_artifact

    return dataclasses.replace(loads_artifact(src.data, src.path), family="beam-bpe artifact")


def _load_gguf(src: Source, pretokenizer: PreTokenizerSpec | None) -> TokenizerData:
    from bpe_core.formats.gguf_file import load_gguf

    return load_gguf(src.path, pretokenizer=pretokenizer)


def _load_gpt2_vocab(src: Source, pretokenizer: PreTokenizerSpec | None) -> TokenizerData:
    from bpe_core.formats.gpt2_files import load_gpt2_files

    return load_gpt2_files(src.path, pretokenizer=pretokenizer)


def _load_merges(src: Source, pretokenizer: PreTokenizerSpec | None) -> TokenizerData:
    from bpe_core.formats.gpt2_files import load_gpt2_files, sibling

    return load_gpt2_files(sibling(src.path, "vocab.json"), src.path, pretokenizer=pretokenizer)


def _load_huggingface(src: Source, pretokenizer: PreTokenizerSpec | None) -> TokenizerData:
    from bpe_core.formats.huggingface import loads_huggingface
    from bpe_core.formats.sentencepiece_json import is_spm_json, spm_json_data

    if is_spm_json(src.json):  # SentencePiece-style BPE (byte_fallback, ▁ spaces): bpe_core/formats/sentencepiece_json
        return spm_json_data(src.json, src.path)
    return loads_huggingface(src.data, src.path)


def _load_tekken(src: Source, pretokenizer: PreTokenizerSpec | None) -> TokenizerData:
    from bpe_core.formats.tekken import tekken_data

    return tekken_data(src.json, src.path)


def _is_sentencepiece(head: bytes) -> bool:
    from bpe_core.formats.sentencepiece import looks_like_model_proto

    return looks_like_model_proto(head)


def _load_sentencepiece(src: Source, pretokenizer: PreTokenizerSpec | None) -> TokenizerData:
    from bpe_core.formats.sentencepiece import load_sentencepiece

    return load_sentencepiece(src.path)


def _load_tiktoken(src: Source, pretokenizer: PreTokenizerSpec | None) -> TokenizerData:
    from bpe_core.formats.tiktoken_file import load_tiktoken

    data = load_tiktoken(src.path, pretokenizer=pretokenizer)
    return dataclasses.replace(data, family=data.family or "tiktoken rank file")


# Every kind of tokenizer file, tried in this order (the first whose test passes loads the file). A new kind is a
# module of this folder and one line here: Tokenizer.from_file, every --tokenizer flag, the error that lists what
# loads, the refusal of a pretokenizer argument and convert's --out suffixes read this table.
FILE_KINDS: tuple[FileKind, ...] = (
    FileKind("artifact", "beam-bpe artifact", _is_artifact, _load_artifact, own_pretokenizer=True, suffix=".bpe"),
    FileKind("gguf", "GGUF", lambda head: head.startswith(b"GGUF"), _load_gguf),
    FileKind("gpt2-vocab", "GPT-2 vocab.json", _is_json, _load_gpt2_vocab, json=_is_gpt2_vocab),
    FileKind("huggingface", "Hugging Face tokenizer.json", _is_json, _load_huggingface,
             json=lambda spec: isinstance(spec, dict) and isinstance(spec.get("model"), dict), own_pretokenizer=True,
             suffix=".json"),
    FileKind("tekken", "Mistral Tekken file", _is_json, _load_tekken, json=_is_tekken, own_pretokenizer=True),
    FileKind("sentencepiece", "SentencePiece model", _is_sentencepiece, _load_sentencepiece, own_pretokenizer=True),
    FileKind("tiktoken", ".tiktoken rank file", _is_rank_file, _load_tiktoken, suffix=".tiktoken"),
    FileKind("gpt2-merges", "GPT-2 merges.txt", _is_merges, _load_merges),
)  # fmt: skip


def sniff(data: bytes) -> str:
    """What the first bytes of a file say: a kind's name, ``"json"`` for the JSON kinds (parse to tell them apart),
    or ``"unknown"``."""
    head = data[:HEAD_BYTES]
    for kind in FILE_KINDS:
        if kind.head(head):
            return "json" if kind.json is not None else kind.name
    return "unknown"


def recognise(path: str, head: bytes) -> tuple[FileKind, Source]:
    """The kind of the file at ``path`` (its first bytes ``head``); a file of no kind raises TokenizerFileError."""
    src = Source(path, head[:HEAD_BYTES])
    json_head = False
    for kind in FILE_KINDS:
        if not kind.head(src.head) or (json_head and kind.json is None):
            continue
        if kind.json is None or kind.json(src.json):
            return kind, src
        json_head = True  # a JSON document: only the JSON kinds may claim it
    if json_head:
        labels = ", ".join(k.label for k in FILE_KINDS if k.json is not None)
        raise TokenizerFileError(path, f"a JSON file that is none of: {labels}")
    raise TokenizerFileError(
        path, f"not a tokenizer file this version recognises ({', '.join(k.label for k in FILE_KINDS)})"
    )


def load_any(path: str, *, pretokenizer: PreTokenizerSpec | None = None) -> TokenizerData:
    """Load any supported file; ``pretokenizer`` is required for ``.tiktoken`` files, overrides the one of GGUF
    and GPT-2 files, and is refused for files that carry their own (artifact, ``tokenizer.json``, Tekken)."""
    path = _resolve_folder(str(path))
    kind, src = recognise(path, _read_head(path))
    if kind.own_pretokenizer:
        _refuse_override(path, pretokenizer, f"a {kind.label}")
    return kind.load(src, pretokenizer)


def _refuse_override(path: str, pretokenizer: PreTokenizerSpec | None, what: str) -> None:
    if pretokenizer is not None:
        raise ValueError(
            f"{path} is {what}, which carries its own pre-tokenizer; a pretokenizer argument applies to "
            f"{', '.join(k.label for k in FILE_KINDS if not k.own_pretokenizer)} files only"
        )


def _read_head(path: str) -> bytes:
    try:
        with open_input(path) as f:
            return f.read(HEAD_BYTES)
    except IsADirectoryError:
        raise TokenizerFileError(path, f"is a folder without any of {', '.join(FOLDER_FILES)}") from None


def _resolve_folder(path: str) -> str:
    """A folder stands for the first tokenizer file found in it."""
    if not is_url(path):  # without importing fsspec (see open_input)
        if not os.path.isdir(os.path.expanduser(path)):
            return path
        for name in FOLDER_FILES:
            if os.path.exists(os.path.join(os.path.expanduser(path), name)):
                return f"{path.rstrip('/')}/{name}"
        raise TokenizerFileError(path, f"is a folder without any of {', '.join(FOLDER_FILES)}")
    import fsspec

    fs, local = fsspec.core.url_to_fs(path)
    if not fs.isdir(local):
        return path
    for name in FOLDER_FILES:
        if fs.exists(f"{local.rstrip('/')}/{name}"):
            return f"{path.rstrip('/')}/{name}"
    raise TokenizerFileError(path, f"is a folder without any of {', '.join(FOLDER_FILES)}")
