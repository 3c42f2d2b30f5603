"""Named pre-tokenizer presets: the exact regexes of the OpenAI encodings and of well-known model families.

The OpenAI patterns are those of ``tiktoken_ext/openai_public.py`` (tiktoken 0.14.0, MIT); the Llama 3 and Qwen2
patterns are those of their Hugging Face ``tokenizer.json`` files as applied by llama.cpp. Every name of the
llama.cpp table (GGUF ``tokenizer.ggml.pre`` values) is accepted too.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from bpe_core.pretokenize.families import family_kinds, same_regex, structural_kind
from bpe_core.pretokenize.llamacpp import LLAMACPP_PRETOKENIZERS

R50K_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|"""
    r"""\s+(?!\S)|\s"""
)
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
# Hugging Face's ByteLevel(use_regex=True) pattern (GPT-2 as published by OpenAI in 2019).
GPT2_HF_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


@dataclass(frozen=True)
class Preset:
    """A named pre-tokenizer: its ordered regexes and whether whole pieces found in the vocabulary skip BPE."""

    name: str
    patterns: tuple[str, ...]
    ignore_merges: bool = False


def _openai(name: str, pattern: str) -> Preset:
    return Preset(name, (pattern,), ignore_merges=True)


PRESETS: dict[str, Preset] = {
    "r50k": _openai("r50k", R50K_PATTERN),
    "gpt2": _openai("r50k", R50K_PATTERN),
    "p50k": _openai("r50k", R50K_PATTERN),
    "cl100k": _openai("cl100k", CL100K_PATTERN),
    "o200k": _openai("o200k", O200K_PATTERN),
    "llama3": Preset("llama3", LLAMACPP_PRETOKENIZERS["llama-bpe"][0], ignore_merges=True),
    "qwen2": Preset("qwen2", LLAMACPP_PRETOKENIZERS["qwen2"][0], ignore_merges=False),
}
# Aliases spelled as tiktoken encoding names.
for _alias, _target in (
    ("r50k_base", "r50k"),
    ("p50k_base", "r50k"),
    ("cl100k_base", "cl100k"),
    ("o200k_base", "o200k"),
):
    PRESETS[_alias] = PRESETS[_target]


# The presets with a hand-written C++ pre-tokenizer (bpe_core/_native/pretok.cpp), by the name the core knows them.
NATIVE_PRESETS: tuple[str, ...] = ("r50k", "cl100k", "o200k", "llama3", "qwen2")
# Every hand-written kind, in the core's order (pretok_names): the presets, then the other members of the cl100k
# family (families.py).
NATIVE_KINDS: tuple[str, ...] = NATIVE_PRESETS + tuple(family_kinds())


def native_kind_patterns(kind: str) -> tuple[str, ...]:
    """The reference regexes of a hand-written kind (a preset's, or a family member's)."""
    return PRESETS[kind].patterns if kind in NATIVE_PRESETS else family_kinds()[kind]


def native_preset_for(patterns: tuple[str, ...]) -> str | None:
    """The name of the hand-written pre-tokenizer that splits exactly as ``patterns`` do, or None.

    Decided by the patterns, never by a name: a pattern read from a GGUF or tokenizer.json file that is a preset's
    gets the fast path too, and a renamed preset with a different regex does not. Each preset's own regex and a few
    other spellings of the same split (:func:`native_aliases`) are known by their text; any other pattern is parsed
    and compared, node for node and class by class, with the spellings of the cl100k family
    (:func:`bpe_core.pretokenize.families.structural_kind`): Qwen 3.5's, Hugging Face's spellings of cl100k or
    Qwen2, whatever their file calls them. Each is checked piece for piece against `regex` by
    tests/native/test_native_pretok.py.
    """
    patterns = tuple(patterns)
    for name in NATIVE_PRESETS:
        if PRESETS[name].patterns == patterns:
            return name
    known = native_aliases().get(patterns)
    if known is not None:
        return known
    if len(patterns) == 2 and same_regex(patterns[0], r"\p{N}") and native_preset_for(patterns[1:]) == "r50k":
        return "r50k-digits"  # each digit a piece, then any spelling of GPT-2's regex on the text between them
    return structural_kind(patterns)


@functools.cache
def native_aliases() -> dict[tuple[str, ...], str]:
    """Other spellings of the native presets' splits: GPT-2's regex as Hugging Face and llama.cpp write it (the same
    pieces as r50k's possessive one: the runs it makes possessive are followed by no character they could give back),
    and each preset's regex after a round trip through a tokenizer.json (Oniguruma spelling and back)."""
    from bpe_core.pretokenize.dialects import from_oniguruma, to_oniguruma
    from bpe_core.pretokenize.llamacpp import LLAMACPP_PRETOKENIZERS

    aliases = {(GPT2_HF_PATTERN,): "r50k", LLAMACPP_PRETOKENIZERS["gpt-2"][0]: "r50k"}
    for name in NATIVE_PRESETS:
        for pattern in PRESETS[name].patterns:
            aliases.setdefault((from_oniguruma(to_oniguruma(pattern)),), name)
    for name in NATIVE_PRESETS:
        aliases.pop(PRESETS[name].patterns, None)
    return aliases


def lookup_preset(name: str) -> Preset | None:
    """The preset called ``name`` (our names first, then llama.cpp's GGUF ``pre`` names), or None."""
    if name in PRESETS:
        return PRESETS[name]
    if name in LLAMACPP_PRETOKENIZERS:
        patterns, ignore_merges = LLAMACPP_PRETOKENIZERS[name]
        return Preset(name, patterns, ignore_merges)
    return None


def preset_names() -> list[str]:
    """Every accepted preset name, ours first."""
    return list(PRESETS) + [n for n in LLAMACPP_PRETOKENIZERS if n not in PRESETS]
