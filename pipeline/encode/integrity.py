"""What a resume checks before it adopts a shard, and what a run checks before it writes ``COMPLETED``.

- A shard is taken as complete only if its stats file carries this job's fingerprint and every file it names has
  the size recorded there (always, also when ``COMPLETED`` and ``manifest.json`` are there), and with ``--recheck``
  the sha256 recorded there too. A damaged shard is redone and the manifest rewritten.
- Each input's version (``pipeline/storage/identity.py``: mtime, etag or generation) is recorded in
  ``_shards/inputs.json`` before any shard is written. An input whose size is the same but whose version changed
  makes exactly the shards built from it incomplete (their stats files are removed first, then the new versions are
  recorded, so a run killed in between still redoes them); a change of size changes the plan, and the job's
  fingerprint: that run is refused as another job, naming the file (``pipeline/encode/resume.py``).
- Before ``manifest.json`` and ``COMPLETED``: the lease is still this run's, and every shard passes the check above.

No Beam here.
"""

from __future__ import annotations

import hashlib
import json

import fsspec

from pipeline.corpus.listing import relist
from pipeline.corpus.records import range_pieces
from pipeline.encode.layout import STATS_DIR, ShardLayout
from pipeline.encode.shards import read_stats
from pipeline.encode.streams import write_file
from pipeline.errors import ShardFileError
from pipeline.storage.files import exists, read_bytes, remove
from pipeline.storage.identity import changed_inputs

INPUTS_FILE = "inputs.json"
NOT_WRITTEN = "no stats file of this job"


def shard_damage(layout: ShardLayout, index: int, *, recheck: bool = False) -> str | None:
    """Why shard ``index`` is not a complete shard of this job (a sentence), or None if it is."""
    stats = read_stats(layout, index)
    if stats is None:
        return NOT_WRITTEN
    fs, _ = fsspec.core.url_to_fs(layout.out_dir)
    for name, record in sorted(stats["files"].items()):
        path = fsspec.core.url_to_fs(layout.path(name))[1]
        if not fs.exists(path):
            return f"{name} is missing"
        size = fs.size(path)
        if size != record["bytes"]:
            return f"{name} holds {size:,} bytes, its record {record['bytes']:,}"
        if recheck and record.get("sha256") and _sha256(fs, path) != record["sha256"]:
            return f"{name} does not match its recorded sha256"
    return None


def _sha256(fs, path: str) -> str:
    digest = hashlib.sha256()
    with fs.open(path, "rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def damaged_shards(layout: ShardLayout, *, recheck: bool = False) -> dict[int, str]:
    """Every shard that is not complete, with the reason."""
    found = {i: shard_damage(layout, i, recheck=recheck) for i in range(layout.num_shards)}
    return {i: why for i, why in found.items() if why is not None}


def input_versions(files, *, fresh: bool = False) -> list[dict]:
    """``[{path, bytes, version}]`` of the plan's files (``SourceFile``): as listed when planned, or with ``fresh``
    as listed now (one listing per folder or prefix, pipeline/corpus/listing.py; a file gone has no version)."""
    if not fresh:
        return [{"path": f.path, "bytes": f.size, "version": f.version} for f in files]
    now = relist(f.path for f in files)
    return [
        {"path": f.path, "bytes": now[f.path].size, "version": now[f.path].version}
        if f.path in now
        else {"path": f.path, "bytes": None, "version": None}
        for f in files
    ]


def reconcile_inputs(layout: ShardLayout, corpus) -> dict[str, list[int]]:
    """Compare the inputs' versions with those recorded; make the shards built from a changed input incomplete;
    record the current versions. Returns ``{changed path: [shard indices redone]}``."""
    path = layout.path(STATS_DIR, INPUTS_FILE)
    current = input_versions(corpus.files)
    previous = recorded_versions(layout)
    changed = changed_inputs(previous, current)
    redo: dict[str, list[int]] = {}
    wanted = set(changed)
    shards_of: dict[str, set[int]] = {}
    for r in corpus.ranges:
        for piece in range_pieces(r):
            if piece[0] in wanted:
                shards_of.setdefault(piece[0], set()).update(layout.shards_built_from(r.index))
    for source in changed:
        shards = sorted(shards_of.get(source, ()))
        redo[source] = shards
        for index in shards:
            remove(layout.stats_path(index))  # first: a run killed after this still redoes the shard
    if current != previous:
        write_file(path, (json.dumps(versions_as_columns(current), separators=(",", ":")) + "\n").encode())
    return redo


def versions_as_columns(versions: list[dict]) -> dict:
    """``_shards/inputs.json`` and the manifest's ``inputs``: one list per field (``paths``, ``bytes``,
    ``versions``), not one object per file (a million files as objects took ~120 MB of indented JSON)."""
    return {
        "paths": [v["path"] for v in versions],
        "bytes": [v["bytes"] for v in versions],
        "versions": [v["version"] for v in versions],
    }


def versions_from_columns(record: dict) -> list[dict]:
    """The versions of an ``inputs.json`` record: the columns, or the older list of objects (read as they are)."""
    if "inputs" in record:  # written before issue 36: one object per file
        return record["inputs"]
    return [
        {"path": p, "bytes": b, "version": v}
        for p, b, v in zip(record["paths"], record["bytes"], record["versions"], strict=True)
    ]


def recorded_versions(layout: ShardLayout) -> list[dict]:
    """The versions recorded in ``_shards/inputs.json``, or [] if there is none."""
    path = layout.path(STATS_DIR, INPUTS_FILE)
    return versions_from_columns(json.loads(read_bytes(path))) if exists(path) else []


def verify_before_completed(layout: ShardLayout, lease) -> None:
    """Raise unless this run still holds the lease and every shard is a complete shard of this job."""
    if lease is not None:
        lease.verify()
    damaged = damaged_shards(layout)
    if damaged:
        listed = "; ".join(f"{layout.name(i)}: {why}" for i, why in sorted(damaged.items())[:5])
        raise ShardFileError(
            f"{len(damaged)} shard(s) of {layout.out_dir} are not what this run wrote ({listed}): another job or a "
            "person changed the output while it ran, so it is not marked complete; make sure one job writes to it, "
            "then rerun the same command"
        )


def changed_since_recorded(layout: ShardLayout, corpus) -> list[str]:
    """The inputs changed at the same size since their versions were recorded (read-only; [] without a corpus)."""
    if corpus is None:
        return []
    return changed_inputs(recorded_versions(layout), input_versions(corpus.files, fresh=True))


def moved_inputs(layout: ShardLayout, corpus) -> None:
    """Read every input's identity again (before ``COMPLETED``); where one differs from what the run recorded
    before it read (size or version: rewritten while the run read it), the shards built from it lose their stats
    files (a rerun redoes them) and ShardFileError says so in one line: never COMPLETED over two versions."""
    if corpus is None:
        return
    recorded = {i["path"]: i for i in recorded_versions(layout)}
    moved = []
    for now in input_versions(corpus.files, fresh=True):
        before = recorded.get(now["path"])
        if before is not None and (before.get("bytes"), before.get("version")) != (now["bytes"], now["version"]):
            moved.append((now["path"], before, now))
    if not moved:
        return
    paths = {path for path, _, _ in moved}
    shards = sorted({i for r in corpus.ranges if any(p[0] in paths for p in range_pieces(r))
                     for i in layout.shards_built_from(r.index)})  # fmt: skip
    for index in shards:
        remove(layout.stats_path(index))
    path, before, now = moved[0]
    what = (f"{before.get('bytes'):,} -> {now['bytes'] or 0:,} bytes" if before.get("bytes") != now["bytes"]
            else "same size, new version")  # fmt: skip
    more = f" (and {len(moved) - 1} more input(s))" if len(moved) > 1 else ""
    same_size = all(b.get("bytes") == n["bytes"] for _, b, n in moved)
    fix = ("rerun the same command, which encodes the current version" if same_size
           else "the input's size changed, so it is another job: rerun with --overwrite")  # fmt: skip
    raise ShardFileError(
        f"{layout.relative(path)} changed while the run read it ({what}){more}: {layout.out_dir} is not marked "
        f"complete and its {len(shards)} shard(s) built from it are not kept; {fix}"
    )
