"""OpenAI ``.tiktoken`` rank files: one ``base64(token bytes) rank`` per line, rank = token id.

The file holds no pre-tokenizer and no special tokens; the caller names them (as tiktoken's own
``tiktoken_ext/openai_public.py`` does), except for OpenAI's published files, recognised by their sha256, which get
tiktoken's pre-tokenizer and special tokens by default. Gaps in ranks are allowed: they leave room for special tokens.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bpe_core._io import read_bytes, write_bytes_atomic
from bpe_core.errors import TokenizerFileError

if TYPE_CHECKING:
    from bpe_core.pretokenize import PreTokenizerSpec
    from bpe_core.tokenizer import Tokenizer


def parse_tiktoken(data: bytes, path: str) -> dict[int, bytes]:
    """Rank -> token bytes; raises TokenizerFileError naming the line of a malformed entry."""
    vocab: dict[int, bytes] = {}
    seen: dict[bytes, int] = {}
    for lineno, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise TokenizerFileError(path, f"expected 'base64 rank', found {line[:60]!r}", line=lineno)
        try:
            token = base64.b64decode(parts[0], validate=True)
            rank = int(parts[1])
        except (binascii.Error, ValueError) as exc:
            raise TokenizerFileError(path, f"bad entry {line[:60]!r}: {exc}", line=lineno) from None
        if rank < 0:
            raise TokenizerFileError(path, f"negative rank {rank}", line=lineno)
        if rank in vocab:
            raise TokenizerFileError(path, f"rank {rank} appears twice", line=lineno)
        if token in seen:
            raise TokenizerFileError(path, f"token {token!r} appears twice (ranks {seen[token]} and {rank})",
                                     line=lineno)
        vocab[rank] = token
        seen[token] = rank
    if not vocab:
        raise TokenizerFileError(path, "no tokens: not a .tiktoken rank file")
    return vocab


@dataclass(frozen=True)
class OpenAIRankFile:
    """One of the rank files OpenAI publishes, with the pre-tokenizer and special tokens tiktoken uses with it."""

    name: str
    preset: str
    special_tokens: dict[str, int]


_EOT, _FIM_P, _FIM_M, _FIM_S, _EOP = (
    "<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>")  # fmt: skip
# sha256 of the file -> what tiktoken_ext/openai_public.py (tiktoken 0.14.0, MIT) pairs it with.
OPENAI_RANK_FILES = {
    "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930": OpenAIRankFile(
        "r50k_base", "r50k", {_EOT: 50256}),
    "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069": OpenAIRankFile(
        "p50k_base", "r50k", {_EOT: 50256}),
    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7": OpenAIRankFile(
        "cl100k_base", "cl100k", {_EOT: 100257, _FIM_P: 100258, _FIM_M: 100259, _FIM_S: 100260, _EOP: 100276}),
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d": OpenAIRankFile(
        "o200k_base", "o200k", {_EOT: 199999, _EOP: 200018}),
}  # fmt: skip


def openai_rank_file(data: bytes, path: str) -> OpenAIRankFile | None:
    """The published OpenAI file these bytes are, by sha256; a file named like one that differs gets a warning
    (a .tiktoken cut at a line boundary still parses, as a smaller vocabulary)."""
    known = OPENAI_RANK_FILES.get(hashlib.sha256(data).hexdigest())
    if known is None:
        base = path.replace("\\", "/").rsplit("/", 1)[-1]
        named = next((f for f in OPENAI_RANK_FILES.values() if base == f"{f.name}.tiktoken"), None)
        if named is not None:
            warnings.warn(
                f"{path} is named like OpenAI's {named.name}.tiktoken but is not that file (its sha256 differs): "
                "truncated or modified? It is loaded as it is, without OpenAI's defaults",
                UserWarning,
                stacklevel=4,
            )
    return known


def load_tiktoken(
    path: str, *, pretokenizer: PreTokenizerSpec | None = None, special_tokens: Mapping[str, int] | None = None
) -> Tokenizer:
    """A .tiktoken file as a Tokenizer. OpenAI's published files (recognised by sha256) default to the pre-tokenizer
    and special tokens tiktoken uses with them; any other file needs ``pretokenizer``."""
    from bpe_core.tokenizer import Tokenizer

    data = read_bytes(path)
    vocab = parse_tiktoken(data, str(path))  # a malformed file is refused first, whatever else is missing
    known = openai_rank_file(data, str(path))
    if pretokenizer is None:
        if known is None:
            raise ValueError(
                f"{path} is a .tiktoken rank file, which carries no pre-tokenizer (and is not one of OpenAI's published "
                "files, whose pre-tokenizer is known): pass one (pretokenizer='cl100k' in Python, --pretokenizer "
                "cl100k on the command line)"
            )
        pretokenizer = known.preset
    if special_tokens is None:
        special_tokens = dict(known.special_tokens) if known is not None else {}
    try:
        return Tokenizer(vocab, merges=None, pretokenizer=pretokenizer, special_tokens=special_tokens,
                         ignore_merges=True, name=known.name if known is not None else None)
    except ValueError as exc:
        raise TokenizerFileError(path, str(exc)) from None


def dumps_tiktoken(tok: Tokenizer) -> bytes:
    vocab = tok.vocab
    return b"".join(base64.b64encode(vocab[i]) + b" " + str(i).encode() + b"\n" for i in sorted(vocab))


def save_tiktoken(tok: Tokenizer, path: str) -> None:
    write_bytes_atomic(path, dumps_tiktoken(tok))
