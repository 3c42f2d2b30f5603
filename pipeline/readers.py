"""Read one corpus range into document batches (no Beam here: the reading DoFn and the tests call these).

Text and JSONL ranges are read as blocks of whole lines: a line belongs to the range holding its first byte, so
ranges cut at arbitrary byte offsets still give every line exactly once. JSONL blocks are parsed with pyarrow's
reader (3.4x faster than per-line ``json.loads`` on fortunes_multi); a block that fails to parse, or holds a bad
record, is re-read line by line so that exactly the bad lines become dead letters.

A plain-text document is a line without its final ``\n`` (a ``\r`` before it stays, as the peers keep it), or a
whole file with ``--text-unit file``. Blank JSONL lines are not records (pyarrow skips them too).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import fsspec
import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from pipeline.corpus_plan import CorpusSpec, compression_of
from pipeline.records import OFFSET, ROW, CorpusRange, DeadLetter, DocumentBatch

READ_BLOCK = 1 << 20
EXCERPT_CHARS = 120
_STRING_TYPES = (pa.string(), pa.large_string())
_BINARY_TYPES = (pa.binary(), pa.large_binary())


class _Batcher:
    """Collects documents and dead letters of one range and cuts them into batches of about ``batch_bytes``."""

    def __init__(self, rng: CorpusRange, spec: CorpusSpec, position_kind: str) -> None:
        self.rng, self.spec, self.kind = rng, spec, position_kind
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
        self.pending += size

    def reject(self, position: int, reason: str, raw: bytes | str = b"", size: int = 0) -> None:
        self.dead.append(DeadLetter(self.rng.source, position, self.kind, reason, _excerpt(raw)))
        self.read += 1
        self.bytes += size
        self.pending += size

    def full(self) -> bool:
        return self.pending >= self.spec.batch_bytes

    def take(self, *, last: bool = False) -> DocumentBatch:
        r = self.rng
        batch = DocumentBatch(
            r.index, self.batch_index, last, r.source, r.source_index, r.weight, self.kind,
            self.positions, self.texts, self.dead, self.read, self.bytes,
        )  # fmt: skip
        self.positions, self.texts, self.dead = [], [], []
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
def _line_documents(rng: CorpusRange, spec: CorpusSpec, batcher: _Batcher) -> Iterator[None]:
    """Parse blocks of whole lines into the batcher, yielding after each block so the caller can cut batches."""
    with fsspec.open(rng.source, "rb", compression=compression_of(rng.source)) as f:
        if spec.text_unit == "file" and spec.format == "text":
            _text_block(f.read(), 0, batcher, whole_file=True)
            yield
            return
        blocks = _stream_blocks(f) if rng.kind == "file" else _range_blocks(f, rng.start, rng.end)
        for offset, block in blocks:
            if spec.format == "text":
                _text_block(block, offset, batcher)
            else:
                _jsonl_block(block, offset, spec.text_field, batcher)
            yield


def _range_blocks(f, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """(offset, block) of whole lines whose first byte lies in [start, end) of a seekable file."""
    pos = _first_line_start(f, start)
    while pos < end:
        f.seek(pos)
        data = f.read(min(READ_BLOCK, end - pos))
        if not data:
            return
        if pos + len(data) < end:
            cut = data.rfind(b"\n")
            data = data[: cut + 1] if cut >= 0 else data + _read_to_newline(f)
        elif not data.endswith(b"\n"):
            data += _read_to_newline(f)  # the range's last line runs past its end: it is still ours
        yield pos, data
        pos += len(data)


def _first_line_start(f, start: int) -> int:
    if start == 0:
        return 0
    f.seek(start - 1)
    return start - 1 + len(_read_to_newline(f))


def _read_to_newline(f) -> bytes:
    parts = []
    while True:
        data = f.read(1 << 16)
        if not data:
            return b"".join(parts)
        cut = data.find(b"\n")
        if cut >= 0:
            parts.append(data[: cut + 1])
            return b"".join(parts)
        parts.append(data)


def _stream_blocks(f) -> Iterator[tuple[int, bytes]]:
    """(offset, block) of whole lines of a whole (possibly decompressing, unseekable) stream."""
    pos, carry = 0, b""
    while True:
        data = f.read(READ_BLOCK)
        if not data:
            if carry:
                yield pos, carry
            return
        data = carry + data
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
            continue
        yield pos, data[: cut + 1]
        pos += cut + 1
        carry = data[cut + 1 :]


def _split_lines(block: bytes, offset: int) -> Iterator[tuple[int, bytes]]:
    lines = block.split(b"\n")
    if block.endswith(b"\n"):
        lines.pop()
    for line in lines:
        yield offset, line
        offset += len(line) + 1


def _text_block(block: bytes, offset: int, batcher: _Batcher, *, whole_file: bool = False) -> None:
    pieces = [(offset, block)] if whole_file else _split_lines(block, offset)
    for position, line in pieces:
        try:
            batcher.add(position, line.decode("utf-8"), len(line))
        except UnicodeDecodeError as exc:
            batcher.reject(position, f"undecodable bytes: {exc.reason} at byte {exc.start} of the line", line, len(line))


def _jsonl_block(block: bytes, offset: int, field: str, batcher: _Batcher) -> None:
    texts = _jsonl_fast(block, field)
    if texts is None:
        _jsonl_slow(block, offset, field, batcher)
        return
    for (position, line), text in zip(_nonblank_lines(block, offset), texts, strict=True):
        batcher.add(position, text, len(line))


def _nonblank_lines(block: bytes, offset: int) -> Iterator[tuple[int, bytes]]:
    return ((p, line) for p, line in _split_lines(block, offset) if line.strip())


def _jsonl_fast(block: bytes, field: str) -> list[str] | None:
    """Every text of the block through pyarrow, or None if any line is bad (the slow path then finds which)."""
    path = field.split(".")
    leaf: pa.DataType = pa.string()
    for name in reversed(path[1:]):
        leaf = pa.struct([(name, leaf)])
    options = pa_json.ParseOptions(explicit_schema=pa.schema([(path[0], leaf)]), unexpected_field_behavior="ignore")
    try:
        table = pa_json.read_json(io.BytesIO(block), read_options=pa_json.ReadOptions(block_size=max(len(block), 1 << 16)), parse_options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    column = table.column(path[0]).combine_chunks() if table.num_rows else pa.array([], pa.string())
    for name in path[1:]:
        if column.null_count:
            return None
        column = column.field(name)
    if column.null_count or table.num_rows != sum(1 for _ in _nonblank_lines(block, 0)):
        return None
    return column.to_pylist()


def _jsonl_slow(block: bytes, offset: int, field: str, batcher: _Batcher) -> None:
    for position, line in _nonblank_lines(block, offset):
        text, reason = _json_text(line, field)
        if reason is None:
            batcher.add(position, text, len(line))
        else:
            batcher.reject(position, reason, line, len(line))


def _json_text(line: bytes, field: str) -> tuple[str, str | None]:
    try:
        value = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return "", f"undecodable bytes: {exc.reason} at byte {exc.start} of the line"
    except ValueError as exc:
        return "", f"malformed JSON: {exc}"
    for name in field.split("."):
        if not isinstance(value, dict):
            return "", f"field {field!r}: expected a JSON object around {name!r}, found {type(value).__name__}"
        if name not in value:
            return "", f"missing field {field!r}"
        value = value[name]
    if not isinstance(value, str):
        return "", f"field {field!r} is {type(value).__name__}, expected a string"
    return value, None


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
        column = pfile.read_row_group(rng.start, columns=[column_path[0]]).column(0).combine_chunks()
    for name in column_path[1:]:
        if not pa.types.is_struct(column.type) or column.type.get_field_index(name) < 0:
            break
        column = column.field(name)
    _parquet_column(column, rng.first_row, spec.text_column, batcher)
    yield


def _parquet_column(column: pa.Array, first_row: int, name: str, batcher: _Batcher) -> None:
    if column.type not in _STRING_TYPES + _BINARY_TYPES:
        reason = f"wrong schema: column {name!r} is {column.type}, expected a string or binary column"
        for row in range(first_row, first_row + len(column)):
            batcher.reject(row, reason)
        return
    binary = column.type in _BINARY_TYPES
    for row, value in enumerate(column.to_pylist(), start=first_row):
        if value is None:
            batcher.reject(row, f"null value in column {name!r}")
        elif not binary:
            batcher.add(row, value, len(value.encode("utf-8", "surrogatepass")))
        else:
            try:
                batcher.add(row, value.decode("utf-8"), len(value))
            except UnicodeDecodeError as exc:
                batcher.reject(row, f"undecodable bytes: {exc.reason} at byte {exc.start}", value, len(value))


def _excerpt(raw: bytes | str) -> str:
    if isinstance(raw, bytes):
        raw = raw[: EXCERPT_CHARS * 4].decode("utf-8", "backslashreplace")
    return raw[:EXCERPT_CHARS]
