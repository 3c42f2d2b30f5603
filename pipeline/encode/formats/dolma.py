"""``--shard-format npy``: dolma's / OLMo's token memmaps: ``.npy`` raw ids and ``.csv.gz`` document metadata, as
``dolma tokens`` writes.

As ``dolma.tokenizer.memmap_writer.MemmapWriter`` and ``dolma.tokenizer.tokenizer.Tokenizer.add_special_tokens``
write them (dolma 1.2)::

    {name}.npy     the ids of every document back to back, no header (a raw ``np.memmap``), each document followed
                   by the EOS id unless it already ends with it; dtype ``np.min_scalar_type(vocab_size - 1)``
                   (``dolma tokens --dtype`` must equal it): uint16, uint32 above 65,536 ids, uint8 for 256 ids
    {name}.csv.gz  one CSV row per document (Python's ``csv.writer``: CRLF line ends, minimal quoting):
                   ``start,end,id,src,loc``, start and end in tokens (EOS included) from the file's start

OLMo (``olmo_core.data.NumpyFSLDataset``, OLMo's ``MemMapDataset``) maps the ``.npy`` with ``np.memmap(path,
dtype)`` and cuts it into sequences. dolma's gzip stream records the time it was written; ours records none, so a
rerun is byte-identical (the decompressed text is dolma's byte for byte). dolma itself skips documents that are
empty after ``str.strip()``; here every document the encode job keeps is written, an empty one as a lone EOS.

>>> with DolmaWriter("out/tokens-00000-of-00001", n_vocab=50257, eos_id=50256) as w:  # doctest: +SKIP
...     w.write(ids, offsets, doc_ids=["a.jsonl@0"], sources=["a.jsonl"], positions=[0])
"""

from __future__ import annotations

import csv
import functools
import gzip
import io
import itertools
from collections.abc import Iterator

import numpy as np

from pipeline.encode.formats.base import (
    FileShardWriter,
    ShardFormat,
    check_batch,
    check_token_id,
    eos_after_each,
    id_dtype,
    layout_n_vocab,
)
from pipeline.errors import ShardFileError

SUFFIXES = (".npy", ".csv.gz")


def memmap_dtype(n_vocab: int) -> np.dtype:
    """dolma's id dtype, ``np.min_scalar_type(vocab_size - 1)``, little-endian.

    >>> [memmap_dtype(n).name for n in (256, 50257, 65536, 65537)]
    ['uint8', 'uint16', 'uint16', 'uint32']
    """
    id_dtype(n_vocab)  # checks n_vocab
    return np.dtype(np.min_scalar_type(n_vocab - 1)).newbyteorder("<")


class DolmaWriter(FileShardWriter):
    """Stream document batches into ``{prefix}.npy`` and ``{prefix}.csv.gz``.

    Each batch brings the documents' ``doc_ids``, ``sources`` and ``positions`` (dolma's ``id``, ``src`` and
    ``loc``: here the document id, its input file and its byte offset or row).
    """

    def __init__(self, prefix: str, *, n_vocab: int, eos_id: int | None) -> None:
        self.prefix, self.n_vocab = prefix, n_vocab
        self.eos_id = check_token_id("eos_id", eos_id, n_vocab)
        self.dtype = memmap_dtype(n_vocab)
        self.tokens = 0
        self.documents = 0
        super().__init__(prefix + ".npy", prefix + ".csv.gz")
        self._npy = self.streams[0]
        self._gzip = gzip.GzipFile(filename="", mode="wb", fileobj=self.streams[1], mtime=0)

    def write(self, ids, offsets, doc_ids=None, sources=None, positions=None) -> None:
        """Append a batch; ``doc_ids``, ``sources`` and ``positions`` (dolma's ``id``, ``src``, ``loc``) are lists or
        arrays of one value per document."""
        ids, offsets = check_batch(ids, offsets, self.n_vocab, doc_ids=doc_ids, sources=sources, positions=positions)
        if doc_ids is None or sources is None or positions is None:
            raise ShardFileError("dolma's metadata needs doc_ids, sources and positions for every document")
        doc_ids, sources, positions = (_values(c) for c in (doc_ids, sources, positions))
        values = ids.astype(self.dtype, copy=False)
        lengths = np.diff(offsets)
        if self.eos_id is not None:
            # add_special_tokens: an EOS after each document that does not end with one already
            ends_with_eos = np.zeros(lengths.size, dtype=bool)
            nonempty = lengths > 0
            ends_with_eos[nonempty] = values[offsets[1:][nonempty] - 1] == self.eos_id
            need = ~ends_with_eos
            values = np.insert(values, offsets[1:][need], np.asarray(self.eos_id, self.dtype))
            lengths = lengths + need
        ends = np.cumsum(lengths) + self.tokens
        starts = ends - lengths
        self._npy.write(np.ascontiguousarray(values, self.dtype).tobytes())
        rows = io.StringIO(newline="")
        csv.writer(rows).writerows(zip(starts.tolist(), ends.tolist(), doc_ids, sources, positions, strict=True))
        self._gzip.write(rows.getvalue().encode("utf-8"))
        self.tokens += int(values.size)
        self.documents += int(lengths.size)

    def _finish(self) -> None:
        self._gzip.close()  # writes the gzip trailer; the file itself is closed (renamed) by the base


class DolmaShardWriter(DolmaWriter):
    """The writer of ``--shard-format npy`` (``FORMAT`` below): the encode stage has
    already put the EOS after each document (the job's policy); ``id`` is the document id (``path@offset``,
    ``path#row``), ``src`` the input file, ``loc`` the byte offset or row."""

    wants: tuple[str, ...] = ("doc_ids", "sources", "positions")

    def __init__(self, prefix: str, layout) -> None:
        super().__init__(prefix, n_vocab=layout_n_vocab(layout), eos_id=None)
        self.dtype = np.dtype(layout.dtype).newbyteorder("<")  # the job chose memmap_dtype(n_vocab)


def _values(column) -> list:
    """Python values of a list, a NumPy array or an Arrow array."""
    if hasattr(column, "to_pylist"):
        return column.to_pylist()
    if isinstance(column, np.ndarray):
        return column.tolist()
    return list(column)


def read_metadata(path: str) -> list[tuple[int, int, str, str, str]]:
    """The rows of a ``.csv.gz``: (start, end, id, src, loc), as OLMo's tools read it."""
    import fsspec

    with fsspec.open(path, "rb") as f:
        text = gzip.decompress(f.read()).decode("utf-8")
    return [(int(r[0]), int(r[1]), r[2], r[3], r[4]) for r in csv.reader(io.StringIO(text, newline=""))]


def read_ids(path: str, n_vocab: int) -> np.ndarray:
    """The ``.npy`` memmap's ids (a raw ``np.memmap``, as OLMo maps it); an empty file gives no id."""
    import os

    if os.path.getsize(path) == 0:
        return np.zeros(0, memmap_dtype(n_vocab))
    return np.memmap(path, dtype=memmap_dtype(n_vocab), mode="r")


def read_dolma_shard(prefix: str, shard: dict) -> Iterator[tuple[str, np.ndarray]]:
    """(doc_id, ids) of one shard, in order: the document ids are in the .csv.gz; the id width is the file's size
    per token."""
    from pipeline.storage.files import read_bytes

    rows = read_metadata(prefix + ".csv.gz")
    data = read_bytes(prefix + ".npy")
    ids = np.frombuffer(data, f"<u{len(data) // rows[-1][1]}") if rows and rows[-1][1] else np.zeros(0, "<u2")
    for start, end, doc_id, _, _ in rows:
        yield doc_id, ids[start:end]


def dolma_doc_batches(prefix: str, shard: dict, size: int = 65536):
    """Per ``size`` documents: their ids, streamed from the ``.csv.gz``, and a loader of their ids read from the
    ``.npy`` by offset (``beam-bpe verify``: the memory of one batch, not of the shard)."""
    import fsspec
    import pyarrow as pa

    with fsspec.open(prefix + ".csv.gz", "rb") as raw, gzip.open(raw, "rt", encoding="utf-8", newline="") as text:
        rows = csv.reader(text)
        while batch := [(int(r[0]), int(r[1]), r[2]) for r in itertools.islice(rows, size)]:
            yield pa.array([r[2] for r in batch], pa.string()), functools.partial(_npy_slice, prefix, shard, batch)


def _npy_slice(prefix: str, shard: dict, batch: list) -> tuple[np.ndarray, np.ndarray]:
    import fsspec

    fs, path = fsspec.core.url_to_fs(prefix + ".npy")
    width = fs.size(path) // shard["tokens"] if shard.get("tokens") else 2
    first, last = batch[0][0], max(r[1] for r in batch)
    with fs.open(path, "rb") as f:
        f.seek(first * width)
        ids = np.frombuffer(f.read((last - first) * width), f"<u{width}")
    if all(a[1] == b[0] for a, b in zip(batch, batch[1:], strict=False)):  # back to back, as the writer puts them
        return ids, np.array([r[0] for r in batch] + [batch[-1][1]], dtype=np.int64) - first
    parts = [ids[start - first : end - first] for start, end, _ in batch]
    return np.concatenate(parts), np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)


FORMAT = ShardFormat(
    name="npy",
    label="npy (dolma/OLMo memmap)",
    suffixes=SUFFIXES,
    dtype=lambda n_vocab: memmap_dtype(n_vocab).name,  # uint8 for 256 ids, as dolma chooses
    writer=DolmaShardWriter,
    reader=read_dolma_shard,
    doc_batches=dolma_doc_batches,
    separators=eos_after_each,
    separator_help="an EOS after each document",
)
