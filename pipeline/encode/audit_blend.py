"""``beam-bpe verify OUT`` on a mixture (``encode --blend``): every source folder as an encoding output of its own,
then the blend against them.

A source folder's own check (pipeline/encode/audit.py) proves each range of each epoch is in exactly one shard and
the ranges of one epoch are disjoint, so every document is there at most once per epoch; here: each full epoch holds
every document of the source (its shards' documents add up to the source's), the ``blend`` section and
``blend.json`` agree with the folders' manifests (tokens, documents, epochs, fingerprints, shares), and
``megatron_data_path.txt`` names exactly the shards with documents. No Beam here.
"""

from __future__ import annotations

import json
import posixpath

import fsspec

from pipeline.encode.formats.megatron import DATA_PATH
from pipeline.storage.files import COMPLETED, MANIFEST
from pipeline.storage.lease import Lease, is_stale
from pipeline.storage.paths import join

KIND = "beam-bpe blend"
BLEND_FILE = "blend.json"


def is_blend(out: str) -> bool:
    """Whether ``out`` holds a mixture's top manifest."""
    fs, root = fsspec.core.url_to_fs(out)
    try:
        with fs.open(posixpath.join(root, MANIFEST), "rb") as f:
            return json.loads(f.read()).get("kind") == KIND
    except (OSError, ValueError, AttributeError):
        return False


def _read_json(audit, name: str) -> dict | None:
    fs, root = fsspec.core.url_to_fs(audit.out)
    try:
        with fs.open(posixpath.join(root, name), "rb") as f:
            return json.loads(f.read())
    except FileNotFoundError:
        audit.problems.append(f"{name}: missing")
    except ValueError as exc:
        audit.problems.append(f"{name}: not JSON ({exc})")
    return None


def audit_blend(audit, audit_output, *, sample: int = 0, seed: int = 0):
    """Fill ``audit`` (an ``Audit`` of the mixture's folder); ``audit_output`` checks one source folder."""
    fs, root = fsspec.core.url_to_fs(audit.out)
    if not fs.exists(posixpath.join(root, COMPLETED)):
        audit.problems.append(f"{COMPLETED}: missing: the blend did not finish (rerun the same encode command)")
    record = Lease(audit.out, command="verify").read()
    if record is not None and not is_stale(record):
        audit.problems.append(f"_shards/lease.json: held by {record.describe()}: a job is writing this output")
    manifest, blend = _read_json(audit, MANIFEST), _read_json(audit, BLEND_FILE)
    if manifest is None:
        return audit
    resolved = {s["name"]: s for s in (blend or {}).get("sources", [])}
    source_manifests = {}
    for name in manifest.get("sources", []):
        sub = audit_output(join(audit.out, name), sample=sample, seed=seed)
        audit.problems.extend(f"{name}/{p}" for p in sub.problems)
        audit.notes.extend(f"{name}/: {n}" for n in sub.notes)
        for key, value in sub.checked.items():
            audit.checked[key] = audit.checked.get(key, 0) + value
        source_manifests[name] = _read_json(audit, join(name, MANIFEST))
        if source_manifests[name] is not None:
            _check_source(audit, name, manifest, resolved.get(name), source_manifests[name])
    _check_totals(audit, manifest, blend, source_manifests)
    _check_data_path(audit, source_manifests)
    return audit


def _check_source(audit, name: str, manifest: dict, resolved: dict | None, source: dict) -> None:
    entry = manifest.get("blend", {}).get(name, {})
    if resolved is None:
        audit.problems.append(f"{BLEND_FILE}: source {name} is missing")
    for key, mine in (("tokens", source.get("tokens")), ("documents", source.get("documents_written"))):
        for where, record in ((MANIFEST, entry), (BLEND_FILE, resolved or {})):
            if record.get(key) != mine:
                audit.problems.append(f"{where}: blend {name} {key} {record.get(key)}, {name}/{MANIFEST} {mine}")
    if manifest.get("fingerprints", {}).get(name) != source.get("fingerprint"):
        audit.problems.append(f"{MANIFEST}: the fingerprint of {name} is not that of {name}/{MANIFEST}")
    selection = source.get("settings", {}).get("blend")
    if selection is None:
        audit.problems.append(f"{name}/{MANIFEST}: no blend selection in its settings: not a blend source folder")
        return
    cutoffs, per_epoch = selection["cutoffs"], selection["shards_per_epoch"]
    if entry.get("epochs") != len(cutoffs):
        audit.problems.append(f"{MANIFEST}: blend {name} epochs {entry.get('epochs')}, its folder {len(cutoffs)}")
    if cutoffs and cutoffs[-1] is not None:
        _check_cutoff(audit, name, source, selection, len(cutoffs) - 1)
    _check_epochs(audit, name, source, (resolved or {}).get("source_documents"), cutoffs, per_epoch)


def _check_epochs(audit, name: str, source: dict, whole: int | None, cutoffs: list, per_epoch: int) -> None:
    """Each full epoch holds as many documents as one whole pass over the source."""
    documents = [0] * len(cutoffs)
    for shard in source.get("shards", []):
        epoch = shard["index"] // per_epoch
        if epoch < len(documents):
            documents[epoch] += shard["documents"]
    for epoch, cutoff in enumerate(cutoffs):
        if cutoff is None and whole is not None and documents[epoch] != whole:
            audit.problems.append(
                f"{name}/: epoch {epoch} holds {documents[epoch]} documents, the source {whole}: a full epoch "
                "holds each document once"
            )


def _check_cutoff(audit, name: str, source: dict, selection: dict, epoch: int) -> None:
    """The last, sampled epoch holds no document whose key is above its cutoff (the keys recomputed from the
    shards' document ids): a document the selection did not take is named."""
    import functools

    import numpy as np

    from pipeline.encode.audit_documents import _batches_from_reader, parse_doc_id
    from pipeline.encode.blend_plan import document_keys
    from pipeline.encode.formats import FORMATS

    fmt = FORMATS.get(source["settings"]["shard_format"])
    if fmt is None or fmt.reader is None:
        audit.notes.append(f"{name}/: its shards keep no document ids: the last epoch's selection was not checked")
        return
    batches_of = fmt.doc_batches or functools.partial(_batches_from_reader, fmt.reader)
    cutoff = np.uint64(selection["cutoffs"][epoch][0])
    per_epoch = selection["shards_per_epoch"]
    for shard in source["shards"]:
        if shard["index"] // per_epoch != epoch or not shard["documents"]:
            continue
        try:
            for doc_ids, _ in batches_of(join(audit.out, name, shard["name"]), shard):
                parsed = [parse_doc_id(d) for d in doc_ids.to_pylist()]
                files = sorted({p[0] for p in parsed if p})
                index = {f: i for i, f in enumerate(files)}
                keys = document_keys(selection["seed"], selection["source"], epoch, files,
                                     [index[p[0]] for p in parsed if p], [p[1] for p in parsed if p])  # fmt: skip
                above = np.flatnonzero(keys > cutoff)
                if above.size:
                    doc = [d for d, p in zip(doc_ids.to_pylist(), parsed, strict=True) if p][int(above[0])]
                    audit.problems.append(
                        f"{name}/{shard['name']}: document {doc} is in epoch {epoch} but its key is above the "
                        f"epoch's cutoff ({above.size} such): not the documents the blend takes"
                    )
                    return
        except Exception as exc:  # noqa: BLE001 - a damaged shard is a finding (named by the folder's own check)
            audit.notes.append(f"{name}/{shard['name']}: the selection not checked ({type(exc).__name__})")


def _check_totals(audit, manifest: dict, blend: dict | None, sources: dict) -> None:
    tokens = sum(m["tokens"] for m in sources.values() if m)
    if manifest.get("tokens") != tokens:
        audit.problems.append(f"{MANIFEST}: tokens {manifest.get('tokens')}, its sources hold {tokens}")
    if blend is not None and blend.get("tokens") != tokens:
        audit.problems.append(f"{BLEND_FILE}: tokens {blend.get('tokens')}, its sources hold {tokens}")
    for name, entry in manifest.get("blend", {}).items():
        m = sources.get(name)
        if m and tokens and abs(entry.get("share", -1) - m["tokens"] / tokens) > 1e-12:
            audit.problems.append(f"{MANIFEST}: blend {name} share {entry.get('share')}, {m['tokens']} / {tokens}")


def _check_data_path(audit, sources: dict) -> None:
    fs, root = fsspec.core.url_to_fs(audit.out)
    path = posixpath.join(root, DATA_PATH)
    if not fs.exists(path):
        return
    with fs.open(path, "rb") as f:
        words = f.read().decode().split()
    got = [(int(w), posixpath.relpath(p, root)) for w, p in zip(words[::2], words[1::2], strict=False)]
    want = [(s["tokens"], f"{name}/{s['name']}") for name, m in sources.items() if m for s in m["shards"]
            if s["documents"]]  # fmt: skip
    if got != want:
        audit.problems.append(f"{DATA_PATH}: does not name each source's shards with their tokens")
