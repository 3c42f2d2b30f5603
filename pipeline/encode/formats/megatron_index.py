"""The Megatron-LM indexed dataset on disk (the ``MMIDIDX`` format, version 1): the ``.idx`` index, parsed and
built, and a reader of ``.bin``/``.idx`` pairs. The bottom of the megatron shard format: ``megatron.py`` (the
writer, the reader of a shard's ids, ``megatron_data_path.txt``) and ``megatron_merge.py`` (``--merge``) both build
on it, and it imports neither (no import circle). No Beam.

``.bin`` holds the tokens of every sequence back to back. ``.idx`` holds::

    b"MMIDIDX\\x00\\x00"   9 bytes
    version             uint64 little-endian, 1
    dtype code          uint8 (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16)
    sequence count      uint64
    document count      uint64 (one more than the documents: document indices start with 0)
    sequence lengths    int32[sequence count]
    sequence pointers   int64[sequence count], byte offsets into .bin
    document indices    int64[document count], the sequence index ending each document: 0, 1, ..., n here

This is what ``megatron.core.datasets.indexed_dataset`` (megatron-core 0.16) writes and reads; we write one
sequence per document. Token dtype: uint16 when the vocabulary has fewer than 65,500 ids, else int32 (Megatron's
``DType.optimal_dtype``).

>>> index = MegatronIndex.from_lengths(np.uint16, [3, 0, 2])
>>> MegatronIndex.from_bytes(index.to_bytes()).pointers.tolist()
[0, 6, 6]
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import fsspec
import numpy as np

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
