"""``--shard-format llmc``: llm.c's token files: a 256-int32 header, then the ids, the EOT id before each document.

As ``dev/data/data_common.py`` ``write_datafile`` and its callers (``fineweb.py``, ``tinystories.py``) write them::

    header   256 int32, little-endian: magic, version, token count, then zeros
             gpt-2 layout (vocabularies of up to 65,536 ids): magic 20240520, version 1, ids uint16
             llama-3 layout (larger vocabularies):            magic 20240801, version 7, ids uint32
    ids      every document preceded by the EOT id (gpt-2: <|endoftext|>; llama-3: <|begin_of_text|>)

llm.c's ``dataloader.h`` checks the magic and version and reads ``header[2]`` ids; ``write_datafile`` refuses 2**31
ids or more, so does this writer. The count sits in the header, before the ids, so the ids are spooled (in memory up
to 64 MiB, then a temporary file) and the file is written whole, through the atomic writer, at ``close``.

>>> with LlmcWriter("out/tokens-00000-of-00001", n_vocab=50257, eot_id=50256) as w:  # doctest: +SKIP
...     w.write(ids, offsets)
"""

from __future__ import annotations

import shutil
import tempfile

import numpy as np

from pipeline.encode.formats.base import (
    FileShardWriter,
    ShardFormat,
    check_batch,
    check_token_id,
    id_dtype,
    layout_n_vocab,
    narrow_dtype,
)
from pipeline.errors import ShardFileError

SUFFIXES = (".bin",)
HEADER_INTS = 256
LAYOUTS = {2: (20240520, 1), 4: (20240801, 7)}  # bytes per id -> (magic, version)
MAX_TOKENS = 2**31 - 1  # write_datafile: assert len(toks) < 2**31
SPOOL_BYTES = 64 << 20


def header(n_tokens: int, token_size: int) -> bytes:
    magic, version = LAYOUTS[token_size]
    values = np.zeros(HEADER_INTS, dtype="<i4")
    values[:3] = (magic, version, n_tokens)
    return values.tobytes()


class LlmcWriter(FileShardWriter):
    """Stream document batches into ``{prefix}.bin``; ``eot_id`` goes before every document (None: as given)."""

    def __init__(self, prefix: str, *, n_vocab: int, eot_id: int | None) -> None:
        self.prefix, self.n_vocab = prefix, n_vocab
        self.eot_id = check_token_id("eot_id", eot_id, n_vocab)
        self.dtype = id_dtype(n_vocab)
        self.tokens = 0
        self.documents = 0
        super().__init__()  # the one file is opened at close, when its header (the count) is known
        self._spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)

    def write(self, ids, offsets, doc_ids=None, sources=None) -> None:
        """Append a batch of documents (``doc_ids`` and ``sources`` are accepted for the common interface: llm.c's
        files do not hold them)."""
        ids, offsets = check_batch(ids, offsets, self.n_vocab, doc_ids=doc_ids, sources=sources)
        values = ids.astype(self.dtype, copy=False)
        if self.eot_id is not None:
            values = np.insert(values, offsets[:-1], np.asarray(self.eot_id, self.dtype))
        if self.tokens + values.size > MAX_TOKENS:
            raise ShardFileError(
                f"{self.prefix}.bin would hold {self.tokens + values.size:,} ids: llm.c's files hold fewer than 2**31 "
                "(write_datafile asserts it); choose a smaller --shard-size"
            )
        self._spool.write(np.ascontiguousarray(values, self.dtype).tobytes())
        self.tokens += int(values.size)
        self.documents += int(offsets.size - 1)

    def _finish(self) -> None:
        out = self._open(self.prefix + ".bin")
        out.write(header(self.tokens, self.dtype.itemsize))
        self._spool.seek(0)
        shutil.copyfileobj(self._spool, out, 1 << 20)
        self._spool.close()

    def _release(self) -> None:
        self._spool.close()


class LlmcShardWriter(LlmcWriter):
    """The writer of ``--shard-format llmc`` (``FORMAT`` below): the encode stage has
    already put the EOT before each document (the job's policy: :func:`eot_token`), so the ids go as they come."""

    wants: tuple[str, ...] = ()

    def __init__(self, prefix: str, layout) -> None:
        super().__init__(prefix, n_vocab=layout_n_vocab(layout), eot_id=None)


EOT_TOKENS = ("<|begin_of_text|>", "<|endoftext|>")  # llama-3's data scripts put its BOS first; gpt-2's its EOT


def eot_token(special_tokens) -> str | None:
    """The token llm.c's data scripts put before each document, among a tokenizer's special tokens: llama-3's
    ``<|begin_of_text|>`` where there is one, else gpt-2's ``<|endoftext|>``; None where neither is.

    >>> eot_token({"<|endoftext|>": 50256}), eot_token(["<|begin_of_text|>", "<|end_of_text|>"]), eot_token([])
    ('<|endoftext|>', '<|begin_of_text|>', None)
    """
    return next((t for t in EOT_TOKENS if t in special_tokens), None)


def read_llmc(path: str) -> np.ndarray:
    """The ids of an llm.c ``.bin`` file, checked as ``dataloader.h`` checks them (magic, version, size)."""
    import fsspec

    with fsspec.open(path, "rb") as f:
        data = f.read()
    head = np.frombuffer(data, "<i4", HEADER_INTS) if len(data) >= 4 * HEADER_INTS else None
    layout = {v: size for size, v in LAYOUTS.items()}.get((int(head[0]), int(head[1]))) if head is not None else None
    if layout is None:
        raise ShardFileError(f"{path}: not an llm.c token file (bad magic or version)")
    ids = np.frombuffer(data, "<u2" if layout == 2 else "<u4", offset=4 * HEADER_INTS)
    if ids.size != int(head[2]):
        raise ShardFileError(f"{path}: the header announces {int(head[2])} ids, the file holds {ids.size}")
    return ids


def eot_before_each(special_tokens, bos: str | None, eos: str | None) -> tuple[str | None, str | None]:
    """llm.c's EOT before each document, as ``--bos``, unless ``--bos`` names one (:func:`eot_token`)."""
    return (eot_token(special_tokens) or "auto") if bos is None else bos, eos


FORMAT = ShardFormat(
    name="llmc",
    label="llmc (llm.c .bin)",
    suffixes=SUFFIXES,
    dtype=narrow_dtype,  # llm.c's gpt-2 layout up to 65,536 ids, its llama-3 layout above
    writer=LlmcShardWriter,
    separators=eot_before_each,
    separator_help="an EOT before each",
    refuse_eos="--eos with --shard-format llmc: llm.c's files hold one EOT token before each document, not after it "
    "(the tokenizer's <|endoftext|> or <|begin_of_text|>, or --bos TOKEN); --eos would add a second one",
)
