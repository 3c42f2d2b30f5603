"""Packed sequences over a finished encoding output: ``OUT/packs/<L>/``, an index beside the token shards.

``build_pack(out, settings)`` reads each shard's documents once (in order, one shard in memory at a time), plans the
pieces with ``pack_plan`` and writes ``index-NNNNN.parquet`` (columns ``seq``, ``shard``, ``offset``, ``length``,
``doc_id``, ``doc_offset``: a row per piece, in sequence order; file ``i`` holds the sequences that start in shard
``i``), optionally ``rows-NNNNN.parquet`` (one row per sequence: ``input_ids``, ``doc_starts``), then ``pack.json``
and ``COMPLETED``. The folder is built under a temporary name and renamed: complete or absent. The token shards are
never touched, so ``beam-bpe pack OUT --length 4096`` adds a length without encoding again.

``iter_sequences(out, length)`` is the one reader (tests and users): each sequence in order as ``(ids,
doc_starts)``, the token ids and the offsets inside the sequence where a document starts.

>>> for ids, doc_starts in iter_sequences("out", 2048):  # doctest: +SKIP
...     ...
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.encode.formats import and_list, readable_formats
from pipeline.encode.pack_plan import FFD_WINDOW, PACK_METHODS, concat_rows, ffd_rows
from pipeline.encode.readback import iter_shard, load_manifest
from pipeline.encode.shuffle_keys import shuffle_sequences
from pipeline.errors import OutputError, ShardFileError, UsageError
from pipeline.storage.files import COMPLETED, exists, read_bytes, remove, write_atomic
from pipeline.storage.paths import join

PACK_DIR = "packs"
PACK_MANIFEST = "pack.json"
INDEX_SCHEMA = pa.schema(
    [("seq", pa.int64()), ("shard", pa.int32()), ("offset", pa.int64()), ("length", pa.int32()),
     ("doc_id", pa.string()), ("doc_offset", pa.int64())]
)  # fmt: skip


@dataclass(frozen=True)
class PackSettings:
    """One pack: the sequence length, the method (``concat`` or ``ffd``) and whether rows are written too."""

    length: int
    method: str = "concat"
    rows: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.length, int) or self.length <= 0:
            raise UsageError(f"--pack-length must be a whole number of tokens above 0, got {self.length!r}")
        if self.method not in PACK_METHODS:
            raise UsageError(f"--pack must be one of {', '.join(PACK_METHODS)}, got {self.method!r}")


def pack_dir(out: str, length: int) -> str:
    return join(out, PACK_DIR, str(length))


def check_packable(out: str, manifest: dict, settings: PackSettings) -> None:
    """Refuse, before any work, an output whose shards keep no document boundaries, or concat without an EOS."""
    fmt = manifest["settings"]["shard_format"]
    if fmt not in readable_formats():
        raise UsageError(
            f"{out}: a pack needs shards that keep document boundaries and ids; {fmt} shards do not (packable: "
            f"{and_list(readable_formats())})"
        )
    if settings.method == "concat" and manifest["settings"].get("eos_id") is None:
        raise UsageError(
            f"{out}: --pack concat joins documents into one stream, and without an EOS after each document their "
            "boundaries are lost in it: encode with --eos, or pack with --pack ffd"
        )


def build_pack(out: str, settings: PackSettings, *, overwrite: bool = False) -> dict:
    """Write ``OUT/packs/<L>/`` for a finished output and return its ``pack.json``; refuses an existing pack unless
    ``overwrite``."""
    manifest = load_manifest(out)
    check_packable(out, manifest, settings)
    final = pack_dir(out, settings.length)
    if exists(final) and not overwrite:
        raise OutputError(
            f"{final} exists: a pack of length {settings.length} was made already; pass --overwrite to make it again"
        )
    tmp = join(out, PACK_DIR, f".tmp-{settings.length}-{uuid.uuid4().hex[:12]}")
    try:
        summary = _write_pack(out, manifest, settings, tmp)
        if exists(final):
            remove(final)
        fs, path = fsspec.core.url_to_fs(tmp)
        fs.mv(path, fsspec.core.url_to_fs(final)[1], recursive=True)
    except BaseException:
        remove(tmp)
        raise
    return summary


def _shard_docs(out: str, manifest: dict, shard: dict) -> tuple[list[str], list[np.ndarray]]:
    docs = list(iter_shard(out, shard, manifest["settings"]["shard_format"]))
    return [d for d, _ in docs], [ids for _, ids in docs]


def _write_pack(out: str, manifest: dict, settings: PackSettings, tmp: str) -> dict:
    L, files, totals = settings.length, [], {"pieces": 0, "documents": 0, "tokens": 0, "cut": 0}
    stream, seq = 0, 0  # concat: the next token's place in the whole stream; ffd: the next sequence number
    for i, shard in enumerate(manifest["shards"]):
        doc_ids, ids = _shard_docs(out, manifest, shard)
        lengths = np.fromiter((a.size for a in ids), dtype=np.int64, count=len(ids))
        if settings.method == "concat":
            cols = concat_rows(shard=i, lengths=lengths, start=stream, length=L)
        else:
            first = seq
            cols, cut, seq = ffd_rows(shard=i, lengths=lengths, first_seq=seq, length=L)
            if manifest["settings"].get("shuffle") is not None:  # --shuffle: the shard's sequences in seeded order
                cols = shuffle_sequences(cols, manifest["settings"]["shuffle"], i, first, seq)
            totals["cut"] += cut
        stream += int(lengths.sum())
        totals["documents"] += len(ids)
        totals["pieces"] += cols["seq"].size
        files.append(_write_index(tmp, i, _index_table(cols, doc_ids)))
    sequences = -(-stream // L) if settings.method == "concat" else seq
    summary = {
        "kind": "beam-bpe pack",
        "length": L,
        "method": settings.method,
        "window": FFD_WINDOW if settings.method == "ffd" else None,
        "sequences": sequences,
        "pieces": totals["pieces"],
        "documents": totals["documents"],
        "documents_cut": totals["cut"],
        "tokens": stream,
        "padding": sequences * L - stream,
        "files": files,
    }
    if settings.rows:
        summary["sequence_rows"] = _write_rows(out, tmp, files, len(manifest["shards"]))
    write_atomic(join(tmp, PACK_MANIFEST), (json.dumps(summary, indent=2, sort_keys=True) + "\n").encode())
    write_atomic(join(tmp, COMPLETED), b"")
    return summary


def _index_table(cols: dict[str, np.ndarray], doc_ids: list[str]) -> pa.Table:
    return pa.table(
        {
            "seq": cols["seq"],
            "shard": cols["shard"],
            "offset": cols["offset"],
            "length": cols["length"].astype(np.int32),
            "doc_id": pa.array([doc_ids[d] for d in cols["doc"].tolist()], pa.string()),
            "doc_offset": cols["doc_offset"],
        },
        schema=INDEX_SCHEMA,
    )


def _write_index(tmp: str, i: int, table: pa.Table) -> dict:
    name = f"index-{i:05d}.parquet"
    return {"name": name, "rows": table.num_rows, **_write_table(join(tmp, name), table)}


def _write_table(path: str, table: pa.Table) -> dict:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    data = sink.getvalue().to_pybytes()
    write_atomic(path, data)
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _write_rows(out: str, tmp: str, files: list[dict], n_shards: int) -> list[dict]:
    """``rows-NNNNN.parquet``: one row per sequence (``input_ids``, ``doc_starts``), each sequence in the file of the
    shard where it starts, one file's rows in memory at a time."""
    written, ids, starts, owner = [], [], [], 0
    tables = (_read_table(join(tmp, f["name"])) for f in files)

    def flush(upto: int) -> None:
        nonlocal ids, starts, owner
        while owner < upto:
            name = f"rows-{owner:05d}.parquet"
            table = pa.table({"input_ids": pa.array(ids, pa.list_(pa.int64())) if not ids else pa.array(ids),
                              "doc_starts": pa.array(starts, pa.list_(pa.int32()))})  # fmt: skip
            written.append({"name": name, "rows": table.num_rows, **_write_table(join(tmp, name), table)})
            ids, starts, owner = [], [], owner + 1

    for first_shard, seq_ids, doc_starts in _sequences_of(_ShardTokens(out), tables):
        flush(first_shard)
        ids.append(seq_ids)
        starts.append(doc_starts)
    flush(n_shards)
    return written


def _read_table(path: str) -> pa.Table:
    with fsspec.open(path, "rb") as f:
        return pq.read_table(f, use_threads=False, pre_buffer=False)  # no Arrow threads (corpus/formats/parquet.py)


class _ShardTokens:
    """The token stream of each shard of a finished output, one or two shards in memory (a concat sequence may span
    a shard's end)."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.manifest = load_manifest(out)
        self.cache: dict[int, np.ndarray] = {}

    def slice(self, shard: int, offset: int, length: int) -> np.ndarray:
        if shard not in self.cache:
            if len(self.cache) >= 2:
                del self.cache[min(self.cache)]
            entry = self.manifest["shards"][shard]
            docs = [ids for _, ids in iter_shard(self.out, entry, self.manifest["settings"]["shard_format"])]
            self.cache[shard] = np.concatenate(docs) if docs else np.zeros(0, dtype=np.uint32)
        tokens = self.cache[shard]
        if offset + length > tokens.size:
            raise ShardFileError(f"{self.out}: a pack row reads past the end of shard {shard}: the pack is stale")
        return tokens[offset : offset + length]


def _sequences_of(tokens: _ShardTokens, tables) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(the shard where it starts, ids, doc_starts) of each sequence, from index tables in order."""
    current, first, parts, starts, filled = None, 0, [], [], 0
    for table in tables:
        cols = {name: table.column(name).to_numpy() for name in ("seq", "shard", "offset", "length", "doc_offset")}
        for k in range(table.num_rows):
            s = int(cols["seq"][k])
            if s != current:
                if current is not None:
                    yield first, _joined(parts), np.asarray(starts, dtype=np.int32)
                parts, starts, filled, first = [], [], 0, int(cols["shard"][k])
            current = s
            if cols["doc_offset"][k] == 0:
                starts.append(filled)
            n = int(cols["length"][k])
            parts.append(tokens.slice(int(cols["shard"][k]), int(cols["offset"][k]), n))
            filled += n
    if current is not None:
        yield first, _joined(parts), np.asarray(starts, dtype=np.int32)


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if len(parts) != 1 else parts[0].copy()


def load_pack(out: str, length: int) -> dict:
    """The ``pack.json`` of a finished pack; an absent or unfinished one raises ShardFileError."""
    folder = pack_dir(out, length)
    if not exists(join(folder, COMPLETED)):
        raise ShardFileError(f"{folder} holds no finished pack: run `beam-bpe pack {out} --length {length}`")
    return json.loads(read_bytes(join(folder, PACK_MANIFEST)))


def iter_sequences(out: str, length: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Each packed sequence of ``OUT/packs/<length>/`` in order, as ``(ids, doc_starts)`` NumPy arrays."""
    pack = load_pack(out, length)
    folder = pack_dir(out, length)
    tables = (_read_table(join(folder, f["name"])) for f in pack["files"])
    for _, ids, doc_starts in _sequences_of(_ShardTokens(out), tables):
        yield ids, doc_starts


def pack_names(out: str) -> list[int]:
    """The lengths of the finished packs of an output."""
    fs, path = fsspec.core.url_to_fs(join(out, PACK_DIR))
    if not fs.exists(path):
        return []
    names = [posixpath.basename(p.rstrip("/")) for p in fs.ls(path, detail=False)]
    return sorted(int(n) for n in names if n.isdigit() and exists(join(out, PACK_DIR, n, COMPLETED)))


def pack_receipts(out: str, manifest: dict) -> tuple[dict[str, dict], list[str]]:
    """For ``beam-bpe verify``: every file of every finished pack with its recorded size and sha256 (names relative
    to ``out``), and the problems found in the packs' own records (totals that disagree with the output's)."""
    files: dict[str, dict] = {}
    problems = []
    for length in pack_names(out):
        pack = load_pack(out, length)
        base = f"{PACK_DIR}/{length}"
        for entry in [*pack["files"], *pack.get("sequence_rows", [])]:
            files[f"{base}/{entry['name']}"] = {"bytes": entry["bytes"], "sha256": entry["sha256"]}
        for key, want in (("documents", manifest.get("documents_written")), ("tokens", manifest.get("tokens"))):
            if want is not None and pack.get(key) != want:
                problems.append(f"{base}/{PACK_MANIFEST}: {key} {pack.get(key)}, the output holds {want}")
        if len(pack["files"]) != len(manifest["shards"]):
            problems.append(
                f"{base}/{PACK_MANIFEST}: {len(pack['files'])} index files for {len(manifest['shards'])} shards"
            )
    return files, problems
