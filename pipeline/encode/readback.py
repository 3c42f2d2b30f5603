"""Reading a finished encoding output back: its manifest, its documents in order, one document by id or number.

What ``beam-bpe decode --shards DIR --doc ID`` and the tests use; each format's reader is in its module
(pipeline/encode/formats/), and a format without one (its files keep no document ids) is named in the refusal.
No Beam here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np

from pipeline.corpus.records import OFFSET
from pipeline.encode.formats import FORMATS, and_list, readable_formats
from pipeline.errors import ShardFileError
from pipeline.storage.files import COMPLETED, MANIFEST, exists, read_bytes
from pipeline.storage.paths import canonical, join


def load_manifest(out_dir: str) -> dict:
    """The manifest of a finished output directory; an unfinished one raises ShardFileError."""
    if not exists(join(out_dir, COMPLETED)):
        raise ShardFileError(f"{out_dir} holds no finished encoding output (no COMPLETED marker): rerun the encode job")
    manifest = json.loads(read_bytes(join(out_dir, MANIFEST)))
    if manifest.get("kind") != "beam-bpe encode":
        raise ShardFileError(
            f"{out_dir}/manifest.json is not the manifest of an encoding job (kind {manifest.get('kind')!r})"
        )
    return manifest


def iter_shard(out_dir: str, shard: dict, shard_format: str) -> Iterator[tuple[str, np.ndarray]]:
    """(doc_id, ids) of one shard of a finished output, in order."""
    _refuse_unsafe_name(out_dir, shard.get("name"))
    prefix = join(out_dir, shard["name"])
    if shard_format not in FORMATS:
        raise ShardFileError(
            f"{out_dir}/manifest.json names the shard format {shard_format!r}, which is none of {', '.join(FORMATS)}: "
            "the manifest is damaged or written by another beam-bpe"
        )
    reader = FORMATS[shard_format].reader
    if reader is None:
        raise ShardFileError(
            f"a {shard_format} shard keeps no document ids: decode --shards reads {and_list(readable_formats())} "
            f"outputs; read {prefix}* with {shard_format}'s own reader"
        )
    yield from reader(prefix, shard)


def _refuse_unsafe_name(out_dir: str, name: object) -> None:
    """A shard name from the manifest is a file name in ``out_dir``, never a path: a manifest naming
    ``../../etc/x`` or ``/data/y`` would otherwise make ``decode --shards`` read files outside the output."""
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or ".." in name:
        raise ShardFileError(
            f"{out_dir}/manifest.json names a shard {name!r}: a shard name must be a plain file name in the output "
            "directory (no '/', '\\' or '..'); the manifest is damaged or not written by beam-bpe encode"
        )


def iter_documents(out_dir: str) -> Iterator[tuple[str, np.ndarray]]:
    """(doc_id, ids) of every document of a finished output, shard by shard, in input order."""
    manifest = load_manifest(out_dir)
    for shard in manifest["shards"]:
        yield from iter_shard(out_dir, shard, manifest["settings"]["shard_format"])


def find_document(out_dir: str, doc: str) -> tuple[str, np.ndarray]:
    """One document by its id (``path@offset``, ``path#row``) or by its 0-based index over the whole output."""
    manifest = load_manifest(out_dir)
    fmt = manifest["settings"]["shard_format"]
    if doc.isdigit():
        wanted, seen = int(doc), 0
        for shard in manifest["shards"]:
            if wanted < seen + shard["documents"]:
                for k, item in enumerate(iter_shard(out_dir, shard, fmt)):
                    if k == wanted - seen:
                        return item
            seen += shard["documents"]
        raise ShardFileError(f"--doc {doc}: the output holds {seen} documents (0 to {seen - 1})")
    for spelling in _spellings(doc, manifest.get("root", "")):
        for shard in _keyed_shard(manifest, spelling) or _shards_that_may_hold(manifest["shards"], spelling):
            for doc_id, ids in iter_shard(out_dir, shard, fmt):
                if doc_id == spelling:
                    return doc_id, ids
    raise ShardFileError(
        f"--doc {doc!r}: no such document in {out_dir} (ids look like PATH@BYTE_OFFSET or PATH#ROW, as in the "
        "dead letters; or pass a 0-based document number)"
    )


def _spellings(doc: str, root: str = "") -> list[str]:
    """The id as the output may spell it: relative to the inputs' ``root`` where the manifest has one (as given, and
    the path as given made absolute, from this directory, then relative to the root), else as the planner spells
    sources (absolute local path, full URL)."""
    cut = max(doc.rfind("@"), doc.rfind("#"))
    if cut <= 0 or not doc[cut + 1 :].isdigit():
        return [doc]
    path = canonical(doc[:cut])
    if not root:
        return [path + doc[cut:]]
    below = root.rstrip("/") + "/"
    spelled = [doc] if not doc.startswith("/") and "://" not in doc else []
    if path.startswith(below):
        spelled.append(path[len(below) :] + doc[cut:])
    return list(dict.fromkeys(spelled)) or [path + doc[cut:]]


def _keyed_shard(manifest: dict, doc: str) -> list[dict]:
    """A ``--shuffle`` output's one shard that can hold ``doc``: the one its key says (pipeline/encode/shuffle.py)."""
    seed = manifest["settings"].get("shuffle")
    if seed is None or not manifest["shards"]:
        return []
    from pipeline.encode.shuffle_keys import shard_of_keys, shuffle_keys

    return [manifest["shards"][int(shard_of_keys(shuffle_keys(seed, [doc]), len(manifest["shards"]))[0])]]


def _shards_that_may_hold(shards: list[dict], doc: str) -> list[dict]:
    """Shards with a range that can hold the document id, from the source and position in the id (the manifest
    names every range of every shard)."""
    out = []
    for shard in shards:
        sep = "@" if shard["position_kind"] == OFFSET else "#"
        source, found, position = doc.rpartition(sep)
        if not found or not position.isdigit():
            continue
        p = int(position)
        # a line belongs to the range of its first byte
        if any(_holds(r, source, p) for r in shard["ranges"]):
            out.append(shard)
    return out or [s for s in shards if any(doc.startswith(r["source"]) for r in s["ranges"])]


def _holds(entry: dict, source: str, position: int) -> bool:
    if entry.get("sources"):  # a range of several whole files
        return source in entry["sources"]["paths"]
    return entry["source"] == source and (entry["kind"] != "bytes" or entry["start"] <= position < entry["end"])
