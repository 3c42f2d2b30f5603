"""The loader of the C++ core, and backend selection: the core (the default) or the pure-Python reference
(``backend="python"``), the oracle. The merge loops' wrappers live beside their callers (``bpe_core.train.native_loop``,
``bpe_core.superword.reference``).

The C++ core (``bpe_core/_native``) is built by the package's own build; a C++17 compiler is the only system
requirement. Where it cannot load, the first use says so once (a RuntimeWarning naming the import error) and the
reference runs instead; with ``BEAM_BPE_REQUIRE_NATIVE=1`` (set by ``make test``) a missing core is an error, so that
a broken build can never pass as "native equals reference".

>>> from bpe_core import native
>>> native.resolve_backend("python")
'python'
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
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


def make_chunk_table():
    """An empty native ChunkTable (bpe_core.train.sorted_counts.ChunkTable wraps it)."""
    return _core.ChunkTable()


def merge_sorted_counts(parts: list[tuple]) -> tuple:
    """(offsets, data, counts) of the k-way merge of sorted (offsets int32, data uint8, counts int64) tables."""
    return _core.merge_sorted_counts(parts)


def core() -> Any:
    """The loaded C++ module (``bpe_core._native._core``) for the wrappers beside its callers (the merge loops of
    bpe_core/train/native_loop.py and bpe_core/superword/reference.py); ImportError where it did not load."""
    if _core is None:
        raise ImportError(f"the native core did not load: {_LOAD_ERROR}")
    return _core
