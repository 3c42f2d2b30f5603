"""What a tokenizer file holds, as plain data: the formats read into :class:`TokenizerData` and write from anything
shaped like :class:`TokenizerLike`; :class:`bpe_core.Tokenizer` is built from the one and is the other.

This module is the floor between ``bpe_core/formats`` and ``bpe_core/tokenizer.py``: the formats never import the
Tokenizer, the Tokenizer imports the formats (tests/core/test_import_circles.py keeps the import graph free of circles).

>>> data = TokenizerData({0: b"a", 1: b"b", 2: b"ab"}, merges=[(0, 1)], pretokenizer=None)
>>> data.vocab[2]
b'ab'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from bpe_core.model.added_tokens import AddedTokenFlags
    from bpe_core.model.sentencepiece import SpmModel
    from bpe_core.pretokenize.pretokenizer import PreTokenizer, PreTokenizerSpec

    Supermerges = Any  # bpe_core.superword.reference.Supermerges: a floor above this one, named, not imported


@dataclass(frozen=True)
class TokenizerData:
    """The arguments of :class:`bpe_core.Tokenizer`, as a file gave them.

    ``vocab`` id -> token bytes (special and added tokens excluded); ``merges`` (left id, right id) in rank order,
    or None for a rank-only vocabulary; ``unreachable`` ids of ``vocab`` that BPE never produces (a file spells them
    as raw text, their bytes the UTF-8 of that text); ``source`` the file, named by errors the Tokenizer finds in the
    data (a duplicate token, a merge of a missing token), after ``context``.
    """

    vocab: Mapping[int, bytes]
    merges: Sequence[tuple[int, int]] | None
    pretokenizer: PreTokenizerSpec | None
    special_tokens: Mapping[str, int] = field(default_factory=dict)
    added_tokens: Mapping[str, int] = field(default_factory=dict)
    token_flags: Mapping[str, AddedTokenFlags] = field(default_factory=dict)
    ignore_merges: bool = False
    name: str | None = None
    family: str | None = None
    unreachable: frozenset[int] = frozenset()
    source: str | None = None
    context: str = ""
    superword: Supermerges | None = None  # a superword tokenizer's phase 2 (format version 3 of tokenizer.bpe)
    sentencepiece: SpmModel | None = None  # a SentencePiece-style vocabulary (bpe_core.model.sentencepiece)
    declared_tokens: Mapping[str, int] = field(default_factory=dict)  # "bos"/"eos" -> the id the file declares


class TokenizerLike(Protocol):
    """What the writers of ``bpe_core/formats`` read from a tokenizer (``bpe_core.Tokenizer`` is one)."""

    name: str | None
    ignore_merges: bool
    special_tokens: dict[str, int]
    added_tokens: dict[str, int]
    token_flags: dict[str, AddedTokenFlags]

    @property
    def pretokenizer(self) -> PreTokenizer | None: ...

    @property
    def kind(self) -> str: ...

    @property
    def vocab(self) -> dict[int, bytes]: ...

    @property
    def merge_ids(self) -> list[tuple[int, int]]: ...

    @property
    def merges(self) -> list[tuple[bytes, bytes]]: ...

    def token_id(self, token: bytes | str) -> int | None: ...

    def unreachable_tokens(self) -> list[int]: ...


def text_spelled_ids(tok: TokenizerLike) -> list[int]:
    """Sorted ids of ``tok``'s vocabulary whose non-empty bytes are not theirs to produce (the tokens a file
    spelled as raw text: ``Tokenizer(..., unreachable=...)``); what a writer must mark as such."""
    vocab = tok.vocab
    return [i for i in sorted(vocab) if vocab[i] and tok.token_id(vocab[i]) != i]


def refuse_superword(tok: object, target: str) -> None:
    """A superword tokenizer (SuperBPE) has supermerges over whole pre-tokens, which ``target`` cannot hold: the
    file would encode with the word model alone and give other ids. Raises ValueError saying so."""
    if getattr(tok, "superword", None) is not None:
        raise ValueError(
            f"this is a superword tokenizer: {target} cannot hold its supermerges (they join whole pre-tokens, which "
            "a merge list or rank file applies only inside one), so it would give other ids; save it as "
            "tokenizer.bpe (Tokenizer.save)"
        )
