"""What the trainer-format writers (datatrove, dolma, llm.c) share: batches checked once, files written atomically.

Each format module has a small streaming writer: ``write(ids, offsets, ...)`` once per document batch (document i
is ``ids[offsets[i]:offsets[i + 1]]``, the flat buffers of ``Tokenizer.encode_ordinary_flat``), then ``close()``,
which returns ``{file name: {"bytes", "sha256"}}``. Every file goes through the project's atomic writer
(``bpe_core._io.open_atomic``): a failure, or leaving the ``with`` block by an exception, leaves no file behind.
No Beam here.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import posixpath

import numpy as np

from pipeline.storage.files import open_atomic


class TokenFileError(ValueError):
    """A batch or a setting cannot be written in a trainer format; the message names the value and the fix."""


class HashedStream(io.RawIOBase):
    """A write-only stream that counts and hashes what it passes to ``raw`` (a file object, so that pyarrow's
    Parquet writer can write to it too)."""

    def __init__(self, raw) -> None:
        super().__init__()
        self.raw, self.sha, self.size = raw, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        self.raw.write(view)
        self.sha.update(view)
        self.size += view.nbytes
        return view.nbytes

    def flush(self) -> None:
        if not self.closed and not getattr(self.raw, "closed", False):  # io's close() and __del__ flush too
            self.raw.flush()

    def stats(self) -> dict:
        return {"bytes": self.size, "sha256": self.sha.hexdigest()}


class ShardFiles:
    """The files of one shard, open side by side under temporary names; renamed by ``close``, removed by ``abort``."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._streams: dict[str, HashedStream] = {}

    def open(self, path: str) -> HashedStream:
        stream = HashedStream(self._stack.enter_context(open_atomic(path)))
        self._streams[posixpath.basename(path.replace("\\", "/"))] = stream
        return stream

    def close(self) -> dict[str, dict]:
        self._stack.close()
        return {name: stream.stats() for name, stream in self._streams.items()}

    def abort(self, exc: BaseException | None = None) -> None:
        exc = exc or RuntimeError("shard writer aborted")
        self._stack.__exit__(type(exc), exc, exc.__traceback__)


class TokenShardWriter:
    """The shared shape of the format writers: a context manager that aborts on an exception, closes otherwise."""

    files: dict[str, dict] | None = None

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


def id_dtype(n_vocab: int) -> np.dtype:
    """uint16 when every id fits in 16 bits (``n_vocab <= 65536``), else uint32, little-endian: what datatrove
    (4 bytes above ``2**16`` ids), dolma (``np.min_scalar_type(vocab_size - 1)``) and llm.c (its uint32 variant)
    choose."""
    if n_vocab < 1:
        raise TokenFileError(f"n_vocab must be at least 1, got {n_vocab}")
    return np.dtype("<u2") if n_vocab <= 1 << 16 else np.dtype("<u4")


def check_token_id(name: str, token_id: int | None, n_vocab: int) -> int | None:
    if token_id is not None and not 0 <= int(token_id) < n_vocab:
        raise TokenFileError(f"{name} {token_id} is not an id of this vocabulary (0 to {n_vocab - 1})")
    return None if token_id is None else int(token_id)


def check_batch(ids, offsets, n_vocab: int, **columns) -> tuple[np.ndarray, np.ndarray]:
    """The batch's ids from its first document on, and its offsets from 0; wrong shapes or ids raise TokenFileError.

    ``columns`` (document ids, sources ...) must hold one value per document where given.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    ids = np.asarray(ids)
    if offsets.ndim != 1 or offsets.size < 1:
        raise TokenFileError(f"offsets must be a 1-d array of len(documents) + 1 values, got shape {offsets.shape}")
    if offsets.size > 1 and (np.any(np.diff(offsets) < 0) or offsets[0] < 0 or offsets[-1] > ids.size):
        raise TokenFileError(
            f"offsets must rise from 0 to at most len(ids) = {ids.size}: got {offsets[0]}..{offsets[-1]}"
        )
    for name, values in columns.items():
        if values is not None and len(values) != offsets.size - 1:
            raise TokenFileError(f"{name} holds {len(values)} values for {offsets.size - 1} documents")
    ids = ids[offsets[0] : offsets[-1]]
    if ids.size and (ids.dtype.kind not in "ui" or int(ids.max()) >= n_vocab or int(ids.min()) < 0):
        raise TokenFileError(f"ids must be integers in 0..{n_vocab - 1}: got {ids.dtype} {ids.min()}..{ids.max()}")
    return ids, offsets - offsets[0]
