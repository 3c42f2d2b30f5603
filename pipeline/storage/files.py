"""File helpers for the stages and the driver: fsspec everywhere, complete-or-absent writes, output guards."""

from __future__ import annotations

from collections.abc import Iterable

import fsspec

from bpe_core._io import open_atomic as open_atomic  # the project's one atomic writer (bpe_core/_io.py)
from bpe_core._io import write_bytes_atomic as write_atomic  # noqa: F401 - re-exported for the stages
from pipeline.errors import OutputError
from pipeline.storage.paths import full_url, join

COMPLETED = "COMPLETED"
MANIFEST = "manifest.json"


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
    return sorted(full_url(fs, path) for path in fs.glob(path))


def prepare_output(out_dir: str, *, owned: Iterable[str], overwrite: bool, keep: Iterable[str] = ()) -> None:
    """Make ``out_dir`` ready for a new run: refuse a finished output unless ``overwrite``, clear our old files.

    ``owned`` names the files and folders (relative to ``out_dir``) the stage's runs write: only those, the manifest
    and the temporary files of a killed write are removed, never anything else a user keeps there. ``keep`` names
    owned ones that stay (the counts, when a run trains from the counts of the same directory).
    """
    if exists(join(out_dir, COMPLETED)) and not overwrite:
        raise OutputError(
            f"{out_dir} already holds a finished output ({COMPLETED} is there): pass --overwrite to replace it, "
            "or choose another --out"
        )
    remove(join(out_dir, COMPLETED))  # first: from here on the directory is incomplete until the run ends
    keep = set(keep)
    for name in (MANIFEST, *owned):
        if name not in keep:
            remove(join(out_dir, name))
    fs, path = fsspec.core.url_to_fs(out_dir)
    for tmp in fs.glob(path.rstrip("/") + "/.tmp-*"):  # the temporary files of a run killed while writing
        fs.rm(tmp)
    fs.makedirs(path, exist_ok=True)
