"""Plan a corpus before anything runs: expand the inputs, check them, sort the files, cut them into ranges.

The plan is made once, on the launching machine, so that the ranges (and the document ids in them) are the same on
every runner and every rerun. A glob that matches nothing, a file that cannot be opened and an empty corpus fail
here, naming the input, before any worker starts.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import fsspec
import pyarrow.parquet as pq

from pipeline.corpus.formats import FORMATS as CORPUS_FORMATS
from pipeline.corpus.names import AUTO, format_of_file
from pipeline.corpus.records import ROW, CorpusRange
from pipeline.errors import CorpusError, NothingWrittenError
from pipeline.storage.paths import full_url, is_url

FORMATS = tuple(CORPUS_FORMATS)  # the registry (pipeline/corpus/formats/__init__.py): --format's choices
TEXT_UNITS = ("line", "file")
COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd"}
# 4 MiB ranges: a 50 MB file spreads over 12 workers, and a range (plus its Python strings) stays small in memory.
DEFAULT_RANGE_BYTES = 4 << 20
# A longer document (line, or file with --text-unit file) is a dead letter, skipped while reading without being held:
# without a limit, one 64 MiB line took 2 GB to count (a 1 GB line would need ~30 GB) and a gzip bomb of one line
# took the decompressed size in memory (measured in tests/reliability/test_hostile_inputs.py).
DEFAULT_MAX_DOCUMENT_BYTES = 32 << 20


@dataclass(frozen=True)
class InputSpec:
    """One ``--input``: a path, fsspec URL or glob, and the integer weight of its documents."""

    pattern: str
    weight: int = 1


@dataclass(frozen=True)
class CorpusSpec:
    """How to parse the files: small and picklable, it travels to the workers with the reading DoFn."""

    format: str = "jsonl"
    text_field: str = "text"
    text_column: str = "text"
    text_unit: str = "line"
    batch_bytes: int = 4 << 20
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES

    def __post_init__(self) -> None:
        if self.format not in CORPUS_FORMATS and self.format != AUTO:
            raise CorpusError(f"--format must be one of {', '.join(FORMATS)}, got {self.format!r}")
        if self.text_unit not in TEXT_UNITS:
            raise CorpusError(f"--text-unit must be one of {', '.join(TEXT_UNITS)}, got {self.text_unit!r}")
        if not self.text_field or not self.text_column:
            raise CorpusError("--text-field and --text-column must not be empty (e.g. --text-field text)")
        if not isinstance(self.batch_bytes, int) or self.batch_bytes < 1:
            raise CorpusError(f"batch_bytes must be a positive integer, got {self.batch_bytes!r}")
        if (
            isinstance(self.max_document_bytes, bool)
            or not isinstance(self.max_document_bytes, int)
            or self.max_document_bytes < 1
        ):
            raise CorpusError(f"--max-document-bytes must be a positive integer, got {self.max_document_bytes!r}")


@dataclass(frozen=True)
class SourceFile:
    path: str
    size: int
    weight: int
    pattern: str


@dataclass
class CorpusPlan:
    files: list[SourceFile]
    ranges: list[CorpusRange] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def describe(self) -> dict:
        return {
            "files": [{"path": f.path, "bytes": f.size, "weight": f.weight} for f in self.files],
            "ranges": len(self.ranges),
            "bytes": self.total_bytes,
        }


def compression_of(path: str) -> str | None:
    """The compression implied by the file name (``.gz``, ``.bz2``, ``.zst``), else None."""
    for ext, name in COMPRESSIONS.items():
        if path.endswith(ext):
            return name
    return None


def plan_corpus(inputs: list[InputSpec], spec: CorpusSpec, *, range_bytes: int = DEFAULT_RANGE_BYTES) -> CorpusPlan:
    """Expand, check and sort the input files, then cut them into ranges (the plan every runner executes).

    >>> plan = plan_corpus([InputSpec("corpus/*.jsonl.gz")], CorpusSpec("jsonl"))  # doctest: +SKIP
    """
    if not inputs:
        raise CorpusError("no input given: pass --input PATH_OR_GLOB (repeatable)")
    if not isinstance(range_bytes, int) or range_bytes < 1:
        raise CorpusError(f"--range-bytes must be a positive integer, got {range_bytes!r}")
    files = _expand_inputs(inputs)
    plan = CorpusPlan(files)
    for source_index, source in enumerate(files):
        _check_readable(source.path)
        plan.ranges += _cut(source, source_index, spec, range_bytes, first_index=len(plan.ranges))
    if plan.total_bytes == 0 or not plan.ranges:
        raise NothingWrittenError(  # exit code 3: no document to read, nothing wrong with the flags
            f"the corpus is empty: {len(files)} file(s) matched by {_patterns(inputs)} hold no bytes"
        )
    return plan


def _patterns(inputs: list[InputSpec]) -> str:
    return ", ".join(repr(i.pattern) for i in inputs)


def _expand_inputs(inputs: list[InputSpec]) -> list[SourceFile]:
    by_path: dict[str, SourceFile] = {}
    for spec in inputs:
        if not isinstance(spec.weight, int) or isinstance(spec.weight, bool) or spec.weight < 1:
            raise CorpusError(f"the weight of input {spec.pattern!r} must be a positive integer, got {spec.weight!r}")
        for path, size in _expand_one(spec.pattern):
            previous = by_path.get(path)
            if previous is not None and previous.pattern != spec.pattern:
                raise CorpusError(
                    f"{path} is matched by both --input {previous.pattern!r} and --input {spec.pattern!r}: "
                    "give each file once, so that its weight is unambiguous"
                )
            by_path[path] = SourceFile(path, size, spec.weight, spec.pattern)
    _refuse_aliases(sorted(by_path))
    return [by_path[p] for p in sorted(by_path)]


def _refuse_aliases(paths: list[str]) -> None:
    """Refuse one local file reached under two names (a symlink or a hard link): it would be read twice."""
    seen: dict[tuple[int, int], str] = {}
    for path in paths:
        if is_url(path):
            continue  # object stores have no links
        try:
            st = os.stat(path)
        except OSError:
            continue  # _check_readable names unreadable files
        first = seen.setdefault((st.st_dev, st.st_ino), path)
        if first != path:
            raise CorpusError(
                f"{first} and {path} are the same file (a symlink or hard link): it would be read twice. Give it "
                "once; to count a file more than once, give it a weight (train --weight GLOB=N)"
            )


def _expand_one(pattern: str) -> list[tuple[str, int]]:
    """(path, size) of every file a pattern names: a glob's matches, a directory's files, or the file itself."""
    try:
        fs, path = fsspec.core.url_to_fs(pattern)
    except (ImportError, ValueError) as exc:
        raise CorpusError(f"cannot open input {pattern!r}: {exc}") from None
    if fsspec.core.has_magic(path):
        found = fs.glob(path, detail=True)
        if not found and fs.isfile(path):  # a file literally named like a glob ("a[1].jsonl")
            found = {path: fs.info(path)}
    elif fs.isdir(path):
        found = fs.find(path, detail=True)
    elif fs.exists(path):
        found = {path: fs.info(path)}
    else:
        found = {}
    files = [(name, int(info.get("size") or 0)) for name, info in found.items() if info.get("type") != "directory"]
    if not files:
        raise CorpusError(f"--input {pattern!r} matches no file: check the path or the glob (quote it in the shell)")
    return [(full_url(fs, name), size) for name, size in files]


def _check_readable(path: str) -> None:
    """Open the file and read its first bytes (decompressed), so that a bad file fails now, not on a worker."""
    try:
        with fsspec.open(path, "rb", compression=compression_of(path)) as f:
            f.read(1)
    except Exception as exc:  # any failure here means the file cannot be read: name it and stop
        raise CorpusError(f"cannot read input file {path}: {type(exc).__name__}: {exc}") from None


def _cut(source: SourceFile, source_index: int, spec: CorpusSpec, range_bytes: int, *, first_index: int):
    """The ranges of one file; under ``--format auto`` each carries the format the file's name says."""
    fmt = format_of_file(source.path) if spec.format == AUTO else spec.format
    common = {"source": source.path, "source_index": source_index, "weight": source.weight}
    if spec.format == AUTO:
        common["format"] = fmt
    if CORPUS_FORMATS[fmt].position_kind == ROW:  # rows: ranges are row groups
        return _row_group_ranges(source, first_index, common)
    if compression_of(source.path) or spec.text_unit == "file" or source.size == 0:
        return [CorpusRange(first_index, kind="file", start=0, end=source.size, **common)]
    n = math.ceil(source.size / range_bytes)
    return [
        CorpusRange(
            first_index + i, kind="bytes", start=i * range_bytes, end=min(source.size, (i + 1) * range_bytes), **common
        )
        for i in range(n)
    ]


def _row_group_ranges(source: SourceFile, first_index: int, common: dict) -> list[CorpusRange]:
    try:
        with fsspec.open(source.path, "rb") as f:
            meta = pq.ParquetFile(f).metadata
    except Exception as exc:  # not a Parquet file at all: nothing of it can be read
        raise CorpusError(f"cannot read input file {source.path} as Parquet: {type(exc).__name__}: {exc}") from None
    ranges, first_row = [], 0
    for group in range(meta.num_row_groups):
        rows = meta.row_group(group).num_rows
        ranges.append(
            CorpusRange(
                first_index + group, kind="row_group", start=group, end=group + 1, first_row=first_row, **common
            )
        )
        first_row += rows
    return ranges
