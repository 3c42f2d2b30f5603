"""Recognise a tokenizer file by its content and load it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bpe_core._io import read_bytes
from bpe_core.errors import TokenizerFileError

if TYPE_CHECKING:
    from bpe_core.pretokenize import PreTokenizerSpec
    from bpe_core.tokenizer import Tokenizer


def sniff(data: bytes) -> str:
    """``"artifact"``, ``"tiktoken"`` or ``"unknown"`` from the first bytes of a file."""
    from bpe_core.formats.artifact import MAGIC

    head = data[:4096]
    if head.startswith(MAGIC.encode() + b"\n"):
        return "artifact"
    first = head.split(b"\n", 1)[0].split()
    if len(first) == 2 and first[1].isdigit():
        return "tiktoken"
    return "unknown"


def load_any(path: str, *, pretokenizer: PreTokenizerSpec | None = None) -> Tokenizer:
    """Load the own artifact or a ``.tiktoken`` file (which needs ``pretokenizer``)."""
    from bpe_core.formats.artifact import loads_artifact
    from bpe_core.formats.tiktoken_file import load_tiktoken

    data = read_bytes(path)
    kind = sniff(data)
    if kind == "artifact":
        if pretokenizer is not None:
            raise ValueError(f"{path} carries its own pre-tokenizer; --pretokenizer applies to .tiktoken files only")
        return loads_artifact(data, str(path))
    if kind == "tiktoken":
        if pretokenizer is None:
            raise ValueError(
                f"{path} is a .tiktoken rank file, which carries no pre-tokenizer: pass one "
                "(pretokenizer='cl100k' in Python, --pretokenizer cl100k on the command line)"
            )
        return load_tiktoken(str(path), pretokenizer=pretokenizer, special_tokens={})
    raise TokenizerFileError(
        path, "not a tokenizer file this version recognises (beam-bpe artifact or .tiktoken rank file)"
    )
