"""Regexes between the Python ``regex`` module (ours) and Oniguruma (Hugging Face ``tokenizers``' Split).

The two dialects read a few constructs differently, and a pattern copied across unchanged would silently split
text differently:

- ``X{m,n}+`` is possessive in ``regex``, but in Oniguruma's default syntax it is ``(?:X{m,n})+`` (checked with
  tokenizers 0.23: ``\\p{N}{1,3}+`` keeps ``12345`` whole). cl100k's pattern has ``\\p{N}{1,3}+``.
- ``^`` / ``$`` are string anchors in ``regex`` (``$`` also before a final newline) but line anchors in Oniguruma.

Both directions rewrite only those constructs; everything else (classes, ``\\p{..}``, ``(?i:..)``, possessive
``*+ ++ ?+``, look-arounds, atomic groups) means the same in both.
"""

from __future__ import annotations

import regex

_BOUNDED = regex.compile(r"\{\d+(?:,\d*)?\}")


def to_oniguruma(pattern: str) -> str:
    """Our pattern spelled so that Oniguruma splits the same way.

    >>> to_oniguruma(r"\\p{N}{1,3}+|\\s+$")
    '(?>\\\\p{N}{1,3})|\\\\s+(?=\\\\n?\\\\z)'
    """
    return _rewrite(pattern, possessive=lambda atom, q: f"(?>{atom}{q})", caret=r"\A", dollar=r"(?=\n?\z)")


def from_oniguruma(pattern: str) -> str:
    """An Oniguruma pattern (from a ``tokenizer.json``) spelled for the ``regex`` module."""
    return _rewrite(pattern, possessive=lambda atom, q: f"(?:{atom}{q})+", caret="(?m:^)", dollar="(?m:$)")


def _rewrite(pattern: str, *, possessive, caret: str, dollar: str) -> str:
    """Scan the pattern atom by atom; rewrite ``atom{m,n}+`` and the anchors ``^`` ``$`` outside classes."""
    out: list[str] = []  # finished atoms and operators, so that a quantifier can find its atom
    group_starts: list[int] = []
    last_atom = -1  # index in ``out`` where the last complete atom starts
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            end = _escape_end(pattern, i)
            last_atom = len(out)
            out.append(pattern[i:end])
            i = end
        elif c == "[":
            end = _class_end(pattern, i)
            last_atom = len(out)
            out.append(pattern[i:end])
            i = end
        elif c == "(":
            group_starts.append(len(out))
            out.append(c)
            i += 1
        elif c == ")":
            last_atom = group_starts.pop() if group_starts else len(out)
            out.append(c)
            i += 1
        elif c == "{" and _BOUNDED.match(pattern, i) and last_atom >= 0:
            quant = _BOUNDED.match(pattern, i).group()
            i += len(quant)
            if i < n and pattern[i] == "+":
                atom = "".join(out[last_atom:])
                del out[last_atom:]
                out.append(possessive(atom, quant))
                i += 1
            else:
                out.append(quant)
        elif c in "^$":
            out.append(caret if c == "^" else dollar)
            last_atom = -1
            i += 1
        else:
            if c not in "*+?|":
                last_atom = len(out)
            out.append(c)
            i += 1
    return "".join(out)


def _escape_end(pattern: str, i: int) -> int:
    """End of the escape starting at ``pattern[i] == '\\'`` (``\\p{..}``, ``\\x{..}``, ``\\N{..}`` or one char)."""
    if i + 1 < len(pattern) and pattern[i + 1] in "pPxNu" and i + 2 < len(pattern) and pattern[i + 2] == "{":
        close = pattern.find("}", i + 3)
        return len(pattern) if close < 0 else close + 1
    if i + 1 < len(pattern) and pattern[i + 1] in "pP":
        return min(i + 3, len(pattern))  # \pL
    return min(i + 2, len(pattern))


def _class_end(pattern: str, i: int) -> int:
    """End of the character class starting at ``pattern[i] == '['`` (nested classes and escapes allowed)."""
    depth = 0
    j = i
    while j < len(pattern):
        c = pattern[j]
        if c == "\\":
            j = _escape_end(pattern, j)
            continue
        if c == "[":
            depth += 1
            if j + 1 < len(pattern) and pattern[j + 1] == "^":
                j += 1
            if j + 1 < len(pattern) and pattern[j + 1] == "]":
                j += 1  # a literal ']' right after '[' or '[^'
        elif c == "]":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return len(pattern)
