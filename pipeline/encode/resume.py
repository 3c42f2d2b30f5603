"""An encoding job's identity, and what a rerun into the same ``--out`` does: finish, resume, refuse or start afresh.

Every run records the job's identity in ``_shards/job.json`` before it writes anything, and every shard's stats
file carries its fingerprint (the SHA-256 of the identity). A rerun of the same job skips the shards that are
complete and rewrites the rest; a directory holding (part of) a job with another tokenizer, input list or settings
is refused, and the refusal names the flags (or the input files) that differ; ``--overwrite`` removes only the files
an encoding output has, never the lease of a running job (pipeline/storage/lease.py). What a resume checks before it
adopts a shard, also when ``COMPLETED`` is there (sizes, ``--recheck``'s sha256, the inputs' versions), is in
pipeline/encode/integrity.py. No Beam here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

import fsspec

import bpe_core
from pipeline.corpus.plan import CorpusPlan
from pipeline.encode.formats import owned_output_files
from pipeline.encode.integrity import NOT_WRITTEN, changed_since_recorded, damaged_shards, reconcile_inputs
from pipeline.encode.layout import DEAD_DIR, JOB_FILE, STATS_DIR, TMP_DIR, ShardLayout
from pipeline.encode.shards import read_stats
from pipeline.encode.streams import write_file
from pipeline.errors import OutputError
from pipeline.storage.files import COMPLETED, MANIFEST, exists, glob, read_bytes, remove
from pipeline.storage.lease import LEASE_FILE


def job_identity(job, tokenizer_digest: str, plan: CorpusPlan, policy: dict, dtype: str) -> dict:
    """What the output depends on (tokenizer, inputs, settings, library version): hashed into the fingerprint.

    The tokenizer counts by its digest (what decides the ids), not its file: a converted copy is the same job.
    ``--merge`` is not part of it: the shards are the same with and without it, so ``--merge`` added to a finished
    job merges its shards without encoding again (``pipeline/encode/job.py``).
    """
    corpus = dataclasses.asdict(job.corpus)
    s = job.settings
    settings = dict(
        corpus,
        range_bytes=job.range_bytes,
        shard_size=job.shard_size,
        shard_format=s.shard_format,
        prefix=s.prefix,
        verify=s.verify,
        dtype=dtype,
        **policy,
    )
    if s.shuffle is not None:  # only when given: a plain job's fingerprint stays what it was
        settings["shuffle"] = s.shuffle
    return {
        "tokenizer": {"digest": tokenizer_digest},
        # as columns: one object per file made job.json ~100 bytes a file (and the launcher's identity ~300)
        "inputs": {"paths": [f.path for f in plan.files], "bytes": [f.size for f in plan.files]},
        "settings": settings,
        "beam_bpe_version": bpe_core.__version__,
    }


def sha256_json(value: dict) -> str:
    """The job fingerprint: SHA-256 of the canonical JSON (sorted keys, no spaces) of ``value``."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def prepare_encode_output(
    layout: ShardLayout,
    identity: dict,
    *,
    overwrite: bool,
    corpus: CorpusPlan | None = None,
    recheck: bool = False,
    changed: dict | None = None,
    redo: dict | None = None,
) -> dict | None:
    """Make ``out`` ready: the finished manifest if this very job is already complete, else None (resume).

    Refuses a directory holding a finished output of another kind, or (part of) an encoding job with another
    fingerprint. ``overwrite`` starts afresh whatever is there, removing only the files an encoding output has.
    A finished output counts as complete only if its ``manifest.json`` is this job's (its fingerprint and shards),
    every shard passes its check (``recheck``: sha256 too) and, given the ``corpus``, no input changed since its
    shards were written; the shards that fail are redone. ``changed`` (a dict) receives ``{input changed at the same
    size: [shards redone]}``, ``redo`` ``{shard index: why it is written again}`` on a resume of this job.
    """
    job_path = layout.path(STATS_DIR, JOB_FILE)
    previous = json.loads(read_bytes(job_path)) if exists(job_path) else None
    completed = exists(layout.path(COMPLETED))
    damaged: dict[int, str] = {}
    if overwrite:
        _remove_outputs(layout, everything=True)
    elif previous is not None and isinstance(previous.get("inputs"), list):
        raise OutputError(
            f"{layout.out_dir} was written by an older beam-bpe (its {STATS_DIR}/{JOB_FILE} lists the inputs one "
            "object per file, before issue 36's columns), which this version does not resume: pass --overwrite to "
            "encode it again"
        )
    elif previous is not None and sha256_json(previous) == layout.fingerprint:
        damaged = damaged_shards(layout, recheck=recheck)
        if completed and not damaged and not changed_since_recorded(layout, corpus):
            manifest = _own_manifest(layout)
            if manifest is not None:
                return manifest
    elif previous is not None or completed:
        what = (
            f"a different encoding job ({_differences(previous, identity)})"
            if previous
            else "a finished output of another job"
        )
        raise OutputError(
            f"{layout.out_dir} already holds {what}: choose another --out, or pass --overwrite to replace it"
        )
    remove(layout.path(COMPLETED))  # from here on the directory is incomplete until the run ends
    remove(layout.path(MANIFEST))
    for name in owned_output_files(layout.prefix):  # a data-path file, a merged pair: rewritten from the shards
        remove(layout.path(name))
    remove(layout.path(TMP_DIR))
    if recheck:  # a shard of the right sizes whose bytes changed: its stats go, so it is redone like a missing one
        for index in damaged:
            remove(layout.stats_path(index))
    found = reconcile_inputs(layout, corpus) if corpus is not None else {}
    if changed is not None:
        changed.update(found)
    if redo is not None and previous is not None and not overwrite:
        redo.update(_why_redone(layout, damaged, found))
    _remove_outputs(layout, everything=False)
    write_file(job_path, (json.dumps(identity, indent=1, sort_keys=True) + "\n").encode())
    return None


def _own_manifest(layout: ShardLayout) -> dict | None:
    """``manifest.json`` if it is this job's: its fingerprint, and its shards those recorded here (not a manifest
    copied or linked from another output); else None (the output is finished again from its shards)."""
    try:
        manifest = json.loads(read_bytes(layout.path(MANIFEST)))
    except (FileNotFoundError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("fingerprint") != layout.fingerprint:
        return None
    shards = manifest.get("shards")
    if not isinstance(shards, list) or len(shards) != layout.num_shards:
        return None
    for index, entry in enumerate(shards):
        stats = read_stats(layout, index) or {}
        if not isinstance(entry, dict) or entry.get("files") != stats.get("files"):
            return None
    return manifest


def _why_redone(layout: ShardLayout, damaged: dict[int, str], changed: dict[str, list[int]]) -> dict[int, str]:
    """Why each shard of a resumed job is written again: its input changed, it is damaged, or it was not finished."""
    why: dict[int, str] = {}
    for source, shards in changed.items():
        for index in shards:
            why[index] = f"input changed: {layout.relative(source)}"
    for index, reason in damaged.items():
        if index not in why:
            why[index] = "not finished" if reason == NOT_WRITTEN else f"damaged: {reason}"
    return why


def _differences(previous: dict, identity: dict) -> str:
    keys = [k for k in ("tokenizer", "inputs", "beam_bpe_version") if previous.get(k) != identity.get(k)]
    old, new = previous.get("settings", {}), identity["settings"]
    keys += [_flag_of(k) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    named = ", ".join(dict.fromkeys(keys)) or "settings"
    if previous.get("inputs") != identity["inputs"]:
        return f"{named} differ: {_input_differences(previous.get('inputs') or {}, identity['inputs'])}"
    return f"{named} differ"


def _input_differences(old: dict, new: dict) -> str:
    """The input files that differ, named: ``a.jsonl: 1,000 -> 1,022 bytes; b.jsonl: new``."""
    before = dict(zip(old.get("paths", []), old.get("bytes", []), strict=True))
    after = dict(zip(new["paths"], new["bytes"], strict=True))
    notes = [f"{p}: {before[p]:,} -> {after[p]:,} bytes" for p in sorted(before.keys() & after.keys())
             if before[p] != after[p]]  # fmt: skip
    notes += [f"{p}: new" for p in sorted(after.keys() - before.keys())]
    notes += [f"{p}: gone" for p in sorted(before.keys() - after.keys())]
    return "; ".join(notes[:5]) + (f"; and {len(notes) - 5} more" if len(notes) > 5 else "")


def _flag_of(setting: str) -> str:
    """The flag a job setting comes from (``eos_id`` from ``--eos``, ``dtype`` from the tokenizer's size)."""
    if setting == "dtype":
        return "the id width (the tokenizer's size)"
    return "--" + setting.removesuffix("_id").replace("_", "-")


def _remove_outputs(layout: ShardLayout, *, everything: bool) -> None:
    """Remove shard files that are not complete shards of this job (all of them with ``everything``)."""
    keep = set() if everything else complete_shards(layout)
    fs, root = fsspec.core.url_to_fs(layout.out_dir)
    if not fs.exists(root):
        return
    pattern = layout.name_glob("*" if everything else None) + "*"
    mine = {n for i in keep for n in layout.data_files(i)} | {
        layout.name(i) + ext for i in keep for ext in (".jsonl", ".json")
    }
    for folder in (root, *(root.rstrip("/") + "/" + d for d in (DEAD_DIR, STATS_DIR))):
        for path in fs.glob(folder.rstrip("/") + "/" + pattern) + fs.glob(folder.rstrip("/") + "/.tmp-*"):
            if os.path.basename(path) not in mine:
                fs.rm(path)
    if everything:
        for name in (DEAD_DIR, MANIFEST, COMPLETED, *owned_output_files(layout.prefix)):
            remove(layout.path(name))
        stats_dir = root.rstrip("/") + "/" + STATS_DIR
        for path in fs.glob(stats_dir + "/*") if fs.exists(stats_dir) else []:
            if not os.path.basename(path).startswith(LEASE_FILE):  # the lease of this very run stays
                fs.rm(path, recursive=True)


def complete_shards(layout: ShardLayout) -> set[int]:
    """Indices of the shards of this job that are complete: stats file of this fingerprint, files of its sizes."""
    done = set()
    fs, _ = fsspec.core.url_to_fs(layout.out_dir)
    for index in range(layout.num_shards):
        stats = read_stats(layout, index)
        if stats is None:
            continue
        paths = {name: fsspec.core.url_to_fs(layout.path(name))[1] for name in stats["files"]}
        if all(fs.exists(p) and fs.size(p) == stats["files"][n]["bytes"] for n, p in paths.items()):
            done.add(index)
    return done


def note_stopped_run(layout: ShardLayout, exc: BaseException) -> None:
    """Add to ``exc`` (a failed or interrupted run) what is complete and what became of its part files: ``_tmp/``
    is removed (a rerun writes the incomplete shards' parts again), or, where that fails too (a full or lost
    disk), named with its size so that it can be removed by hand."""
    done = len(glob(layout.stats_glob()))
    exc.add_note(f"{done} of {layout.num_shards} shards complete in {layout.out_dir}")
    tmp = layout.path(TMP_DIR)
    try:
        fs, path = fsspec.core.url_to_fs(tmp)
        sizes = [info.get("size") or 0 for info in fs.find(path, detail=True).values()] if fs.exists(path) else []
    except OSError:
        sizes = []
    if not sizes:
        return
    try:
        remove(tmp)
    except OSError as error:
        exc.add_note(f"{len(sizes)} part files ({_size(sum(sizes))}) are left in {tmp} ({error}): delete that folder, "
                     "or rerun the same command, which does")  # fmt: skip
    else:
        exc.add_note(f"its {len(sizes)} part files ({_size(sum(sizes))}) in {tmp} were removed")


def _size(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n} GB"
