"""``--shard-format megatron``: Megatron-LM indexed datasets (``.bin`` + ``.idx`` + ``.positions.npy``), written,
read back with their document ids, and named in ``megatron_data_path.txt``. The on-disk index and the pair reader are
``megatron_index.py``; ``--merge`` is ``megatron_merge.py``; this module imports both, neither imports it. No Beam.

Beside each pair, ``{name}.positions.npy`` (int64): the byte offset or row of each document, which gives back its id.
We write one sequence per document.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import fsspec
import numpy as np

from pipeline.corpus.records import document_id
from pipeline.encode.formats import megatron_merge
from pipeline.encode.formats.base import FileShardWriter, ShardFormat
from pipeline.encode.formats.megatron_index import MegatronIndex, MegatronReader, token_dtype
from pipeline.encode.streams import write_file

DATA_PATH = "megatron_data_path.txt"
MERGED_SUFFIXES = megatron_merge.SUFFIXES  # --merge: {prefix}.bin and {prefix}.idx


# ------------------------------------------------------------------ the shard format
class MegatronShardWriter(FileShardWriter):
    """``{prefix}.bin`` streamed from the flat ids, then ``{prefix}.idx`` and ``{prefix}.positions.npy`` from the
    lengths and positions kept meanwhile (12 bytes per document)."""

    wants = ("positions",)

    def __init__(self, prefix: str, layout) -> None:
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
        self._open(self.prefix + ".idx").write(MegatronIndex.from_lengths(self.dtype.type, lengths).to_bytes())
        positions = np.concatenate(self._positions) if self._positions else np.zeros(0, np.int64)
        self._open(self.prefix + ".positions.npy").write(_npy(positions))


def _npy(array: np.ndarray) -> bytes:
    sink = io.BytesIO()
    np.save(sink, np.ascontiguousarray(array, dtype="<i8"), allow_pickle=False)
    return sink.getvalue()


def read_megatron_shard(prefix: str, shard: dict) -> Iterator[tuple[str, np.ndarray]]:
    """(doc_id, ids) of one shard, in order: the ids from the pair, the ids of the documents from the positions and
    the manifest's ranges."""
    reader = MegatronReader(prefix)
    with fsspec.open(prefix + ".positions.npy", "rb") as f:
        positions = np.load(io.BytesIO(f.read()), allow_pickle=False).tolist()
    sources = [f["source"] for r in shard["ranges"] for f in _range_files(r) for _ in range(f["documents"])]
    for position, source, ids in zip(positions, sources, reader, strict=True):
        yield document_id(source, shard["position_kind"], position), ids


def _range_files(entry: dict) -> list[dict]:
    """The files of a range's manifest entry, with their documents (several for a range of small files)."""
    files = entry.get("sources")
    if not files:
        return [entry]
    return [{"source": p, "documents": d} for p, d in zip(files["paths"], files["documents"], strict=True)]


def write_data_path(layout, manifest: dict) -> None:
    """``megatron_data_path.txt``: ``weight prefix weight prefix ...`` on one line, the weights the shards' token
    counts, for Megatron-LM's ``--data-path`` (paste the line) or ``--data-args-path FILE`` (which reads
    ``f.read().split()`` into ``get_blend_from_list``). Shards without a document are left out (an empty dataset
    has nothing to sample); prefixes are absolute, so the file works from any directory. With ``--merge``: the one
    merged prefix and its token count."""
    merged = manifest.get("merged")
    if merged is not None:
        pairs = [f"{merged['tokens']} {layout.path(merged['prefix'])}"] if merged["documents"] else []
    else:
        pairs = [f"{s['tokens']} {layout.path(s['name'])}" for s in manifest["shards"] if s["documents"]]
    write_file(layout.path(DATA_PATH), (" ".join(pairs) + "\n").encode())


def output_files(prefix: str) -> tuple[str, ...]:
    """What a megatron job writes in ``--out`` beside its shards: the data-path file and the merged pair."""
    return (DATA_PATH, *(prefix + suffix for suffix in MERGED_SUFFIXES))


FORMAT = ShardFormat(
    name="megatron",
    label="megatron (.bin/.idx)",
    suffixes=(".bin", ".idx", ".positions.npy"),
    dtype=lambda n_vocab: np.dtype(token_dtype(n_vocab)).name,
    writer=MegatronShardWriter,
    reader=read_megatron_shard,
    merge=megatron_merge.merge_shards,
    finish=write_data_path,
    output_files=output_files,
)
