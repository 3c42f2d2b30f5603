"""Parquet: a document is a cell of the text column (``--text-column``, dotted for a struct field), read a row group
per range as one Arrow column, in place where the column is valid UTF-8 throughout and cell by cell where not."""

from __future__ import annotations

from collections.abc import Iterator

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.corpus.batcher import EXCERPT_CHARS, Batcher, too_long
from pipeline.corpus.plan import CorpusSpec
from pipeline.corpus.records import CorpusRange
from pipeline.errors import CorpusError

SLICE_ROWS = 4096  # cells converted to Python per step
_STRING_TYPES = (pa.string(), pa.large_string())
_BINARY_TYPES = (pa.binary(), pa.large_binary())


def parquet_documents(rng: CorpusRange, spec: CorpusSpec, batcher: Batcher) -> Iterator[None]:
    column_path = spec.text_column.split(".")
    with fsspec.open(rng.source, "rb") as f:
        # No Arrow thread: one column of one row group gains nothing from them, and Arrow's pool threads alive at
        # interpreter exit abort it now and then ("terminate called without an active exception", apache/arrow#34314)
        pfile = pq.ParquetFile(f, pre_buffer=False)
        num_rows = pfile.metadata.row_group(rng.start).num_rows
        if column_path[0] not in pfile.schema_arrow.names:
            reason = f"wrong schema: no column {spec.text_column!r} (columns: {pfile.schema_arrow.names})"
            for row in range(rng.first_row, rng.first_row + num_rows):
                batcher.reject(row, reason)
            yield
            return
        try:
            table = pfile.read_row_group(rng.start, columns=[column_path[0]], use_threads=False)
            column = table.column(0).combine_chunks()
        except (OSError, pa.ArrowException) as exc:  # a damaged page: fail the bundle (retryable), naming the place
            raise CorpusError(
                f"{rng.source}: row group {rng.start} (rows {rng.first_row} to {rng.first_row + num_rows - 1}) cannot "
                f"be read: {type(exc).__name__}: {exc}"
            ) from exc
    for name in column_path[1:]:
        if not pa.types.is_struct(column.type) or column.type.get_field_index(name) < 0:
            break
        column = column.field(name)
    _parquet_column(column, rng.first_row, spec.text_column, spec.max_document_bytes, batcher)
    yield


def _parquet_column(column: pa.Array, first_row: int, name: str, limit: int, batcher: Batcher) -> None:
    if column.type not in _STRING_TYPES + _BINARY_TYPES:
        reason = f"wrong schema: column {name!r} is {column.type}, expected a string or binary column"
        for row in range(first_row, first_row + len(column)):
            batcher.reject(row, reason)
        return
    # Parquet writers need not check UTF-8 (pyarrow's does not: converting the column raised and failed the run):
    # a column that is not valid UTF-8 throughout is read as bytes, so that each bad cell is decoded, and rejected,
    # alone; a binary column that is valid UTF-8 throughout is read as text, in place.
    if column.type in _BINARY_TYPES:
        text = column.view(_STRING_TYPES[_BINARY_TYPES.index(column.type)])
        if not _valid_strings(text):
            _parquet_cells(column, first_row, name, limit, batcher)
            return
        column = text
    elif not _valid_strings(column):
        _parquet_cells(column.view(_BINARY_TYPES[_STRING_TYPES.index(column.type)]), first_row, name, limit, batcher)
        return
    sizes = pc.fill_null(pc.binary_length(column), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    nulls = column.is_null().to_numpy(zero_copy_only=False)
    for i in np.flatnonzero(nulls | (sizes > limit)).tolist():
        if nulls[i]:
            batcher.reject(first_row + i, f"null value in column {name!r}")
        else:
            head = pc.binary_slice(column.slice(i, 1).cast(_BINARY_TYPES[1]), 0, EXCERPT_CHARS * 4)[0].as_py()
            batcher.reject(first_row + i, too_long(int(sizes[i]), limit), head, int(sizes[i]))
    keep = ~nulls & (sizes <= limit)
    texts = column if keep.all() else column.filter(pa.array(keep))
    batcher.add_column(first_row + np.flatnonzero(keep), texts, int(sizes[keep].sum()))


def _parquet_cells(column: pa.Array, first_row: int, name: str, limit: int, batcher: Batcher) -> None:
    """The exact path for a binary column that is not all UTF-8: each cell decoded alone, a bad one rejected."""
    # Cell sizes come from Arrow, so that a cell over the limit is never made into a Python object (a 1 GB cell
    # would otherwise be held twice); the others are converted a slice at a time.
    sizes = pc.binary_length(column).to_pylist()
    start = 0
    while start < len(column):
        end = min(len(column), start + SLICE_ROWS)
        long_rows = [i for i in range(start, end) if sizes[i] is not None and sizes[i] > limit]
        end = long_rows[0] if long_rows else end
        for row, value in enumerate(column.slice(start, end - start).to_pylist(), start=first_row + start):
            _parquet_value(row, value, name, batcher)
        if long_rows:
            head = pc.binary_slice(column.slice(end, 1).cast(_BINARY_TYPES[1]), 0, EXCERPT_CHARS * 4)[0].as_py()
            batcher.reject(first_row + end, too_long(sizes[end], limit), head, sizes[end])
            end += 1
        start = end


def _valid_strings(column: pa.Array) -> bool:
    try:
        column.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _parquet_value(row: int, value: bytes | None, name: str, batcher: Batcher) -> None:
    if value is None:
        batcher.reject(row, f"null value in column {name!r}")
    else:
        try:
            batcher.add(row, value.decode("utf-8"), len(value))
        except UnicodeDecodeError as exc:
            batcher.reject(
                row, f"undecodable bytes: {exc.reason} at byte {exc.start} of the value (not UTF-8)", value, len(value)
            )
