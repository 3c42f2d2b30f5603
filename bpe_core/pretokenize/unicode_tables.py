"""The Unicode classes of the hand-written pre-tokenizers, read off the `regex` module (no other import).

Used twice: at build time by ``bpe_core/_native/gen_unicode_tables.py`` (loaded by path, so the package itself is
not imported in the build environment), which writes the tables into the C++ core with their :func:`digest`; and at
run time by ``PreTokenizer.native_kind`` when the imported `regex` is not the version the tables came from: it then
derives the tables again (about 3 s, once per process) and keeps the fast path if the digest is the same.

Every class is read off `regex` itself (one findall of the class over a string of all 0x110000 code points,
surrogates included), never from unicodedata or a hand-made list: the C++ matchers must agree with the reference on
every code point, and regex ships its own Unicode data (it does not count U+001C..U+001F as \\s, as `re` does, for
example). The case-insensitive contraction letters are read off regex too: its (?i) accepts U+017F for s.
"""

from __future__ import annotations

import hashlib

import regex

N_CODE_POINTS = 0x110000

# Flag bits of one code point (kept in step with pretok.cpp).
FLAGS = {
    "kL": (1, r"\p{L}"),
    "kN": (2, r"\p{N}"),
    "kS": (4, r"\s"),
    # o200k's two letter classes: "upper-ish" and "lower-ish" (Lm, Lo and M are in both).
    "kU": (8, r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"),
    "kW": (16, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"),
    # DeepSeek V3's punctuation and symbols (its ` ?[\p{P}\p{S}]+` and the prefix class that excludes them).
    "kPS": (64, r"[\p{P}\p{S}]"),
}
CR_LF = 32  # "\r" or "\n" (literal in the patterns, not a property)
# The letters of the contractions, in the bit order of pretok.cpp's ci masks; "'" is inside o200k's (?i:...).
CI_LETTERS = "sdmtlvre'"


class TableError(Exception):
    """This `regex` classes characters in a way the C++ matchers do not model."""


def all_code_points() -> str:
    return "".join(map(chr, range(N_CODE_POINTS)))


def class_members(pattern: str, text: str) -> list[int]:
    """Code points that `pattern` (one character wide) matches, read with one findall."""
    hits = regex.findall(pattern, text)
    if any(len(h) != 1 for h in hits):
        raise TableError(f"{pattern!r} matched more than one code point at once")
    return [ord(h) for h in hits]


def flag_table(text: str) -> bytearray:
    flags = bytearray(N_CODE_POINTS)
    for bit, pattern in FLAGS.values():
        for cp in class_members(pattern, text):
            flags[cp] |= bit
    flags[0x0D] |= CR_LF
    flags[0x0A] |= CR_LF
    check_derived_classes(flags, text)
    return flags


def check_derived_classes(flags: bytearray, text: str) -> None:
    """pretok.cpp builds the patterns' negated classes from the bits: make sure regex agrees on every code point."""
    L, N, S, U, W = (FLAGS[k][0] for k in ("kL", "kN", "kS", "kU", "kW"))

    def mark(cp: int) -> bool:  # pretok.cpp flags_mark: in both of o200k's classes and not a letter
        return flags[cp] & (U | W | L) == U | W

    derived = {
        r"[\p{L}\p{M}]": [cp for cp in range(N_CODE_POINTS) if flags[cp] & L or mark(cp)],
        r"[^\s\p{L}\p{M}\p{N}]": [cp for cp in range(N_CODE_POINTS) if not flags[cp] & (S | L | N) and not mark(cp)],
        r"[^\s\p{L}\p{N}]": [cp for cp in range(N_CODE_POINTS) if not flags[cp] & (S | L | N)],
        r"[^\r\n\p{L}\p{N}]": [cp for cp in range(N_CODE_POINTS) if not flags[cp] & (CR_LF | L | N)],
        r"[\p{Lu}\p{Ll}\p{Lt}\p{Lm}\p{Lo}]": [cp for cp in range(N_CODE_POINTS) if flags[cp] & L],
    }
    for pattern, expected in derived.items():
        if class_members(pattern, text) != expected:
            raise TableError(f"{pattern!r} is not what the flag bits say")
    if [cp for cp in range(N_CODE_POINTS) if flags[cp] & CR_LF and not flags[cp] & S] != []:
        raise TableError("\\r or \\n is not \\s in this regex")


def ci_masks(text: str) -> dict[int, int]:
    """Code point -> bit mask of the contraction letters that (?i:letter) matches it as, per regex."""
    for pattern in ("(?i:'s|'t|'re|'ve|'m|'ll|'d)", "'(?i:[sdmt]|ll|ve|re)"):
        if regex.compile(pattern).flags & regex.FULLCASE:
            raise TableError("regex applies full case folding; the matchers assume simple folding")
    masks: dict[int, int] = {}
    for bit, letter in enumerate(CI_LETTERS):
        for cp in class_members(f"(?i:{regex.escape(letter)})", text):
            masks[cp] = masks.get(cp, 0) | (1 << bit)
    return masks


def derive() -> tuple[bytearray, dict[int, int]]:
    """(flags per code point, contraction-letter masks) as the imported `regex` classes them."""
    text = all_code_points()
    return flag_table(text), ci_masks(text)


def digest(flags: bytes | bytearray, masks: dict[int, int]) -> str:
    """sha256 of the tables: equal digests, equal splits."""
    h = hashlib.sha256(bytes(flags))
    h.update(repr(sorted(masks.items())).encode("ascii"))
    return h.hexdigest()
