"""Paths and URLs: the one place that tells a local path from a URL and spells each the way the pipeline does.

A path with ``://`` is a URL and is left to fsspec; any other path is local and made absolute, so that workers in
another process or directory find the same file.

>>> is_url("gs://b/c.jsonl"), is_url("c.jsonl")
(True, False)
>>> absolute("gs://b/c.jsonl")
'gs://b/c.jsonl'
>>> absolute("/data/c.jsonl")
'/data/c.jsonl'
"""

from __future__ import annotations

import os
import posixpath

import fsspec


def is_url(path: str) -> bool:
    """Whether ``path`` names a file through a protocol (``gs://``, ``s3://``, ``file://``, ``memory://``)."""
    return "://" in path


def is_local(fs: fsspec.AbstractFileSystem) -> bool:
    """Whether an fsspec filesystem is this machine's own."""
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in ("file", "local")


def absolute(path: str) -> str:
    """A local path made absolute; a URL as given."""
    return path if is_url(path) else os.path.abspath(path)


def full_url(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """A path as ``fs`` lists it, spelled as the planner spells sources: a local path bare, others as a full URL."""
    return path if is_local(fs) else fs.unstrip_protocol(path)


def canonical(path: str) -> str:
    """The one spelling of a file: an absolute local path (``file://`` dropped), or the full URL fsspec gives."""
    if not is_url(path):
        return os.path.abspath(path)
    fs, fs_path = fsspec.core.url_to_fs(path)
    return full_url(fs, fs_path)


def join(base: str, *parts: str) -> str:
    """``base/parts...``: with ``/`` for a URL, with the local separator for a local path."""
    return posixpath.join(base.rstrip("/"), *parts) if is_url(base) else os.path.join(base, *parts)
