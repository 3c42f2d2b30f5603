"""``beam-bpe verify --sample N``: the drawn documents read again from their inputs by the job's own readers (one
planned range at a time, each range once) and encoded again with the job's tokenizer and policy, ids compared.

The tokenizer is the file the manifest names, taken only if its digest is the recorded one; an input is read only
if its size is still the recorded one (a new version at the same size is noted and compared all the same).
No pipeline runs (``encode_batch`` lives beside its DoFn, so Beam is imported).
"""

from __future__ import annotations

import numpy as np

from pipeline.corpus.readers import read_range
from pipeline.encode.audit_documents import corpus_range, corpus_spec_of, parse_doc_id
from pipeline.encode.documents import encode_batch
from pipeline.encode.policy import EncodePolicy
from pipeline.storage.identity import input_identity


def compare_sample(audit, manifest: dict, receipts: dict, picked: list) -> None:
    tok = _tokenizer(audit, manifest)
    if tok is None or not picked:
        return
    settings, info = manifest["settings"], manifest["tokenizer"]
    spec = corpus_spec_of(settings)
    policy = EncodePolicy(settings.get("special_tokens", "ordinary"), info.get("bos_id"), info.get("eos_id"))
    ranges = {r["index"]: r for s in receipts["shards"] for r in s["ranges"]}
    by_range: dict[int, dict[str, tuple]] = {}
    for shard, doc_id, range_index, ids in picked:
        if range_index >= 0:
            by_range.setdefault(range_index, {})[parse_doc_id(doc_id)[1]] = (shard, doc_id, ids)
    recorded = {i["path"]: i for i in manifest.get("inputs", [])}
    root = manifest.get("root", "")
    for index in sorted(by_range):
        rng = corpus_range(ranges[index], root, spec)
        if not _reachable(audit, rng.source, recorded.get(rng.source)):
            continue
        wanted = by_range[index]
        found = set()
        for batch in read_range(rng, spec):
            encoded = encode_batch(tok, batch, policy, settings["dtype"])
            offsets = encoded.offsets
            for k, position in enumerate(encoded.positions.tolist()):
                if position in wanted:
                    found.add(position)
                    shard, doc_id, ids = wanted[position]
                    why = ids_differ(ids, encoded.tokens[offsets[k] : offsets[k + 1]])
                    audit.checked["sampled"] += 1
                    if why:
                        audit.problems.append(f"{shard}: document {doc_id}: {why}")
        for position in sorted(set(wanted) - found):
            shard, doc_id, _ = wanted[position]
            audit.problems.append(f"{shard}: document {doc_id} is not in its input when read again")


def _tokenizer(audit, manifest: dict):
    from pipeline.encode.tokenizer import open_tokenizer

    info = manifest["tokenizer"]
    try:
        tok, ref = open_tokenizer(info["path"], info.get("pretokenizer_option"))
    except Exception as exc:  # noqa: BLE001 - an unreachable tokenizer is a note, the rest is still checked
        audit.notes.append(f"--sample: the tokenizer {info['path']} cannot be loaded ({exc}): no ids compared")
        return None
    if ref.digest != info["digest"]:
        audit.problems.append(
            f"{info['path']}: the tokenizer there is not the one the output was encoded with (digest {ref.digest}, "
            f"the manifest's {info['digest']}): no ids compared"
        )
        return None
    return tok


def _reachable(audit, source: str, recorded: dict | None) -> bool:
    try:
        now = input_identity(source)
    except (OSError, ValueError) as exc:
        audit.notes.append(
            f"--sample: input {source} is not reachable ({type(exc).__name__}): its documents not compared"
        )
        return False
    if recorded is not None and now["bytes"] != recorded["bytes"]:
        audit.notes.append(
            f"--sample: input {source} changed since the run ({recorded['bytes']:,} bytes, now {now['bytes']:,}): its "
            "documents not compared"
        )
        return False
    if recorded is not None and now["version"] != recorded.get("version"):
        audit.notes.append(
            f"--sample: input {source} has another version than the run's ({recorded.get('version')}, now "
            f"{now['version']}; a copy, or edited at the same size): its documents compared all the same"
        )
    return True


def ids_differ(a: np.ndarray, b: np.ndarray) -> str | None:
    """Where two id sequences first differ, in words, or None where they are equal."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    n = min(a.size, b.size)
    diff = np.flatnonzero(a[:n] != b[:n])
    if diff.size:
        k = int(diff[0])
        return f"ids differ at position {k}: the shard has {int(a[k])}, the encoder gives {int(b[k])}"
    if a.size != b.size:
        return f"the shard has {a.size} ids, the encoder gives {b.size}"
    return None
