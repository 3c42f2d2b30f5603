"""The last two files of every output: ``manifest.json`` (with the versions that made it), then ``COMPLETED``."""

from __future__ import annotations

import json
import platform

import bpe_core
from pipeline.storage.files import COMPLETED, MANIFEST, write_atomic
from pipeline.storage.paths import join


def versions() -> dict:
    from importlib.metadata import version  # not `import apache_beam`: train --from-counts runs without Beam

    import pyarrow
    import regex

    return {
        "beam_bpe": bpe_core.__version__,
        "apache_beam": version("apache-beam"),
        "pyarrow": pyarrow.__version__,
        "regex": regex.__version__,
        "python": platform.python_version(),
    }


def finish_output(out_dir: str, manifest: dict) -> None:
    """Write ``manifest.json``, then the ``COMPLETED`` marker: a directory without the marker is incomplete."""
    manifest = dict(manifest, versions=versions())
    write_atomic(join(out_dir, MANIFEST), (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())
    write_atomic(join(out_dir, COMPLETED), b"")


def check_reconciled(stats: dict, kept: str) -> None:
    """``documents_read == {kept} + dead_letters``: every document a run read is in its output or in its dead
    letters (``kept``: ``documents_written`` for encode, ``documents_counted`` for train)."""
    read, done, dead = stats["documents_read"], stats[kept], stats["dead_letters"]
    if read != done + dead:
        raise RuntimeError(
            f"counts do not reconcile: documents_read={read} but {kept}={done} + dead_letters={dead}; "
            "a stage lost documents: this is a bug, please report it with the manifest"
        )
