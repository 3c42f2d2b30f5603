"""The reduced counts on disk: Parquet shards ``counts/counts-{i:05d}-of-{n:05d}.parquet`` (``chunk: binary, count:
int64``, sorted by chunk), the pre-tokenizer in the schema metadata, and ``counts/_stats.json`` beside them.

Reading is streaming (record batches, never a whole table): ``load_chunk_table`` hands the batches' Arrow buffers to
the native merge loop's table (the driver's way), ``load_counts`` builds a dict (small counts, tests). Both apply
the optional chunk filters after the global reduce, with an exact report of what they dropped. No Beam here: the
driver and ``--from-counts`` use it.
"""

from __future__ import annotations

import contextlib
import heapq
import io
import json
import posixpath
from collections import Counter
from collections.abc import Iterator

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bpe_core import ChunkCounts, PreTokenizer
from bpe_core.train.sorted_counts import ChunkTable, SortedCounts, sorted_counts_from_dict
from pipeline.errors import ShardFileError
from pipeline.storage.files import glob, read_bytes, write_atomic
from pipeline.storage.paths import is_local, join

SCHEMA = pa.schema([("chunk", pa.binary()), ("count", pa.int64())])
PRETOKENIZER_KEY = b"beam_bpe.pretokenizer"
STATS_FILE = "_stats.json"
INT64_MAX = (1 << 63) - 1


def shard_name(shard: int, num_shards: int) -> str:
    return f"counts-{shard:05d}-of-{num_shards:05d}.parquet"


def counts_table(columns: SortedCounts | None) -> pa.Table:
    """A sorted table (``bpe_core.train.sorted_counts.SortedCounts``, or None: empty) as an Arrow table of SCHEMA,
    without copying its buffers."""
    if columns is None or not len(columns):
        return SCHEMA.empty_table()
    n = len(columns.counts)
    chunks = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(columns.offsets), pa.py_buffer(columns.data)])
    return pa.Table.from_arrays([chunks, pa.array(columns.counts, pa.int64())], schema=SCHEMA)


def table_columns(table: pa.Table | pa.RecordBatch) -> SortedCounts:
    """The table's buffers as NumPy views (no copy unless it is in several chunks), for the native merge."""
    if isinstance(table, pa.Table):
        table = table.combine_chunks().to_batches()
        if not table:
            return SortedCounts(np.zeros(1, np.int32), np.zeros(0, np.uint8), np.zeros(0, np.int64))
        table = table[0]
    chunks, counts = table.column(0), table.column(1)
    n = len(chunks)
    if chunks.null_count or counts.null_count:
        raise ShardFileError("a counts table holds nulls: chunk and count must both be set on every row")
    _, offsets_buf, data_buf = chunks.buffers()
    offsets = (
        np.frombuffer(offsets_buf, np.int32)[chunks.offset : chunks.offset + n + 1] if n else np.zeros(1, np.int32)
    )
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return SortedCounts(offsets, data, counts.to_numpy(zero_copy_only=True) if n else np.zeros(0, np.int64))


def counts_parquet(counts: pa.Table | dict[bytes, int], pretokenizer: PreTokenizer) -> bytes:
    """One shard as Parquet bytes, rows sorted by chunk, so equal counts give equal files. ``counts``: a sorted
    table of SCHEMA (the count stage's) or a dict (tests, empty shards)."""
    if isinstance(counts, dict):
        counts = counts_table(sorted_counts_from_dict(counts) if counts else None)
    meta = {PRETOKENIZER_KEY: json.dumps(_pre_state(pretokenizer)).encode()}
    table = counts.combine_chunks().replace_schema_metadata(meta)
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def write_missing_shards(counts_dir: str, num_shards: int, pretokenizer: PreTokenizer) -> int:
    """Write an empty file for each shard that received no chunk, so that the layout is always complete."""
    written = 0
    present = {posixpath.basename(p) for p in glob(join(counts_dir, "counts-*.parquet"))}
    for shard in range(num_shards):
        path = join(counts_dir, shard_name(shard, num_shards))
        if shard_name(shard, num_shards) not in present:
            write_atomic(path, counts_parquet({}, pretokenizer))
            written += 1
    return written


def _pre_state(pre: PreTokenizer) -> dict:
    return {"patterns": list(pre.patterns), "normalizer": pre.normalizer, "name": pre.name}


def shard_paths(counts_dir: str) -> list[str]:
    """The shard files, checked to be the complete set ``0..n-1 of n``."""
    names = [posixpath.basename(p) for p in glob(join(counts_dir, "counts-*-of-*.parquet"))]
    if not names:
        raise ShardFileError(f"no counts-*.parquet files in {counts_dir}: pass the --out of a finished train run")
    n = int(names[0].rsplit("-of-", 1)[1].split(".")[0])
    expected = [shard_name(i, n) for i in range(n)]
    if names != expected:
        missing = sorted(set(expected) - set(names))
        raise ShardFileError(f"incomplete counts in {counts_dir}: expected {n} shards, missing {missing[:5]}")
    return [join(counts_dir, name) for name in names]


def counts_pretokenizer(counts_dir: str) -> PreTokenizer:
    """The pre-tokenizer the counts were made with (from the first shard's schema metadata)."""
    path = shard_paths(counts_dir)[0]
    with fsspec.open(path, "rb") as f:
        meta = pq.ParquetFile(f).schema_arrow.metadata or {}
    if PRETOKENIZER_KEY not in meta:
        raise ShardFileError(f"{path} does not record its pre-tokenizer: it was not written by beam-bpe train")
    state = json.loads(meta[PRETOKENIZER_KEY])
    return PreTokenizer(state["patterns"], normalizer=state["normalizer"], name=state["name"])


def read_stats(counts_dir: str) -> dict:
    path = join(counts_dir, STATS_FILE)
    try:
        return json.loads(read_bytes(path))
    except FileNotFoundError:
        raise ShardFileError(f"{path} is missing: the counting run did not finish; rerun it") from None


def iter_counts(counts_dir: str, *, batch_rows: int = 1 << 16) -> Iterator[tuple[list[bytes], list[int]]]:
    """(chunks, counts) record batches over every shard, in shard order."""
    for path in shard_paths(counts_dir):
        for batch in _record_batches(path, batch_rows):
            yield batch.column(0).to_pylist(), batch.column(1).to_pylist()


def load_counts(counts_dir: str, *, min_chunk_count: int = 0, max_chunks: int = 0) -> tuple[ChunkCounts, dict]:
    """All counts (filtered) as ``ChunkCounts`` remembering their pre-tokenizer, and the filter report.

    ``min_chunk_count`` drops chunks counted fewer times; then ``max_chunks`` keeps the most frequent ones, ties
    at the threshold count broken by the chunk bytes (smallest first), so the result is deterministic. With
    ``max_chunks`` the driver holds at most ``2 * max_chunks`` chunks plus one record batch: the top chunks of a
    prefix of the shards are pruned as it goes (exact: a chunk outside the top of a part is outside the top of
    the whole), so ``--max-chunks`` also bounds the driver's memory, not only the merge loop's.
    """
    counts = ChunkCounts(pretokenizer=counts_pretokenizer(counts_dir))
    report = {
        "min_chunk_count": min_chunk_count,
        "max_chunks": max_chunks,
        "chunks_reduced": 0,
        "occurrences_reduced": 0,
    }
    low_chunks = low_occ = 0
    over = [0, 0]  # chunks and occurrences dropped by max_chunks
    for chunks, values in iter_counts(counts_dir):
        for chunk, n in zip(chunks, values, strict=True):
            report["chunks_reduced"] += 1
            report["occurrences_reduced"] += n
            if n < min_chunk_count:
                low_chunks, low_occ = low_chunks + 1, low_occ + n
            elif chunk in counts:
                raise ShardFileError(f"chunk {chunk!r} appears in two shards of {counts_dir}: the counts are corrupt")
            else:
                counts[chunk] = n
        if max_chunks and len(counts) >= 2 * max_chunks:
            _add(over, _drop_below_top(counts, max_chunks))
    report["dropped_below_min_count"] = {"chunks": low_chunks, "occurrences": low_occ}
    if max_chunks:
        _add(over, _drop_below_top(counts, max_chunks))
    report["dropped_over_max_chunks"] = {"chunks": over[0], "occurrences": over[1]}
    if over[0]:
        threshold = min(counts.values())
        ties = sum(1 for n in counts.values() if n == threshold)
        report["dropped_over_max_chunks"].update(threshold_count=threshold, ties_kept=ties)
    report["chunks_kept"] = len(counts)
    report["occurrences_kept"] = sum(counts.values())
    return counts, report


def load_chunk_table(counts_dir: str, *, min_chunk_count: int = 0, max_chunks: int = 0) -> tuple[ChunkTable, dict]:
    """The counts (filtered) streamed into a native ``ChunkTable`` for the merge loop, and the filter report.

    The same chunks and the same report as ``load_counts``, without a Python object per chunk: each record batch's
    Arrow buffers go to the table as they are read (1 byte per chunk byte plus 16 per chunk; the dict of
    ``load_counts`` cost about 200 bytes per chunk). Each shard is checked to be sorted, distinct and hashed to
    that shard, which also proves that no chunk is in two shards. With ``max_chunks`` the table is pruned to its
    top ``max_chunks`` whenever it reaches twice that (exact, as in ``load_counts``).
    """
    table = ChunkTable(pretokenizer=counts_pretokenizer(counts_dir))
    paths = shard_paths(counts_dir)
    if not max_chunks:  # room for every row at once (vectors grown by doubling left up to 2x slack)
        table.reserve(*_sizes(paths))
    with _system_memory_pool():
        _fill(table, paths, min_chunk_count, max_chunks)
    if max_chunks:
        table.keep_top(max_chunks)
    t = table.tallies()
    report = {"min_chunk_count": min_chunk_count, "max_chunks": max_chunks, "chunks_reduced": t["rows"],
              "occurrences_reduced": t["occurrences"],
              "dropped_below_min_count": {"chunks": t["low_rows"], "occurrences": t["low_occurrences"]},
              "dropped_over_max_chunks": {"chunks": t["over_rows"], "occurrences": t["over_occurrences"]}}  # fmt: skip
    if t["over_rows"]:
        threshold = table.min_count_kept()
        report["dropped_over_max_chunks"].update(threshold_count=threshold, ties_kept=table.count_equal(threshold))
    report["chunks_kept"] = len(table)
    report["occurrences_kept"] = t["occurrences"] - t["low_occurrences"] - t["over_occurrences"]
    return table, report


def _fill(table: ChunkTable, paths: list[str], min_chunk_count: int, max_chunks: int) -> None:
    for shard, path in enumerate(paths):
        for batch in _record_batches(path):
            try:
                table.add(table_columns(batch), shard=shard, num_shards=len(paths), min_count=min_chunk_count)
            except ValueError as exc:
                raise ShardFileError(f"{path}: {exc}: the counts are corrupt; count again") from None
            if max_chunks and len(table) >= 2 * max_chunks:
                table.keep_top(max_chunks)


@contextlib.contextmanager
def _system_memory_pool() -> Iterator[None]:
    """Arrow allocates from malloc while the shards are read, so that what reading frees is reused by the merge
    loop (Arrow's default mimalloc pool keeps it: the 566k-chunk shard of a 300 MB corpus left 40 MB of RSS
    behind for 11 MB of Arrow allocations, 21 MB through malloc)."""
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(previous)


def _record_batches(path: str, batch_rows: int = 1 << 16) -> Iterator[pa.RecordBatch]:
    # One decoding thread: with Arrow's threads (and their allocator arenas) reading a 566k-chunk shard cost 15 MB
    # more RSS.
    with _open_parquet(path) as pfile:
        if pfile.schema_arrow.remove_metadata() != SCHEMA:
            raise ShardFileError(f"{path} has schema {pfile.schema_arrow}, expected chunk: binary, count: int64")
        yield from pfile.iter_batches(batch_size=batch_rows, use_threads=False)


@contextlib.contextmanager
def _open_parquet(path: str) -> Iterator[pq.ParquetFile]:
    fs, local = fsspec.core.url_to_fs(path)
    if is_local(fs):  # Arrow's own file reader: no Python file object in between
        yield pq.ParquetFile(local, pre_buffer=False)
        return
    with fs.open(local, "rb") as f:
        yield pq.ParquetFile(f, pre_buffer=False)


def _sizes(paths: list[str]) -> tuple[int, int]:
    """Rows and chunk bytes (from the Parquet metadata: uncompressed size less the 4-byte lengths) of the shards."""
    rows = data = 0
    for path in paths:
        with _open_parquet(path) as pfile:
            meta = pfile.metadata
            rows += meta.num_rows
            data += sum(meta.row_group(g).column(0).total_uncompressed_size for g in range(meta.num_row_groups))
    return rows, max(0, data - 4 * rows)


def _add(total: list[int], dropped: tuple[int, int]) -> None:
    total[0] += dropped[0]
    total[1] += dropped[1]


def _drop_below_top(counts: ChunkCounts, max_chunks: int) -> tuple[int, int]:
    """Keep the ``max_chunks`` most frequent chunks in place (ties at the threshold: smallest bytes); return the
    chunks and occurrences dropped."""
    if len(counts) <= max_chunks:
        return 0, 0
    histogram = Counter(counts.values())
    kept, threshold = 0, 0
    for value in sorted(histogram, reverse=True):
        if kept + histogram[value] >= max_chunks:
            threshold = value
            break
        kept += histogram[value]
    ties_kept = max_chunks - kept
    keep_ties = set(heapq.nsmallest(ties_kept, (c for c, n in counts.items() if n == threshold)))
    dropped = [c for c, n in counts.items() if n < threshold or (n == threshold and c not in keep_ties)]
    return len(dropped), sum(counts.pop(c) for c in dropped)
