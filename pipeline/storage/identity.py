"""An input file's identity: its size and what its filesystem reports of its version.

The encode job's fingerprint holds each input's path and size; the version is kept beside it, so that a file
edited in place at the same size is noticed (the shards built from it are redone) while a resume of the same
files is not disturbed. What counts as the version, by filesystem (the first present of):

- ``generation`` (GCS: a new number at every write of the object),
- ``etag`` / ``ETag`` (S3, Azure, HTTP servers that send one; S3's is the MD5 of the content for simple uploads),
- ``mtime`` in nanoseconds for local files (``os.stat``'s ``st_mtime_ns``: a rewrite within the same clock tick of
  the filesystem, a few ms on ext4, is not seen), else ``mtime`` / ``LastModified`` / ``last_modified`` /
  ``updated`` / ``created`` as the driver reports it.

A filesystem that reports none of these gives ``version: None``: only a change of size is noticed there.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "a.txt"); _ = open(path, "w").write("hi")
>>> sorted(input_identity(path))
['bytes', 'version']
"""

from __future__ import annotations

import os

import fsspec

VERSION_KEYS = ("generation", "etag", "ETag", "mtime", "LastModified", "last_modified", "updated", "created")


def input_identity(url: str, info: dict | None = None) -> dict:
    """``{"bytes": size, "version": "<key>:<value>" or None}`` for one input file (``info``: fsspec's, if known)."""
    fs, path = fsspec.core.url_to_fs(url)
    info = fs.info(path) if info is None else info
    return {"bytes": int(info["size"]), "version": version_of(fs, path, info)}


def version_of(fs: fsspec.AbstractFileSystem, path: str, info: dict) -> str | None:
    """The version part of :func:`input_identity` (see the module's notes for the order of the keys)."""
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    if protocol in ("file", "local"):
        return f"mtime_ns:{os.stat(path).st_mtime_ns}"
    for key in VERSION_KEYS:
        value = info.get(key)
        if value not in (None, ""):
            return f"{key.lower()}:{value}"
    return None


def changed_inputs(previous: list[dict], current: list[dict]) -> list[str]:
    """Paths whose size is the same in both input lists but whose version differs (compared where both have one)."""
    before = {i["path"]: i for i in previous}
    return [
        i["path"]
        for i in current
        if i["path"] in before
        and before[i["path"]].get("bytes") == i.get("bytes")
        and before[i["path"]].get("version") is not None
        and i.get("version") is not None
        and before[i["path"]]["version"] != i["version"]
    ]
