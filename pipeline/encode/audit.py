"""``beam-bpe verify OUT``: an encoding output checked against its manifest, its receipts and (``--sample``) its inputs.

What is checked, in order; each failure is one line that names the file and what differs:

1. ``COMPLETED`` and ``manifest.json`` are there, and the lease (``_shards/lease.json``) is free or stale;
2. the manifest's ``fingerprint`` and ``run_hash`` are those of what it records (``pipeline/encode/receipts.py``),
   and ``_shards/job.json``, where present, is the job the fingerprint names;
3. every file of every receipt has its size and sha256 (read in 8 MiB blocks), and no shard file is there that no
   receipt names;
4. every planned input range is in exactly one shard (with ``--shuffle``: in one or more), no two ranges of one
   input overlap, and the documents of the ranges add up to the shards' and the manifest's;
5. where the format keeps document ids: each shard's documents, read in order, lie in the shard's own ranges, one
   after the other (a position never repeats or goes back), and as many as the receipt says. Ranges are disjoint, so
   this proves that every document is there once, with memory bounded by one batch of the reader, no set of ids.
   A shuffled output's documents are checked against their keys instead (``pipeline/encode/audit_shuffle.py``);
6. ``--sample N``: N documents drawn with ``--seed`` over the whole output are read again from their inputs (the
   job's own readers, range by range) and encoded again with the job's tokenizer and policy; their ids must equal
   the shards'.

An output made before receipts existed is checked for what its manifest records (the shards' files, sizes and
sha256; the ranges it names) and the notes say what could not be checked. No Beam here.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from dataclasses import dataclass, field

import fsspec

from pipeline.encode.audit_documents import check_documents
from pipeline.encode.audit_sample import compare_sample
from pipeline.encode.audit_shuffle import shuffled_walks
from pipeline.encode.layout import JOB_FILE, STATS_DIR
from pipeline.encode.receipts import fingerprint_of, receipts_of, run_hash_of
from pipeline.encode.resume import sha256_json
from pipeline.storage.files import COMPLETED, MANIFEST
from pipeline.storage.lease import Lease, is_stale
from pipeline.storage.paths import join

BLOCK = 8 << 20  # hashlib's sha256 runs at ~1.5 GB/s on 8 MiB blocks; larger blocks only cost memory
SHARD_FILE = "[0-9]" * 5 + "-of-" + "[0-9]" * 5


@dataclass
class Audit:
    """What ``verify`` found: ``problems`` (each a line naming a file), ``notes`` (what it could not check),
    ``checked`` (counts of what it read)."""

    out: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checked: dict = field(default_factory=lambda: {"files": 0, "bytes": 0, "documents": 0, "sampled": 0})

    @property
    def ok(self) -> bool:
        return not self.problems


def audit_output(out: str, *, sample: int = 0, seed: int = 0) -> Audit:
    """Check the finished encoding output ``out`` (a local path or an fsspec URL).

    >>> audit_output("out", sample=100, seed=0).ok  # doctest: +SKIP
    True
    """
    audit = Audit(out)
    from pipeline.encode.audit_blend import audit_blend, is_blend

    if is_blend(out):  # a mixture: every source folder, and the blend against them
        return audit_blend(audit, audit_output, sample=sample, seed=seed)
    manifest = _manifest(audit)
    if manifest is None:
        return audit
    _check_lease(audit)
    _check_hashes(audit, manifest)
    receipts = manifest.get("receipts")
    if receipts is None:
        audit.notes.append(
            "manifest.json predates receipts: the planned ranges are not recorded, so a range missing from every "
            "shard cannot be told from one never planned; checked the shards and ranges it names"
        )
        receipts = receipts_of(manifest["shards"], planned_ranges=-1)
    for shard in receipts["shards"]:
        for name, record in sorted(shard["files"].items()):
            _check_file(audit, name, record)
    _check_unexpected(audit, manifest, receipts)
    _check_ranges(audit, manifest, receipts)
    picked = check_documents(audit, manifest, receipts, sample=sample, seed=seed, walk_of=shuffled_walks(manifest))
    if sample:
        compare_sample(audit, manifest, receipts, picked)
    _check_packs(audit, manifest)
    return audit


def _check_packs(audit: Audit, manifest: dict) -> None:
    """The pack indexes beside the shards (``packs/<L>/``): each file against ``pack.json``, its totals against the
    output's."""
    from pipeline.encode.packing import pack_receipts

    try:
        files, problems = pack_receipts(audit.out, manifest)
    except (OSError, ValueError, KeyError) as exc:
        audit.problems.append(f"packs/: unreadable pack record ({exc!r})")
        return
    audit.problems.extend(problems)
    for name, record in sorted(files.items()):
        _check_file(audit, name, record)


def _manifest(audit: Audit) -> dict | None:
    out = audit.out
    fs, root = fsspec.core.url_to_fs(out)
    if not fs.exists(root):
        audit.problems.append(f"{out}: no such folder")
        return None
    if not fs.exists(posixpath.join(root, COMPLETED)):
        audit.problems.append(f"{COMPLETED}: missing: the run did not finish (rerun the same encode command)")
    try:
        with fs.open(posixpath.join(root, MANIFEST), "rb") as f:
            manifest = json.loads(f.read())
    except FileNotFoundError:
        audit.problems.append(f"{MANIFEST}: missing: nothing to check the shards against")
        return None
    except ValueError as exc:
        audit.problems.append(f"{MANIFEST}: not JSON ({exc})")
        return None
    if manifest.get("kind") != "beam-bpe encode":
        audit.problems.append(f"{MANIFEST}: kind {manifest.get('kind')!r}, not an encoding output's manifest")
        return None
    return manifest


def _check_lease(audit: Audit) -> None:
    record = Lease(audit.out, command="verify").read()
    if record is not None and is_stale(record) is None:
        audit.problems.append(f"{STATS_DIR}/lease.json: held by {record.describe()}: a job is writing this output")


def _check_hashes(audit: Audit, manifest: dict) -> None:
    if "run_hash" not in manifest:
        made_by = manifest.get("versions", {}).get("beam_bpe", "an older beam-bpe")
        audit.notes.append(f"manifest.json has no run_hash (made by beam-bpe {made_by}): the run is not pinned")
    else:
        try:
            fingerprint, run_hash = fingerprint_of(manifest), run_hash_of(manifest)
        except (KeyError, TypeError) as exc:
            audit.problems.append(f"{MANIFEST}: a field run_hash covers is missing or malformed ({exc!r})")
            return
        if fingerprint != manifest.get("fingerprint"):
            audit.problems.append(
                f"{MANIFEST}: fingerprint {manifest.get('fingerprint')} is not that of the tokenizer, inputs and "
                f"settings it records ({fingerprint}): the manifest was edited"
            )
        if run_hash != manifest["run_hash"]:
            audit.problems.append(
                f"{MANIFEST}: run_hash {manifest['run_hash']} is not that of what it records ({run_hash}): the "
                "manifest was edited"
            )
    job_path = join(audit.out, STATS_DIR, JOB_FILE)
    fs, path = fsspec.core.url_to_fs(job_path)
    if fs.exists(path):
        with fs.open(path, "rb") as f:
            job = json.loads(f.read())
        if sha256_json(job) != manifest.get("fingerprint"):
            audit.problems.append(f"{STATS_DIR}/{JOB_FILE}: another job than the manifest's (fingerprints differ)")


def _check_file(audit: Audit, name: str, record: dict) -> None:
    fs, path = fsspec.core.url_to_fs(join(audit.out, name))
    if not fs.exists(path):
        audit.problems.append(f"{name}: missing")
        return
    size = fs.size(path)
    if size != record["bytes"]:
        audit.problems.append(f"{name}: {size:,} bytes, its receipt says {record['bytes']:,}")
        return
    audit.checked["files"] += 1
    audit.checked["bytes"] += size
    if not record.get("sha256"):
        audit.notes.append(f"{name}: no sha256 recorded: only its size was checked")
        return
    digest = hashlib.sha256()
    with fs.open(path, "rb", block_size=BLOCK) as f:
        while block := f.read(BLOCK):
            digest.update(block)
    if digest.hexdigest() != record["sha256"]:
        audit.problems.append(f"{name}: sha256 {digest.hexdigest()}, its receipt says {record['sha256']}")


def _check_unexpected(audit: Audit, manifest: dict, receipts: dict) -> None:
    """Shard files (``{prefix}-NNNNN-of-NNNNN*``) that no receipt names: a shard of another run, a crafted one."""
    fs, root = fsspec.core.url_to_fs(audit.out)
    named = {n for s in receipts["shards"] for n in s["files"]}
    named |= set(manifest.get("merged", {}).get("files", {}) or ())
    prefix = manifest["settings"].get("prefix", "tokens")
    for path in sorted(fs.glob(posixpath.join(root, f"{prefix}-{SHARD_FILE}*"))):
        name = posixpath.relpath(path, root)
        if name not in named:
            audit.problems.append(f"{name}: a shard file that no receipt names (another run's, or added by hand)")


def _check_ranges(audit: Audit, manifest: dict, receipts: dict) -> None:
    """Every planned range once; no two ranges of an input overlapping; document counts that add up."""
    owner: dict[int, str] = {}
    by_source: dict[str, list[tuple[int, int, int, str]]] = {}
    per_epoch = manifest.get("settings", {}).get("blend", {}).get("ranges_per_epoch")  # a blend source's epochs
    shuffled = manifest.get("settings", {}).get("shuffle") is not None  # then every shard holds of every range
    for shard in receipts["shards"]:
        for r in shard["ranges"]:
            if shuffled and r["index"] in owner:
                continue
            if r["index"] in owner:
                audit.problems.append(
                    f"{shard['name']}: input range {r['index']} ({_range_text(r)}) is also in {owner[r['index']]}: "
                    "written twice"
                )
            owner[r["index"]] = shard["name"]
            if r.get("kind") in ("bytes", "row_group"):
                key = f"{r['source']} (epoch {r['index'] // per_epoch})" if per_epoch else r["source"]
                by_source.setdefault(key, []).append((r["start"], r["end"], r["index"], shard["name"]))
        in_ranges = sum(r.get("documents", 0) for r in shard["ranges"])
        if in_ranges != shard["documents"]:
            audit.problems.append(
                f"{shard['name']}: its ranges hold {in_ranges} documents, its receipt {shard['documents']}"
            )
    planned = receipts.get("planned_ranges", -1)
    if planned >= 0:
        for index in sorted(set(range(planned)) - set(owner))[:20]:
            audit.problems.append(f"input range {index}: planned but in no shard: never written")
        for index in sorted(i for i in owner if not 0 <= i < planned)[:20]:
            audit.problems.append(f"{owner[index]}: input range {index} was never planned (the plan cut {planned})")
    _check_overlaps(audit, by_source)
    total = sum(s["documents"] for s in receipts["shards"])
    if total != manifest.get("documents_written", total):
        audit.problems.append(f"{MANIFEST}: documents_written {manifest['documents_written']}, its shards hold {total}")


def _check_overlaps(audit: Audit, by_source: dict) -> None:
    for source, spans in sorted(by_source.items()):
        spans.sort()
        for (_, end, i0, n0), (start, _, i1, n1) in zip(spans, spans[1:], strict=False):
            if start < end:
                audit.problems.append(f"{n1}: input range {i1} of {source} overlaps range {i0} (in {n0})")


def _range_text(r: dict) -> str:
    return f"{r['source']} {r.get('kind', '')} {r.get('start', '')}..{r.get('end', '')}".strip()
