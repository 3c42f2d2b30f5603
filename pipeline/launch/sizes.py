"""Sizes on the command line: ``1GiB``, ``256MiB``, ``500MB`` or a number of bytes, for every flag that takes
a size (``--shard-size``, ``--range-bytes``, ``--max-document-bytes``, ``--driver-memory``). No Beam here."""

from __future__ import annotations

import argparse

from pipeline.errors import UsageError

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
}


def parse_size(text: str, flag: str = "--shard-size") -> int:
    """``1GiB``, ``256MiB``, ``500MB`` or a number of bytes -> bytes; anything else raises UsageError.

    >>> parse_size("256MiB"), parse_size("1000")
    (268435456, 1000)
    """
    value = str(text).strip().lower().replace(" ", "").replace("_", "")
    number = value.rstrip("kmgtib")
    unit = value[len(number) :]
    try:
        size = float(number) * _SIZE_UNITS[unit]
    except (KeyError, ValueError):
        raise UsageError(
            f"{flag} must be a size such as 1GiB, 256MiB, 500MB or a number of bytes, got {text!r}"
        ) from None
    if size < 1 or size != int(size):
        raise UsageError(f"{flag} must be a whole number of bytes of at least 1, got {text!r}")
    return int(size)


def size_argument(flag: str):
    """An argparse ``type=`` that reads a size for ``flag`` (its errors name the flag)."""

    def read(text: str) -> int:
        try:
            return parse_size(text, flag)
        except UsageError as exc:  # argparse prints an ArgumentTypeError's own message
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{flag} ")) from None

    read.__name__ = "size"
    return read
