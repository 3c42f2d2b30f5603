"""Compile a pre-tokenizer's regex list into a program for the native matcher (``bpe_core/_native/pretok_rx.cpp``).

The subset compiled is what pre-tokenizers use: alternations and sequences; one-character atoms (a literal, an
escape such as ``\\s`` or ``\\p{L}``, a bracket class, a group whose every alternative is one character, possibly
behind one-character lookaheads, as llama.cpp's ``((?=[\\p{L}])([^a-z]))``), repeated ``?``, ``*``, ``+``,
``{m}``, ``{m,n}``, ``{m,}``, greedy or possessive; ``(?:...)``, ``(?i:...)`` and capturing groups, optional or not;
one-character lookaheads ``(?!\\S)``; ``$``. Anything else (lazy quantifiers, lookbehind, backreferences, inline
flags, an alternative that can match the empty string, ...) is not compiled: :func:`compile_patterns` returns None
and the `regex` module splits, as before. A pattern that backtracks without
bound (``a+a+a+a+a+b``: adjacent unbounded runs whose classes overlap) is bounded by the matcher's step budget
(``pretok_rx.h``): past it the split raises ``PreTokenizeTimeout`` naming the patterns, in milliseconds (`regex`
itself runs over its 10 s limit on 800 a's of that one).

Every one-character atom becomes a class whose members are found by the `regex` module itself, over every code point
(surrogates included): the native matcher and `regex` agree on every character by construction, whatever the
Unicode version. The matcher's semantics (ordered alternation, greedy runs give back one character at a time,
possessive ones never, ``$`` at the end or before a final ``\\n``) are those of `regex`;
tests/native/test_native_pretok_rx.py checks them piece for piece.

Program encoding (a flat list of ints), read by ``rx_register``::

    program := npatterns, pattern*         pattern := alts | -1 index      alts := nalts, seq*
    seq     := first (class bit mask, -1 = any), nitems, item*
    item    := 0 class min max(-1 = unbounded) possessive | 1 min max alts | 2 class negative | 3   ($)

``-1 index``: a stage of a list that a hand-written pre-tokenizer splits exactly (``pretok_names()[index]``, as
``presets.native_preset_for`` finds it), such as GPT-2's regex as falcon's second: the core runs that splitter on each
piece the stages before it leave. The core also matches a pattern of the shape ``A?C{m,M}$?`` (one alternative; most
stages of llama.cpp's lists) with loops of its own instead of the interpreter.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import regex

MAX_CLASSES = 32
# The escapes compiled: property classes, shorthand classes, control characters, hex code points, escaped symbols.
_ESCAPE = regex.compile(
    r"\\(?:[pP]\{\^?[A-Za-z_ =&]+\}|[pP][A-Za-z]|[sSdDwWrntfv]|x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}"
    r"|[^A-Za-z0-9])"
)
MAX_ALTERNATIVES = 32


class NotCompiled(ValueError):
    """The pattern uses regex syntax outside the compiled subset."""


@dataclass
class Atom:  # one character: its regex source, with the flags it was written under
    source: str


@dataclass
class Look:  # (?=X) or (?!X), X one character
    atom: Atom
    negative: bool


@dataclass
class End:  # $
    pass


@dataclass
class Repeat:
    node: object  # Atom or Group
    min: int
    max: int | None
    possessive: bool


@dataclass
class Group:
    alts: list[list[object]] = field(default_factory=list)


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0

    def error(self, what: str) -> NotCompiled:
        return NotCompiled(f"{what} at {self.i} of {self.p!r}")

    def peek(self) -> str:
        return self.p[self.i] if self.i < len(self.p) else ""

    def parse(self) -> Group:
        group = self.alternation(False)
        if self.i != len(self.p):
            raise self.error("unbalanced ')'")
        return group

    def alternation(self, ci: bool) -> Group:
        group = Group([self.sequence(ci)])
        while self.peek() == "|":
            self.i += 1
            group.alts.append(self.sequence(ci))
        return group

    def sequence(self, ci: bool) -> list[object]:
        items: list[object] = []
        while self.peek() not in ("", "|", ")"):
            node = self.atom(ci)
            if isinstance(node, (Atom, Group)):
                node = self.quantifier(node)
            elif self.peek() in ("?", "*", "+", "{"):
                raise self.error("a quantifier on a lookahead or anchor")
            items.append(node)
        return items

    def quantifier(self, node: object) -> object:
        c = self.peek()
        if c == "?":
            lo, hi = 0, 1
        elif c == "*":
            lo, hi = 0, None
        elif c == "+":
            lo, hi = 1, None
        elif c == "{":
            m = regex.compile(r"\{(\d+)(?:(,)(\d*))?\}").match(self.p, self.i)
            if m is None:
                raise self.error("a '{' that is no {m,n} quantifier")
            lo = int(m.group(1))
            hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
            self.i = m.end() - 1
        else:
            return Repeat(node, 1, 1, False)
        self.i += 1
        possessive = False
        if self.peek() == "+":
            possessive, self.i = True, self.i + 1
        elif self.peek() == "?":
            raise self.error("a lazy quantifier")
        if hi is not None and (hi < lo or hi == 0):
            raise self.error("an empty quantifier range")
        return Repeat(node, lo, hi, possessive)

    def atom(self, ci: bool) -> object:
        p, i = self.p, self.i
        c = p[i]
        if c == "(":
            return self.group(ci)
        if c == "[":
            end = self.class_end(i)
            self.i = end
            return Atom(self.flagged(p[i:end], ci))
        if c == "\\":
            m = _ESCAPE.match(p, i)
            if m is None:
                raise self.error("an escape outside the compiled subset")
            self.i = m.end()
            return Atom(self.flagged(m.group(), ci))
        if c == "$":
            self.i += 1
            return End()
        if c in "^*+?{)|":
            raise self.error(f"{c!r} outside the compiled subset")
        self.i += 1
        return Atom(self.flagged(regex.escape(c) if c != "." else ".", ci))

    @staticmethod
    def flagged(source: str, ci: bool) -> str:
        return f"(?i:{source})" if ci else source

    def class_end(self, i: int) -> int:
        p = self.p
        j = i + 1
        if j < len(p) and p[j] == "^":
            j += 1
        if j < len(p) and p[j] == "]":
            j += 1
        while j < len(p) and p[j] != "]":
            if p[j] == "\\":
                j += 1
            elif p[j] == "[":
                raise self.error("a nested set or POSIX class")
            j += 1
        if j >= len(p):
            raise self.error("an unterminated '['")
        return j + 1

    def group(self, ci: bool) -> object:
        p = self.p
        head = regex.compile(r"\((\?:|\?i:|\?=|\?!|(?!\?))").match(p, self.i)
        if head is None:
            raise self.error("a group kind outside the compiled subset")
        kind = head.group(1)
        self.i = head.end()
        inner = self.alternation(ci or kind == "?i:")
        if self.peek() != ")":
            raise self.error("an unterminated group")
        self.i += 1
        one = _one_char(inner)
        if kind in ("?=", "?!"):
            if one is None:
                raise self.error("a lookahead of more than one character")
            return Look(Atom(one), kind == "?!")
        return Atom(one) if one is not None else inner


def _one_char(group: Group) -> str | None:
    """The source of a class equal to ``group`` when its every alternative matches exactly one character (with
    one-character lookaheads before it), else None."""
    parts = []
    for seq in group.alts:
        looks = [n for n in seq[:-1] if isinstance(n, Look)]
        last = seq[-1] if seq else None
        if len(looks) != len(seq) - 1 or not isinstance(last, Repeat) or (last.min, last.max) != (1, 1):
            return None
        if not isinstance(last.node, Atom):
            return None
        head = "".join(f"(?{'!' if look.negative else '='}{look.atom.source})" for look in looks)
        parts.append(head + last.node.source)
    return "(?:" + "|".join(parts) + ")"


ALL_CODE_POINTS_LEN = 0x110000


@functools.cache
def _all_code_points() -> str:
    """Every code point in order, surrogates included: decoded from their UTF-32 (7 ms; a join of ``chr`` took
    0.10 s, and it is built in every process that compares a class)."""
    import numpy as np

    return np.arange(ALL_CODE_POINTS_LEN, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")


@functools.cache
def class_ranges(source: str) -> tuple[int, ...]:
    """(first, last) pairs of the code points that the one-character ``source`` matches, found by `regex`."""
    try:
        pattern = regex.compile(f"(?:{source})+")
    except regex.error as exc:
        raise NotCompiled(f"{source!r}: {exc}") from None
    out: list[int] = []
    for m in pattern.finditer(_all_code_points()):
        if m.end() - m.start() == 0:
            raise NotCompiled(f"{source!r} matches the empty string")
        out += (m.start(), m.end() - 1)
    # One character each: a run's length in code points equals its characters only if every match is one char.
    return tuple(out)


class _Builder:
    def __init__(self) -> None:
        self.classes: list[str] = []

    def cls(self, atom: Atom) -> int:
        if atom.source not in self.classes:
            if len(self.classes) == MAX_CLASSES:
                raise NotCompiled(f"more than {MAX_CLASSES} character classes")
            self.classes.append(atom.source)
        return self.classes.index(atom.source)

    def alts(self, group: Group, out: list[int]) -> None:
        if len(group.alts) > MAX_ALTERNATIVES:
            raise NotCompiled(f"more than {MAX_ALTERNATIVES} alternatives")
        out.append(len(group.alts))
        for seq in group.alts:
            self.seq(seq, out)

    def first(self, seq: list[object]) -> int:
        """Bit mask of the classes the first character must be in, or -1 (no filter)."""
        mask = 0
        for node in seq:
            if not isinstance(node, Repeat):
                return -1  # a lookahead or $ first: no filter
            if isinstance(node.node, Group):
                for alt in node.node.alts:
                    sub = self.first(alt)
                    if sub < 0:
                        return -1
                    mask |= sub
            else:
                mask |= 1 << self.cls(node.node)
            if node.min > 0 and (not isinstance(node.node, Group) or all(_min_len(a) > 0 for a in node.node.alts)):
                return mask
        return -1  # every item optional

    def seq(self, seq: list[object], out: list[int]) -> None:
        out.append(self.first(seq))
        out.append(len(seq))
        for node in seq:
            if isinstance(node, Look):
                out += (2, self.cls(node.atom), int(node.negative))
            elif isinstance(node, End):
                out.append(3)
            elif isinstance(node.node, Group):
                if node.possessive or node.max != 1:
                    raise NotCompiled("a group repeated other than '?'")
                out += (1, node.min, 1)
                self.alts(node.node, out)
            else:
                out += (0, self.cls(node.node), node.min, -1 if node.max is None else node.max, int(node.possessive))


def _min_len(seq: list[object]) -> int:
    total = 0
    for node in seq:
        if isinstance(node, Repeat):
            inner = 1 if isinstance(node.node, Atom) else min(_min_len(a) for a in node.node.alts)
            total += node.min * inner
    return total


@dataclass(frozen=True)
class Compiled:
    program: tuple[int, ...]
    classes: tuple[str, ...]


@functools.cache
def compile_patterns(patterns: tuple[str, ...], delegates: tuple[tuple[int, int], ...] = ()) -> Compiled | None:
    """The program of ``patterns``, or None when one of them is outside the compiled subset. ``delegates``: (stage,
    index) pairs, the stages a hand-written kind (``pretok_names()[index]``) splits instead."""
    try:
        return _compile(patterns, dict(delegates))
    except (NotCompiled, RecursionError):
        return None


def _compile(patterns: Sequence[str], delegates: dict[int, int]) -> Compiled:
    builder = _Builder()
    program = [len(patterns)]
    for stage, pattern in enumerate(patterns):
        regex.compile(pattern)  # a pattern `regex` refuses is refused there, not here
        if stage in delegates:
            program += (-1, delegates[stage])
            continue
        group = _Parser(pattern).parse()
        if any(_min_len(seq) == 0 for seq in group.alts):
            raise NotCompiled(f"an alternative of {pattern!r} can match the empty string")
        builder.alts(group, program)
    if not builder.classes:
        builder.classes.append(r"\n")  # the core wants one class at least
    return Compiled(tuple(program), tuple(builder.classes))
