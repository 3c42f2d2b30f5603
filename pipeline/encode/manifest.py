"""An encoding output's ``manifest.json``, built from its shards' stats files, and the one-line summary of a run.

No times and no runner in it: a rerun writes the same bytes (the run's times are printed, not written). No Beam here.
"""

from __future__ import annotations

from pipeline.encode.integrity import recorded_versions
from pipeline.encode.receipts import run_record
from pipeline.encode.shards import read_stats
from pipeline.encode.tokenizer import file_sha256
from pipeline.storage.manifest import check_reconciled

SUMMED = ("documents_read", "documents", "dead_letters", "tokens", "text_bytes", "verified")


def build_manifest(plan) -> dict:
    """The manifest of an ``EncodePlan`` from the shards' stats files."""
    layout, tok, job, identity, policy = plan.layout, plan.tok, plan.job, plan.identity, plan.policy
    shards = []
    ranges = {r.index: r for r in plan.corpus.ranges}
    for index in range(layout.num_shards):
        stats = read_stats(layout, index)
        if stats is None:
            raise RuntimeError(
                f"the pipeline finished but shard {layout.name(index)} is missing from {layout.out_dir}: the "
                "runner did not run the writing step for it (see the runner notes in pipeline/launch/options.py); "
                "rerun the same command to write the missing shards"
            )
        for entry in stats["ranges"]:  # where each range is in its file, beside its counts
            rng = ranges[entry["index"]]
            entry.update(kind=rng.kind, start=rng.start, end=rng.end, first_row=rng.first_row)
        shards.append({k: v for k, v in stats.items() if k != "fingerprint"})
    totals = {key: sum(s[key] for s in shards) for key in SUMMED}
    manifest = {
        "kind": "beam-bpe encode",
        "fingerprint": layout.fingerprint,
        "tokenizer": _tokenizer_info(tok, job.tokenizer, job.settings.pretokenizer, identity, policy),
        "settings": identity["settings"],
        "given": [i.pattern for i in job.inputs],  # --input as given
        "root": layout.root,  # their common folder: document ids and sources below are relative to it
        "inputs": recorded_versions(layout) or identity["inputs"],  # with each file's version, where recorded
        "shards": shards,
        "sources": _per_source(shards, policy.extra_tokens),
        "documents_read": totals["documents_read"],
        "documents_written": totals["documents"],
        "dead_letters": totals["dead_letters"],
        "tokens": totals["tokens"],
        "text_bytes": totals["text_bytes"],
        "verified": totals["verified"],
    }
    check_reconciled(manifest, "documents_written")
    manifest.update(run_record(plan, manifest))  # run_hash, run_versions, receipts (pipeline/encode/receipts.py)
    return manifest


def _tokenizer_info(tok, path: str, pretokenizer_option: str | None, identity: dict, policy) -> dict:
    info = tok.describe()
    keep = ("name", "family", "kind", "normalizer", "pretokenizer", "n_vocab", "special_tokens")
    return dict(
        {k: info[k] for k in keep}, path=path, sha256=file_sha256(path), pretokenizer_option=pretokenizer_option,
        **identity["tokenizer"], bos_id=policy.bos_id, eos_id=policy.eos_id,
    )  # fmt: skip


def _per_source(shards: list[dict], extra_tokens: int) -> list[dict]:
    by_source: dict[str, dict] = {}
    for s in (r for shard in shards for r in shard["ranges"]):
        acc = by_source.setdefault(s["source"], {"path": s["source"], "documents": 0, "text_bytes": 0, "tokens": 0})
        acc["documents"] += s["documents"]
        acc["text_bytes"] += s["text_bytes"]
        acc["tokens"] += s["tokens"] - extra_tokens * s["documents"]  # BOS/EOS are not text
    for acc in by_source.values():
        acc["bytes_per_token"] = round(acc["text_bytes"] / acc["tokens"], 4) if acc["tokens"] else None
    return [by_source[k] for k in sorted(by_source)]


def summary_line(manifest: dict) -> str:
    """The one-line summary printed at the end of a run."""
    run = manifest.get("run", {})
    mb = manifest["text_bytes"] / 1e6
    rate = f", {mb / run['seconds']:.2f} MB/s" if run.get("seconds") else ""
    skipped = f", {run['shards_skipped']} already complete" if run.get("shards_skipped") else ""
    verified = f", {manifest['verified']} verified" if manifest["settings"]["verify"] else ""
    done = "already complete: " if run.get("already_complete") else ""
    changed = run.get("inputs_changed") or {}
    reread = "".join(
        f"; {path} changed since its shards were written: {len(shards)} shard(s) redone"
        for path, shards in sorted(changed.items())
    )
    redone = run.get("redone") or {}
    if redone:
        named = ", ".join(f"{name} ({why})" for name, why in list(redone.items())[:5])
        more = f" and {len(redone) - 5} more" if len(redone) > 5 else ""
        reread += f"; redid {len(redone)} shard(s): {named}{more}"
    return (
        f"{done}encoded {manifest['documents_written']} of {manifest['documents_read']} documents ({mb:.2f} MB) into "
        f"{manifest['tokens']} tokens in {len(manifest['shards'])} {manifest['settings']['shard_format']} shards"
        f"{skipped}; {manifest['dead_letters']} dead letters{verified}{rate}{reread}"
    )
