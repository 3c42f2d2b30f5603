"""The special-token policy and the search for special and added tokens in text, for one Tokenizer.

tiktoken's rules: special-token text listed in ``allowed_special`` becomes its id; any other special-token text
raises (``disallowed_special="all"`` by default), so that user text cannot inject a control token by accident.
Hugging Face's two passes find the allowed special tokens and the added tokens (see :mod:`bpe_core.model.added_tokens`).
Both the Python reference and the native encoder take their segments from here; the native encoder then splits
each segment itself when the pre-tokenizer has a hand-written twin (``PreTokenizer.native_kind``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import Literal, Union

import regex

from bpe_core.model.added_tokens import DEFAULT_FLAGS, AddedTokenFlags, TokenMatcher
from bpe_core.pretokenize.pretokenizer import PreTokenizer

SpecialSet = Union[Literal["all"], AbstractSet[str], Collection[str]]


class TokenFinder:
    """Resolves ``allowed_special`` / ``disallowed_special`` and cuts text into segments and token ids.

    Holds the Tokenizer's own dicts (not copies) and caches one matcher per set of tokens.

    >>> finder = TokenFinder({"<|end|>": 9}, {}, {}, None)
    >>> list(finder.segments("a<|end|>b", finder.resolve_allowed("all")))
    ['a', 9, 'b']
    """

    def __init__(
        self,
        special_tokens: Mapping[str, int],
        added_tokens: Mapping[str, int],
        token_flags: Mapping[str, AddedTokenFlags],
        pretokenizer: PreTokenizer | None,
    ) -> None:
        self.special_tokens = special_tokens
        self.added_tokens = added_tokens
        self.token_flags = token_flags
        self.pretokenizer = pretokenizer
        self._matchers: dict[tuple[frozenset[str], bool], regex.Pattern | None] = {}
        self._added_matchers: dict[tuple[frozenset[str], bool], TokenMatcher | None] = {}
        self._plain: dict[frozenset[str], bool] = {}

    # ----------------------------------------------------------------- policy
    def resolve_allowed(self, allowed_special: SpecialSet) -> frozenset[str]:
        if allowed_special == "all":
            return frozenset(self.special_tokens)
        _refuse_one_string("allowed_special", allowed_special)
        allowed = frozenset(allowed_special)
        unknown = allowed - self.special_tokens.keys()
        if unknown:
            raise ValueError(
                f"allowed_special names tokens that are not special tokens of this vocabulary: {sorted(unknown)}; "
                f"its special tokens are {sorted(self.special_tokens)}"
            )
        return allowed

    def resolve_disallowed(self, disallowed_special: SpecialSet, allowed: frozenset[str]) -> frozenset[str]:
        if disallowed_special == "all":
            return frozenset(self.special_tokens) - allowed
        _refuse_one_string("disallowed_special", disallowed_special)
        return frozenset(disallowed_special)

    def check_disallowed(self, text: str | bytes, disallowed: frozenset[str]) -> None:
        """Raise if text holds a disallowed special token. Bytes are searched as bytes (the UTF-8 of a token
        matches there exactly where the token matches the surrogateescape decoding); a str is searched as it is,
        lone surrogates included, as tiktoken does."""
        if not disallowed:
            return
        if isinstance(text, bytes):
            in_bytes = self._matcher(disallowed, as_bytes=True)
            if in_bytes is not None:
                match = in_bytes.search(text)
                if match is not None:
                    raise_disallowed(match.group().decode())
                return
            text = text.decode("utf-8", "surrogateescape")
        matcher = self._matcher(disallowed, as_bytes=False)
        found = matcher.search(text) if matcher is not None else None
        if found is not None:
            raise_disallowed(found.group())

    def _matcher(self, specials: frozenset[str], *, as_bytes: bool) -> regex.Pattern | None:
        """A regex matching the given tokens, leftmost and then longest; over UTF-8 bytes with as_bytes (None if
        a token has no UTF-8, a lone surrogate: the caller searches the decoded str then)."""
        key = (specials, as_bytes)
        if key not in self._matchers:
            strings = sorted((s for s in specials if s), key=lambda s: (-len(s), s))
            pattern: regex.Pattern | None = None
            if strings and not as_bytes:
                pattern = regex.compile("|".join(regex.escape(s) for s in strings))
            elif strings:
                try:
                    data = sorted((s.encode() for s in strings), key=lambda b: (-len(b), b))
                    pattern = regex.compile(b"|".join(regex.escape(b) for b in data))
                except UnicodeEncodeError:
                    pattern = None
            self._matchers[key] = pattern
        return self._matchers[key]

    # ----------------------------------------------------------------- segments
    def is_plain(self, allowed: frozenset[str]) -> bool:
        """True when any text is one segment as it is: no token to find, no normalizer."""
        plain = self._plain.get(allowed)
        if plain is None:
            plain = self._plain[allowed] = (
                self._added_matcher(allowed, normalized=False) is None
                and self._added_matcher(allowed, normalized=True) is None
                and not (self.pretokenizer is not None and self.pretokenizer.normalizer)
            )
        return plain

    def segments(self, text: str, allowed: frozenset[str]) -> Iterator[str | int]:
        """Ordinary text (str) and the ids of allowed special and added tokens (int), in order.

        Hugging Face's two passes: tokens flagged ``normalized`` are found in the normalized text left between
        the others, which are found in the raw text first (each pass leftmost-longest, flags applied).
        """
        raw = self._added_matcher(allowed, normalized=False)
        norm = self._added_matcher(allowed, normalized=True)
        parts: list[str | int] = [text] if raw is None else raw.split(text)
        if norm is None:
            yield from parts
            return
        for part in parts:
            if isinstance(part, int):
                yield part
            else:  # normalizing again in the pre-tokenizer is a no-op: substrings of NFC/NFKC text stay normalized
                yield from norm.split(self.pretokenizer.normalize(part) if self.pretokenizer else part)

    def _added_matcher(self, allowed: frozenset[str], *, normalized: bool) -> TokenMatcher | None:
        """The matcher of one pass over the allowed special tokens and all added tokens (None: nothing to find)."""
        key = (allowed, normalized)
        if key not in self._added_matchers:
            table = {t: self.special_tokens[t] for t in allowed}
            table.update(self.added_tokens)
            ids: dict[str, int] = {}
            flags: dict[str, AddedTokenFlags] = {}
            for token, tid in sorted(table.items(), key=lambda kv: kv[1]):  # same normalized text: lower id wins
                if self.flags(token).normalized != normalized:
                    continue
                pattern = self.pretokenizer.normalize(token) if normalized and self.pretokenizer else token
                if pattern and pattern not in ids:
                    ids[pattern], flags[pattern] = tid, self.flags(token)
            self._added_matchers[key] = TokenMatcher(ids, flags) if ids else None
        return self._added_matchers[key]

    def flags(self, token: str) -> AddedTokenFlags:
        return self.token_flags.get(token, DEFAULT_FLAGS)


def _refuse_one_string(name: str, value: object) -> None:
    """A single token passed as a string would be read as a set of its characters: say what to pass instead."""
    if isinstance(value, str):
        raise TypeError(
            f"{name} takes 'all' or a set of token strings, e.g. {name}={{{value!r}}}; got the string {value!r}"
        )


def raise_disallowed(token: str) -> None:
    raise ValueError(
        f"Encountered text corresponding to disallowed special token {token!r}.\n"
        f"If you want this text to be encoded as a special token, pass it to `allowed_special`, "
        f"e.g. `allowed_special={{{token!r}, ...}}`.\n"
        f"If you want this text to be encoded as normal text, disable the check for this token by passing "
        f"`disallowed_special=(tok.special_tokens_set - {{{token!r}}})`.\n"
        f"To disable this check for all special tokens, pass `disallowed_special=()`.\n"
    )
