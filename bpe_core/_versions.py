"""Versions recorded in artifacts: ours, the regex module's, and the Unicode tables the regex module carries."""

from __future__ import annotations

from functools import cache

import regex

BEAM_BPE_VERSION = "0.1.0"

# One letter first assigned in each Unicode version; the newest one the regex module knows tells its tables.
_UNICODE_PROBES = (
    ("14.0", 0x1E290),
    ("15.0", 0x11F04),
    ("15.1", 0x2EBF0),
    ("16.0", 0x1C89),
    ("17.0", 0x323B0),
)


@cache
def regex_unicode_version() -> str:
    """The Unicode version of the regex module's property tables (at least the newest probe it assigns)."""
    known = [v for v, cp in _UNICODE_PROBES if regex.match(r"\p{Assigned}", chr(cp))]
    return known[-1] if known else "<14.0"


def regex_version() -> str:
    return str(regex.__version__)
