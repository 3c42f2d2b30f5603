"""GPT-2's reversible byte <-> printable-character map, used by Hugging Face and llama.cpp vocabulary files."""

from __future__ import annotations

from functools import cache


@cache
def bytes_to_unicode() -> dict[int, str]:
    """Map each byte to a printable character: printable Latin-1 bytes map to themselves, the rest to U+0100...

    >>> bytes_to_unicode()[ord(" ")]
    'Ġ'
    """
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    mapping = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


@cache
def unicode_to_bytes() -> dict[str, int]:
    return {c: b for b, c in bytes_to_unicode().items()}


def bytes_to_token_string(data: bytes) -> str:
    """Spell bytes as GPT-2 byte-level characters (``b" hi"`` -> ``"Ġhi"``)."""
    table = bytes_to_unicode()
    return "".join(table[b] for b in data)


def token_string_to_bytes(text: str) -> bytes:
    """Inverse of :func:`bytes_to_token_string`; raises KeyError on a character outside the map."""
    table = unicode_to_bytes()
    return bytes(table[c] for c in text)


def huggingface_base_order() -> list[int]:
    """Byte values sorted as Hugging Face's BpeTrainer numbers its alphabet: by code point of their character."""
    table = bytes_to_unicode()
    return sorted(range(256), key=lambda b: ord(table[b]))
