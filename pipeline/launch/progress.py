"""What a running job shows: a progress bar on a terminal, one JSON line per stage otherwise."""

from __future__ import annotations

import json
import sys
import time


class Reporter:
    """A progress bar with merges per second and ETA on a terminal; one JSON line per stage otherwise."""

    def __init__(self, stream=None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.perf_counter()

    def stage(self, name: str, **fields) -> None:
        if self.tty:
            details = ", ".join(f"{k}={v}" for k, v in fields.items())
            print(f"[beam-bpe] {name}: {details}", file=self.stream)
        else:
            print(json.dumps({"stage": name, **fields}, sort_keys=True), file=self.stream)
        self.stream.flush()

    def merges(self, total: int):
        """A ``progress(done, budget)`` callback for ``bpe_core.train``, or None off a terminal."""
        if not self.tty:
            return None
        start = time.perf_counter()

        def progress(done: int, budget: int) -> None:
            elapsed = max(time.perf_counter() - start, 1e-9)
            rate = done / elapsed
            eta = (budget - done) / rate if rate else float("inf")
            width = 30
            filled = int(width * done / max(budget, 1))
            bar = "#" * filled + "." * (width - filled)
            self.stream.write(f"\r[{bar}] {done}/{budget} merges, {rate:,.0f}/s, ETA {eta:,.0f} s ")
            self.stream.flush()

        return progress

    def end_progress(self) -> None:
        if self.tty:
            self.stream.write("\n")
