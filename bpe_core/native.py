"""Backend selection: the C++ core (the default) or the pure-Python reference (``backend="python"``), the oracle.

The C++ core (``bpe_core/_native``) is built by the package's own build; a C++17 compiler is the only system
requirement. Where it cannot load, the first use says so once (a RuntimeWarning naming the import error) and the
reference runs instead; with ``BEAM_BPE_REQUIRE_NATIVE=1`` (set by ``make test``) a missing core is an error, so that
a broken build can never pass as "native equals reference".

>>> from bpe_core import native
>>> native.resolve_backend("python")
'python'
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Mapping
from typing import Any

BACKENDS = ("native", "python")
REQUIRE_ENV = "BEAM_BPE_REQUIRE_NATIVE"

_core: Any = None
try:
    import bpe_core._native._core as _loaded
except ImportError as exc:  # pragma: no cover - exercised only on a broken build
    _LOAD_ERROR: str | None = f"{type(exc).__name__}: {exc}"
    if os.environ.get(REQUIRE_ENV) == "1":
        raise ImportError(
            f"the native core bpe_core._native._core did not load ({_LOAD_ERROR}) and {REQUIRE_ENV}=1 requires it: "
            "rebuild with `pip install -e .` (needs a C++17 compiler and CMake)"
        ) from exc
else:
    _core, _LOAD_ERROR = _loaded, None

_warned = False


def available() -> bool:
    """True if the C++ core loaded."""
    return _core is not None


def load_error() -> str | None:
    """Why the C++ core did not load, or None."""
    return _LOAD_ERROR


def resolve_backend(backend: str | None) -> str:
    """``"native"`` or ``"python"``: None means native where it loads (with one warning where it does not)."""
    global _warned
    if backend is None:
        if _core is not None:
            return "native"
        if not _warned:
            _warned = True
            warnings.warn(
                f"beam-bpe: the native core did not load ({_LOAD_ERROR}); using the pure-Python reference, which is "
                "much slower. Reinstall with a C++17 compiler available: pip install --force-reinstall beam-bpe",
                RuntimeWarning,
                stacklevel=3,
            )
        return "python"
    if backend == "python":
        return "python"
    if backend == "native":
        if _core is None:
            raise ImportError(f"backend='native' was asked for but the native core did not load: {_LOAD_ERROR}")
        return "native"
    raise ValueError(f"backend must be 'native', 'python' or None (native where it loads), got {backend!r}")


CACHE_ENV = "BEAM_BPE_CACHE_MB"


def cache_limit_bytes() -> int | None:
    """The bound of each worker's encode cache from ``BEAM_BPE_CACHE_MB`` (MiB), or None (the core's default,
    256 MiB). Over it a worker's piece table is reset to the vocabulary's seed image (``Encoder.cache_resets``)."""
    value = os.environ.get(CACHE_ENV)
    if value is None or value == "":
        return None
    try:
        mb = int(value)
    except ValueError:
        mb = 0
    if mb < 1:
        raise ValueError(f"{CACHE_ENV} must be a positive number of MiB (e.g. {CACHE_ENV}=64), got {value!r}")
    return mb << 20


def make_encoder(vocab: Mapping[int, bytes], pair_values: Mapping[int, int] | None, ignore_merges: bool):
    """The C++ encoder of a vocabulary: ``pair_values`` as bpe.MergeTable, or None for a rank-only vocabulary."""
    pairs = None if pair_values is None else dict(pair_values)
    encoder = _core.Encoder(dict(vocab), pairs, bool(ignore_merges))
    limit = cache_limit_bytes()
    if limit is not None:
        encoder.cache_limit = limit
    return encoder


def make_chunk_counter(kind: str):
    """A native chunk counter for the hand-written pre-tokenizer ``kind`` (``.add(texts, num_threads)``,
    ``.to_dict()``)."""
    return _core.ChunkCounter(kind)


def resolve_threads(num_threads: int | None) -> int:
    """The number of threads for a batch: None means every core this process may run on (os.sched_getaffinity,
    which respects taskset and container CPU sets, where os.cpu_count does not)."""
    if num_threads is None:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):  # pragma: no cover - not Linux
            return os.cpu_count() or 1
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads must be a positive int or None (all usable cores), got {num_threads!r}")
    return num_threads


def make_decoder(id_to_bytes: list[bytes | None], special_ids):
    return _core.Decoder(id_to_bytes, list(special_ids))


def make_stream_state(decoder, errors: str, skip_special: bool):
    return _core.StreamState(decoder, errors, skip_special)


# ----------------------------------------------------------------------------------------------- training


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
    n_words, n_tokens = _core.train_sizes(_as_dict(chunk_counts))
    return n_words, n_tokens, _core.estimate_train_memory(n_words, n_tokens)


def train_merges(
    chunk_counts: Mapping[bytes, int],
    budget: int,
    min_count: int,
    tie_break: str,
    progress: Callable[[int, int], None] | None = None,
    *,
    memory_limit: int | None = None,
) -> tuple[list[tuple[int, int]], list[bytes]]:
    """The C++ merge loop: (merges as id pairs, token bytes by id), equal to train._MergeLoop's.

    Logs the memory estimate (logger ``bpe_core.native``, INFO; the figures are ``train_memory_estimate`` and
    ``available_memory``, for a caller that reports them itself) and raises MemoryError, with the figures, where it
    exceeds ``memory_limit`` (default: the memory available now).
    """
    from bpe_core.constants import TIE_BREAKS

    counts = _as_dict(chunk_counts)
    n_words, n_tokens, estimate = train_memory_estimate(counts)
    _check_memory(n_words, n_tokens, estimate, memory_limit)
    merges, token_bytes = _core.train(counts, budget, min_count, TIE_BREAKS.index(tie_break), _hf_rank(), progress)
    return merges, token_bytes


def make_chunk_table():
    """An empty native ChunkTable (bpe_core.train.sorted_counts.ChunkTable wraps it)."""
    return _core.ChunkTable()


def merge_sorted_counts(parts: list[tuple]) -> tuple:
    """(offsets, data, counts) of the k-way merge of sorted (offsets int32, data uint8, counts int64) tables."""
    return _core.merge_sorted_counts(parts)


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
    from bpe_core.constants import TIE_BREAKS

    n_words, n_tokens = table.train_sizes()
    _check_memory(n_words, n_tokens, _core.estimate_train_memory(n_words, n_tokens), memory_limit)
    return _core.train_table(table, budget, min_count, TIE_BREAKS.index(tie_break), _hf_rank(), progress)


def _hf_rank() -> list[int]:
    from bpe_core.model.bytelevel import huggingface_base_order

    hf_rank = [0] * 256
    for rank, b in enumerate(huggingface_base_order()):
        hf_rank[b] = rank
    return hf_rank


def _check_memory(n_words: int, n_tokens: int, estimate: int, memory_limit: int | None) -> None:
    limit = available_memory() if memory_limit is None else memory_limit
    gib = 1 << 30
    logging.getLogger(__name__).info(
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


def train_supermerges(
    ids, offsets, counts, alphabet: list[bytes], budget: int, min_count: int, tie_break: str, progress
):
    """Phase 2 of a superword tokenizer on the native core: (merges, the new tokens' bytes)."""
    from bpe_core.constants import TIE_BREAKS

    return _core.train_supermerges(
        ids, offsets, counts, alphabet, budget, min_count, TIE_BREAKS.index(tie_break), _hf_rank(), progress
    )


def make_superword_pass(token_len, eligible: bytes, letter: bytes, run_needs_letter: bool, left, right, result, kind):
    """The native superword pass of one tokenizer (bpe_core.superword.reference.SuperwordPass wraps it)."""
    return _core.SuperwordPass(token_len, eligible, letter, run_needs_letter, left, right, result, kind)
