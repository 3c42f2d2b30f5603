"""Plan a corpus before anything runs: expand the inputs, check them, sort the files, cut them into ranges.

The plan is made once, on the launching machine, so that the ranges (and the document ids in them) are the same on
every runner and every rerun. A glob that matches nothing, a file that cannot be opened and an empty corpus fail
here, naming the input, before any worker starts.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import fsspec
import pyarrow.parquet as pq

from pipeline.corpus.formats import FORMATS as CORPUS_FORMATS
from pipeline.corpus.listing import list_pattern
from pipeline.corpus.names import AUTO, format_of_file
from pipeline.corpus.records import PACKED, ROW, CorpusRange
from pipeline.errors import CorpusError, NothingWrittenError
from pipeline.storage.paths import is_url

FORMATS = tuple(CORPUS_FORMATS)  # the registry (pipeline/corpus/formats/__init__.py): --format's choices
TEXT_UNITS = ("line", "file")
COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd"}
# 4 MiB ranges: a 50 MB file spreads over 12 workers, and a range (plus its Python strings) stays small in memory.
DEFAULT_RANGE_BYTES = 4 << 20
# A longer document (line, or file with --text-unit file) is a dead letter, skipped while reading without being held:
# without a limit, one 64 MiB line took 2 GB to count (a 1 GB line would need ~30 GB) and a gzip bomb of one line
# took the decompressed size in memory (measured in tests/reliability/test_hostile_inputs.py).
DEFAULT_MAX_DOCUMENT_BYTES = 32 << 20
# Packing small files: at most this many files in one range (a range's pickle stays under ~0.5 MB of paths), a
# compressed file counted as this many times its size (text and JSONL compress 3-5x with gzip or zstd).
MAX_PIECES = 4096
# Files are packed only in a corpus of more than this many: below it, a file per range costs little (~3 ms each) and
# keeps a corpus of a few small files spread over workers.
PACK_ABOVE_FILES = 256
COMPRESSED_RATIO = 4
# The plan opens at most this many files to check that they read (a spread sample beyond), on this many threads.
CHECK_OPENS = 1024
CHECK_THREADS = 16


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


@dataclass(frozen=True, slots=True)
class SourceFile:
    path: str
    size: int
    weight: int
    pattern: str
    version: str | None = None  # as listed at plan time (pipeline/storage/identity.py's version string)


@dataclass
class CorpusPlan:
    files: list[SourceFile]
    ranges: list[CorpusRange] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def describe(self) -> dict:
        """The plan for a manifest, compact at any file count: the files as columns (paths, bytes, weights), not
        one object per file (a million files as objects took ~90 MB of JSON)."""
        return {
            "files": {
                "count": len(self.files),
                "paths": [f.path for f in self.files],
                "bytes": [f.size for f in self.files],
                "weights": _runs([f.weight for f in self.files]),
            },
            "ranges": len(self.ranges),
            "bytes": self.total_bytes,
        }


def _runs(values: list[int]) -> list[list[int]]:
    """``[[value, count], ...]`` of consecutive equal values: one weight is one pair for any number of files."""
    out: list[list[int]] = []
    for v in values:
        if out and out[-1][0] == v:
            out[-1][1] += 1
        else:
            out.append([v, 1])
    return out


def compression_of(path: str) -> str | None:
    """The compression implied by the file name (``.gz``, ``.bz2``, ``.zst``), else None."""
    dot = path.rfind(".")
    return COMPRESSIONS.get(path[dot:]) if dot >= 0 else None


def plan_corpus(inputs: list[InputSpec], spec: CorpusSpec, *, range_bytes: int = DEFAULT_RANGE_BYTES) -> CorpusPlan:
    """Expand, check and sort the input files, then cut them into ranges (the plan every runner executes).

    Small files are packed into ranges of several whole files (about ``range_bytes`` each, at most ``MAX_PIECES``
    files), large ones cut into byte ranges, Parquet files into row groups.

    >>> plan = plan_corpus([InputSpec("corpus/*.jsonl.gz")], CorpusSpec("jsonl"))  # doctest: +SKIP
    """
    if not inputs:
        raise CorpusError("no input given: pass --input PATH_OR_GLOB (repeatable)")
    if not isinstance(range_bytes, int) or range_bytes < 1:
        raise CorpusError(f"--range-bytes must be a positive integer, got {range_bytes!r}")
    files = _expand_inputs(inputs)
    check_readable(files)
    plan = CorpusPlan(files, cut_ranges(files, spec, range_bytes))
    if plan.total_bytes == 0 or not plan.ranges:
        raise NothingWrittenError(  # exit code 3: no document to read, nothing wrong with the flags
            f"the corpus is empty: {len(files)} file(s) matched by {_patterns(inputs)} hold no bytes"
        )
    return plan


def _patterns(inputs: list[InputSpec]) -> str:
    return ", ".join(repr(i.pattern) for i in inputs)


def _expand_inputs(inputs: list[InputSpec]) -> list[SourceFile]:
    by_path: dict[str, SourceFile] = {}
    inodes: dict[tuple[int, int], str] = {}
    for spec in inputs:
        if not isinstance(spec.weight, int) or isinstance(spec.weight, bool) or spec.weight < 1:
            raise CorpusError(f"the weight of input {spec.pattern!r} must be a positive integer, got {spec.weight!r}")
        found = list_pattern(spec.pattern)
        if not found:
            raise CorpusError(
                f"--input {spec.pattern!r} matches no file: check the path or the glob (quote it in the shell)"
            )
        for listed in found:
            path = listed.path
            previous = by_path.get(path)
            if previous is not None and previous.pattern != spec.pattern:
                raise CorpusError(
                    f"{path} is matched by both --input {previous.pattern!r} and --input {spec.pattern!r}: "
                    "give each file once, so that its weight is unambiguous"
                )
            if listed.inode is not None:
                inodes.setdefault(listed.inode, path)
                _refuse_alias(inodes[listed.inode], path)
            by_path[path] = SourceFile(path, listed.size, spec.weight, spec.pattern, listed.version)
    return [by_path[p] for p in sorted(by_path)]


def _refuse_alias(first: str, path: str) -> None:
    """Refuse one local file reached under two names (a symlink or a hard link): it would be read twice."""
    if first != path:
        first, path = sorted((first, path))
        raise CorpusError(
            f"{first} and {path} are the same file (a symlink or hard link): it would be read twice. Give it "
            "once; to count a file more than once, give it a weight (train --weight GLOB=N)"
        )


def check_readable(files: list[SourceFile]) -> None:
    """Fail now, not on a worker, on a file that cannot be read: every local file's permission (one ``access``
    call each), and the first decompressed bytes of every file up to ``CHECK_OPENS`` files (beyond, a sample spread
    through the sorted list; a damaged compressed file that is not opened here becomes a dead letter where it is
    read). Opening every file cost ~50 us locally and a round trip remotely, per file."""
    for f in files:
        if not is_url(f.path) and not os.access(f.path, os.R_OK):
            raise CorpusError(f"cannot read input file {f.path}: PermissionError: permission denied")
    step = max(1, math.ceil(len(files) / CHECK_OPENS))
    sample = [f.path for f in files[::step] if f.size or compression_of(f.path)]
    with ThreadPoolExecutor(CHECK_THREADS) as pool:
        list(pool.map(_check_opens, sample))


def _check_opens(path: str) -> None:
    """Open the file and read its first bytes (decompressed), so that a bad file fails now, not on a worker."""
    try:
        with fsspec.open(path, "rb", compression=compression_of(path)) as f:
            f.read(1)
    except Exception as exc:  # any failure here means the file cannot be read: name it and stop
        raise CorpusError(f"cannot read input file {path}: {type(exc).__name__}: {exc}") from None


def cut_ranges(files: list[SourceFile], spec: CorpusSpec, range_bytes: int) -> list[CorpusRange]:
    """The ranges of the sorted files, in order: Parquet row groups (footers read in parallel), byte ranges of
    large files, and runs of small whole files packed into one range each."""
    formats = [format_of_file(f.path) if spec.format == AUTO else spec.format for f in files]
    with ThreadPoolExecutor(CHECK_THREADS) as pool:
        parquet = [f.path for f, fmt in zip(files, formats, strict=True) if _by_rows(fmt)]
        footers = dict(pool.map(_row_groups, parquet))
    ranges: list[CorpusRange] = []
    pack: list[int] = []
    pack_cost = 0
    packing = len(files) > PACK_ABOVE_FILES
    for i, (source, fmt) in enumerate(zip(files, formats, strict=True)):
        cost = _cost(source)
        small = packing and not _by_rows(fmt) and cost <= range_bytes // 2
        if pack and not (small and _same_pack(files, formats, pack[0], i) and len(pack) < MAX_PIECES
                         and pack_cost + cost <= range_bytes):  # fmt: skip
            ranges += _packed(files, formats, pack, spec, len(ranges))
            pack, pack_cost = [], 0
        if small:
            pack.append(i)
            pack_cost += cost
            continue
        common = _common(source, i, fmt, spec)
        if _by_rows(fmt):  # rows: ranges are row groups
            ranges += _row_group_ranges(footers[source.path], len(ranges), common)
        else:
            ranges += _byte_ranges(source, spec, range_bytes, len(ranges), common)
    if pack:
        ranges += _packed(files, formats, pack, spec, len(ranges))
    return ranges


def _by_rows(fmt: str) -> bool:
    return CORPUS_FORMATS[fmt].position_kind == ROW


def _same_pack(files, formats, first: int, i: int) -> bool:
    return formats[i] == formats[first] and files[i].weight == files[first].weight


def _common(source: SourceFile, source_index: int, fmt: str, spec: CorpusSpec) -> dict:
    common = {"source": source.path, "source_index": source_index, "weight": source.weight}
    if spec.format == AUTO:  # under --format auto each range carries the format the file's name says
        common["format"] = fmt
    return common


def _cost(source: SourceFile) -> int:
    """What a file weighs in a range: its bytes, a compressed file's times COMPRESSED_RATIO."""
    return source.size * (COMPRESSED_RATIO if compression_of(source.path) else 1)


def _packed(files, formats, pack: list[int], spec: CorpusSpec, index: int) -> list[CorpusRange]:
    """One range of the packed files; a pack of one file is that file's ordinary range."""
    first = files[pack[0]]
    common = _common(first, pack[0], formats[pack[0]], spec)
    if len(pack) == 1:
        kind = "bytes" if first.size and not compression_of(first.path) and spec.text_unit == "line" else "file"
        return [CorpusRange(index, kind=kind, start=0, end=first.size, **common)]
    pieces = tuple((files[j].path, j, 0, files[j].size) for j in pack)
    return [CorpusRange(index, kind=PACKED, start=0, end=sum(p[3] for p in pieces), pieces=pieces, **common)]


def _byte_ranges(source: SourceFile, spec: CorpusSpec, range_bytes: int, first_index: int, common: dict):
    if compression_of(source.path) or spec.text_unit == "file" or source.size == 0:
        return [CorpusRange(first_index, kind="file", start=0, end=source.size, **common)]
    n = math.ceil(source.size / range_bytes)
    return [
        CorpusRange(
            first_index + i, kind="bytes", start=i * range_bytes, end=min(source.size, (i + 1) * range_bytes), **common
        )
        for i in range(n)
    ]


def _row_groups(path: str) -> tuple[str, list[int]]:
    """A Parquet file's rows per row group, from its footer."""
    try:
        with fsspec.open(path, "rb") as f:
            meta = pq.ParquetFile(f).metadata
    except Exception as exc:  # not a Parquet file at all: nothing of it can be read
        raise CorpusError(f"cannot read input file {path} as Parquet: {type(exc).__name__}: {exc}") from None
    return path, [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]


def _row_group_ranges(rows_per_group: list[int], first_index: int, common: dict) -> list[CorpusRange]:
    ranges, first_row = [], 0
    for group, rows in enumerate(rows_per_group):
        ranges.append(
            CorpusRange(
                first_index + group, kind="row_group", start=group, end=group + 1, first_row=first_row, **common
            )
        )
        first_row += rows
    return ranges
