"""The families of hand-written splits (cl100k's, o200k's, two cascades), and how a pattern is recognised as one of
them: by its structure.

The native core (``bpe_core/_native/pretok.h``, ``kFamilyBase``) splits ``C|[^\\r\\n\\p{L}\\p{N}]?X+|D| ?O+[\\r\\n]*|T``
with four parameters: the contractions C case-folded (cl100k's ``(?i:...)``, which also takes U+017F for s) or
ASCII-only (llama.cpp's ``'[sS]|...``); the digits D ``\\p{N}{1,3}`` or ``\\p{N}``; the letters X ``\\p{L}`` or
``[\\p{L}\\p{M}]`` (marks join letters, as Qwen 3.5; O is then ``[^\\s\\p{L}\\p{M}\\p{N}]``); the whitespace tail T
cl100k's ``\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s`` or llama.cpp's ``\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+``. cl100k, llama3 and
qwen2 are three of the sixteen; the others are named as the core names them (``family:ci-d1-LM-llama``).

The same recognition gives the hand-written cascades (``CASCADES``: DeepSeek V3's three regexes; the digits split
before GPT-2's regex of six llama.cpp vocabularies, whose second regex may be any spelling of r50k's split:
``presets.native_preset_for``).

A pattern gets a family when it *is* one, whatever it is called and however it is spelled: :func:`structural_kind`
parses it with the compiled matcher's parser (``compiler.py``) and compares the tree with each family's spellings,
node for node, every one-character class by the code points `regex` puts in it (``class_ranges``). Equal trees are the
same regex, so the same split; no name and no string comparison decides. Two rewrites that cannot change a match are
applied first: a group alone in an alternative is spliced into the alternation around it, and a possessive run with
nothing after it that could fail (the end of its alternative, or only optional items) loses its ``+``.
"""

from __future__ import annotations

import functools
import itertools

from bpe_core.pretokenize.compiler import Atom, End, Group, Look, NotCompiled, Repeat, _Parser, class_ranges
from bpe_core.pretokenize.llamacpp import LLAMACPP_PRETOKENIZERS

FOLD, DIGITS3, MARKS, CL100K_TAIL = 1, 2, 4, 8
N_FAMILY = 16
# The bits the presets have (pretok.cpp kBitsCl100k, kBitsLlama3, kBitsQwen2).
PRESET_BITS = {"cl100k": FOLD | DIGITS3 | CL100K_TAIL, "llama3": DIGITS3, "qwen2": 0}

_CONTRACTIONS = {
    True: (r"'(?i:[sdmt]|ll|ve|re)", r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"),
    False: (
        r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])",
        r"'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]",
    ),
}
# Whitespace tails: the first of each is the reference; the others split the same (pretok.cpp's notes):
# `\s*[\r\n]` and `\s*[\r\n]+` end after the run's last newline, `\s` and `\s+` take one character where
# `\s+(?!\S)` failed, `\s+$` and `\s++$` match the same runs.
_TAILS = {
    True: tuple(
        f"{end}|{nl}|\\s+(?!\\S)|{one}"
        for end, nl, one in itertools.product((r"\s++$", r"\s+$"), (r"\s*[\r\n]", r"\s*[\r\n]+"), (r"\s", r"\s+"))
    ),
    False: tuple(
        f"{nl}|\\s+(?!\\S)|{one}" for nl, one in itertools.product((r"\s*[\r\n]+", r"\s*[\r\n]"), (r"\s+", r"\s"))
    ),
}


def family_name(bits: int) -> str:
    """The name the native core gives the family member ``bits`` (the preset's name for the presets' bits)."""
    for name, preset_bits in PRESET_BITS.items():
        if bits == preset_bits:
            return name
    return (
        f"family:{'ci' if bits & FOLD else 'ascii'}-{'d3' if bits & DIGITS3 else 'd1'}-"
        f"{'LM' if bits & MARKS else 'L'}-{'cl100k' if bits & CL100K_TAIL else 'llama'}"
    )


def _spelling_parts(bits: int) -> list[tuple[str, ...]]:
    """Each spelling of the family member ``bits`` as its top-level parts, to be joined by ``|``."""
    fold, marks = bool(bits & FOLD), bool(bits & MARKS)
    letters = r"[\p{L}\p{M}]" if marks else r"\p{L}"
    other = r"[^\s\p{L}\p{M}\p{N}]" if marks else r"[^\s\p{L}\p{N}]"
    digits = r"\p{N}{1,3}" if bits & DIGITS3 else r"\p{N}"
    return [
        (contraction, f"[^\\r\\n\\p{{L}}\\p{{N}}]{opt}{letters}+", digits, f" ?{other}+[\\r\\n]*", tail)
        for contraction, opt, tail in itertools.product(
            _CONTRACTIONS[fold], ("?", "?+"), _TAILS[bool(bits & CL100K_TAIL)]
        )
    ]


def _spellings(bits: int, reference_only: bool = False) -> list[str]:
    parts = _spelling_parts(bits)
    return ["|".join(p) for p in (parts[:1] if reference_only else parts)]


def family_pattern(bits: int) -> str:
    """The reference regex of the family member ``bits`` (what tests compare the native split with)."""
    return _spellings(bits, reference_only=True)[0]


# ------------------------------------------------------------------------------------------ the o200k family
# P?U*W+C?|P?U+W*C?|D| ?O+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+ (pretok.h kO200kBase): U and W o200k's classes or
# llama.cpp's (gpt-4o, tekken), C o200k's case-folded contraction suffix, llama.cpp's ASCII one, or none (Tekken), D
# three digits or one.
O2_LLAMA, O2_FOLD, O2_ASCII, O2_DIGITS1 = 1, 2, 4, 8
O200K_BITS = O2_FOLD
_O2_CLASSES = {
    False: (r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"),
    True: (r"((?=[\p{L}])([^a-z]))", r"((?=[\p{L}])([^A-Z]))"),
}
_O2_SUFFIX = {O2_FOLD: r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?", O2_ASCII: "(?:" + _CONTRACTIONS[False][1] + ")?", 0: ""}


def o200k_members() -> list[int]:
    return [b for b in range(16) if b & (O2_FOLD | O2_ASCII) != O2_FOLD | O2_ASCII]


def o200k_name(bits: int) -> str:
    if bits == O200K_BITS:
        return "o200k"
    contraction = "ci" if bits & O2_FOLD else "ascii" if bits & O2_ASCII else "none"
    return f"o200k-family:{'L' if bits & O2_LLAMA else 'UW'}-{contraction}-{'d1' if bits & O2_DIGITS1 else 'd3'}"


def o200k_pattern(bits: int) -> str:
    upper, lower = _O2_CLASSES[bool(bits & O2_LLAMA)]
    c = _O2_SUFFIX[bits & (O2_FOLD | O2_ASCII)]
    digits = r"\p{N}" if bits & O2_DIGITS1 else r"\p{N}{1,3}"
    return (
        f"[^\\r\\n\\p{{L}}\\p{{N}}]?{upper}*{lower}+{c}|[^\\r\\n\\p{{L}}\\p{{N}}]?{upper}+{lower}*{c}|{digits}|"
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    )


def family_kinds() -> dict[str, tuple[str, ...]]:
    """Every hand-written kind after the presets: its native name -> its reference patterns, in the core's order
    (the cascades, then the family members that are not presets)."""
    kinds = dict(CASCADES)
    kinds.update(
        (family_name(bits), (family_pattern(bits),)) for bits in range(N_FAMILY) if bits not in PRESET_BITS.values()
    )
    kinds.update((o200k_name(b), (o200k_pattern(b),)) for b in o200k_members() if b != O200K_BITS)
    return kinds


# ------------------------------------------------------------------------------------------ structure


def _canonical_alts(group: Group) -> list[list[object]]:
    alts: list[list[object]] = []
    for seq in group.alts:
        only = seq[0] if len(seq) == 1 else None
        if isinstance(only, Repeat) and isinstance(only.node, Group) and (only.min, only.max) == (1, 1):
            if not only.possessive:
                alts += _canonical_alts(only.node)
                continue
        alts.append(_canonical_seq(seq))
    return alts


def _cannot_fail(rest: list[object]) -> bool:
    return all(isinstance(n, Repeat) and n.min == 0 and isinstance(n.node, Atom) for n in rest)


def _canonical_seq(seq: list[object]) -> list[object]:
    out: list[object] = []
    for k, node in enumerate(seq):
        if isinstance(node, Repeat):
            inner = Group(_canonical_alts(node.node)) if isinstance(node.node, Group) else node.node
            possessive = node.possessive and not (isinstance(node.node, Atom) and _cannot_fail(seq[k + 1 :]))
            node = Repeat(inner, node.min, node.max, possessive)
        out.append(node)
    return out


def _tree(pattern: str) -> Group | None:
    try:
        return Group(_canonical_alts(_Parser(pattern).parse()))
    except (NotCompiled, RecursionError):
        return None


def _shape(node: object) -> object:
    """The tree with every class left out (a cheap key; classes are compared after)."""
    if isinstance(node, Group):
        return ("g", tuple(tuple(_shape(n) for n in seq) for seq in node.alts))
    if isinstance(node, Repeat):
        return ("r", _shape(node.node), node.min, node.max, node.possessive)
    if isinstance(node, Look):
        return ("l", node.negative)
    if isinstance(node, End):
        return ("$",)
    return ("c",)


def _classes(node: object, out: list[str]) -> list[str]:
    if isinstance(node, Group):
        for seq in node.alts:
            for n in seq:
                _classes(n, out)
    elif isinstance(node, Repeat):
        _classes(node.node, out)
    elif isinstance(node, Look):
        out.append(node.atom.source)
    elif isinstance(node, Atom):
        out.append(node.source)
    return out


# The other hand-written cascades, by the core's name: llama.cpp's regex lists (the reference of each).
CASCADES: dict[str, tuple[str, ...]] = {
    "deepseek-v3": LLAMACPP_PRETOKENIZERS["deepseek-v3"][0],
    "r50k-digits": LLAMACPP_PRETOKENIZERS["starcoder"][0],
}


def _part_alts(part: str) -> list[list[object]]:
    return _canonical_alts(_Parser(part).parse())


def _spelled_trees() -> list[tuple[tuple[Group | None, ...], str]]:
    """The trees of every spelling, by kind. A family spelling's tree is its parts' alternatives one after another
    (the tree of ``A|B`` is A's alternatives then B's, each canonical on its own): 24 distinct parts parsed, not 384
    whole spellings (every process's first structural_kind: 0.035-0.040 -> 0.013 s of CPU)."""
    alts = functools.cache(_part_alts)
    out = [
        ((Group([alt for part in parts for alt in alts(part)]),), family_name(bits))
        for bits in range(N_FAMILY)
        for parts in _spelling_parts(bits)
    ]
    out += [((_tree(o200k_pattern(b)),), o200k_name(b)) for b in o200k_members()]
    return out + [(tuple(_tree(p) for p in patterns), name) for name, patterns in CASCADES.items()]


@functools.cache
def _templates() -> dict[object, list[tuple[tuple[str, ...], str]]]:
    by_shape: dict[object, list[tuple[tuple[str, ...], str]]] = {}
    for trees, name in _spelled_trees():
        assert all(t is not None for t in trees), name
        shape = tuple(_shape(t) for t in trees)
        by_shape.setdefault(shape, []).append((tuple(c for t in trees for c in _classes(t, [])), name))
    return by_shape


def _same_class(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return class_ranges(a) == class_ranges(b)
    except NotCompiled:
        return False


@functools.cache
def same_regex(a: str, b: str) -> bool:
    """Whether regexes ``a`` and ``b`` have the same tree, class for class (so the same matches)."""
    ta, tb = _tree(a), _tree(b)
    if ta is None or tb is None or _shape(ta) != _shape(tb):
        return False
    return all(_same_class(x, y) for x, y in zip(_classes(ta, []), _classes(tb, []), strict=True))


@functools.cache
def structural_kind(patterns: tuple[str, ...]) -> str | None:
    """The hand-written kind (a family member, or a cascade of CASCADES) whose regexes ``patterns`` are, node for
    node, or None."""
    trees = [_tree(p) for p in patterns]
    if not trees or any(t is None for t in trees):
        return None
    classes = [c for t in trees for c in _classes(t, [])]
    candidates = _templates().get(tuple(_shape(t) for t in trees), [])
    # A template spelt class for class as the pattern first: no class's code points are needed (each takes a pass
    # of `regex` over every code point, 0.1 s for the six Qwen 3.5's shape met before). Distinct kinds are distinct
    # regexes, so at most one kind matches either way.
    for template_classes, name in candidates:
        if template_classes == tuple(classes):
            return name
    for template_classes, name in candidates:
        if all(_same_class(a, b) for a, b in zip(classes, template_classes, strict=True)):
            return name
    return None
