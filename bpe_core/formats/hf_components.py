"""Hugging Face normalizers and pre-tokenizers <-> our normalizer name and ordered regex list.

Our pre-tokenizer is an ordered list of regexes, each splitting every piece left by the previous one, with the
matches and the text between them all kept ("Isolated"). Every Hugging Face ``Split`` behaviour that keeps all
the text can be written that way, so a ``tokenizer.json`` maps onto the same :class:`PreTokenizer` the artifact
stores (checked piece for piece against ``tokenizers`` 0.23 in tests/formats/test_huggingface.py):

- ``Isolated`` (with or without ``invert``): the pattern itself;
- ``Contiguous`` (either ``invert``): ``(?:P)+`` -- adjacent matches merge;
- ``MergedWithPrevious``: each match joins the text before it: ``.*?(?:P)|.+``;
- ``MergedWithNext``: each match joins the text after it: ``(?:P)(?:(?!P).)*|(?:(?!P).)+``;
  ``invert`` swaps the last two.

``Removed`` drops text and is refused, as is any component type not listed here: the caller gets an error naming
it, never a tokenizer that splits differently.
"""

from __future__ import annotations

from collections.abc import Sequence

from bpe_core.pretokenize.dialects import from_oniguruma, to_oniguruma
from bpe_core.pretokenize.presets import GPT2_HF_PATTERN

WHOLE_TEXT = r"(?s:.+)"  # a step that keeps each piece whole (ByteLevel without its regex)
# Rust's char::is_numeric (Nd, Nl, No) and tokenizers' is_punc (ASCII punctuation or a Unicode P* category).
DIGIT = r"\p{N}"
PUNCTUATION = r"[\p{P}!-/:-@\[-`{-~]"
BEHAVIOURS = ("isolated", "contiguous", "mergedwithprevious", "mergedwithnext", "removed")


class UnsupportedComponent(ValueError):
    """A component of a tokenizer file that this version cannot reproduce exactly."""


def normalizer_from_hf(spec: dict | None) -> str | None:
    """``"NFC"``, ``"NFKC"`` or None from a ``normalizer`` entry; a Sequence of them composes to the strongest.

    NFKC after NFC (or the reverse) equals NFKC, so any sequence of the two is one of them.
    """
    steps = _flatten(spec, "normalizers", "normalizer")
    kinds = set()
    for step in steps:
        kind = step.get("type")
        if kind not in ("NFC", "NFKC"):
            raise UnsupportedComponent(
                f"normalizer {kind!r} is not supported (supported: NFC, NFKC, a Sequence of them, or none)"
            )
        kinds.add(kind)
    return "NFKC" if "NFKC" in kinds else ("NFC" if kinds else None)


def pretokenizer_from_hf(spec: dict | None) -> tuple[str, ...]:
    """The ordered regexes equal to a ``pre_tokenizer`` entry, which must end in ByteLevel (byte-level BPE)."""
    steps = _flatten(spec, "pretokenizers", "pre-tokenizer")
    kinds = [s.get("type") for s in steps]
    if "ByteLevel" not in kinds:
        raise UnsupportedComponent(
            f"pre-tokenizer {kinds or None} has no ByteLevel step: not a byte-level BPE tokenizer (SentencePiece-"
            "style Metaspace files and character-level BPE are not supported)"
        )
    if kinds.count("ByteLevel") > 1 or kinds[-1] != "ByteLevel":
        raise UnsupportedComponent(
            f"pre-tokenizer sequence {kinds}: steps after ByteLevel see byte-level text; only a single final "
            "ByteLevel step is supported"
        )
    patterns = [p for step in steps for p in _step_patterns(step)]
    return tuple(patterns) or (WHOLE_TEXT,)


def _step_patterns(step: dict) -> list[str]:
    kind = step.get("type")
    if kind == "ByteLevel":
        if step.get("add_prefix_space", False):
            raise UnsupportedComponent(
                "ByteLevel with add_prefix_space=true (a space added before every segment) is not supported"
            )
        return [GPT2_HF_PATTERN] if step.get("use_regex", True) else []
    if kind == "Split":
        pattern = step.get("pattern") or {}
        if "Regex" in pattern:
            regex_text = from_oniguruma(pattern["Regex"])
        elif "String" in pattern:
            regex_text = _escape(pattern["String"])
        else:
            raise UnsupportedComponent(f"Split pattern {pattern!r} is neither a Regex nor a String")
        return [split_pattern(regex_text, step.get("behavior", "Isolated"), bool(step.get("invert", False)))]
    if kind == "Digits":
        return [DIGIT if step.get("individual_digits", False) else DIGIT + "+"]
    if kind == "Punctuation":
        return [split_pattern(PUNCTUATION, step.get("behavior", "Isolated"), False)]
    raise UnsupportedComponent(
        f"pre-tokenizer {kind!r} is not supported (supported: ByteLevel, Split, Digits, Punctuation, Sequence)"
    )


def split_pattern(pattern: str, behaviour: str, invert: bool) -> str:
    """One regex (Isolated semantics) equal to a Hugging Face Split of ``pattern`` with ``behaviour``."""
    key = behaviour.replace("_", "").lower()
    if key not in BEHAVIOURS:
        raise UnsupportedComponent(f"Split behavior {behaviour!r} is unknown (known: {', '.join(BEHAVIOURS)})")
    if key == "removed":
        raise UnsupportedComponent(
            "Split behavior 'Removed' drops text, which a byte-level BPE pre-tokenizer here never does"
        )
    if key == "isolated":
        return pattern
    if key == "contiguous":
        return f"(?:{pattern})+"
    if (key == "mergedwithprevious") != invert:
        return f"(?s:.*?)(?:{pattern})|(?s:.+)"
    not_p = f"(?s:(?!(?:{pattern})).)"
    return f"(?:{pattern}){not_p}*|{not_p}+"


def _flatten(spec: dict | None, key: str, what: str) -> list[dict]:
    if spec is None:
        return []
    if not isinstance(spec, dict):
        raise UnsupportedComponent(f"{what} entry {spec!r} is not a JSON object")
    if spec.get("type") == "Sequence":
        subs = spec.get(key)
        if not isinstance(subs, list):
            raise UnsupportedComponent(f"{what} Sequence has {key} {subs!r}, not a list")
        return [s for sub in subs for s in _flatten(sub, key, what)]
    return [spec]


def _escape(text: str) -> str:
    import regex

    return regex.escape(text)


# ----------------------------------------------------------------------------------------------- export
def normalizer_to_hf(normalizer: str | None) -> dict | None:
    return None if normalizer is None else {"type": normalizer}


def pretokenizer_to_hf(patterns: Sequence[str]) -> dict:
    """A ``pre_tokenizer`` entry splitting as ``patterns`` do, then mapping bytes (ByteLevel without regex)."""
    if tuple(patterns) == (GPT2_HF_PATTERN,):
        return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    steps = [
        {"type": "Split", "pattern": {"Regex": to_oniguruma(p)}, "behavior": "Isolated", "invert": False}
        for p in patterns
        if p != WHOLE_TEXT
    ]
    steps.append({"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False})
    return steps[0] if len(steps) == 1 else {"type": "Sequence", "pretokenizers": steps}
