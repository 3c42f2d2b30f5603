"""Hashed, complete-or-absent files: what every shard file, stats file and merged file is written through.

Every file goes through the project's atomic writer (``bpe_core._io.open_atomic``): a failure, or leaving the
``with`` block by an exception, leaves no file behind; what passes is counted and hashed on the way, for the stats
files and the manifest (``{"bytes", "sha256"}``). No Beam here.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import posixpath

from pipeline.storage.files import open_atomic


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


@contextlib.contextmanager
def open_hashing(url: str):
    """The project's atomic writer (``bpe_core._io.open_atomic``) behind a writer that counts and hashes what passes."""
    with open_atomic(url) as f:
        yield HashedStream(f)


def write_file(url: str, data: bytes) -> dict:
    """``data`` into ``url``, complete or absent; its size and sha256."""
    with open_hashing(url) as f:
        f.write(data)
    return f.stats()


class ShardFiles:
    """The files of one shard, open side by side under temporary names; renamed by ``close``, removed by ``abort``."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._streams: dict[str, HashedStream] = {}

    def open(self, path: str) -> HashedStream:
        stream = self._stack.enter_context(open_hashing(path))
        self._streams[posixpath.basename(path.replace("\\", "/"))] = stream
        return stream

    def enter(self, context):
        """A writer over one of the files (pyarrow's), closed before the files are (and aborted with them)."""
        return self._stack.enter_context(context)

    def close(self) -> dict[str, dict]:
        self._stack.close()
        return {name: stream.stats() for name, stream in self._streams.items()}

    def abort(self, exc: BaseException | None = None) -> None:
        exc = exc or RuntimeError("shard writer aborted")
        self._stack.__exit__(type(exc), exc, exc.__traceback__)
