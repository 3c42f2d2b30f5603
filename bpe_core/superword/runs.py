"""Runs, the words of phase 2 (SuperBPE): the eligibility rules, run keys (a run's word-model ids as little-endian
u32, as the pipeline's ``runs/`` stores them) and runs as three columns (no Python object per run)."""

from __future__ import annotations

import array
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

# The eligibility rules (the artifact names its rule, so that a reader refuses one it does not know):
# - "letter-run": a run is a maximal run of >= 2 consecutive pre-tokens that the word model encodes as one token each,
#   and it counts (in training and in encoding) where one of its tokens holds a letter.
# - "letter-token": fastboundlessbpe's rule: every pre-token of the run is one token holding a letter.
# Measured on the shared corpora, cl100k, every 20th document held out (total tokens against the plain tokenizer of
# the same size trained on the same documents; benchmarks/bench_superword.py): 16000/2000: letter-run 12.7% fewer,
# letter-token 3.2%; 8000/2000: 8.1% and -0.2%; 8000/1000: 8.6% and 1.4%. Punctuation, digits and whitespace
# pre-tokens (",", "\n   ") are single tokens without a letter: letter-token ends a run at each, so phrases like
# "LORD, and" or "\n    return" never form.
RULES = ("letter-run", "letter-token")
DEFAULT_RULE = "letter-run"


def run_key(ids: Sequence[int]) -> bytes:
    """A run's key: its token ids as little-endian u32 (the ``chunk`` column of ``runs/``)."""
    arr = array.array("I", ids)
    if sys.byteorder != "little":  # pragma: no cover - no big-endian machine here
        arr.byteswap()
    return arr.tobytes()


def run_ids(key: bytes) -> list[int]:
    """The token ids of a run key (the inverse of :func:`run_key`)."""
    if len(key) % 4:
        raise ValueError(f"a run key is a whole number of little-endian u32 ids, got {len(key)} bytes")
    arr = array.array("I")
    arr.frombytes(key)
    if sys.byteorder != "little":  # pragma: no cover
        arr.byteswap()
    return arr.tolist()


def is_eligible_token(data: bytes | None) -> bool:
    """True where a pre-token that is exactly this token may join a run: valid UTF-8 holding a letter (\\p{L})."""
    if not data:
        return False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return any(ch.isalpha() for ch in text)


def letter_table(token_bytes: Sequence[bytes | None]) -> bytearray:
    """One flag per id: :func:`is_eligible_token` of its bytes (valid UTF-8 holding a letter)."""
    return bytearray(is_eligible_token(b) for b in token_bytes)


def eligible_table(token_bytes: Sequence[bytes | None], rule: str = DEFAULT_RULE) -> bytearray:
    """One flag per id: may a whole pre-token that is this one token join a run under ``rule``."""
    check_rule(rule)
    if rule == "letter-token":
        return letter_table(token_bytes)
    return bytearray(1 if b else 0 for b in token_bytes)


def check_rule(rule: str) -> str:
    if rule not in RULES:
        raise ValueError(f"superword eligibility rule must be one of {RULES}, got {rule!r}")
    return rule


class RunColumns(NamedTuple):
    """Runs as three columns: ``ids`` (uint32, the runs' word-model ids one after another), ``offsets`` (int64,
    ``n + 1``: run ``i`` is ``ids[offsets[i]:offsets[i + 1]]``) and ``counts`` (int64)."""

    ids: Any
    offsets: Any
    counts: Any

    def __len__(self) -> int:  # runs, not fields
        return len(self.counts)


def run_columns_to_dict(columns: RunColumns) -> dict[bytes, int]:
    """The columns as a dict keyed by :func:`run_key` (tests and the reference's backend)."""
    import numpy as np

    data, o = np.asarray(columns.ids, dtype="<u4").tobytes(), columns.offsets
    return {data[4 * o[i] : 4 * o[i + 1]]: int(c) for i, c in enumerate(columns.counts)}


def run_columns(run_counts: Mapping[bytes, int]) -> RunColumns:
    """Runs as columns, sorted by key: (ids uint32, offsets int64, counts int64)."""
    import numpy as np

    keys = sorted(run_counts)
    for key in keys:
        if len(key) % 4:
            raise ValueError(f"a run key is a whole number of little-endian u32 ids, got {len(key)} bytes: {key!r}")
    ids = np.frombuffer(b"".join(keys), dtype="<u4").astype(np.uint32, copy=False)
    offsets = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum([len(k) // 4 for k in keys], out=offsets[1:])
    counts = np.array([run_counts[k] for k in keys], dtype=np.int64)
    return RunColumns(ids, offsets, counts)
