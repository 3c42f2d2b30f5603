"""``--shard-format megatron``: Megatron-LM indexed datasets (``.bin`` + ``.idx``, the ``MMIDIDX`` format, version
1), written, read, and named in ``megatron_data_path.txt``; ``--merge`` is ``megatron_merge.py``. No Beam.

``.bin`` holds the tokens of every sequence back to back. ``.idx`` holds::

    b"MMIDIDX\\x00\\x00"   9 bytes
    version             uint64 little-endian, 1
    dtype code          uint8 (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16)
    sequence count      uint64
    document count      uint64 (one more than the documents: document indices start with 0)
    sequence lengths    int32[sequence count]
    sequence pointers   int64[sequence count], byte offsets into .bin
    document indices    int64[document count], the sequence index ending each document: 0, 1, ..., n here

Beside them, ``{name}.positions.npy`` (int64): the byte offset or row of each document, which gives back its id.
This is what ``megatron.core.datasets.indexed_dataset`` (megatron-core 0.16) writes and reads; we write one
sequence per document. Token dtype: uint16 when the vocabulary has fewer than 65,500 ids, else int32 (Megatron's
``DType.optimal_dtype``).

>>> index = MegatronIndex.from_lengths(np.uint16, [3, 0, 2])
>>> MegatronIndex.from_bytes(index.to_bytes()).pointers.tolist()
[0, 6, 6]
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import fsspec
import numpy as np

from pipeline.corpus.records import document_id
from pipeline.encode.formats.base import FileShardWriter, ShardFormat
from pipeline.encode.streams import write_file
from pipeline.errors import ShardFileError

HEADER = b"MMIDIDX\x00\x00"
VERSION = 1
DTYPE_CODES = {
    np.uint8: 1,
    np.int8: 2,
    np.int16: 3,
    np.int32: 4,
    np.int64: 5,
    np.float64: 6,
    np.float32: 7,
    np.uint16: 8,
}
CODE_DTYPES = {code: dtype for dtype, code in DTYPE_CODES.items()}
UINT16_LIMIT = 65500  # Megatron's threshold (not 65536): keep to it so that its own tools agree with our files
DATA_PATH = "megatron_data_path.txt"
MERGED_SUFFIXES = (".bin", ".idx")  # --merge: {prefix}.bin and {prefix}.idx


def token_dtype(n_vocab: int) -> type[np.number]:
    """The ``.bin`` dtype for a vocabulary: uint16 below 65,500 ids, else int32 (as Megatron chooses).

    >>> token_dtype(50257).__name__, token_dtype(100277).__name__
    ('uint16', 'int32')
    """
    return np.uint16 if n_vocab < UINT16_LIMIT else np.int32


@dataclass(frozen=True)
class MegatronIndex:
    """The contents of a ``.idx`` file."""

    dtype: type[np.number]
    lengths: np.ndarray  # int32, tokens per sequence
    pointers: np.ndarray  # int64, byte offset of each sequence in .bin
    document_indices: np.ndarray  # int64, 0 then the sequence index ending each document

    @classmethod
    def from_lengths(cls, dtype: type[np.number], lengths) -> MegatronIndex:
        """The index of one sequence per document, for sequences of ``lengths`` tokens stored back to back."""
        lengths = np.asarray(lengths, dtype=np.int64)
        if lengths.size and (lengths.min() < 0 or lengths.max() > np.iinfo(np.int32).max):
            raise ShardFileError(f"sequence lengths must lie in [0, 2**31): got {lengths.min()}..{lengths.max()}")
        itemsize = np.dtype(dtype).itemsize
        pointers = np.zeros(lengths.size, dtype=np.int64)
        if lengths.size > 1:
            np.cumsum(lengths[:-1] * itemsize, out=pointers[1:])
        documents = np.arange(lengths.size + 1, dtype=np.int64)
        return cls(dtype, lengths.astype(np.int32), pointers, documents)

    @property
    def num_tokens(self) -> int:
        return int(self.lengths.sum(dtype=np.int64))

    def to_bytes(self) -> bytes:
        if self.dtype not in DTYPE_CODES:
            raise ShardFileError(
                f"dtype {self.dtype} has no Megatron code; use one of {sorted(d.__name__ for d in DTYPE_CODES)}"
            )
        head = HEADER + struct.pack(
            "<QBQQ", VERSION, DTYPE_CODES[self.dtype], self.lengths.size, self.document_indices.size
        )
        parts = (self.lengths.astype("<i4"), self.pointers.astype("<i8"), self.document_indices.astype("<i8"))
        return head + b"".join(p.tobytes() for p in parts)

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<idx>") -> MegatronIndex:
        """Parse a ``.idx`` file; a wrong header, version, dtype code or size raises ShardFileError."""
        fixed = len(HEADER) + struct.calcsize("<QBQQ")
        if len(data) < fixed or not data.startswith(HEADER):
            raise ShardFileError(f"{name}: not a Megatron index (the file does not start with {HEADER!r})")
        version, code, sequences, documents = struct.unpack_from("<QBQQ", data, len(HEADER))
        if version != VERSION:
            raise ShardFileError(f"{name}: index version {version} is not supported (only {VERSION})")
        if code not in CODE_DTYPES:
            raise ShardFileError(f"{name}: unknown dtype code {code}")
        expected = fixed + 12 * sequences + 8 * documents
        if len(data) < expected:
            raise ShardFileError(f"{name}: truncated: {len(data)} bytes, the header announces {expected}")
        lengths = np.frombuffer(data, "<i4", sequences, fixed)
        pointers = np.frombuffer(data, "<i8", sequences, fixed + 4 * sequences)
        document_indices = np.frombuffer(data, "<i8", documents, fixed + 12 * sequences)
        return cls(CODE_DTYPES[code], lengths, pointers, document_indices)


class MegatronReader:
    """Read the sequences of a ``.bin``/``.idx`` pair (any fsspec URL; the ``.bin`` is read lazily).

    >>> reader = MegatronReader("out/tokens-00000-of-00004")  # doctest: +SKIP
    >>> reader[0]  # the first document's ids, as a numpy array  # doctest: +SKIP
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        with fsspec.open(prefix + ".idx", "rb") as f:
            self.index = MegatronIndex.from_bytes(f.read(), prefix + ".idx")
        self._itemsize = np.dtype(self.index.dtype).itemsize

    def __len__(self) -> int:
        return int(self.index.lengths.size)

    def __getitem__(self, i: int) -> np.ndarray:
        if not 0 <= i < len(self):
            raise IndexError(f"sequence {i} is out of range: {self.prefix} holds {len(self)}")
        count = int(self.index.lengths[i])
        with fsspec.open(self.prefix + ".bin", "rb") as f:
            f.seek(int(self.index.pointers[i]))
            data = f.read(count * self._itemsize)
        if len(data) != count * self._itemsize:
            raise ShardFileError(f"{self.prefix}.bin is truncated: sequence {i} runs past its end")
        return np.frombuffer(data, self.index.dtype)

    def __iter__(self):
        """Every sequence in order, reading the ``.bin`` once."""
        with fsspec.open(self.prefix + ".bin", "rb") as f:
            for count in self.index.lengths.tolist():
                data = f.read(count * self._itemsize)
                if len(data) != count * self._itemsize:
                    raise ShardFileError(f"{self.prefix}.bin is truncated")
                yield np.frombuffer(data, self.index.dtype)


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


def merge_shards(layout, manifest: dict) -> dict:
    """``--merge``: :func:`pipeline.encode.formats.megatron_merge.merge_shards` (which reads this module's index)."""
    from pipeline.encode.formats import megatron_merge

    return megatron_merge.merge_shards(layout, manifest)


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
    merge=merge_shards,
    finish=write_data_path,
    output_files=output_files,
)
