"""Small file helpers: fsspec URLs everywhere, atomic replacement for local files."""

from __future__ import annotations

import os
import tempfile

import fsspec


def read_bytes(path: str | os.PathLike) -> bytes:
    """Whole file as bytes; ``path`` may be a local path or any fsspec URL (``gs://``, ``s3://``, ``memory://``)."""
    with fsspec.open(os.fspath(path), "rb") as f:
        return f.read()


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` so that readers see the old file or the whole new one, never half of it."""
    path = os.fspath(path)
    if "://" in path and not path.startswith("file://"):
        with fsspec.open(path, "wb") as f:  # object stores publish an object only once it is complete
            f.write(data)
        return
    local = path[len("file://") :] if path.startswith("file://") else path
    directory = os.path.dirname(os.path.abspath(local))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), 0o666 & ~_umask())  # mkstemp makes 0600: give the file what open() would
        os.replace(tmp, local)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    """The process umask, read without changing it (os.umask sets it, which races with other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
