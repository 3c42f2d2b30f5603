"""Special and added tokens found in text before pre-tokenization, with Hugging Face's per-token flags.

Hugging Face's ``AddedVocabulary`` finds its tokens leftmost-longest (an Aho-Corasick automaton) and then applies
each token's flags: ``single_word`` drops a match glued to a word character on either side, ``lstrip`` /
``rstrip`` swallow the whitespace beside the token into it, and ``normalized`` makes the token match the
normalized text (a second pass) instead of the raw text (the first pass). :class:`TokenMatcher` reproduces that
search for one pass; :class:`bpe_core.Tokenizer` runs the two passes and decides which special tokens take part
(the special-token policy stays in the Tokenizer).

Tokens loaded from our own artifact, tiktoken files and GGUF files have the default flags: raw text, no strip, no
word check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import regex

# Rust's regex ``\w`` and ``\s`` (Unicode), which Hugging Face uses for the word and whitespace checks.
_WORD_CHAR = regex.compile(r"[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]")
# Unicode's White_Space property (stable since Unicode 6.0), which Rust's ``char::is_whitespace`` follows.
WHITE_SPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | frozenset(
    map(chr, range(0x2000, 0x200B))
)


@dataclass(frozen=True)
class AddedTokenFlags:
    """Hugging Face's matching flags of one added or special token (all False: match the raw text as is).

    >>> AddedTokenFlags(lstrip=True).is_default
    False
    """

    lstrip: bool = False
    rstrip: bool = False
    single_word: bool = False
    normalized: bool = False

    @property
    def is_default(self) -> bool:
        return self == DEFAULT_FLAGS

    def as_dict(self) -> dict[str, bool]:
        return {
            "lstrip": self.lstrip,
            "rstrip": self.rstrip,
            "single_word": self.single_word,
            "normalized": self.normalized,
        }


DEFAULT_FLAGS = AddedTokenFlags()


class TokenMatcher:
    """Split text into plain-text segments (str) and token ids (int), finding tokens leftmost-longest.

    ``pattern_to_id`` maps the string to find (the token text, or its normalized form for the normalized pass) to
    the id to emit; ``flags`` gives the flags of a pattern (default flags where absent).

    >>> TokenMatcher({"<s>": 1, "<s><s>": 2}).split("a<s><s>b")
    ['a', 2, 'b']
    """

    def __init__(self, pattern_to_id: Mapping[str, int], flags: Mapping[str, AddedTokenFlags] | None = None) -> None:
        patterns = sorted((p for p in pattern_to_id if p), key=lambda s: (-len(s), s))
        if not patterns:
            raise ValueError("a TokenMatcher needs at least one non-empty token")
        # Longest first within an alternation = leftmost-longest, as Aho-Corasick's LeftmostLongest.
        self._regex = regex.compile("|".join(regex.escape(p) for p in patterns))
        self._ids = dict(pattern_to_id)
        flags = flags or {}
        self._flags = {p: f for p, f in flags.items() if f.lstrip or f.rstrip or f.single_word}

    def split(self, text: str) -> list[str | int]:
        if not self._flags:
            return self._split_plain(text)
        return self._split_flagged(text)

    def _split_plain(self, text: str) -> list[str | int]:
        out: list[str | int] = []
        pos = 0
        for found in self._regex.finditer(text):
            start, end = found.span()
            if start > pos:
                out.append(text[pos:start])
            out.append(self._ids[found.group()])
            pos = end
        if pos < len(text):
            out.append(text[pos:])
        return out

    def _split_flagged(self, text: str) -> list[str | int]:
        """Hugging Face's ``AddedVocabulary::find_matches``: the search resumes after each match as found
        (a match dropped by ``single_word`` does not let a shorter token inside it match)."""
        out: list[str | int] = []
        pos = 0
        search_from = 0
        while True:
            found = self._regex.search(text, search_from)
            if found is None:
                break
            start, stop = found.span()
            search_from = stop
            token = found.group()
            flags = self._flags.get(token)
            if flags is not None:
                if flags.single_word and not _is_single_word(text, start, stop):
                    continue
                if flags.lstrip:  # whitespace before the token, but none a previous token already took
                    while start > pos and text[start - 1] in WHITE_SPACE:
                        start -= 1
                if flags.rstrip:
                    while stop < len(text) and text[stop] in WHITE_SPACE:
                        stop += 1
                    search_from = stop  # never match inside the swallowed whitespace
            if start > pos:
                out.append(text[pos:start])
            out.append(self._ids[token])
            pos = stop
        if pos < len(text):
            out.append(text[pos:])
        return out


def _is_single_word(text: str, start: int, stop: int) -> bool:
    """No word character touches the match on either side (Hugging Face's ``single_word``)."""
    if start > 0 and _WORD_CHAR.match(text, start - 1):
        return False
    return not (stop < len(text) and _WORD_CHAR.match(text, stop))
