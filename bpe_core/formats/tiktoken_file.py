"""OpenAI ``.tiktoken`` rank files: one ``base64(token bytes) rank`` per line, rank = token id.

The file holds no pre-tokenizer and no special tokens; the caller names them (as tiktoken's own
``tiktoken_ext/openai_public.py`` does). Gaps in ranks are allowed: they leave room for special tokens.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
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


def load_tiktoken(path: str, *, pretokenizer: PreTokenizerSpec, special_tokens: Mapping[str, int]) -> Tokenizer:
    from bpe_core.tokenizer import Tokenizer

    if pretokenizer is None:
        raise ValueError(
            f"{path}: a .tiktoken file carries no pre-tokenizer; pass pretokenizer= (e.g. 'cl100k', 'o200k', 'r50k')"
        )
    vocab = parse_tiktoken(read_bytes(path), str(path))
    try:
        return Tokenizer(vocab, merges=None, pretokenizer=pretokenizer, special_tokens=special_tokens,
                         ignore_merges=True, name=None)
    except ValueError as exc:
        raise TokenizerFileError(path, str(exc)) from None


def dumps_tiktoken(tok: Tokenizer) -> bytes:
    vocab = tok.vocab
    return b"".join(base64.b64encode(vocab[i]) + b" " + str(i).encode() + b"\n" for i in sorted(vocab))


def save_tiktoken(tok: Tokenizer, path: str) -> None:
    write_bytes_atomic(path, dumps_tiktoken(tok))
