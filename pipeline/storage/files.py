"""File helpers for the stages and the driver: fsspec everywhere, complete-or-absent writes, output guards."""

from __future__ import annotations

import os
import posixpath

import fsspec

from bpe_core._io import open_atomic as open_atomic  # the project's one atomic writer (bpe_core/_io.py)
from bpe_core._io import write_bytes_atomic as write_atomic  # noqa: F401 - re-exported for the stages

COMPLETED = "COMPLETED"
MANIFEST = "manifest.json"


class OutputError(ValueError):
    """The output directory cannot be used as asked; the message says why and what to pass instead."""


def join(base: str, *parts: str) -> str:
    return posixpath.join(base.rstrip("/"), *parts) if "://" in base else os.path.join(base, *parts)


def read_bytes(url: str) -> bytes:
    with fsspec.open(url, "rb") as f:
        return f.read()


def exists(url: str) -> bool:
    fs, path = fsspec.core.url_to_fs(url)
    return fs.exists(path)


def remove(url: str) -> None:
    """Remove a file or a directory tree if it exists."""
    fs, path = fsspec.core.url_to_fs(url)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def glob(url_pattern: str) -> list[str]:
    fs, path = fsspec.core.url_to_fs(url_pattern)
    return sorted(path if _is_local(fs) else fs.unstrip_protocol(path) for path in fs.glob(path))


def _is_local(fs: fsspec.AbstractFileSystem) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in ("file", "local")


def prepare_output(out_dir: str, *, overwrite: bool, keep: tuple[str, ...] = ()) -> None:
    """Make ``out_dir`` ready for a new run: refuse a finished output unless ``overwrite``, clear our old files.

    Only the files a run writes are removed (never anything else a user keeps there); ``keep`` names subpaths
    that stay (the counts, when a run trains from the counts of the same directory).
    """
    if exists(join(out_dir, COMPLETED)) and not overwrite:
        raise OutputError(
            f"{out_dir} already holds a finished output ({COMPLETED} is there): pass --overwrite to replace it, "
            "or choose another --out"
        )
    remove(join(out_dir, COMPLETED))  # first: from here on the directory is incomplete until the run ends
    for name in (
        MANIFEST,
        "counts",
        "dead_letters",
        "tokenizer.bpe",
        "tokenizer.tiktoken",
        "tokenizer.json",
        "report.json",
        "report.md",
        "compression.png",
    ):
        if name not in keep:
            remove(join(out_dir, name))
    fs, path = fsspec.core.url_to_fs(out_dir)
    for tmp in fs.glob(path.rstrip("/") + "/.tmp-*"):  # the temporary files of a run killed while writing
        fs.rm(tmp)
    for folder in fs.glob(path.rstrip("/") + "/v[0-9]*"):  # one tokenizer folder per size of a multi-size run
        if fs.isdir(folder) and posixpath.basename(folder)[1:].isdigit():
            fs.rm(folder, recursive=True)
    fs.makedirs(path, exist_ok=True)
