"""What every shard format is and shares: the :class:`ShardFormat` record, the writer interface, batches checked once.

A format is one module of this folder with one ``FORMAT = ShardFormat(...)`` and one line in ``FORMATS``
(``formats/__init__.py``); nothing outside this folder compares a format's name.

The writer interface: a class made with the file prefix of one shard and the :class:`ShardLayout` (its ``dtype``,
``tokenizer_digest``), with ``write(ids, offsets, **columns)`` once per document batch, in order (document i is
``ids[offsets[i]:offsets[i + 1]]``; ``columns`` are the per-document columns the class names in ``wants``, among
``doc_ids`` (Arrow strings), ``sources`` and ``positions`` (int64)) and ``close() -> {file name: {"bytes",
"sha256"}}``; leaving it by an exception (``abort``) leaves no file. Every file goes through the project's atomic
writer (``pipeline/encode/streams.py``). No Beam here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from pipeline.encode.streams import HashedStream, ShardFiles
from pipeline.errors import ShardFileError, UsageError

Separators = tuple[str | None, str | None]  # (--bos, --eos): None (off), "auto" or a token's text


def keep_separators(special_tokens, bos: str | None, eos: str | None) -> Separators:
    """The separators of a format that implies none: the flags as given."""
    return bos, eos


def eos_after_each(special_tokens, bos: str | None, eos: str | None) -> Separators:
    """An EOS after each document (the tokenizer's usual one) unless ``--eos`` names one: datatrove's and dolma's."""
    return bos, "auto" if eos is None else eos


def no_files(prefix: str) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class ShardFormat:
    """One ``--shard-format``: its files, id width, separators, checks, writer and reader."""

    name: str
    label: str  # how --help lists it: "megatron (.bin/.idx)"
    suffixes: tuple[str, ...]  # the files of one shard: {name}{suffix}
    dtype: Callable[[int], str]  # the numpy dtype name of the ids for a vocabulary of n ids
    writer: type  # the writer class (the interface above)
    reader: Callable[[str, dict], Iterator[tuple[str, np.ndarray]]] | None = None  # (shard prefix, manifest entry)
    # verify's fast path, where a format has one: (shard prefix, manifest entry) -> per batch, its document ids (an
    # Arrow string array) and a loader of their ids ((values, offsets)), called only for a batch with a sampled one
    doc_batches: Callable[[str, dict], Iterator[tuple[object, Callable[[], tuple]]]] | None = None
    separators: Callable[..., Separators] = keep_separators  # (special tokens, --bos, --eos) -> what it implies
    separator_help: str = ""  # what it implies, for --help: "an EOS after each document"
    merge: Callable[..., dict] | None = None  # --merge: (layout, manifest) -> the manifest's "merged" entry
    finish: Callable[..., None] | None = None  # (layout, manifest) after the shards: a file beside them
    output_files: Callable[[str], tuple[str, ...]] = no_files  # (prefix) -> what merge and finish write in --out
    refuse_eos: str = ""  # why --eos cannot go with this format ("" where it can)

    def check_merge(self, merge: bool) -> None:
        """Refuse ``--merge`` where the format has no merged file."""
        if merge and self.merge is None:
            raise UsageError(
                f"--merge writes one Megatron .bin/.idx pair: it needs --shard-format megatron, got {self.name!r}"
            )

    def check_eos(self, eos: str | None) -> None:
        """Refuse ``--eos`` where the format puts its own separator before each document."""
        if self.refuse_eos and eos is not None:
            raise UsageError(self.refuse_eos)


# ------------------------------------------------------------------ the writers' shared shape
class TokenShardWriter:
    """The shared shape of the format writers: a context manager that aborts on an exception, closes otherwise."""

    files: dict[str, dict] | None = None
    wants: tuple[str, ...] = ("doc_ids", "sources")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is None:
            self.close()
        else:
            self.abort(exc)
        return False

    def close(self) -> dict[str, dict]:  # pragma: no cover - each format defines it
        raise NotImplementedError

    def abort(self, exc: BaseException | None = None) -> None:  # pragma: no cover
        raise NotImplementedError


class FileShardWriter(TokenShardWriter):
    """A writer whose files are opened side by side (:class:`ShardFiles`), hashed, renamed at ``close``."""

    wants: tuple[str, ...] = ("doc_ids",)

    def __init__(self, *paths: str) -> None:
        """Open ``paths`` side by side (a failure to open one leaves none); ``self.streams`` holds them in order."""
        self._files = ShardFiles()
        self.streams: list[HashedStream] = []
        try:
            self.streams = [self._files.open(path) for path in paths]
        except BaseException as exc:
            self._files.abort(exc)
            raise

    def _open(self, path: str) -> HashedStream:
        return self._files.open(path)

    def close(self) -> dict[str, dict]:
        """Finish and rename the files (once); their sizes and sha256."""
        if self.files is None:
            try:
                self._finish()
            except BaseException as exc:  # a failed footer leaves no file, as a failed batch does
                self.abort(exc)
                raise
            self.files = self._files.close()
        return self.files

    def _finish(self) -> None:
        """What a format writes last (an index, a footer); nothing by default."""

    def abort(self, exc: BaseException | None = None) -> None:
        try:
            self._release()
        finally:
            self._files.abort(exc)

    def _release(self) -> None:
        """What a format frees on abort besides its files (a spool); nothing by default."""


# ------------------------------------------------------------------ ids and batches
def narrow_dtype(n_vocab: int) -> str:
    """``uint16`` when every id fits in 16 bits, else ``uint32`` (Parquet's, datatrove's and llm.c's rule).

    >>> narrow_dtype(50257), narrow_dtype(100277)
    ('uint16', 'uint32')
    """
    return "uint16" if n_vocab <= 1 << 16 else "uint32"


def id_dtype(n_vocab: int) -> np.dtype:
    """uint16 when every id fits in 16 bits (``n_vocab <= 65536``), else uint32, little-endian: what datatrove
    (4 bytes above ``2**16`` ids), dolma (``np.min_scalar_type(vocab_size - 1)``) and llm.c (its uint32 variant)
    choose."""
    if n_vocab < 1:
        raise ShardFileError(f"n_vocab must be at least 1, got {n_vocab}")
    return np.dtype("<u2") if n_vocab <= 1 << 16 else np.dtype("<u4")


def layout_n_vocab(layout) -> int:
    """The id bound a shard layout implies (its dtype's range: the encoder checked the ids against the vocabulary)."""
    return int(np.iinfo(np.dtype(layout.dtype)).max) + 1


def check_token_id(name: str, token_id: int | None, n_vocab: int) -> int | None:
    if token_id is not None and not 0 <= int(token_id) < n_vocab:
        raise ShardFileError(f"{name} {token_id} is not an id of this vocabulary (0 to {n_vocab - 1})")
    return None if token_id is None else int(token_id)


def check_batch(ids, offsets, n_vocab: int, **columns) -> tuple[np.ndarray, np.ndarray]:
    """The batch's ids from its first document on, and its offsets from 0; wrong shapes or ids raise ShardFileError.

    ``columns`` (document ids, sources ...) must hold one value per document where given.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    ids = np.asarray(ids)
    if offsets.ndim != 1 or offsets.size < 1:
        raise ShardFileError(f"offsets must be a 1-d array of len(documents) + 1 values, got shape {offsets.shape}")
    if offsets.size > 1 and (np.any(np.diff(offsets) < 0) or offsets[0] < 0 or offsets[-1] > ids.size):
        raise ShardFileError(
            f"offsets must rise from 0 to at most len(ids) = {ids.size}: got {offsets[0]}..{offsets[-1]}"
        )
    for name, values in columns.items():
        if values is not None and len(values) != offsets.size - 1:
            raise ShardFileError(f"{name} holds {len(values)} values for {offsets.size - 1} documents")
    ids = ids[offsets[0] : offsets[-1]]
    if ids.size and (ids.dtype.kind not in "ui" or int(ids.max()) >= n_vocab or int(ids.min()) < 0):
        raise ShardFileError(f"ids must be integers in 0..{n_vocab - 1}: got {ids.dtype} {ids.min()}..{ids.max()}")
    return ids, offsets - offsets[0]
