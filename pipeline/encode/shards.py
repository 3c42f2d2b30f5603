"""Token-id shards on disk: names, part files, the shard formats, per-shard stats, reading back. No Beam here.

Layout of an encoding ``--out DIR``::

    {prefix}-{i:05d}-of-{n:05d}.parquet                  doc_id, tokens (list<uint16|uint32>), num_tokens
    {prefix}-{i:05d}-of-{n:05d}.bin / .idx               Megatron indexed dataset, one sequence per document
    {prefix}-{i:05d}-of-{n:05d}.positions.npy            (Megatron only) int64 byte offset or row of each document
    {prefix}-{i:05d}-of-{n:05d}.ds / .ds.index / .ds.metadata   datatrove (pipeline/encode/datatrove.py), EOS after each
    {prefix}-{i:05d}-of-{n:05d}.npy / .csv.gz            dolma / OLMo memmap (pipeline/encode/dolma.py), EOS after each
    {prefix}-{i:05d}-of-{n:05d}.bin                      llm.c (pipeline/encode/llmc.py), EOT before each document
    dead_letters/{prefix}-{i:05d}-of-{n:05d}.jsonl       rejected documents of shard i (only if there are any)
    _shards/{prefix}-{i:05d}-of-{n:05d}.json             shard i is complete: its counts, files and their sha256
    manifest.json, COMPLETED                             written last, by the driver

Shards and ranges: the planner cuts the inputs into small ranges (the parallelism) and assigns consecutive ranges,
in input order, to output shards of about ``--shard-size`` input bytes (``ShardLayout.range_to_shard``), before
anything runs. A shard is written from its part files (one per document batch, under ``_tmp/``), range by range and
batch by batch, streaming, to temporary names that are renamed when whole; its stats file (which names every range
it holds) is written after its data files, so a shard with a stats file is complete, and one without is rewritten
by the next run. Nothing in these files depends on times or runners.

The per-format writer interface (what a new format module implements; see pipeline/encode/streams.py): a class
made with the file prefix of one shard and the layout, with ``write(ids, offsets, **columns)`` once per document
batch, in order (document i is ``ids[offsets[i]:offsets[i + 1]]``; ``columns`` are the per-document columns the
class names in ``wants``, among ``doc_ids`` (Arrow strings), ``sources`` and ``positions`` (int64)) and
``close() -> {file name: {"bytes", "sha256"}}``; leaving it by an exception (``abort``) leaves no file. A format's
class goes into ``SHARD_WRITERS``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.corpus.records import OFFSET, document_id
from pipeline.encode import datatrove, dolma, llmc, megatron
from pipeline.encode.streams import HashedStream, TokenShardWriter
from pipeline.storage.files import exists, open_atomic
from pipeline.storage.files import read_bytes as read_file

SHARD_FORMATS = ("parquet", "megatron", "datatrove", "npy", "llmc")  # each with its writer class in SHARD_WRITERS
FORMAT_SUFFIXES = {
    "parquet": (".parquet",),
    "megatron": (".bin", ".idx", ".positions.npy"),
    "datatrove": datatrove.SUFFIXES,
    "npy": dolma.SUFFIXES,
    "llmc": llmc.SUFFIXES,
}
STATS_DIR = "_shards"
TMP_DIR = "_tmp"
DEAD_DIR = "dead_letters"
TOKENIZER_KEY = b"beam_bpe.tokenizer_digest"


class ShardError(ValueError):
    """Shards are missing, incomplete or inconsistent; the message names the file."""


def parquet_dtype(n_vocab: int) -> str:
    """``uint16`` when every id fits in 16 bits, else ``uint32``."""
    return "uint16" if n_vocab <= 1 << 16 else "uint32"


def shard_dtype(shard_format: str, n_vocab: int) -> str:
    """The numpy dtype of the ids in a shard of this format for a vocabulary of ``n_vocab`` ids."""
    if shard_format == "megatron":
        return np.dtype(megatron.token_dtype(n_vocab)).name
    if shard_format == "npy":
        return dolma.memmap_dtype(n_vocab).name  # uint8 for 256 ids, as dolma chooses
    return parquet_dtype(n_vocab)  # also datatrove's and llm.c's rule


def format_separators(shard_format: str, special_tokens, bos: str | None, eos: str | None) -> tuple[str | None, ...]:
    """The ``--bos`` / ``--eos`` a format implies where they are not given: datatrove and dolma write an EOS after
    each document (the tokenizer's usual one), llm.c an EOT before each (:func:`llmc.eot_token`)."""
    if shard_format in ("datatrove", "npy") and eos is None:
        eos = "auto"
    if shard_format == "llmc" and bos is None:
        bos = llmc.eot_token(special_tokens) or "auto"
    return bos, eos


@dataclass(frozen=True)
class ShardLayout:
    """Where and how the shards of one job are written: small and picklable, it travels with the writing DoFns."""

    out_dir: str
    prefix: str
    num_shards: int
    shard_format: str
    dtype: str
    tokenizer_digest: str = ""
    fingerprint: str = ""
    range_to_shard: tuple[int, ...] = ()  # the shard of each range (by range index); empty: one shard per range

    def shard_of(self, range_index: int) -> int:
        return self.range_to_shard[range_index] if self.range_to_shard else range_index

    def ranges_of(self, index: int) -> list[int]:
        """The range indices of shard ``index``, in input order."""
        if not self.range_to_shard:
            return [index]
        return [r for r, s in enumerate(self.range_to_shard) if s == index]

    def name(self, index: int) -> str:
        return f"{self.prefix}-{index:05d}-of-{self.num_shards:05d}"

    def path(self, *parts: str) -> str:
        base = self.out_dir.rstrip("/")
        return posixpath.join(base, *parts) if "://" in base else os.path.join(base, *parts)

    def data_files(self, index: int) -> list[str]:
        return [self.name(index) + suffix for suffix in FORMAT_SUFFIXES[self.shard_format]]

    def stats_path(self, index: int) -> str:
        return self.path(STATS_DIR, self.name(index) + ".json")

    def dead_letters_path(self, index: int) -> str:
        return self.path(DEAD_DIR, self.name(index) + ".jsonl")

    def part_path(self, range_index: int, batch_index: int) -> str:
        shard = self.name(self.shard_of(range_index))
        return self.path(TMP_DIR, shard, f"part-{range_index:07d}-{batch_index:05d}.arrow")


# ------------------------------------------------------------------ complete-or-absent writing
@contextlib.contextmanager
def open_hashing(url: str):
    """The project's atomic writer (``bpe_core._io.open_atomic``) behind a writer that counts and hashes what passes."""
    with open_atomic(url) as f:
        yield HashedStream(f)


def write_file(url: str, data: bytes) -> dict:
    with open_hashing(url) as f:
        f.write(data)
    return f.stats()


# ------------------------------------------------------------------ part files (one per document batch)
def tokens_array(offsets: np.ndarray, tokens: np.ndarray) -> pa.Array:
    """One list of ids per document, built from the flat buffers in place (no per-document Python lists)."""
    if offsets[-1] > np.iinfo(np.int32).max:
        return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(tokens))
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(tokens))


def part_table(positions: np.ndarray, offsets: np.ndarray, tokens: np.ndarray) -> pa.Table:
    """A part's columns: ``position`` (int64), ``num_tokens`` (int64), ``tokens`` (list of ids), from the flat
    buffers."""
    return pa.table(
        {
            "position": pa.array(positions),
            "num_tokens": pa.array(np.diff(offsets)),
            "tokens": tokens_array(offsets, tokens),
        }
    )


def part_bytes(positions: np.ndarray, offsets: np.ndarray, tokens: np.ndarray) -> bytes:
    """A part as the bytes of an Arrow IPC file (what :func:`write_part` writes)."""
    table = part_table(positions, offsets, tokens)
    sink = io.BytesIO()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def write_part(url: str, positions: np.ndarray, offsets: np.ndarray, tokens: np.ndarray) -> int:
    """Write a part (an Arrow IPC file) complete-or-absent, streamed to its file; its size in bytes.

    Not hashed and not built in memory first (part_bytes + write_file did both: 1.3 s of CPU per GB of text on
    cl100k, the sha256 of a file nobody checks and a copy of every id): a part lives until its shard is written.
    """
    table = part_table(positions, offsets, tokens)
    with open_atomic(url) as f, pa.ipc.new_file(f, table.schema) as writer:
        writer.write_table(table)
    return _part_size(url)


def _part_size(url: str) -> int:
    fs, path = fsspec.core.url_to_fs(url)
    return int(fs.size(path))


def read_part(url: str) -> pa.Table:
    """A part's table; a local file is memory-mapped (its ids are read in place, not copied into Python bytes)."""
    fs, path = fsspec.core.url_to_fs(url)
    if _is_local(fs):
        return pa.ipc.open_file(pa.memory_map(path)).read_all()
    with fs.open(path, "rb") as f:
        return pa.ipc.open_file(pa.BufferReader(f.read())).read_all()


def _is_local(fs) -> bool:
    return (fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]) in ("file", "local")


# ------------------------------------------------------------------ final shards
def document_ids(source: str, kind: str, positions) -> pa.Array:
    """``document_id`` of every position, as one Arrow string column (computed by Arrow, not per document)."""
    prefix = document_id(source, kind, 0)[:-1]
    return pc.binary_join_element_wise(pa.scalar(prefix), pc.cast(positions, pa.string()), "")


def parquet_schema(dtype: str, tokenizer_digest: str) -> pa.Schema:
    fields = [
        ("doc_id", pa.string()),
        ("tokens", pa.list_(pa.from_numpy_dtype(np.dtype(dtype)))),
        ("num_tokens", pa.int64()),
    ]
    return pa.schema(fields, metadata={TOKENIZER_KEY: tokenizer_digest.encode()})


class _ShardWriter(TokenShardWriter):
    """The shared part of the two built-in writers: files opened atomically and hashed, aborted on an exception."""

    wants: tuple[str, ...] = ("doc_ids",)

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self.files: dict[str, dict] = {}
        self._streams: dict[str, HashedStream] = {}

    def _open(self, path: str) -> HashedStream:
        stream = self._stack.enter_context(open_hashing(path))
        self._streams[posixpath.basename(path.replace("\\", "/"))] = stream
        return stream

    def close(self) -> dict[str, dict]:
        """Finish and rename the files (once); their sizes and sha256."""
        if not self.files:
            self._finish()
            self._stack.close()
            self.files = {name: stream.stats() for name, stream in self._streams.items()}
        return self.files

    def _finish(self) -> None:
        """What a format writes last (an index, a footer); nothing by default."""

    def abort(self, exc: BaseException | None = None) -> None:
        exc = exc or RuntimeError("shard writer aborted")
        self._stack.__exit__(type(exc), exc, exc.__traceback__)


class ParquetShardWriter(_ShardWriter):
    """``{prefix}.parquet``: ``doc_id``, ``tokens`` (the list column made from the flat buffers in place),
    ``num_tokens``; one row group per batch written."""

    def __init__(self, prefix: str, layout: ShardLayout) -> None:
        super().__init__()
        self.schema = parquet_schema(layout.dtype, layout.tokenizer_digest)
        f = self._open(prefix + ".parquet")
        # no dictionary: ids and doc ids barely repeat within a page (15% smaller files, as fast, measured on cl100k)
        self._writer = self._stack.enter_context(
            pq.ParquetWriter(f, self.schema, compression="zstd", use_dictionary=False)
        )

    def write(self, ids: np.ndarray, offsets: np.ndarray, *, doc_ids: pa.Array) -> None:
        if len(offsets) <= 1:
            return
        tokens = tokens_array(offsets, ids).cast(self.schema.field("tokens").type)
        num_tokens = pa.array(np.diff(offsets))
        self._writer.write_table(pa.Table.from_arrays([doc_ids, tokens, num_tokens], schema=self.schema))


class MegatronShardWriter(_ShardWriter):
    """``{prefix}.bin`` streamed from the flat ids, then ``{prefix}.idx`` and ``{prefix}.positions.npy`` from the
    lengths and positions kept meanwhile (12 bytes per document)."""

    wants = ("positions",)

    def __init__(self, prefix: str, layout: ShardLayout) -> None:
        super().__init__()
        self.prefix, self.dtype = prefix, np.dtype(layout.dtype)
        self._bin = self._open(prefix + ".bin")
        self._lengths: list[np.ndarray] = []
        self._positions: list[np.ndarray] = []

    def write(self, ids: np.ndarray, offsets: np.ndarray, *, positions: np.ndarray) -> None:
        flat = np.ascontiguousarray(ids[offsets[0] : offsets[-1]], dtype=self.dtype.newbyteorder("<"))
        self._bin.write(memoryview(flat).cast("B"))  # in place: tobytes() copied every id once more
        self._lengths.append(np.diff(offsets))
        self._positions.append(np.asarray(positions, np.int64))

    def _finish(self) -> None:
        if self._bin.size == 0:
            # numpy (and so Megatron) cannot map an empty file: an empty shard holds one zero no sequence points to
            self._bin.write(np.zeros(1, dtype=self.dtype).tobytes())
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, np.int64)
        self._open(self.prefix + ".idx").write(megatron.MegatronIndex.from_lengths(self.dtype.type, lengths).to_bytes())
        positions = np.concatenate(self._positions) if self._positions else np.zeros(0, np.int64)
        self._open(self.prefix + ".positions.npy").write(_npy(positions))


SHARD_WRITERS = {
    "parquet": ParquetShardWriter,
    "megatron": MegatronShardWriter,
    "datatrove": datatrove.DatatroveShardWriter,
    "npy": dolma.DolmaShardWriter,
    "llmc": llmc.LlmcShardWriter,
}


def write_shard(layout: ShardLayout, index: int, parts: list[tuple[str, str, str]]) -> dict:
    """Stream the part files ``(path, source, position_kind)``, in order, into shard ``index`` with its format's
    writer; return ``{file: {bytes, sha256}}``."""
    writer_class = SHARD_WRITERS[layout.shard_format]
    wants = getattr(writer_class, "wants", ("doc_ids", "sources"))
    with writer_class(layout.path(layout.name(index)), layout) as writer:
        for path, source, kind in parts:
            table = read_part(path)
            tokens = table.column("tokens").combine_chunks()
            ids = tokens.values.to_numpy(zero_copy_only=False)
            offsets = tokens.offsets.to_numpy().astype(np.int64, copy=False)
            positions = table.column("position").combine_chunks()
            writer.write(ids, offsets, **{name: _column(name, source, kind, positions) for name in wants})
    return writer.close()  # already closed by the with block: the same stats


def _column(name: str, source: str, kind: str, positions: pa.Array):
    if name == "doc_ids":
        return document_ids(source, kind, positions)
    if name == "sources":
        return [source] * len(positions)
    return positions.to_numpy()


def _npy(array: np.ndarray) -> bytes:
    sink = io.BytesIO()
    np.save(sink, np.ascontiguousarray(array, dtype="<i8"), allow_pickle=False)
    return sink.getvalue()


def write_dead_letters(layout: ShardLayout, index: int, dead_letters: list) -> dict:
    if not dead_letters:
        return {}
    data = b"".join(_json_line(d.to_json_dict()) for d in dead_letters)
    return {posixpath.join(DEAD_DIR, layout.name(index) + ".jsonl"): write_file(layout.dead_letters_path(index), data)}


def _json_line(record: dict) -> bytes:
    """One JSON line, valid UTF-8 even where the record holds lone surrogates (escaped as ``\\udXXX`` then)."""
    try:
        return (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(record) + "\n").encode("ascii")


def write_stats(layout: ShardLayout, index: int, stats: dict) -> None:
    write_file(layout.stats_path(index), (json.dumps(stats, indent=1, sort_keys=True) + "\n").encode())


def read_stats(layout: ShardLayout, index: int) -> dict | None:
    """The stats of a complete shard of this job, or None where the shard is incomplete."""
    try:
        stats = json.loads(read_file(layout.stats_path(index)))
    except FileNotFoundError:
        return None
    return stats if stats.get("fingerprint") == layout.fingerprint else None


# ------------------------------------------------------------------ reading back
def load_manifest(out_dir: str) -> dict:
    """The manifest of a finished output directory; an unfinished one raises ShardError."""
    layout = ShardLayout(out_dir, "", 0, "parquet", "uint16")
    if not exists(layout.path("COMPLETED")):
        raise ShardError(f"{out_dir} holds no finished encoding output (no COMPLETED marker): rerun the encode job")
    manifest = json.loads(read_file(layout.path("manifest.json")))
    if manifest.get("kind") != "beam-bpe encode":
        raise ShardError(
            f"{out_dir}/manifest.json is not the manifest of an encoding job (kind {manifest.get('kind')!r})"
        )
    return manifest


def iter_shard(out_dir: str, shard: dict, shard_format: str) -> Iterator[tuple[str, np.ndarray]]:
    """(doc_id, ids) of one shard of a finished output, in order."""
    _refuse_unsafe_name(out_dir, shard.get("name"))
    layout = ShardLayout(out_dir, "", 0, shard_format, "uint16")
    if shard_format == "parquet":
        with fsspec.open(layout.path(shard["name"] + ".parquet"), "rb") as f:
            for batch in pq.ParquetFile(f).iter_batches(columns=["doc_id", "tokens"]):
                tokens = batch.column(1)
                values, offsets = tokens.values.to_numpy(zero_copy_only=False), tokens.offsets.to_numpy()
                for i, doc_id in enumerate(batch.column(0).to_pylist()):
                    yield doc_id, values[offsets[i] : offsets[i + 1]]
        return
    if shard_format == "npy":  # the document ids are in the .csv.gz; the id width is the file's size per token
        rows = dolma.read_metadata(layout.path(shard["name"] + ".csv.gz"))
        data = read_file(layout.path(shard["name"] + ".npy"))
        ids = np.frombuffer(data, f"<u{len(data) // rows[-1][1]}") if rows and rows[-1][1] else np.zeros(0, "<u2")
        for start, end, doc_id, _, _ in rows:
            yield doc_id, ids[start:end]
        return
    if shard_format in ("datatrove", "llmc"):
        raise ShardError(
            f"a {shard_format} shard keeps no document ids: decode --shards reads parquet, megatron and npy outputs; "
            f"read {layout.path(shard['name'])}* with {shard_format}'s own reader"
        )
    reader = megatron.MegatronReader(layout.path(shard["name"]))
    with fsspec.open(layout.path(shard["name"] + ".positions.npy"), "rb") as f:
        positions = np.load(io.BytesIO(f.read()), allow_pickle=False).tolist()
    sources = [r["source"] for r in shard["ranges"] for _ in range(r["documents"])]  # the ranges, in order
    for position, source, ids in zip(positions, sources, reader, strict=True):
        yield document_id(source, shard["position_kind"], position), ids


def _refuse_unsafe_name(out_dir: str, name: object) -> None:
    """A shard name from the manifest is a file name in ``out_dir``, never a path: a manifest naming
    ``../../etc/x`` or ``/data/y`` would otherwise make ``decode --shards`` read files outside the output."""
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or ".." in name:
        raise ShardError(
            f"{out_dir}/manifest.json names a shard {name!r}: a shard name must be a plain file name in the output "
            "directory (no '/', '\\' or '..'); the manifest is damaged or not written by beam-bpe encode"
        )


def iter_documents(out_dir: str) -> Iterator[tuple[str, np.ndarray]]:
    """(doc_id, ids) of every document of a finished output, shard by shard, in input order."""
    manifest = load_manifest(out_dir)
    for shard in manifest["shards"]:
        yield from iter_shard(out_dir, shard, manifest["settings"]["shard_format"])


def find_document(out_dir: str, doc: str) -> tuple[str, np.ndarray]:
    """One document by its id (``path@offset``, ``path#row``) or by its 0-based index over the whole output."""
    manifest = load_manifest(out_dir)
    fmt = manifest["settings"]["shard_format"]
    if doc.isdigit():
        wanted, seen = int(doc), 0
        for shard in manifest["shards"]:
            if wanted < seen + shard["documents"]:
                for k, item in enumerate(iter_shard(out_dir, shard, fmt)):
                    if k == wanted - seen:
                        return item
            seen += shard["documents"]
        raise ShardError(f"--doc {doc}: the output holds {seen} documents (0 to {seen - 1})")
    doc = _canonical_id(doc)
    for shard in _shards_that_may_hold(manifest["shards"], doc):
        for doc_id, ids in iter_shard(out_dir, shard, fmt):
            if doc_id == doc:
                return doc_id, ids
    raise ShardError(
        f"--doc {doc!r}: no such document in {out_dir} (ids look like PATH@BYTE_OFFSET or PATH#ROW, as in the "
        "dead letters; or pass a 0-based document number)"
    )


def _canonical_id(doc: str) -> str:
    """The id with its path spelled as the planner spells sources (absolute local path, full URL)."""
    cut = max(doc.rfind("@"), doc.rfind("#"))
    if cut <= 0 or not doc[cut + 1 :].isdigit():
        return doc
    source = doc[:cut]
    if "://" not in source:
        return os.path.abspath(source) + doc[cut:]
    fs, path = fsspec.core.url_to_fs(source)
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return (path if protocol in ("file", "local") else fs.unstrip_protocol(path)) + doc[cut:]


def _shards_that_may_hold(shards: list[dict], doc: str) -> list[dict]:
    """Shards with a range that can hold the document id, from the source and position in the id (the manifest
    names every range of every shard)."""
    out = []
    for shard in shards:
        sep = "@" if shard["position_kind"] == OFFSET else "#"
        source, found, position = doc.rpartition(sep)
        if not found or not position.isdigit():
            continue
        p = int(position)
        # a line belongs to the range of its first byte
        if any(r["source"] == source and (r["kind"] != "bytes" or r["start"] <= p < r["end"]) for r in shard["ranges"]):
            out.append(shard)
    return out or [s for s in shards if any(doc.startswith(r["source"]) for r in s["ranges"])]
