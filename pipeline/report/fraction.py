"""The held-out sample's fraction: its default and its check, without Beam (the CLI and ``train --from-counts``
import them; the sample's Beam stage is in pipeline/report/sample.py)."""

from __future__ import annotations

DEFAULT_EVAL_FRACTION = 0.01


def check_fraction(fraction: float) -> float:
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 < fraction <= 1.0:
        raise ValueError(
            f"--eval-fraction must be a number in (0, 1], e.g. 0.01 for 1% of the documents, got {fraction!r}"
        )
    return float(fraction)
