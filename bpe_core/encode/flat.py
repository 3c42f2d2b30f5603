"""Flat batch encoding: many texts in, one array of ids and one of offsets out (no Python int per token).

What a job that writes token shards needs: ``ids[offsets[i]:offsets[i + 1]]`` are the ids of text ``i``, exactly
``encode_ordinary_batch(texts)[i]`` (or ``encode_batch``'s, with its special-token policy), for every input and
thread count. Texts are a list of ``str`` (or ``bytes``, as everywhere in ``bpe_core``) or a pyarrow string array
(``StringArray``, ``LargeStringArray`` or a ``ChunkedArray`` of them), which the native core reads from its
buffers without making a Python string; such input is checked first (pyarrow's JSON reader does not check UTF-8),
and a null or invalid element raises :class:`InvalidTextError` naming its index, so that a pipeline can
dead-letter it. The :class:`~bpe_core.Tokenizer` methods ``encode_ordinary_flat``, ``encode_flat`` and
``decode_flat`` call the functions here.

>>> tok = bpe_core.Tokenizer.from_file("cl100k_base.tiktoken")  # doctest: +SKIP
>>> ids, offsets = tok.encode_ordinary_flat(["hello world", "hi"])  # doctest: +SKIP
>>> ids.tolist(), offsets.tolist()  # doctest: +SKIP
([15339, 1917, 6151], [0, 2, 3])
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from bpe_core import native

if TYPE_CHECKING:
    from bpe_core.model.data import TokenizerLike as Tokenizer  # annotations only: no import of tokenizer
    from bpe_core.model.special_tokens import SpecialSet

# ids fit in uint16 when every id is below this (n_vocab <= 65536).
NARROW_LIMIT = 1 << 16


class InvalidTextError(ValueError):
    """An element of the texts given to a flat encode is not text: null, or not valid UTF-8 (Arrow input).

    ``index`` is its position in the input (across the chunks of a ChunkedArray), so that the caller can set it
    aside (a dead letter) and encode the others.

    >>> try:
    ...     raise InvalidTextError(3, "is null")
    ... except InvalidTextError as e:
    ...     e.index
    3
    """

    def __init__(self, index: int, problem: str) -> None:
        self.index = index
        self.problem = problem
        super().__init__(
            f"text {index} {problem}: drop or repair it (e.g. pyarrow.compute.drop_null, or decode the source with "
            "errors='replace') and encode the others"
        )


def id_dtype(n_vocab: int) -> np.dtype:
    """uint16 when every id of the vocabulary fits, else uint32."""
    return np.dtype(np.uint16 if n_vocab <= NARROW_LIMIT else np.uint32)


def encode_ordinary_flat(
    tok: Tokenizer, texts: Any, *, num_threads: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(ids, offsets) of ``tok.encode_ordinary_batch(texts)``; see the module docstring."""
    return _encode(tok, texts, frozenset(), frozenset(), native.resolve_threads(num_threads))


def encode_flat(
    tok: Tokenizer,
    texts: Any,
    *,
    allowed_special: SpecialSet = frozenset(),
    disallowed_special: SpecialSet = "all",
    num_threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(ids, offsets) of ``tok.encode_batch(texts, allowed_special=..., disallowed_special=...)``: the same policy
    (a disallowed special token in any text raises tiktoken's ValueError)."""
    threads = native.resolve_threads(num_threads)
    finder = tok.token_finder
    allowed = finder.resolve_allowed(allowed_special)
    return _encode(tok, texts, allowed, finder.resolve_disallowed(disallowed_special, allowed), threads)


def decode_flat(tok: Tokenizer, ids: Any, offsets: Any, *, errors: str = "replace") -> list[str]:
    """One str per text of flat ``ids`` and ``offsets`` (as :func:`encode_flat` returns them): ``tok.decode`` of
    each slice. An id without a token raises ``decode``'s ValueError; offsets must rise from 0 to at most
    ``len(ids)``."""
    ids_array = _as_id_array(ids)
    offsets_array = _as_offsets(offsets)
    return tok.engine.decode_flat(ids_array, offsets_array, errors)


# ----------------------------------------------------------------------------------------------- encoding


def _encode(
    tok: Tokenizer, texts: Any, allowed: frozenset[str], disallowed: frozenset[str], threads: int
) -> tuple[np.ndarray, np.ndarray]:
    dtype = id_dtype(tok.n_vocab)
    chunks = _arrow_chunks(texts)
    if chunks is None:
        return _encode_texts(tok, _as_list(texts), allowed, disallowed, threads, dtype)
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    start = 0
    for chunk in chunks:
        try:
            parts.append(_encode_arrow(tok, chunk, allowed, disallowed, threads, dtype))
        except InvalidTextError as e:
            raise InvalidTextError(start + e.index, e.problem) from None
        start += len(chunk)
    return _concat(parts, dtype)


def _encode_texts(
    tok: Tokenizer, texts: list, allowed: frozenset[str], disallowed: frozenset[str], threads: int, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray]:
    if not tok.engine.splits_whole_texts(allowed):
        return _from_lists(_encode_lists(tok, texts, allowed, disallowed, threads), dtype)
    return tok.engine.flat(texts, disallowed, threads, dtype)


def _encode_lists(
    tok: Tokenizer, texts: list, allowed: frozenset[str], disallowed: frozenset[str], threads: int
) -> list[list[int]]:
    if not allowed and not disallowed:
        return tok.encode_ordinary_batch(texts, num_threads=threads)
    return tok.encode_batch(texts, allowed_special=allowed, disallowed_special=disallowed, num_threads=threads)


def _encode_arrow(
    tok: Tokenizer, chunk: Any, allowed: frozenset[str], disallowed: frozenset[str], threads: int, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray]:
    """One Arrow string array: validated (nulls here, UTF-8 in the core), then read in place where the core
    encodes it alone; else as Python strings through the list path."""
    _check_nulls(chunk)
    width = 8 if _is_large(chunk) else 4
    n = len(chunk)
    _, offsets_buf, data_buf = chunk.buffers()
    offsets_addr = 0 if offsets_buf is None else offsets_buf.address + chunk.offset * width
    data_addr, data_size = (0, 0) if data_buf is None else (data_buf.address, data_buf.size)
    fast = tok.engine.splits_whole_texts(allowed)
    if n == 0 or not fast or offsets_buf is None:
        _validate_arrow(chunk, offsets_addr, width, data_addr, data_size)
        texts = chunk.to_pylist()
        if disallowed:
            _check_disallowed_all(tok, texts, disallowed)
        if not fast:
            return _from_lists(_encode_lists(tok, texts, allowed, frozenset(), threads), dtype)
        return tok.engine.flat(texts, frozenset(), threads, dtype)
    if disallowed:
        _validate_arrow(chunk, offsets_addr, width, data_addr, data_size)
        _check_disallowed_arrow(tok, chunk, offsets_addr, width, data_buf, disallowed)
    result = tok.engine.flat_arrow(offsets_addr, width, data_addr, data_size, n, threads, dtype)
    if result[0] is None:
        _, index, problem, at = result
        raise InvalidTextError(index, _problem_text(problem, at, chunk, index))
    return result


def _validate_arrow(chunk: Any, offsets_addr: int, width: int, data_addr: int, data_size: int) -> None:
    """The core's UTF-8 and offsets check alone (for the paths that then read the array through Python)."""
    n = len(chunk)
    if n == 0:
        return
    if not native.available():
        for i, value in enumerate(chunk.cast(_binary_type(chunk)).to_pylist()):
            try:
                value.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InvalidTextError(i, f"is not valid UTF-8 (byte {e.start}: {value[e.start]:#04x})") from None
        return
    index, problem, at = native._core.validate_arrow_strings(offsets_addr, width, data_addr, data_size, n)
    if index >= 0:
        raise InvalidTextError(index, _problem_text(problem, at, chunk, index))


def _problem_text(problem: str, at: int, chunk: Any, index: int) -> str:
    if problem == "offsets":
        return "has offsets outside the array's data buffer (a malformed Arrow array)"
    value = chunk.cast(_binary_type(chunk))[index].as_py()
    return f"is not valid UTF-8 (byte {at}: {value[at]:#04x})"


def _check_nulls(chunk: Any) -> None:
    if chunk.null_count:
        import pyarrow.compute as pc

        raise InvalidTextError(pc.index(chunk.is_null(), True).as_py(), "is null")


def _check_disallowed_all(tok: Tokenizer, texts: Iterable[str], disallowed: frozenset[str]) -> None:
    for text in texts:
        tok.token_finder.check_disallowed(text, disallowed)


def _check_disallowed_arrow(
    tok: Tokenizer, chunk: Any, offsets_addr: int, width: int, data_buf: Any, disallowed: frozenset[str]
) -> None:
    """check_disallowed over the array's data buffer in one search (no Python string per text). A match across two
    texts does not count; the search goes on after its first byte."""
    from bpe_core.model.special_tokens import raise_disallowed

    matcher = tok.token_finder._matcher(disallowed, as_bytes=True)
    if matcher is None:  # a token without UTF-8 (a lone surrogate) cannot be in valid UTF-8 text
        return
    _, offsets_buf, _ = chunk.buffers()
    kind = np.int64 if width == 8 else np.int32
    bounds = np.frombuffer(offsets_buf, dtype=kind, count=len(chunk) + 1, offset=chunk.offset * width).astype(np.int64)
    data = memoryview(data_buf)
    pos, end = int(bounds[0]), int(bounds[-1])
    while True:
        match = matcher.search(data, pos, end)
        if match is None:
            return
        doc = int(np.searchsorted(bounds, match.start(), side="right")) - 1
        if match.end() <= bounds[doc + 1]:
            raise_disallowed(match.group().decode())
        pos = match.start() + 1


# ----------------------------------------------------------------------------------------------- helpers


def _arrow_chunks(texts: Any) -> list | None:
    """The string arrays of Arrow input (one, or a ChunkedArray's chunks); None for anything else."""
    module = type(texts).__module__
    if not module.startswith("pyarrow"):
        return None
    import pyarrow as pa

    if isinstance(texts, pa.ChunkedArray):
        chunks = list(texts.chunks)
        kind = texts.type
    elif isinstance(texts, pa.Array):
        chunks, kind = [texts], texts.type
    else:
        return None
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise TypeError(
            f"Arrow texts must be a string or large_string array, got {kind}: cast it "
            "(pyarrow.compute.cast(array, pyarrow.string())) or pass a list of str"
        )
    return chunks


def _is_large(chunk: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_large_string(chunk.type)


def _binary_type(chunk: Any) -> Any:
    import pyarrow as pa

    return pa.large_binary() if _is_large(chunk) else pa.binary()


def _as_list(texts: Any) -> list:
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be a list of texts, not one text: pass [text]")
    return texts if isinstance(texts, list) else list(texts)


def _from_lists(lists: Sequence[list[int]], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum([len(ids) for ids in lists], out=offsets[1:])
    ids = np.fromiter(chain.from_iterable(lists), dtype=dtype, count=int(offsets[-1]))
    return ids, offsets


def _concat(parts: list[tuple[np.ndarray, np.ndarray]], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    if len(parts) == 1:
        return parts[0]
    ids = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, dtype=dtype)
    offsets = [np.zeros(1, dtype=np.int64)]
    base = 0
    for part_ids, part_offsets in parts:
        offsets.append(part_offsets[1:] + base)
        base += len(part_ids)
    return ids.astype(dtype, copy=False), np.concatenate(offsets)


def _as_id_array(ids: Any) -> np.ndarray:
    array = np.asarray(ids)
    if array.ndim != 1:
        raise ValueError(f"ids must be one-dimensional, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"token ids must be integers, got an array of {array.dtype}")
    if array.dtype in (np.uint16, np.uint32):
        return np.ascontiguousarray(array)
    if array.size and (int(array.min()) < 0 or int(array.max()) > 0xFFFFFFFF):
        bad = int(array.min()) if int(array.min()) < 0 else int(array.max())
        raise ValueError(f"token ids not in this vocabulary: [{bad}]")
    return np.ascontiguousarray(array, dtype=np.uint32)


def _as_offsets(offsets: Any) -> np.ndarray:
    array = np.asarray(offsets)
    if array.ndim != 1 or array.size == 0:
        raise ValueError("offsets must be a one-dimensional array of len(texts) + 1 integers")
    if not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"offsets must be integers, got an array of {array.dtype}")
    return np.ascontiguousarray(array, dtype=np.int64)


__all__ = ["InvalidTextError", "decode_flat", "encode_flat", "encode_ordinary_flat", "id_dtype"]
