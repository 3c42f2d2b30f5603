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
from bpe_core.model.data import TokenizerData, TokenizerLike, refuse_superword, text_spelled_ids

if TYPE_CHECKING:
    from bpe_core.pretokenize.pretokenizer import PreTokenizerSpec


def parse_tiktoken(data: bytes, path: str) -> dict[int, bytes]:
    """Rank -> token bytes, read as ``tiktoken.load.load_tiktoken_bpe`` reads (tiktoken 0.14): lines as
    ``bytes.splitlines`` cuts them, empty lines skipped, base64 decoded without validation (``=`` is the empty
    token: Whisper's ``multilingual.tiktoken`` has it at rank 50256, a rank no text produces), and a token listed
    twice keeps its last rank, as tiktoken's dict does (with a warning: the earlier rank has no token). Refused,
    naming the line: a line that is not two fields, bad base64 or rank, a negative rank, a rank given to two tokens
    (``tiktoken.Encoding`` refuses those too). A file in the plain form is read by the native core (the same dict;
    cl100k 0.3 s -> ~0.02 s); anything else, errors and warnings included, here."""
    from bpe_core import native

    if native.available() and hasattr(native._core, "parse_rank_file"):
        parsed = native._core.parse_rank_file(data)
        if parsed is not None:
            return parsed
    vocab: dict[int, bytes] = {}
    seen: dict[bytes, tuple[int, int]] = {}  # token -> (rank, line)
    replaced: list[str] = []
    for lineno, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise TokenizerFileError(path, f"expected 'base64 rank', found {line[:60]!r}", line=lineno)
        try:
            token = base64.b64decode(parts[0])
            rank = int(parts[1])
        except (binascii.Error, ValueError) as exc:
            raise TokenizerFileError(path, f"bad entry {line[:60]!r}: {exc}", line=lineno) from None
        if rank < 0:
            raise TokenizerFileError(path, f"negative rank {rank}", line=lineno)
        if rank in vocab and (vocab[rank] != token or seen[token][0] != rank):
            raise TokenizerFileError(
                path, f"rank {rank} appears twice, for two tokens ({vocab[rank]!r} and {token!r})", line=lineno
            )
        if token in seen and seen[token][0] != rank:
            old_rank, old_line = seen[token]
            del vocab[old_rank]
            replaced.append(f"{token!r} (rank {old_rank} on line {old_line}, then {rank} on line {lineno})")
        vocab[rank] = token
        seen[token] = (rank, lineno)
    if not vocab:
        raise TokenizerFileError(path, "no tokens: not a .tiktoken rank file")
    if replaced:
        warnings.warn(
            f"{path}: {len(replaced)} token(s) listed twice keep their last rank, as tiktoken loads them, and leave "
            f"the earlier rank without a token: {', '.join(replaced[:3])}",
            UserWarning,
            stacklevel=4,
        )
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
) -> TokenizerData:
    """What a .tiktoken file holds. OpenAI's published files (recognised by sha256) default to the pre-tokenizer
    and special tokens tiktoken uses with them; any other file needs ``pretokenizer``."""
    data = read_bytes(path)
    vocab = parse_tiktoken(data, str(path))  # a malformed file is refused first, whatever else is missing
    known = openai_rank_file(data, str(path))
    if pretokenizer is None:
        if known is None:
            raise ValueError(
                f"{path} is a .tiktoken rank file, which carries no pre-tokenizer (and is not one of OpenAI's "
                "published files, whose pre-tokenizer is known): pass one, e.g. pretokenizer='cl100k'"
            )
        pretokenizer = known.preset
    if special_tokens is None:
        special_tokens = dict(known.special_tokens) if known is not None else {}
    return TokenizerData(
        vocab,
        merges=None,
        pretokenizer=pretokenizer,
        special_tokens=special_tokens,
        ignore_merges=True,
        name=known.name if known is not None else None,
        source=str(path),
    )


def dumps_tiktoken(tok: TokenizerLike) -> bytes:
    """The rank file of ``tok``'s vocabulary; the empty token is written ``=`` (as Whisper's file has it: an empty
    field would not be a 'base64 rank' line). Tokens spelled as text (unreachable, their bytes perhaps another
    token's) have no place in a rank file, where every token is produced by its bytes: refused."""
    refuse_superword(tok, "a .tiktoken rank file")
    vocab = tok.vocab
    textual = text_spelled_ids(tok)
    if textual:
        raise ValueError(
            f"{len(textual)} token(s) of this vocabulary are spelled as text and never produced by BPE (e.g. id "
            f"{textual[0]}, {vocab[textual[0]]!r}), which a .tiktoken rank file cannot say: save it as a "
            "tokenizer.json (to_huggingface) or a tokenizer.bpe (save) instead"
        )
    return b"".join((base64.b64encode(vocab[i]) or b"=") + b" " + str(i).encode() + b"\n" for i in sorted(vocab))


def save_tiktoken(tok: TokenizerLike, path: str) -> None:
    write_bytes_atomic(path, dumps_tiktoken(tok))
