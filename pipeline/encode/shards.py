"""One shard's files: written from its part files with its format's writer, its dead letters, its stats file.

A shard is complete when its stats file (``_shards/{name}.json``) is there: it is written last, after the data files
and the dead letters, names every file with its size and sha256 and carries the job's fingerprint. No Beam here.
"""

from __future__ import annotations

import json
import posixpath

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.corpus.records import document_id
from pipeline.encode.layout import DEAD_DIR, ShardLayout
from pipeline.encode.parts import read_part
from pipeline.encode.streams import write_file
from pipeline.storage.files import read_bytes


def write_shard(layout: ShardLayout, index: int, parts: list[tuple[str, tuple, str]]) -> dict:
    """Stream the part files ``(path, source runs, position_kind)``, in order, into shard ``index`` with its
    format's writer; return ``{file: {bytes, sha256}}``. The runs are ``((source, source_index, documents, ...),
    ...)``: one run for a part of one file."""
    writer_class = layout.format.writer
    with writer_class(layout.path(layout.name(index)), layout) as writer:
        for path, runs, kind in parts:
            # documents named relative to the inputs' root: a portable output
            sources = [(layout.relative(run[0]), run[2]) for run in runs]
            table = read_part(path)
            tokens = table.column("tokens").combine_chunks()
            ids = tokens.values.to_numpy(zero_copy_only=False)
            offsets = tokens.offsets.to_numpy().astype(np.int64, copy=False)
            positions = table.column("position").combine_chunks()
            writer.write(ids, offsets, **{name: _column(name, sources, kind, positions) for name in writer.wants})
    return writer.close()  # already closed by the with block: the same stats


def document_ids(source: str, kind: str, positions) -> pa.Array:
    """``document_id`` of every position, as one Arrow string column (computed by Arrow, not per document)."""
    prefix = document_id(source, kind, 0)[:-1]
    return pc.binary_join_element_wise(pa.scalar(prefix), pc.cast(positions, pa.string()), "")


def _column(name: str, sources: list[tuple[str, int]], kind: str, positions: pa.Array):
    if name == "doc_ids":
        if len(sources) == 1:
            return document_ids(sources[0][0], kind, positions)
        # a part of many small files: one prefix per file, repeated per document, joined in one Arrow call
        prefixes = pa.array([document_id(s, kind, 0)[:-1] for s, _ in sources], pa.string())
        owner = np.repeat(np.arange(len(sources)), [n for _, n in sources])
        return pc.binary_join_element_wise(prefixes.take(pa.array(owner)), pc.cast(positions, pa.string()), "")
    if name == "sources":
        return [s for s, n in sources for _ in range(n)]
    return positions.to_numpy()


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
        stats = json.loads(read_bytes(layout.stats_path(index)))
    except FileNotFoundError:
        return None
    return stats if stats.get("fingerprint") == layout.fingerprint else None
