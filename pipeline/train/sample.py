"""What the training pre-flight reads: windows spread over the corpus, inside every kind of input, counted.

At ``units`` positions spaced evenly over the corpus's stored bytes the sample takes a window of about
``budget / units`` bytes of text: inside an uncompressed text/JSONL range a byte window read directly; inside a
compressed file a window of its decompressed lines at the same relative position, the stream read from its start
and discarded between windows, or from the window's frame where a zstd seek table has one
(``pipeline.corpus.decompress.StreamWindows``); inside a Parquet row group the rows
at that share of the group's text (the group is read as the count stage reads it). Ranges smaller than a window
(small files, packed ranges of many files, small row groups) are read whole, as many of them as the rest of the
budget holds, spread over all of them, not only those the positions hit: a corpus of many small files is sampled
from many files.

Why windows inside compressed files and row groups: sampled whole, a few files stood for the corpus (seven
corpora as ``.jsonl.gz``: -52% unique chunks; a Parquet file at a 10% sample: -37%).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import fsspec
import numpy as np
import pyarrow.compute as pc

from bpe_core.train.sorted_counts import SortedChunkCounter, SortedCounts
from pipeline.corpus.decompress import StreamWindows
from pipeline.corpus.formats import FORMATS
from pipeline.corpus.plan import COMPRESSED_RATIO, CorpusPlan, CorpusSpec, compression_of
from pipeline.corpus.readers import _pieces as _pieces_of
from pipeline.corpus.readers import read_range  # pyarrow readers, as the count stage reads
from pipeline.corpus.records import OFFSET, PACKED, CorpusRange

SAMPLE_UNITS = 64
# A range read whole is one table per this many windows of text: a small file is one unit, as a window is (pieces
# of one file share its words; as pieces of one window, three corpora as 400 .jsonl.gz files were predicted at -19%,
# -22% and -25%, as files at -11%, -20% and -12%: benchmarks/bench_estimate.py).
WHOLE_PIECES = 4


class SampleUnit(NamedTuple):
    """One range of the sample: read whole (``windows`` empty) or at windows centred on these fractions of it (a
    compressed file, a row group). ``file_bytes``: the stored bytes of what is read (of a byte window, of the whole
    range); of a windowed range, the range's whole bytes (the windows' share is known once they are read)."""

    rng: CorpusRange
    file_bytes: int
    windows: tuple[float, ...] = ()


def sample_window(budget: int, units: int = SAMPLE_UNITS) -> int:
    """Bytes of one sampled window (and of one piece of a range read whole)."""
    return max(1 << 12, budget // units)


FOOTERS_READ = 4096  # Parquet files whose row groups are sized from their footers; beyond, a file is split evenly


def range_file_bytes(plan: CorpusPlan) -> list[int]:
    """The stored bytes of each range: its byte span (a byte range, a whole file, a range of several small files),
    or a row group's compressed bytes from its file's footer (an even share of the file where the corpus has more
    than ``FOOTERS_READ`` Parquet files: groups of one file differ, up to 7x in a mixed corpus, and even shares
    put the sample's windows in the wrong places: -39%). One pass over the plan."""
    groups: dict[str, int] = {}
    for r in plan.ranges:
        if r.kind == "row_group":
            groups[r.source] = groups.get(r.source, 0) + 1
    file_size = {f.path: f.size for f in plan.files if f.path in groups}
    sizes = {}
    if groups and len(groups) <= FOOTERS_READ:
        with ThreadPoolExecutor(16) as pool:
            sizes = dict(zip(groups, pool.map(_group_bytes, groups), strict=True))
    out = []
    for r in plan.ranges:
        if r.kind != "row_group":
            out.append(max(0, r.end - r.start))
        elif r.source in sizes and len(sizes[r.source]) == groups[r.source] and sum(sizes[r.source]):
            scale = file_size[r.source] / sum(sizes[r.source])  # the footer and headers spread over the groups
            out.append(int(sizes[r.source][r.start] * scale))
        else:
            out.append(file_size[r.source] // groups[r.source])
    return out


def _group_bytes(path: str) -> list[int]:
    import pyarrow.parquet as pq

    with fsspec.open(path, "rb") as f:
        meta = pq.ParquetFile(f).metadata
    return [_compressed(meta.row_group(g)) for g in range(meta.num_row_groups)]


def _compressed(group) -> int:
    return sum(group.column(i).total_compressed_size for i in range(group.num_columns))


def _windowed(rng: CorpusRange, size: int, window: int, spec: CorpusSpec | None) -> bool:
    """A range entered at windows: a compressed line-format file or a row group of more than a window's bytes
    stored (about four windows of text: a smaller one costs little more read whole)."""
    if rng.kind == "row_group":
        return size > window
    fmt = rng.format or (spec.format if spec else "jsonl")
    lines = fmt in FORMATS and FORMATS[fmt].position_kind == OFFSET and (spec is None or spec.text_unit == "line")
    return rng.kind == "file" and lines and bool(compression_of(rng.source)) and size > window


def sample_ranges(
    plan: CorpusPlan, budget: int, *, units: int = SAMPLE_UNITS, spec: CorpusSpec | None = None
) -> list[SampleUnit]:
    """The sample's units in corpus order (see the module). A budget of the corpus's size or more is every range,
    whole."""
    sized = list(zip(plan.ranges, range_file_bytes(plan), strict=True))
    total = sum(size for _, size in sized)
    if budget >= total:
        return [SampleUnit(rng, size) for rng, size in sized]
    window = sample_window(budget, units)
    sized = [unit for rng, size in sized for unit in _units_of(rng, size)]
    starts = np.cumsum([0] + [size for _, size in sized[:-1]])
    picked: dict[tuple[int, int], SampleUnit] = {}
    entered: dict[int, list[float]] = {}
    for i in range(units):
        target = (i + 0.5) * total / units
        k = int(np.searchsorted(starts, target, "right")) - 1
        rng, size = sized[k]
        if rng.kind == "bytes" and size > window:
            begin = rng.start + min(size - window, max(0, int(target - starts[k]) - window // 2))
            picked[(k, begin)] = SampleUnit(rng._replace(start=begin, end=begin + window), window)
        elif _windowed(rng, size, window, spec):
            entered.setdefault(k, []).append((target - starts[k]) / max(1, size))
    for k, fractions in entered.items():
        picked[(k, sized[k][0].start)] = SampleUnit(*sized[k], tuple(sorted(fractions)))
    whole = [k for k, (rng, size) in enumerate(sized) if not _entered(rng, size, window, spec)]
    room = budget - window * sum(max(1, len(unit.windows)) for unit in picked.values())
    mean = sum(sized[k][1] for k in whole) / max(1, len(whole))
    keep = min(len(whole), max(1 if whole and not picked else 0, int(room // max(1.0, mean))))
    for j in range(keep):  # spread over every such range, not the first ones
        k = whole[int((j + 0.5) * len(whole) / keep)]
        picked[(k, sized[k][0].start)] = SampleUnit(*sized[k])
    return [picked[key] for key in sorted(picked)]


def _units_of(rng: CorpusRange, size: int) -> list[tuple[CorpusRange, int]]:
    """A range as the sample sees it: a range of many small files as its files (each a candidate on its own: read
    whole, a packed range of 4 MiB put a corpus of small files into a handful of units, or none), others as they are."""
    if rng.kind != PACKED:
        return [(rng, size)]
    return [(piece, piece.end - piece.start) for piece in _pieces_of(rng)]


def _entered(rng: CorpusRange, size: int, window: int, spec: CorpusSpec | None) -> bool:
    return (rng.kind == "bytes" and size > window) or _windowed(rng, size, window, spec)


class CountedSample(NamedTuple):
    """The sample counted: one sorted table per window or piece (``tables``) with its text bytes (``sizes``), the
    stored bytes the sample stands for (``file_bytes``), and ``draws``: (text bytes, stored bytes) of each window
    and each range read whole, empty windows included (how evenly text falls into the windows: a few long
    documents make it uneven, and the corpus's text uncertain)."""

    tables: list[SortedCounts]
    sizes: list[int]
    file_bytes: int
    draws: list[tuple[int, int]]


def count_sample(sample: list[SampleUnit], spec: CorpusSpec, settings, *, piece: int) -> CountedSample:
    """One sorted table per window, or per ``piece`` bytes of text of a range read whole (a file holds many
    pieces: the growth between them is what the fit needs)."""
    out = CountedSample([], [], 0, [])
    for unit in sample:
        if not unit.windows:
            limit = WHOLE_PIECES * piece if unit.rng.kind != "bytes" else 1 << 62
            texts = _range_texts(unit.rng, spec)
        elif unit.rng.kind == "row_group":
            texts, limit = _row_group_windows(unit, spec, piece), 1 << 62
        else:
            texts, limit = _stream_windows(unit, spec, piece), 1 << 62
        text = 0
        for parts in _pieces(texts, limit):
            counter = SortedChunkCounter(settings.pre)
            for part in parts:
                counter.add(part, num_threads=None)
            out.tables.append(_take(counter))
            out.sizes.append(sum(int(_lengths(p).sum()) for p in parts))
            text += out.sizes[-1]
        draws = texts.draws if unit.windows else [(text, unit.file_bytes)]
        out.draws.extend(draws)
    file_bytes = sum(stored for _, stored in out.draws)
    return out._replace(file_bytes=file_bytes)


class _Windows:
    """The texts of a windowed unit, window by window (``None`` after each window), and once read the (text,
    stored bytes) of each window (``draws``)."""

    def __init__(self, gen) -> None:
        self._gen, self.draws = gen, []

    def __iter__(self):
        self.draws = yield from self._gen


def _stream_windows(unit: SampleUnit, spec: CorpusSpec, piece: int) -> _Windows:
    def gen() -> Iterator:
        rng, texts = unit.rng, []
        fmt = rng.format or spec.format
        with fsspec.open(rng.source, "rb") as raw:
            stream = StreamWindows(raw, compression_of(rng.source), size=unit.file_bytes)
            starts = [max(0, int(f * unit.file_bytes) - piece // (2 * COMPRESSED_RATIO)) for f in unit.windows]
            for block in stream.windows(starts, piece, longest=spec.max_document_bytes):
                texts.append(0)
                for batch in _block_texts(block, fmt, spec) if block else ():
                    texts[-1] += int(_lengths(batch).sum())
                    yield batch
                yield None
        stored = int(piece * stream.compressed / max(1, stream.decompressed))  # a window: piece bytes of the stream
        return [(text, stored) for text in texts]

    return _Windows(gen())


def _block_texts(block: bytes, fmt: str, spec: CorpusSpec) -> Iterator:
    """The documents of a block of whole lines, parsed by the format's own reader (dead letters dropped)."""
    fs, path = fsspec.filesystem("memory"), f"/beam-bpe-estimate/{uuid.uuid4().hex}"
    fs.pipe(path, block)
    try:
        rng = CorpusRange(0, f"memory://{path}", 0, "file", 0, len(block), format=fmt)
        for batch in read_range(rng, spec):
            if len(batch.texts):
                yield batch.texts
    finally:
        fs.rm(path)


def _row_group_windows(unit: SampleUnit, spec: CorpusSpec, piece: int) -> _Windows:
    def gen() -> Iterator:
        batches = list(_range_texts(unit.rng, spec))
        lengths = [_lengths(b) for b in batches]
        total = sum(int(n.sum()) for n in lengths)
        ends = np.cumsum([int(n.sum()) for n in lengths])
        draws = []
        for f in unit.windows:  # the rows that start in a window of piece bytes of the group's text
            begin, end, text = int(f * total) - piece // 2, int(f * total) + (piece + 1) // 2, 0
            for batch, n, stop in zip(batches, lengths, ends, strict=True):
                at = stop - n.sum() + np.concatenate([[0], np.cumsum(n)[:-1]])  # each row's start in the group
                rows = np.flatnonzero((at >= begin) & (at < end))
                if len(rows):
                    yield batch[int(rows[0]) : int(rows[-1]) + 1]
                    text += int(n[rows[0] : rows[-1] + 1].sum())
            yield None
            draws.append((text, int(unit.file_bytes * min(1.0, piece / max(1, total)))))
        return draws

    return _Windows(gen())


def _range_texts(rng: CorpusRange, spec: CorpusSpec) -> Iterator:
    for batch in read_range(rng, spec):
        if len(batch.texts):
            yield batch.texts


def _pieces(texts, limit: int) -> Iterator[list]:
    """Groups of text slices: one per window (``None`` separates windows), or per ``limit`` bytes of text."""
    parts, size = [], 0
    for batch in texts:
        if batch is None:
            if parts:
                yield parts
            parts, size = [], 0
            continue
        lengths = _lengths(batch)
        start = 0
        while start < len(lengths):
            end = start + max(1, int(np.searchsorted(np.cumsum(lengths[start:]), limit - size, "left")) + 1)
            parts.append(batch[start:end])
            size += int(lengths[start:end].sum())
            start = end
            if size >= limit:
                yield parts
                parts, size = [], 0
    if parts:
        yield parts


def _take(counter: SortedChunkCounter) -> SortedCounts:
    parts, _ = counter.take(1)
    return parts[0][1] if parts else SortedCounts(np.zeros(1, np.int32), np.zeros(0, np.uint8), np.zeros(0, np.int64))


def _lengths(texts) -> np.ndarray:
    """UTF-8 bytes of each text (an Arrow column where the reader made one; the readers check UTF-8)."""
    arrow = getattr(texts, "arrow", None)
    if arrow is not None:
        return pc.binary_length(arrow).to_numpy(zero_copy_only=False).astype(np.int64)
    return np.array([len(t.encode("utf-8", "surrogatepass")) for t in texts], dtype=np.int64)
