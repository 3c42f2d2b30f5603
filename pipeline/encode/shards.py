"""Token-id shards on disk: names, part files, the two shard formats, per-shard stats, reading back. No Beam here.

Layout of an encoding ``--out DIR``::

    {prefix}-{i:05d}-of-{n:05d}.parquet                  doc_id, tokens (list<uint16|uint32>), num_tokens
    {prefix}-{i:05d}-of-{n:05d}.bin / .idx               Megatron indexed dataset, one sequence per document
    {prefix}-{i:05d}-of-{n:05d}.positions.npy            (Megatron only) int64 byte offset or row of each document
    dead_letters/{prefix}-{i:05d}-of-{n:05d}.jsonl       rejected documents of shard i (only if there are any)
    _shards/{prefix}-{i:05d}-of-{n:05d}.json             shard i is complete: its counts, files and their sha256
    manifest.json, COMPLETED                             written last, by the driver

A shard is written from its part files (one per document batch, under ``_tmp/``) streaming, to a temporary name
that is renamed when whole; its stats file is written after its data files, so a shard with a stats file is
complete, and one without is rewritten by the next run. Nothing in these files depends on times or runners.
"""

from __future__ import annotations

import contextlib
import hashlib
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
from pipeline.encode import megatron
from pipeline.storage.files import exists, open_atomic
from pipeline.storage.files import read_bytes as read_file

SHARD_FORMATS = ("parquet", "megatron")
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
    return parquet_dtype(n_vocab)


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

    def name(self, index: int) -> str:
        return f"{self.prefix}-{index:05d}-of-{self.num_shards:05d}"

    def path(self, *parts: str) -> str:
        base = self.out_dir.rstrip("/")
        return posixpath.join(base, *parts) if "://" in base else os.path.join(base, *parts)

    def data_files(self, index: int) -> list[str]:
        name = self.name(index)
        if self.shard_format == "parquet":
            return [name + ".parquet"]
        return [name + ".bin", name + ".idx", name + ".positions.npy"]

    def stats_path(self, index: int) -> str:
        return self.path(STATS_DIR, self.name(index) + ".json")

    def dead_letters_path(self, index: int) -> str:
        return self.path(DEAD_DIR, self.name(index) + ".jsonl")

    def part_path(self, index: int, batch_index: int) -> str:
        return self.path(TMP_DIR, self.name(index), f"part-{batch_index:05d}.arrow")


# ------------------------------------------------------------------ complete-or-absent writing
class _HashingWriter(io.RawIOBase):
    """A write-only stream that hashes and counts what passes through to ``raw``."""

    def __init__(self, raw) -> None:
        self.raw, self.sha, self.size = raw, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.raw.write(data)
        self.sha.update(data)
        self.size += len(data)
        return len(data)


@contextlib.contextmanager
def open_hashing(url: str):
    """The project's atomic writer (``bpe_core._io.open_atomic``) behind a writer that counts and hashes what passes."""
    with open_atomic(url) as f:
        yield _HashingWriter(f)


def write_file(url: str, data: bytes) -> dict:
    with open_hashing(url) as f:
        f.write(data)
    return {"bytes": f.size, "sha256": f.sha.hexdigest()}


# ------------------------------------------------------------------ part files (one per document batch)
def tokens_array(offsets: np.ndarray, tokens: np.ndarray) -> pa.Array:
    """One list of ids per document, built from the flat buffers in place (no per-document Python lists)."""
    if offsets[-1] > np.iinfo(np.int32).max:
        return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(tokens))
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(tokens))


def part_bytes(positions: np.ndarray, offsets: np.ndarray, tokens: np.ndarray) -> bytes:
    """An Arrow IPC file: ``position`` (int64), ``num_tokens`` (int64), ``tokens`` (list of ids)."""
    table = pa.table({"position": pa.array(positions), "num_tokens": pa.array(np.diff(offsets)), "tokens": tokens_array(offsets, tokens)})
    sink = io.BytesIO()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def read_part(url: str) -> pa.Table:
    with fsspec.open(url, "rb") as f:
        return pa.ipc.open_file(pa.BufferReader(f.read())).read_all()


# ------------------------------------------------------------------ final shards
def document_ids(source: str, kind: str, positions) -> pa.Array:
    """``document_id`` of every position, as one Arrow string column (computed by Arrow, not per document)."""
    prefix = document_id(source, kind, 0)[:-1]
    return pc.binary_join_element_wise(pa.scalar(prefix), pc.cast(positions, pa.string()), "")


def parquet_schema(dtype: str, tokenizer_digest: str) -> pa.Schema:
    fields = [("doc_id", pa.string()), ("tokens", pa.list_(pa.from_numpy_dtype(np.dtype(dtype)))), ("num_tokens", pa.int64())]
    return pa.schema(fields, metadata={TOKENIZER_KEY: tokenizer_digest.encode()})


def write_parquet_shard(layout: ShardLayout, index: int, parts: list[str], source: str, kind: str) -> dict:
    """Stream the part files into ``{name}.parquet``, one row group per part; return ``{file: {bytes, sha256}}``."""
    name = layout.name(index) + ".parquet"
    schema = parquet_schema(layout.dtype, layout.tokenizer_digest)
    with open_hashing(layout.path(name)) as f:
        # no dictionary: ids and doc ids barely repeat within a page (15% smaller files, as fast, measured on cl100k)
        with pq.ParquetWriter(f, schema, compression="zstd", use_dictionary=False) as writer:
            for part in parts:
                table = read_part(part)
                if table.num_rows == 0:
                    continue
                doc_ids = document_ids(source, kind, table.column("position"))
                tokens = table.column("tokens").combine_chunks().cast(schema.field("tokens").type)
                writer.write_table(pa.Table.from_arrays([doc_ids, tokens, table.column("num_tokens")], schema=schema))
    return {name: {"bytes": f.size, "sha256": f.sha.hexdigest()}}


def write_megatron_shard(layout: ShardLayout, index: int, parts: list[str]) -> dict:
    """Stream the part files into ``{name}.bin``, then write ``{name}.idx`` and ``{name}.positions.npy``."""
    name = layout.name(index)
    dtype = np.dtype(layout.dtype)
    lengths, positions = [], []
    with open_hashing(layout.path(name + ".bin")) as f:
        for part in parts:
            table = read_part(part)
            values = table.column("tokens").combine_chunks().values.to_numpy(zero_copy_only=False)
            f.write(np.ascontiguousarray(values, dtype=dtype.newbyteorder("<")).tobytes())
            lengths.append(table.column("num_tokens").to_numpy())
            positions.append(table.column("position").to_numpy())
        if f.size == 0:
            # numpy (and so Megatron) cannot map an empty file: an empty shard holds one zero no sequence points to
            f.write(np.zeros(1, dtype=dtype).tobytes())
    files = {name + ".bin": {"bytes": f.size, "sha256": f.sha.hexdigest()}}
    index_file = megatron.MegatronIndex.from_lengths(dtype.type, np.concatenate(lengths) if lengths else [])
    files[name + ".idx"] = write_file(layout.path(name + ".idx"), index_file.to_bytes())
    files[name + ".positions.npy"] = write_file(layout.path(name + ".positions.npy"), _npy(np.concatenate(positions) if positions else np.zeros(0, np.int64)))
    return files


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
        raise ShardError(f"{out_dir}/manifest.json is not the manifest of an encoding job (kind {manifest.get('kind')!r})")
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
    reader = megatron.MegatronReader(layout.path(shard["name"]))
    with fsspec.open(layout.path(shard["name"] + ".positions.npy"), "rb") as f:
        positions = np.load(io.BytesIO(f.read()), allow_pickle=False).tolist()
    for position, ids in zip(positions, reader, strict=True):
        yield document_id(shard["source"], shard["position_kind"], position), ids


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
    """Shards whose range can hold the document id, from the source and position in the id."""
    out = []
    for shard in shards:
        sep = "@" if shard["position_kind"] == OFFSET else "#"
        source, found, position = doc.rpartition(sep)
        if not found or source != shard["source"] or not position.isdigit():
            continue
        rng, p = shard["range"], int(position)
        if rng["kind"] != "bytes" or rng["start"] <= p < rng["end"]:  # a line belongs to the range of its first byte
            out.append(shard)
    return out or [s for s in shards if doc.startswith(s["source"])]
