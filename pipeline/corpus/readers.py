"""Read one corpus range into document batches (no Beam here: the reading DoFn and the tests call these).

Text and JSONL ranges are read as blocks of whole lines: a line belongs to the range holding its first byte, so
ranges cut at arbitrary byte offsets still give every line exactly once. JSONL blocks are parsed with pyarrow's
reader (3.4x faster than per-line ``json.loads`` on fortunes_multi); a block that fails to parse, or holds a bad
record, is re-read line by line so that exactly the bad lines become dead letters.

A plain-text document is a line without its final ``\n`` (a ``\r`` before it stays, as the peers keep it), or a
whole file with ``--text-unit file``. Blank JSONL lines are not records (pyarrow skips them too).

Texts stay in Arrow from the parser to the encoder: a batch's texts are one ``large_string`` array (a
:class:`TextColumn`), built from pyarrow's JSON column, from the block itself for text lines (newlines cut out with
numpy) or from the Parquet column, and the line positions come from numpy over the block. Only the exact paths
(a block that fails UTF-8 or parsing, a bad Parquet column) make Python strings, for the documents they read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from pipeline.corpus.decompress import DamagedStream, DecompressedFile
from pipeline.corpus.plan import CorpusSpec, compression_of
from pipeline.corpus.records import OFFSET, ROW, CorpusRange, DeadLetter, DocumentBatch
from pipeline.corpus.texts import TextColumn
from pipeline.errors import CorpusError

READ_BLOCK = 1 << 20
EXCERPT_CHARS = 120
_PARQUET_SLICE_ROWS = 4096  # cells converted to Python per step
# What a document costs in a batch beyond its text (str header, position int, list slots), counted towards
# batch_bytes: without it, 20 M empty lines (a 20 KB gzip file) made one batch and took 1.3 GB.
DOCUMENT_OVERHEAD = 64
BLOCK_LINES = 16384  # lines parsed between two checks of the batch size
BOM = b"\xef\xbb\xbf"
_STRING_TYPES = (pa.string(), pa.large_string())
_BINARY_TYPES = (pa.binary(), pa.large_binary())
_WHITESPACE = np.zeros(256, dtype=bool)
_WHITESPACE[list(b" \t\n\r\x0b\x0c")] = True  # what bytes.strip() removes: a line of only these is blank
_SCAN_LINES = 256  # lines starting with whitespace checked one by one, per block; more: one vectorised pass


class _Batcher:
    """Collects documents and dead letters of one range and cuts them into batches of about ``batch_bytes``.

    Documents come as Arrow columns (the fast paths) or one by one as Python strings (the exact paths); a batch's
    texts are concatenated into one ``large_string`` array, in file order, when it is taken.
    """

    def __init__(self, rng: CorpusRange, spec: CorpusSpec, position_kind: str) -> None:
        self.rng, self.spec, self.kind = rng, spec, position_kind
        self.columns: list[pa.Array] = []
        self.column_positions: list[np.ndarray] = []
        self.positions: list[int] = []
        self.texts: list[str] = []
        self.dead: list[DeadLetter] = []
        self.read = self.bytes = self.batch_index = 0
        self.pending = 0

    def add(self, position: int, text: str, size: int) -> None:
        self.positions.append(position)
        self.texts.append(text)
        self.read += 1
        self.bytes += size
        self.pending += size + DOCUMENT_OVERHEAD

    def add_column(self, positions: np.ndarray, texts: pa.Array, size: int) -> None:
        """Documents parsed together: their positions (int64) and texts (valid UTF-8, no nulls), ``size`` bytes."""
        if not len(texts):
            return
        self._close_strings()
        self.column_positions.append(positions.astype(np.int64, copy=False))
        self.columns.append(texts if texts.type == pa.large_string() else texts.cast(pa.large_string()))
        self.read += len(texts)
        self.bytes += size
        self.pending += size + DOCUMENT_OVERHEAD * len(texts)

    def _close_strings(self) -> None:
        if self.texts:
            self.column_positions.append(np.asarray(self.positions, dtype=np.int64))
            self.columns.append(pa.array(self.texts, pa.large_string()))
            self.positions, self.texts = [], []

    def reject(self, position: int, reason: str, raw: bytes | str = b"", size: int = 0) -> None:
        self.dead.append(DeadLetter(self.rng.source, position, self.kind, reason, _excerpt(raw)))
        self.read += 1
        self.bytes += size
        self.pending += min(size, EXCERPT_CHARS * 4) + DOCUMENT_OVERHEAD

    def full(self) -> bool:
        return self.pending >= self.spec.batch_bytes

    def take(self, *, last: bool = False) -> DocumentBatch:
        r = self.rng
        self._close_strings()
        texts = pa.concat_arrays(self.columns) if self.columns else pa.array([], pa.large_string())
        positions = np.concatenate(self.column_positions) if self.column_positions else np.zeros(0, np.int64)
        batch = DocumentBatch(
            r.index, self.batch_index, last, r.source, r.source_index, r.weight, self.kind,
            positions, TextColumn(texts), self.dead, self.read, self.bytes,
        )  # fmt: skip
        self.columns, self.column_positions, self.dead = [], [], []
        self.read = self.bytes = self.pending = 0
        self.batch_index += 1
        return batch


def read_range(rng: CorpusRange, spec: CorpusSpec) -> Iterator[DocumentBatch]:
    """The documents of one range, in file order, as batches; the final batch has ``last=True``."""
    if spec.format == "parquet":
        batcher = _Batcher(rng, spec, ROW)
        parts = _parquet_documents(rng, spec, batcher)
    else:
        batcher = _Batcher(rng, spec, OFFSET)
        parts = _line_documents(rng, spec, batcher)
    for _ in parts:
        if batcher.full():
            yield batcher.take()
    yield batcher.take(last=True)


# ---------------------------------------------------------------- text and JSONL
class _LongLine(NamedTuple):
    """A line longer than the document limit, skipped while reading (never held whole): a dead letter."""

    size: int  # bytes, without the newline
    head: bytes  # its first bytes, for the excerpt


def _line_documents(rng: CorpusRange, spec: CorpusSpec, batcher: _Batcher) -> Iterator[None]:
    """Parse blocks of whole lines into the batcher, yielding after each block so the caller can cut batches.

    A compressed file that ends early or is corrupt keeps the documents read before the damage; the rest of the
    file becomes one dead letter at the offset where reading stopped (a crawl with one truncated file among
    thousands should not fail a job of hours). Other read errors still fail the bundle, so a runner can retry it.
    """
    limit = spec.max_document_bytes
    offset = 0
    try:
        with _open_source(rng.source) as f:
            if spec.text_unit == "file" and spec.format == "text":
                _whole_file(f, limit, batcher)
                yield
                return
            start = 0 if rng.kind == "file" else _first_line_start(f, rng.start, rng.end)
            end = None if rng.kind == "file" else rng.end
            for offset, block in _line_blocks(f, start, end, limit):
                if isinstance(block, _LongLine):
                    batcher.reject(offset, _too_long(block.size, limit), block.head, block.size)
                    offset += block.size + 1
                    yield
                    continue
                for offset, lines in _few_lines(offset, block):  # noqa: B020 - offset: where the next read starts
                    if spec.format == "text":
                        _text_block(lines, offset, limit, batcher)
                    else:
                        _jsonl_block(lines, offset, spec.text_field, limit, batcher)
                    offset += len(lines)
                    yield
    except DamagedStream as exc:
        batcher.reject(offset, f"damaged compressed file: {exc}; the documents before this offset were read")
        yield


@contextmanager
def _open_source(source: str):
    """The file's decompressed bytes (see pipeline/corpus/decompress.py for why not fsspec's ``compression=``)."""
    compression = compression_of(source)
    with fsspec.open(source, "rb") as raw:
        yield DecompressedFile(raw, compression) if compression else raw


def _few_lines(offset: int, block: bytes) -> Iterator[tuple[int, bytes]]:
    """The block in pieces of at most BLOCK_LINES lines, so that batches are cut by count too: a 1 MiB block of
    empty lines is a million documents (a gzip bomb of newlines held them all in one batch)."""
    if block.count(b"\n") <= BLOCK_LINES:
        yield offset, block
        return
    start = 0
    while start < len(block):
        end = start
        for _ in range(BLOCK_LINES):
            end = block.find(b"\n", end) + 1
            if end == 0:
                end = len(block)
                break
        yield offset + start, block[start:end]
        start = end


def _too_long(size: int, limit: int) -> str:
    return f"document of {size} bytes is longer than --max-document-bytes {limit}"


def _whole_file(f, limit: int, batcher: _Batcher) -> None:
    data = f.read(limit + 1)
    if len(data) <= limit:
        _text_block(data, 0, limit, batcher, whole_file=True)
        return
    size = len(data)
    for chunk in iter(lambda: f.read(READ_BLOCK), b""):
        size += len(chunk)
    batcher.reject(0, _too_long(size, limit), data[: EXCERPT_CHARS * 4], size)


def _first_line_start(f, start: int, end: int) -> int:
    """The offset of the first line starting in [start, end), or ``end`` if none does (a range inside one long
    line scans only its own bytes: a 1 GB line cut into 256 ranges is read about twice, not 128 times)."""
    if start == 0:
        return 0
    f.seek(start - 1)
    pos = start - 1
    while pos < end:
        data = f.read(min(1 << 16, end - pos))
        if not data:
            return end
        cut = data.find(b"\n")
        if cut >= 0:
            return pos + cut + 1
        pos += len(data)
    return end


def _line_blocks(f, pos: int, end: int | None, limit: int) -> Iterator[tuple[int, bytes | _LongLine]]:
    """(offset, block of whole lines) from ``pos``, for the lines starting before ``end`` (None: to the end of a
    possibly decompressing, unseekable stream). A line longer than ``limit`` comes alone, as a _LongLine.

    Memory: one block plus at most ``limit`` bytes of one line; a long line's pieces are joined once, not
    re-concatenated per block (which was quadratic in the line length).
    """
    if end is not None:
        f.seek(pos)
    # read1 on a decompressing stream returns what one step decompressed: at a truncation, everything before the
    # failing step is kept (read() would drop the whole block it was filling)
    read = f.read if end is not None else getattr(f, "read1", f.read)
    line = _Unfinished(limit)
    while end is None or pos < end:
        data = read(READ_BLOCK)
        if not data:
            if line.size:
                yield pos, line.finish()
            return
        cut = data.find(b"\n")
        if cut < 0:
            line.add(data)
            continue
        if line.size:  # the line carried over from earlier blocks ends here
            line.add(data[:cut])
            size = line.size + 1
            yield pos, line.finish(newline=True)
            pos, data, line = pos + size, data[cut + 1 :], _Unfinished(limit)
            if end is not None and pos >= end:
                return
        last = data.rfind(b"\n")
        if last >= 0:
            block = data[: last + 1]
            if end is not None and pos + len(block) > end:  # keep the lines that start before the range's end
                yield pos, block[: block.index(b"\n", end - pos - 1) + 1]
                return
            yield pos, block
            pos += len(block)
        line.add(data[last + 1 :])


class _Unfinished:
    """The line in progress across blocks: its pieces while within the limit, only its length and head beyond."""

    def __init__(self, limit: int) -> None:
        self.limit, self.size, self.parts, self.head = limit, 0, [], b""

    def add(self, data: bytes) -> None:
        if not data:
            return
        if not self.size:
            self.head = data[: EXCERPT_CHARS * 4]
        self.size += len(data)
        if self.size <= self.limit:
            self.parts.append(data)
        else:
            self.parts = []

    def finish(self, *, newline: bool = False) -> bytes | _LongLine:
        if self.size > self.limit:
            return _LongLine(self.size, self.head)
        return b"".join(self.parts) + (b"\n" if newline else b"")


def _split_lines(block: bytes, offset: int) -> Iterator[tuple[int, bytes]]:
    lines = block.split(b"\n")
    if block.endswith(b"\n"):
        lines.pop()
    for line in lines:
        yield offset, line
        offset += len(line) + 1


class _LineTable(NamedTuple):
    """The lines of a block, from numpy over its bytes: where each starts (its position), where its content
    begins (after a file-opening BOM) and ends (before its newline)."""

    starts: np.ndarray
    begins: np.ndarray
    ends: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return self.ends - self.begins


def _line_table(block: bytes, offset: int) -> _LineTable:
    """The lines of ``block`` as ``block.split(b"\n")`` gives them (no empty line after a final newline)."""
    data = np.frombuffer(block, np.uint8)
    newlines = np.flatnonzero(data == 10)
    ends = newlines if block.endswith(b"\n") else np.append(newlines, len(data))
    starts = np.zeros(len(ends), np.int64)
    starts[1:] = newlines[: len(ends) - 1] + 1
    begins = starts.copy()
    if offset == 0 and block.startswith(BOM) and len(begins):
        begins[0] += len(BOM)
    return _LineTable(starts, begins, ends.astype(np.int64))


def _nonblank(block: bytes, lines: _LineTable) -> np.ndarray:
    """Which lines hold something besides whitespace (bytes.strip()), as a boolean mask.

    A line whose first byte is not whitespace holds something (every JSONL record line): one lookup per line. Only
    the lines that start with whitespace are scanned. Was a cumsum over every byte of the block: 4.0 s per GB of
    JSONL, 40% of the reader's CPU on the 1 GB scale corpus; this takes 0.1 s per GB.
    """
    data = np.frombuffer(block, np.uint8)
    begins, ends = lines.begins, lines.ends
    full = ends > begins
    mask = np.zeros(len(ends), bool)
    mask[full] = ~_WHITESPACE[data[begins[full]]]
    unsure = np.flatnonzero(full & ~mask)
    if len(unsure) > _SCAN_LINES:  # many indented lines: one pass over the bytes is cheaper than a slice each
        solid = np.zeros(len(data) + 1, np.int64)
        np.cumsum(~_WHITESPACE[data], out=solid[1:])
        return solid[ends] > solid[begins]
    for i in unsure.tolist():
        mask[i] = bool(block[begins[i] : ends[i]].strip())
    return mask


def _text_block(block: bytes, offset: int, limit: int, batcher: _Batcher, *, whole_file: bool = False) -> None:
    if not whole_file and _valid_utf8(block):
        _text_lines(block, offset, limit, batcher)
        return
    pieces = [(offset, block)] if whole_file else _split_lines(block, offset)
    for position, line in pieces:
        if position == 0 and line.startswith(BOM):
            line = line[len(BOM) :]
        if len(line) > limit:
            batcher.reject(position, _too_long(len(line), limit), line, len(line))
            continue
        try:
            batcher.add(position, line.decode("utf-8"), len(line))
        except UnicodeDecodeError as exc:
            batcher.reject(position, _undecodable(exc), line, len(line))


def _text_lines(block: bytes, offset: int, limit: int, batcher: _Batcher) -> None:
    """A block of valid UTF-8 lines as one Arrow column: the block's bytes with the newlines (and a file-opening
    BOM) cut out, the offsets from the line table; no Python string per line."""
    lines = _line_table(block, offset)
    keep = _reject_long(block, offset, lines, np.ones(len(lines.ends), bool), limit, batcher)
    begins, ends = lines.begins[keep], lines.ends[keep]
    size = len(block) + 1
    inside = np.cumsum(np.bincount(begins, minlength=size) - np.bincount(ends, minlength=size))[:-1] > 0
    data = np.frombuffer(block, np.uint8)[inside]
    offsets = np.zeros(len(begins) + 1, np.int64)
    np.cumsum(ends - begins, out=offsets[1:])
    texts = pa.LargeStringArray.from_buffers(len(begins), pa.py_buffer(offsets), pa.py_buffer(data.tobytes()))
    batcher.add_column(offset + lines.starts[keep], texts, int(offsets[-1]))


def _reject_long(
    block: bytes, offset: int, lines: _LineTable, keep: np.ndarray, limit: int, batcher: _Batcher
) -> np.ndarray:
    """Dead-letter the kept lines longer than ``limit``; the mask of the lines that stay."""
    lengths = lines.lengths
    for i in np.flatnonzero(keep & (lengths > limit)).tolist():
        begin, length = int(lines.begins[i]), int(lengths[i])
        batcher.reject(
            offset + int(lines.starts[i]), _too_long(length, limit), block[begin : begin + EXCERPT_CHARS * 4], length
        )
    return keep & (lengths <= limit)


def _undecodable(exc: UnicodeDecodeError) -> str:
    return f"undecodable bytes: {exc.reason} at byte {exc.start} of the line (not UTF-8)"


def _jsonl_block(block: bytes, offset: int, field: str, limit: int, batcher: _Batcher) -> None:
    # A BOM opening the file is dropped (pyarrow drops one at the start of what it parses); anywhere else it is a
    # character outside any JSON value, so a block that starts with one away from offset 0 goes the exact way.
    lines = _line_table(block, offset)
    records = _nonblank(block, lines)
    texts = None if block.startswith(BOM) and offset != 0 else _jsonl_fast(block, field, int(records.sum()))
    if texts is None:
        _jsonl_slow(block, offset, field, limit, batcher)
        return
    keep = _reject_long(block, offset, lines, records, limit, batcher)
    if not keep[records].all():
        texts = texts.filter(pa.array(keep[records]))
    batcher.add_column(offset + lines.starts[keep], texts, int(lines.lengths[keep].sum()))


def _nonblank_lines(block: bytes, offset: int) -> Iterator[tuple[int, bytes]]:
    """The lines that hold a record, with their offsets; the BOM of a file's first line removed."""
    for position, line in _split_lines(block, offset):
        if position == 0 and line.startswith(BOM):
            line = line[len(BOM) :]
        if line.strip():
            yield position, line


def _valid_utf8(block: bytes) -> bool:
    """Whether the whole block is UTF-8 (pyarrow's JSON reader does not check: it handed invalid bytes on as text).

    The whole block, not only the text column, so that the fast path accepts exactly the lines the exact path does
    (which decodes each line). Arrow's validation over the block's buffer, no copy, per 1 MiB block (loaded machine):
    0.05 ms on fortunes_multi, 1.0 ms on multi_udhr (mostly non-ASCII), 0.03 ms on code_cpython, against 3-8 ms
    for the parse itself; Python's bytes.decode took 0.4 / 2.0 / 0.03 ms and builds a str.
    """
    offsets = pa.array([0, len(block)], pa.int64()).buffers()[1]
    try:
        pa.LargeStringArray.from_buffers(1, offsets, pa.py_buffer(block)).validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _jsonl_fast(block: bytes, field: str, records: int) -> pa.Array | None:
    """Every text of the block through pyarrow (one ``large_string`` array of ``records`` texts), or None if any
    line is bad (the slow path then finds which).

    Any failure of the fast path, whatever its type, sends the block to the exact path: the fast path decides
    nothing alone. pyarrow rejects lone surrogate escapes (``"\\ud800"``), which the exact path then reports.
    """
    if not _valid_utf8(block):
        return None
    path = field.split(".")
    leaf: pa.DataType = pa.large_string()
    for name in reversed(path[1:]):
        leaf = pa.struct([(name, leaf)])
    options = pa_json.ParseOptions(explicit_schema=pa.schema([(path[0], leaf)]), unexpected_field_behavior="ignore")
    try:
        table = pa_json.read_json(
            pa.BufferReader(block),  # in place (io.BytesIO copied the block)
            # one thread: the block is one parse block anyway, and the runner already runs a bundle per core
            read_options=pa_json.ReadOptions(block_size=max(len(block), 1 << 16), use_threads=False),
            parse_options=options,
        )
        column = table.column(path[0]).combine_chunks() if table.num_rows else pa.array([], leaf)
        for name in path[1:]:
            if column.null_count:
                return None
            column = column.field(name)
        if column.null_count or table.num_rows != records:
            return None
        return column
    except Exception:  # noqa: BLE001 - any failure: the exact path below reads the block again, line by line
        return None


def _jsonl_slow(block: bytes, offset: int, field: str, limit: int, batcher: _Batcher) -> None:
    for position, line in _nonblank_lines(block, offset):
        text, reason = _json_text(line, field) if len(line) <= limit else ("", _too_long(len(line), limit))
        if reason is None:
            batcher.add(position, text, len(line))
        else:
            batcher.reject(position, reason, line, len(line))


def _json_text(line: bytes, field: str) -> tuple[str, str | None]:
    try:
        value = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return "", _undecodable(exc)
    except ValueError as exc:
        return "", f"malformed JSON: {exc}"
    except RecursionError:  # json.loads recurses per nesting level: ~1,000 nested arrays exhaust the stack
        return "", "malformed JSON: nested too deeply for Python's JSON parser"
    for name in field.split("."):
        if not isinstance(value, dict):
            return "", f"field {field!r}: expected a JSON object around {name!r}, found {type(value).__name__}"
        if name not in value:
            return "", f"missing field {field!r}"
        value = value[name]
    if not isinstance(value, str):
        return "", f"field {field!r} is {type(value).__name__}, expected a string"
    reason = _lone_surrogate(value, field)
    return ("", reason) if reason else (value, None)


def _lone_surrogate(text: str, field: str) -> str | None:
    """The reason a JSON string is not text: a ``\\ud800``-style escape of half a surrogate pair, which JSON's
    grammar allows but no UTF-8 can hold. Such a document is a dead letter, as pyarrow (Hugging Face datasets' JSON
    loader) and orjson (datatrove's) refuse it too; replacing it by U+FFFD would train on text nobody wrote."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"lone surrogate \\u{ord(text[exc.start]):04x} at character {exc.start} of field {field!r}: "
            "a JSON escape of half a UTF-16 pair is not Unicode text"
        )
    return None


# ---------------------------------------------------------------- Parquet
def _parquet_documents(rng: CorpusRange, spec: CorpusSpec, batcher: _Batcher) -> Iterator[None]:
    column_path = spec.text_column.split(".")
    with fsspec.open(rng.source, "rb") as f:
        pfile = pq.ParquetFile(f)
        num_rows = pfile.metadata.row_group(rng.start).num_rows
        if column_path[0] not in pfile.schema_arrow.names:
            reason = f"wrong schema: no column {spec.text_column!r} (columns: {pfile.schema_arrow.names})"
            for row in range(rng.first_row, rng.first_row + num_rows):
                batcher.reject(row, reason)
            yield
            return
        try:
            column = pfile.read_row_group(rng.start, columns=[column_path[0]]).column(0).combine_chunks()
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


def _parquet_column(column: pa.Array, first_row: int, name: str, limit: int, batcher: _Batcher) -> None:
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
            batcher.reject(first_row + i, _too_long(int(sizes[i]), limit), head, int(sizes[i]))
    keep = ~nulls & (sizes <= limit)
    texts = column if keep.all() else column.filter(pa.array(keep))
    batcher.add_column(first_row + np.flatnonzero(keep), texts, int(sizes[keep].sum()))


def _parquet_cells(column: pa.Array, first_row: int, name: str, limit: int, batcher: _Batcher) -> None:
    """The exact path for a binary column that is not all UTF-8: each cell decoded alone, a bad one rejected."""
    # Cell sizes come from Arrow, so that a cell over the limit is never made into a Python object (a 1 GB cell
    # would otherwise be held twice); the others are converted a slice at a time.
    sizes = pc.binary_length(column).to_pylist()
    start = 0
    while start < len(column):
        end = min(len(column), start + _PARQUET_SLICE_ROWS)
        long_rows = [i for i in range(start, end) if sizes[i] is not None and sizes[i] > limit]
        end = long_rows[0] if long_rows else end
        for row, value in enumerate(column.slice(start, end - start).to_pylist(), start=first_row + start):
            _parquet_value(row, value, name, batcher)
        if long_rows:
            head = pc.binary_slice(column.slice(end, 1).cast(_BINARY_TYPES[1]), 0, EXCERPT_CHARS * 4)[0].as_py()
            batcher.reject(first_row + end, _too_long(sizes[end], limit), head, sizes[end])
            end += 1
        start = end


def _valid_strings(column: pa.Array) -> bool:
    try:
        column.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _parquet_value(row: int, value: bytes | None, name: str, batcher: _Batcher) -> None:
    if value is None:
        batcher.reject(row, f"null value in column {name!r}")
    else:
        try:
            batcher.add(row, value.decode("utf-8"), len(value))
        except UnicodeDecodeError as exc:
            batcher.reject(
                row, f"undecodable bytes: {exc.reason} at byte {exc.start} of the value (not UTF-8)", value, len(value)
            )


def _excerpt(raw: bytes | str) -> str:
    if isinstance(raw, bytes):
        raw = raw[: EXCERPT_CHARS * 4].decode("utf-8", "backslashreplace")
    return raw[:EXCERPT_CHARS]
