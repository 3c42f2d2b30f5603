"""The mixture job: ``run_encode_blend`` (pipeline/encode/blend.py's stages in order) and the files of ``OUT``.

``OUT/manifest.json`` (kind ``beam-bpe blend``): the ``blend`` section, per source name its ``tokens``,
``documents``, ``epochs`` and ``share`` (of the blend's tokens), and the totals; ``OUT/blend.json``: the mixture as
given and as resolved (targets, full epochs, the last epoch's cutoff), which is what a trainer or a rerun needs to
reproduce it; ``OUT/megatron_data_path.txt`` (megatron shards): every source's shards with their token counts as
weights, Megatron-LM's ``--data-path`` for the blend as made (each document once per epoch). ``COMPLETED`` last.
"""

from __future__ import annotations

import contextlib
import json
import time

from pipeline.encode.blend import count_documents, epoch_plan, plan_sources, write_sources
from pipeline.encode.blend_plan import pick_source, source_targets
from pipeline.encode.blend_spec import BlendSpec
from pipeline.encode.formats import FORMATS
from pipeline.encode.formats.megatron import DATA_PATH
from pipeline.encode.run import finish_encode, prepare_output, stopped
from pipeline.encode.streams import write_file
from pipeline.errors import OutputError, UsageError
from pipeline.launch.progress import Reporter
from pipeline.storage.files import COMPLETED, MANIFEST, exists, read_bytes, remove
from pipeline.storage.lease import Lease
from pipeline.storage.manifest import finish_output
from pipeline.storage.paths import join

KIND = "beam-bpe blend"
BLEND_FILE = "blend.json"


def run_encode_blend(job, spec: BlendSpec, beam_args: list[str] | None = None, *, reporter: Reporter | None = None):
    """Encode the mixture ``spec`` with ``job``'s tokenizer and settings into ``job.out``; return the top manifest
    (with each source's manifest under ``sources_manifests``, printed, not written)."""
    beam_args, reporter = list(beam_args or []), reporter or Reporter()
    started = time.perf_counter()
    plans = plan_sources(job, spec, beam_args)  # every refusal of the inputs before any work
    refuse_other_output(job.out)
    with contextlib.ExitStack() as stack:
        top = stack.enter_context(Lease(job.out, command="encode"))
        leases = [stack.enter_context(Lease(p.job.out, command="encode", group=top.record.run_id)) for p in plans]
        columns = count_documents(plans, beam_args, reporter)
        picks = pick_all(spec, plans, columns)
        plans = [epoch_plan(p, pick, spec.seed, s.name) for p, pick, s in zip(plans, picks, spec.sources, strict=True)]
        outputs = [prepare_output(p, lease) for p, lease in zip(plans, leases, strict=True)]
        remove(join(job.out, COMPLETED))  # accepted: OUT is complete again only when every source is
        with stopped(outputs):
            write_sources(outputs, beam_args, reporter)
            manifests = [finish_encode(o, reporter, beam_args, started) for o in outputs]
        manifest = finish_blend(job, spec, picks, manifests)
        return dict(manifest, sources_manifests=dict(zip([s.name for s in spec.sources], manifests, strict=True)))


def refuse_other_output(out: str) -> None:
    """A folder holding a plain encoding output (or anything with another manifest) is not a mixture's: refused,
    since the blend would write beside its shards and take its COMPLETED away."""
    path = join(out, MANIFEST)
    if not exists(path):
        return
    try:
        kind = json.loads(read_bytes(path)).get("kind")
    except (ValueError, AttributeError):
        kind = None
    if kind != KIND:
        raise OutputError(
            f"--out {out} holds {path} of {kind or 'an unknown kind'}, not a mixture's: choose another --out (a blend "
            "writes OUT/<name>/ per source, OUT/manifest.json and OUT/blend.json)"
        )


def pick_all(spec: BlendSpec, plans: list, columns: list) -> list:
    """Each source's pick; a target that cannot be met (a source without a token) is refused with the numbers."""
    picks = []
    for src, plan, table, target in zip(spec.sources, plans, columns, source_targets(spec), strict=True):
        files = [plan.layout.relative(f.path) for f in plan.corpus.files]
        try:
            picks.append(pick_source(spec.seed, src.name, files, table[0], table[1], table[2], target))
        except ValueError as exc:
            raise UsageError(
                f"{spec.path}:{src.line}: key 'input' of source {src.name}: the target of {target} tokens cannot be "
                f"met: its {table.shape[1]} documents hold 0 tokens (every document empty or a dead letter); "
                "remove the source or give it other inputs"
            ) from exc
    return picks


def finish_blend(job, spec: BlendSpec, picks: list, manifests: list[dict]) -> dict:
    """``blend.json``, ``megatron_data_path.txt`` (megatron shards), then ``manifest.json`` and ``COMPLETED``."""
    total = sum(m["tokens"] for m in manifests)
    section, resolved = {}, []
    for src, pick, m, target in zip(spec.sources, picks, manifests, source_targets(spec), strict=True):
        share = m["tokens"] / total if total else 0.0
        section[src.name] = {"tokens": m["tokens"], "documents": m["documents_written"], "epochs": pick.epochs,
                             "full_epochs": pick.full_epochs, "share": share, "target": target}  # fmt: skip
        resolved.append({"name": src.name, "path": src.name, **section[src.name],
                         "source_tokens": pick.source_tokens, "source_documents": pick.source_documents,
                         "cutoffs": pick.cutoffs(), "fingerprint": m["fingerprint"]})  # fmt: skip
    blend = {"version": 1, "given": spec.to_json(), "seed": spec.seed, "total_tokens": spec.total_tokens,
             "tokens": total, "documents": sum(m["documents_written"] for m in manifests),
             "sources": resolved}  # fmt: skip
    write_file(join(job.out, BLEND_FILE), (json.dumps(blend, indent=2, sort_keys=True) + "\n").encode())

    # The formats whose outputs name their shards in a data-path file (megatron) name the whole blend in one too.
    def named_by_data_path(m: dict) -> bool:
        fmt = FORMATS.get(m.get("settings", {}).get("shard_format"))
        return "shards" in m and fmt is not None and DATA_PATH in fmt.output_files("")

    if all(named_by_data_path(m) for m in manifests):
        pairs = [f"{s['tokens']} {join(job.out, src.name, s['name'])}"
                 for src, m in zip(spec.sources, manifests, strict=True)
                 for s in m["shards"] if s["documents"]]  # fmt: skip
        write_file(join(job.out, DATA_PATH), (" ".join(pairs) + "\n").encode())
    manifest = {
        "kind": KIND,
        "blend": section,
        "seed": spec.seed,
        "total_tokens": spec.total_tokens,
        "tokens": total,
        "documents_written": blend["documents"],
        "sources": [src.name for src in spec.sources],
        "fingerprints": {src.name: m["fingerprint"] for src, m in zip(spec.sources, manifests, strict=True)},
    }
    finish_output(job.out, manifest)
    return manifest
