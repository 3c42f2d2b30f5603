"""``--shard-format datatrove``: datatrove's tokenized files (what nanotron reads): ``.ds`` ids, ``.ds.index``
document ends, ``.ds.metadata``.

As ``datatrove.pipeline.tokens.tokenizer.DocumentTokenizer`` writes them with ``shuffle_documents=False`` and an
``eos_token`` (datatrove 0.10, ``TokenizedFile``)::

    {name}.ds           the ids of every document back to back, each document followed by the EOS id;
                        little-endian uint16, or uint32 when the vocabulary has more than 65,536 ids
    {name}.ds.index     uint64 little-endian: the end of each document, in tokens from the file's start
    {name}.ds.metadata  three lines, no final newline: "{tokenizer name}|{bytes per id}", the token count, and
                        the count as humanize.metric(count, unit="T") writes it ("1.23 MT")

Read back by ``datatrove.utils.dataset.DatatroveFileDataset`` (and nanotron's datatrove loader).

>>> with DatatroveWriter("out/tokens-00000-of-00001", n_vocab=50257, eos_id=50256) as w:  # doctest: +SKIP
...     w.write(ids, offsets)
>>> w.files  # doctest: +SKIP
{'tokens-00000-of-00001.ds': {'bytes': ..., 'sha256': ...}, ...}
"""

from __future__ import annotations

import humanize
import numpy as np

from pipeline.encode.formats.base import (
    FileShardWriter,
    ShardFormat,
    check_batch,
    check_token_id,
    eos_after_each,
    id_dtype,
    layout_n_vocab,
    narrow_dtype,
)

SUFFIXES = (".ds", ".ds.index", ".ds.metadata")


def metadata_text(tokenizer_name: str, token_size: int, tokens: int) -> str:
    return "\n".join(
        [
            f"{tokenizer_name or 'Unknown Tokenizer|' + str(token_size)}|{token_size}",
            str(tokens),
            humanize.metric(tokens, unit="T"),
        ]
    )


class DatatroveWriter(FileShardWriter):
    """Stream document batches into ``{prefix}.ds``, ``.ds.index`` and ``.ds.metadata``.

    ``eos_id`` is written after every document (datatrove's ``eos_token``); None writes the documents as given
    (when the ids already end with it). ``tokenizer_name`` goes into the metadata, as datatrove's
    ``tokenizer_name_or_path`` does.
    """

    def __init__(self, prefix: str, *, n_vocab: int, eos_id: int | None, tokenizer_name: str = "") -> None:
        self.prefix, self.n_vocab, self.tokenizer_name = prefix, n_vocab, tokenizer_name
        self.eos_id = check_token_id("eos_id", eos_id, n_vocab)
        self.dtype = id_dtype(n_vocab)
        self.tokens = 0
        self.documents = 0
        super().__init__(prefix + ".ds", prefix + ".ds.index")
        self._ds, self._index = self.streams

    def write(self, ids, offsets, doc_ids=None, sources=None) -> None:
        """Append a batch of documents (``doc_ids`` and ``sources`` are accepted for the common interface: datatrove's
        files do not hold them)."""
        ids, offsets = check_batch(ids, offsets, self.n_vocab, doc_ids=doc_ids, sources=sources)
        ends = offsets[1:]
        values = ids.astype(self.dtype, copy=False)
        if self.eos_id is not None:
            values = np.insert(values, ends, np.asarray(self.eos_id, self.dtype))
            ends = ends + np.arange(1, ends.size + 1)
        self._ds.write(np.ascontiguousarray(values, self.dtype).tobytes())
        self._index.write((ends + self.tokens).astype("<u8").tobytes())
        self.tokens += int(values.size)
        self.documents += int(ends.size)

    def _finish(self) -> None:
        meta = self._open(self.prefix + ".ds.metadata")
        meta.write(metadata_text(self.tokenizer_name, self.dtype.itemsize, self.tokens).encode("utf-8"))


class DatatroveShardWriter(DatatroveWriter):
    """The writer of ``--shard-format datatrove`` (``FORMAT`` below): the encode stage has
    already put the EOS after each document (the job's policy), so the ids are written as they come; the metadata
    names the tokenizer by its digest (datatrove's merger splits that line at its one ``|``)."""

    wants: tuple[str, ...] = ()  # nothing but the ids

    def __init__(self, prefix: str, layout) -> None:
        name = f"beam-bpe:{layout.tokenizer_digest[:16]}" if layout.tokenizer_digest else "beam-bpe"
        super().__init__(prefix, n_vocab=layout_n_vocab(layout), eos_id=None, tokenizer_name=name)


class DatatroveReader:
    """The documents of a ``.ds`` file from its ``.ds.index``, with the token size from ``.ds.metadata``."""

    def __init__(self, prefix: str) -> None:
        import fsspec

        with fsspec.open(prefix + ".ds.metadata", "rt", encoding="utf-8") as f:
            first, count, _ = f.read().split("\n")
        self.token_size = int(first.rpartition("|")[2])
        with fsspec.open(prefix + ".ds.index", "rb") as f:
            self.ends = np.frombuffer(f.read(), "<u8").astype(np.int64)
        with fsspec.open(prefix + ".ds", "rb") as f:
            self.ids = np.frombuffer(f.read(), "<u2" if self.token_size == 2 else "<u4")
        if self.ids.size != int(count) or (self.ends.size and self.ends[-1] != self.ids.size):
            raise ValueError(
                f"{prefix}.ds holds {self.ids.size} ids; its metadata says {count}, its index ends at {self.ends[-1:]}"
            )

    def __len__(self) -> int:
        return int(self.ends.size)

    def __getitem__(self, i: int) -> np.ndarray:
        start = int(self.ends[i - 1]) if i > 0 else 0
        return self.ids[start : int(self.ends[i])]


FORMAT = ShardFormat(
    name="datatrove",
    label="datatrove (.ds, nanotron)",
    suffixes=SUFFIXES,
    dtype=narrow_dtype,
    writer=DatatroveShardWriter,
    separators=eos_after_each,
    separator_help="an EOS after each document",
)
