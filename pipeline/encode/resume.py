"""An encoding job's identity, and what a rerun into the same ``--out`` does: finish, resume, refuse or start afresh.

Every run records the job's identity in ``_shards/job.json`` before it writes anything, and every shard's stats
file carries its fingerprint (the SHA-256 of the identity). A rerun of the same job skips the shards that are
complete and rewrites the rest; a directory holding (part of) a job with another tokenizer, input list or settings
is refused, and the refusal names the flags that differ; ``--overwrite`` removes only the files an encoding output
has. No Beam here.
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
from pipeline.encode.layout import DEAD_DIR, JOB_FILE, STATS_DIR, TMP_DIR, ShardLayout
from pipeline.encode.shards import read_stats
from pipeline.encode.streams import write_file
from pipeline.errors import OutputError
from pipeline.storage.files import COMPLETED, MANIFEST, exists, read_bytes, remove


def job_identity(job, tokenizer_digest: str, plan: CorpusPlan, policy: dict, dtype: str) -> dict:
    """What the output depends on (tokenizer, inputs, settings, library version): hashed into the fingerprint.

    The tokenizer counts by its digest (what decides the ids), not its file: a converted copy is the same job.
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
    if s.merge:  # only when given: the fingerprints of the jobs without it stay what they were
        settings["merge"] = True
    return {
        "tokenizer": {"digest": tokenizer_digest},
        "inputs": [{"path": f.path, "bytes": f.size} for f in plan.files],
        "settings": settings,
        "beam_bpe_version": bpe_core.__version__,
    }


def sha256_json(value: dict) -> str:
    """The job fingerprint: SHA-256 of the canonical JSON (sorted keys, no spaces) of ``value``."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def prepare_encode_output(layout: ShardLayout, identity: dict, *, overwrite: bool) -> dict | None:
    """Make ``out`` ready: the finished manifest if this very job is already complete, else None (resume).

    Refuses a directory holding a finished output of another kind, or (part of) an encoding job with another
    fingerprint. ``overwrite`` starts afresh whatever is there, removing only the files an encoding output has.
    """
    job_path = layout.path(STATS_DIR, JOB_FILE)
    previous = json.loads(read_bytes(job_path)) if exists(job_path) else None
    completed = exists(layout.path(COMPLETED))
    if overwrite:
        _remove_outputs(layout, everything=True)
    elif previous is not None and sha256_json(previous) == layout.fingerprint:
        if completed:
            return json.loads(read_bytes(layout.path(MANIFEST)))
    elif previous is not None or completed:
        what = (
            f"a different encoding job ({_differences(previous, identity)} differ)"
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
    _remove_outputs(layout, everything=False)
    write_file(job_path, (json.dumps(identity, indent=1, sort_keys=True) + "\n").encode())
    return None


def _differences(previous: dict, identity: dict) -> str:
    keys = [k for k in ("tokenizer", "inputs", "beam_bpe_version") if previous.get(k) != identity.get(k)]
    old, new = previous.get("settings", {}), identity["settings"]
    keys += [_flag_of(k) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return ", ".join(dict.fromkeys(keys)) or "settings"


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
        for name in (STATS_DIR, DEAD_DIR, MANIFEST, COMPLETED, *owned_output_files(layout.prefix)):
            remove(layout.path(name))


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
