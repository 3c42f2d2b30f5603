"""What lets a third party check an encoding output without running the job again: ``run_hash`` and the receipts.

Both go into ``manifest.json`` (:func:`run_record`, one call at the end of :func:`build_manifest`):

- ``run_versions``: what, beside the tokenizer, the inputs and the settings, decides the output's bytes: beam-bpe,
  the Unicode version of the pre-tokenizer's character classes (the native tables' when the hand-written splitter
  runs, else the `regex` module's), the `regex` module's version and Unicode version where it splits, Apache Beam,
  pyarrow, NumPy and Python.
- ``run_hash``: the SHA-256 of the canonical JSON of ``{"fingerprint", "inputs", "run_versions"}``. It is built on
  the resume fingerprint (``pipeline/encode/resume.py``: tokenizer digest, inputs' paths and sizes, settings,
  beam-bpe's version) and adds the inputs' versions as recorded (mtime, etag or generation) and the versions
  above. So a resume that the fingerprint accepts may still end with another ``run_hash`` (an upgraded pyarrow),
  and two outputs with the same ``run_hash`` came from the same files, settings and software. Everything it covers
  is in the manifest: ``beam-bpe verify`` recomputes both.
- ``receipts``: ``planned_ranges`` (how many input ranges the plan cut) and, per shard, its files (bytes, sha256),
  documents, tokens and the input ranges it holds. A later kind of output (a blend's sources, a pack's index
  files) adds its own list beside ``shards`` in the same shape: files with bytes and sha256.

No Beam here.
"""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

import bpe_core
from bpe_core._versions import regex_unicode_version
from pipeline.encode.resume import sha256_json

RECEIPTS_VERSION = 1
RANGE_KEYS = ("index", "source", "kind", "start", "end", "first_row", "documents_read", "documents")


def run_versions(tok) -> dict:
    """The software versions that decide the bytes of an output encoded with ``tok`` on this machine."""
    import numpy
    import pyarrow
    import regex

    kind = tok.pretokenizer.native_kind if tok.pretokenizer is not None else None
    uses_regex = tok.pretokenizer is not None and (kind is None or kind.startswith("rx:"))
    tables = _native_tables_unicode() if tok.pretokenizer is not None and not uses_regex else None
    out = {
        "beam_bpe": bpe_core.__version__,
        "pretokenizer_unicode": tables or (regex_unicode_version() if uses_regex else None),
        "apache_beam": _package_version("apache-beam"),
        "pyarrow": pyarrow.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
    }
    if uses_regex:
        out.update(regex=regex.__version__, regex_unicode=regex_unicode_version())
    return out


def _native_tables_unicode() -> str | None:
    from bpe_core import native

    if not native.available() or not hasattr(native._core, "unicode_tables_info"):
        return None
    return str(native._core.unicode_tables_info()["unicode_version"])


def _package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def fingerprint_of(manifest: dict) -> str:
    """The resume fingerprint recomputed from what the manifest records (the identity of ``job_identity``)."""
    identity = {
        "tokenizer": {"digest": manifest["tokenizer"]["digest"]},
        # as resume.job_identity records them: columns (one object per file made job.json ~100 bytes a file)
        "inputs": {"paths": [i["path"] for i in manifest["inputs"]], "bytes": [i["bytes"] for i in manifest["inputs"]]},
        "settings": manifest["settings"],
        "beam_bpe_version": manifest["run_versions"]["beam_bpe"],
    }
    return sha256_json(identity)


def run_hash_of(manifest: dict) -> str:
    """``run_hash`` from the manifest's recorded fields (the module's notes say what it covers): the fingerprint is
    recomputed, not read, so an edited setting changes both."""
    inputs = [{"path": i["path"], "bytes": i["bytes"], "version": i.get("version")} for i in manifest["inputs"]]
    return sha256_json(
        {"fingerprint": fingerprint_of(manifest), "inputs": inputs, "run_versions": manifest["run_versions"]}
    )


def receipts_of(shards: list[dict], planned_ranges: int) -> dict:
    """The receipts of the manifest's shard entries."""
    return {
        "version": RECEIPTS_VERSION,
        "planned_ranges": planned_ranges,
        "shards": [
            {
                "name": s["name"],
                "files": {n: {"bytes": f["bytes"], "sha256": f["sha256"]} for n, f in sorted(s["files"].items())},
                "documents": s["documents"],
                "tokens": s["tokens"],
                "position_kind": s["position_kind"],
                "ranges": [{k: r[k] for k in RANGE_KEYS if k in r} for r in s["ranges"]],
            }
            for s in shards
        ],
    }


def run_record(plan, manifest: dict) -> dict:
    """``{"run_versions", "run_hash", "receipts"}`` for the manifest of ``plan`` (an ``EncodePlan``)."""
    record = {"run_versions": run_versions(plan.tok)}
    record["run_hash"] = run_hash_of(dict(manifest, **record))
    record["receipts"] = receipts_of(manifest["shards"], len(plan.corpus.ranges))
    return record
