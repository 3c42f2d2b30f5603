"""``encode --merge``: one Megatron ``.bin``/``.idx`` pair for the whole output, from its complete shards. No Beam.

Megatron-LM's ``tools/merge_datasets.py`` (``IndexedDatasetBuilder.add_index``, then ``finalize``) reads every
shard's index into Python lists before writing: memory grows with the documents of the whole output (NeMo's users
report over 200 GB for 2,000 shards). This pass writes the same files streaming, with memory bounded by
``CHUNK`` index entries whatever the number or size of the shards:

    .bin   every shard's tokens, in shard order (the bytes its index points to; an empty shard's placeholder id,
           written only because numpy cannot map an empty file, is left out)
    .idx   header (sequence count, document count), then three sections, each streamed shard by shard:
           lengths (int32, as stored), pointers (int64, the shard's own plus the bytes before it),
           document indices (int64: 0, then each shard's own after its 0, plus the sequences before it)

which is byte for byte what ``add_index`` + ``finalize`` write for the same shards (tested). Both files go through
the atomic writer; the job writes the manifest (naming them, with their sha256) and ``COMPLETED`` after them, and a
rerun of an incomplete output removes them first, so the pair is complete or absent.
"""

from __future__ import annotations

import struct

import fsspec
import numpy as np

from pipeline.encode.formats.megatron_index import CODE_DTYPES, DTYPE_CODES, HEADER, VERSION
from pipeline.encode.streams import ShardFiles

SUFFIXES = (".bin", ".idx")  # {prefix}.bin and {prefix}.idx
CHUNK = 1 << 20  # index entries (and 4 MiB of .bin ids per read) held at once
_FIXED = len(HEADER) + struct.calcsize("<QBQQ")


class MergeError(RuntimeError):
    """A shard does not fit the merge (dtype, sizes); the message names the file."""


def merge_shards(layout, manifest: dict) -> dict:
    """``--merge``: the complete shards streamed into ``{prefix}.bin`` / ``{prefix}.idx``; the manifest's entry
    (prefix, files with bytes and sha256, documents, tokens), checked against the shards' totals."""
    merged = merge_megatron(
        layout.path(layout.prefix), [layout.path(s["name"]) for s in manifest["shards"]], layout.dtype
    )
    if (merged["documents"], merged["tokens"]) != (manifest["documents_written"], manifest["tokens"]):
        raise RuntimeError(
            f"the merged {layout.prefix}.bin/.idx hold {merged['documents']} documents and {merged['tokens']} tokens, "
            f"the shards {manifest['documents_written']} and {manifest['tokens']}: "
            "a shard changed while it was merged; rerun"
        )
    return {"prefix": layout.prefix, **merged}


def merge_megatron(out_prefix: str, shard_prefixes: list[str], dtype) -> dict:
    """Merge the Megatron shards ``shard_prefixes`` (in order) into ``out_prefix.bin`` / ``.idx``; return
    ``{"files": {name: {bytes, sha256}}, "documents": n, "tokens": t}``.

    >>> merge_megatron(  # doctest: +SKIP
    ...     "out/tokens", ["out/tokens-00000-of-00002", "out/tokens-00001-of-00002"], "int32"
    ... )
    """
    dtype = np.dtype(dtype)
    heads = [_header(p, dtype) for p in shard_prefixes]
    sequences = sum(h[0] for h in heads)
    files = ShardFiles()
    try:
        tokens = _write_bin(files.open(out_prefix + ".bin"), shard_prefixes, heads, dtype)
        _write_idx(files.open(out_prefix + ".idx"), shard_prefixes, heads, dtype, sequences)
    except BaseException as exc:
        files.abort(exc)
        raise
    return {"files": files.close(), "documents": sequences, "tokens": tokens}


def _header(prefix: str, dtype: np.dtype) -> tuple[int, int, int]:
    """(sequences, documents, tokens) of a shard, its index header and .bin size checked."""
    name = prefix + ".idx"
    with fsspec.open(name, "rb") as f:
        head = f.read(_FIXED)
        if len(head) < _FIXED or not head.startswith(HEADER):
            raise MergeError(f"{name}: not a Megatron index")
        version, code, sequences, documents = struct.unpack_from("<QBQQ", head, len(HEADER))
        if version != VERSION or CODE_DTYPES.get(code) is not dtype.type:
            raise MergeError(f"{name}: version {version}, dtype code {code}; the merge expects version 1, {dtype.name}")
        tokens = 0
        for lengths in _section(f, _FIXED, sequences, "<i4"):
            tokens += int(lengths.sum(dtype=np.int64))
    fs, path = fsspec.core.url_to_fs(prefix + ".bin")
    size, want = int(fs.size(path)), tokens * dtype.itemsize
    if size != want and not (tokens == 0 and size == dtype.itemsize):
        raise MergeError(
            f"{prefix}.bin holds {size} bytes, its index points to {want}: the shard is damaged; rerun with --overwrite"
        )
    return sequences, documents, tokens


def _section(f, offset: int, count: int, dtype: str):
    """``count`` values of ``dtype`` from ``offset`` of an open file, CHUNK at a time."""
    itemsize = np.dtype(dtype).itemsize
    f.seek(offset)
    for start in range(0, count, CHUNK):
        n = min(CHUNK, count - start)
        data = f.read(n * itemsize)
        if len(data) != n * itemsize:
            raise MergeError(f"{getattr(f, 'path', f)}: truncated index")
        yield np.frombuffer(data, dtype)


def _write_bin(out, prefixes: list[str], heads: list[tuple[int, int, int]], dtype: np.dtype) -> int:
    total = 0
    for prefix, (_, _, tokens) in zip(prefixes, heads, strict=True):
        left = tokens * dtype.itemsize
        with fsspec.open(prefix + ".bin", "rb") as f:
            while left:
                data = f.read(min(left, CHUNK * 4))
                if not data:
                    raise MergeError(f"{prefix}.bin ended early")
                out.write(data)
                left -= len(data)
        total += tokens
    if total == 0:
        out.write(np.zeros(1, dtype).tobytes())  # as a shard does: numpy cannot map an empty file
    return total


def _write_idx(out, prefixes: list[str], heads: list[tuple[int, int, int]], dtype: np.dtype, sequences: int) -> None:
    documents = 1 + sum(d - 1 for _, d, _ in heads)  # each shard's list opens with its own 0
    out.write(HEADER + struct.pack("<QBQQ", VERSION, DTYPE_CODES[dtype.type], sequences, documents))
    for prefix, (n, _, _) in zip(prefixes, heads, strict=True):  # lengths
        with fsspec.open(prefix + ".idx", "rb") as f:
            for lengths in _section(f, _FIXED, n, "<i4"):
                out.write(lengths)
    base = 0
    for prefix, (n, _, tokens) in zip(prefixes, heads, strict=True):  # pointers: the bytes before each shard added
        with fsspec.open(prefix + ".idx", "rb") as f:
            for pointers in _section(f, _FIXED + 4 * n, n, "<i8"):
                out.write((pointers + base).astype("<i8"))
        base += tokens * dtype.itemsize
    out.write(np.zeros(1, "<i8"))  # document indices: 0, then each shard's after its own 0, shifted
    before = 0
    for prefix, (n, documents, _) in zip(prefixes, heads, strict=True):
        with fsspec.open(prefix + ".idx", "rb") as f:
            first = True
            for indices in _section(f, _FIXED + 12 * n, documents, "<i8"):
                out.write((indices[1:] if first else indices) + before)
                first = False
        before += n
