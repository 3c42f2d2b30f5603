"""Phase 1's merge loop on the native core (``run_merge_loop`` of ``bpe_core/_native/trainer_bindings.cpp``), with
its memory estimate: the wrappers that ``bpe_core.train`` calls; ``bpe_core.model.merge_loop`` is the reference."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping

from bpe_core import native
from bpe_core.constants import TIE_BREAKS
from bpe_core.model.merge_loop import hf_rank

# The memory estimate is logged under the name it always had (pipeline/train/driver.py shows it as a stage).
LOGGER = logging.getLogger("bpe_core.native")


def available_memory() -> int:
    """Bytes of memory available to a new allocation now (MemAvailable on Linux)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62  # unknown: do not refuse


def train_memory_estimate(chunk_counts: Mapping[bytes, int]) -> tuple[int, int, int]:
    """(unique chunks with pairs, their bytes, estimated bytes of the merge loop); validates the counts."""
    core = native.core()
    n_words, n_tokens = core.train_sizes(_as_dict(chunk_counts))
    return n_words, n_tokens, core.estimate_train_memory(n_words, n_tokens)


def train_merges(
    chunk_counts: Mapping[bytes, int],
    budget: int,
    min_count: int,
    tie_break: str,
    progress: Callable[[int, int], None] | None = None,
    *,
    memory_limit: int | None = None,
) -> tuple[list[tuple[int, int]], list[bytes]]:
    """The C++ merge loop: (merges as id pairs, token bytes by id), equal to ``bpe_core.model.merge_loop``'s.

    Logs the memory estimate (logger ``bpe_core.native``, INFO; the figures are ``train_memory_estimate`` and
    ``available_memory``, for a caller that reports them itself) and raises MemoryError, with the figures, where it
    exceeds ``memory_limit`` (default: the memory available now).
    """
    counts = _as_dict(chunk_counts)
    n_words, n_tokens, estimate = train_memory_estimate(counts)
    _check_memory(n_words, n_tokens, estimate, memory_limit)
    return native.core().train(counts, budget, min_count, TIE_BREAKS.index(tie_break), hf_rank(), progress)


def train_table_merges(
    table,
    budget: int,
    min_count: int,
    tie_break: str,
    progress: Callable[[int, int], None] | None = None,
    *,
    memory_limit: int | None = None,
) -> tuple[list[tuple[int, int]], list[bytes]]:
    """``train_merges`` on a native ChunkTable (emptied as its chunks become the loop's words), with the same
    memory estimate, log line and MemoryError. ``tie_break`` is one of ``TIE_BREAKS``: ``bpe_core.train`` checked
    it (``check_train_arguments``)."""
    core = native.core()
    n_words, n_tokens = table.train_sizes()
    _check_memory(n_words, n_tokens, core.estimate_train_memory(n_words, n_tokens), memory_limit)
    return core.train_table(table, budget, min_count, TIE_BREAKS.index(tie_break), hf_rank(), progress)


def _check_memory(n_words: int, n_tokens: int, estimate: int, memory_limit: int | None) -> None:
    limit = available_memory() if memory_limit is None else memory_limit
    gib = 1 << 30
    LOGGER.info(
        "merge loop over %s unique chunks (%s bytes) needs about %.2f GiB (%.1f GiB available)",
        f"{n_words:,}",
        f"{n_tokens:,}",
        estimate / gib,
        limit / gib,
    )
    if estimate > limit:
        raise MemoryError(
            f"the merge loop over {n_words:,} unique chunks ({n_tokens:,} bytes) needs about {estimate / gib:.2f} GiB "
            f"but only {limit / gib:.2f} GiB is available: keep fewer chunks (drop rare chunks from "
            "chunk_counts) or use a machine with more memory"
        )


def _as_dict(chunk_counts: Mapping[bytes, int]) -> dict:
    return chunk_counts if isinstance(chunk_counts, dict) else dict(chunk_counts.items())
