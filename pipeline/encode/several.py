"""Several tokenizers, one read: ``beam-bpe encode --tokenizer A --tokenizer B ... --out OUT``.

    plan per tokenizer (its folder OUT/<stem>/, identity, shards, resume check)           (driver)
    ReadCorpus (the ranges any tokenizer still needs) ─┬─ Select A -> EncodeDocuments A -> WriteShards A ─┐
                                                       └─ Select B -> EncodeDocuments B -> WriteShards B ─┴─ Flatten
    per tokenizer: manifest.json, the format's own files, COMPLETED                        (driver)

The corpus is read and parsed once (about 3 s per GB, a third of an encoding job once the encoder is fast) and each
tokenizer's branch is the single-tokenizer job's own stages on its own layout, so each folder holds the same files
as a separate ``encode --tokenizer X --out OUT/<stem>`` run, with its own manifest, fingerprint and resume: a folder
that is complete is left as it is, and a branch encodes only the ranges of its own incomplete shards. All branches
end in one Flatten: Dask's runner computes only the last branch of a graph.
"""

from __future__ import annotations

import dataclasses
import posixpath

import apache_beam as beam

from pipeline.corpus.plan import CorpusPlan
from pipeline.corpus.read import ReadCorpus
from pipeline.encode.documents import EncodeDocuments
from pipeline.encode.integrity import verify_before_completed
from pipeline.encode.job import EncodePlan, plan_encode
from pipeline.encode.layout import TMP_DIR, ShardLayout
from pipeline.encode.manifest import build_manifest
from pipeline.encode.resume import complete_shards, prepare_encode_output
from pipeline.encode.settings import EncodeJob
from pipeline.encode.write import WriteShards
from pipeline.errors import UsageError
from pipeline.launch.options import pipeline_options, run_to_end
from pipeline.launch.progress import Reporter
from pipeline.storage.files import glob, remove
from pipeline.storage.lease import Lease
from pipeline.storage.manifest import finish_output
from pipeline.storage.paths import join


def tokenizer_folders(tokenizers: list[str]) -> list[str]:
    """The folder name of each tokenizer: its file's name without the suffix (``cl100k.bpe`` -> ``cl100k``, a
    folder by its name); two with the same name are refused, naming both."""
    names: dict[str, str] = {}
    for path in tokenizers:
        base = posixpath.basename(path.rstrip("/"))
        stem = base.split(".", 1)[0] if "." in base[1:] else base
        if stem in names:
            raise UsageError(
                f"--tokenizer {names[stem]} and --tokenizer {path} would both write into OUT/{stem}/: give each "
                "tokenizer a file of its own name (copy or rename one), or encode them in two runs"
            )
        names[stem] = path
    return list(names)


@dataclasses.dataclass(frozen=True)
class Branch:
    """One tokenizer's part of the run: its plan and the ranges of its shards that are not complete."""

    stem: str
    plan: EncodePlan
    todo: frozenset[int]
    finished: dict | None = None  # the manifest of a folder already complete (this very job): left as it is


def plan_branches(job: EncodeJob, tokenizers: list[str], beam_args: list[str]) -> list[EncodePlan]:
    """Plan every tokenizer's job into ``job.out/<stem>/``, each checked and refused on its own before any work."""
    stems = tokenizer_folders(tokenizers)
    return [
        plan_encode(dataclasses.replace(job, tokenizer=path, out=join(job.out, stem)), beam_args)
        for stem, path in zip(stems, tokenizers, strict=True)
    ]


def prepare_branches(plans: list[EncodePlan], changed: dict) -> list[Branch]:
    """What each tokenizer still has to do (under the lease): a finished folder of the same job has nothing to do,
    a resumed one the ranges of its incomplete shards (checked as the single-tokenizer job checks them)."""
    branches = []
    for plan in plans:
        job, layout = plan.job, plan.layout
        stem = posixpath.basename(job.out.rstrip("/"))
        finished = prepare_encode_output(
            layout, plan.identity, overwrite=job.overwrite, corpus=plan.corpus, recheck=job.recheck, changed=changed
        )
        if finished is not None:
            branches.append(Branch(stem, plan, frozenset(), finished))
            continue
        done = complete_shards(layout)
        todo = frozenset(r.index for r in plan.corpus.ranges if layout.shard_of(r.index) not in done)
        branches.append(Branch(stem, plan, todo))
    return branches


def _selected(batch, todo: frozenset[int]) -> bool:
    return batch.range_index in todo


def build_several_graph(pipeline: beam.Pipeline, corpus: CorpusPlan, branches: list[Branch]):
    """One read of ``corpus``, one encode-and-write branch per tokenizer with work to do, one terminal Flatten."""
    batches = pipeline | "ReadCorpus" >> ReadCorpus(corpus, branches[0].plan.job.corpus)
    written = []
    for b in branches:
        if not b.todo:
            continue
        s, layout = b.plan.job.settings, b.plan.layout
        written.append(
            batches
            | f"Select[{b.stem}]" >> beam.Filter(_selected, b.todo)
            | f"EncodeDocuments[{b.stem}]" >> EncodeDocuments(b.plan.ref, b.plan.policy, layout.dtype, verify=s.verify)
            | f"WriteShards[{b.stem}]" >> WriteShards(layout, fail_at_shard=b.plan.job.fail_at_shard)
        )
    return tuple(written) | "FlattenWritten" >> beam.Flatten()


def run_encode_several(
    job: EncodeJob, tokenizers: list[str], beam_args: list[str] | None = None, *, reporter: Reporter | None = None
) -> dict[str, dict]:
    """Encode the corpus of ``job`` with every tokenizer in one read; return each folder's manifest by stem. One
    lease, ``job.out``'s, covers every folder from before the first is touched to after the last COMPLETED."""
    beam_args, reporter = list(beam_args or []), reporter or Reporter()
    plans = plan_branches(job, tokenizers, beam_args)
    with Lease(job.out, command="encode") as lease:  # one job per output: a second one is refused here
        changed: dict[str, list[int]] = {}
        branches = prepare_branches(plans, changed)
        _encode_branches(branches, beam_args, reporter)
        return {b.stem: b.finished or _finish(b.plan, reporter, lease) for b in branches}


def _encode_branches(branches: list[Branch], beam_args: list[str], reporter: Reporter) -> None:
    corpus = branches[0].plan.corpus
    needed = set().union(*(b.todo for b in branches))
    todo = [r for r in corpus.ranges if r.index in needed]
    reporter.stage("plan", files=len(corpus.files), ranges=len(corpus.ranges), bytes=corpus.total_bytes,
                   tokenizers=len(branches), ranges_to_read=len(todo))  # fmt: skip
    if todo:
        sizes = {f.path: f.size for f in corpus.files}
        layouts = [b.plan.layout for b in branches if b.todo]
        with reporter.pipeline("encode", ranges=todo, file_sizes=sizes, beam_args=beam_args,
                               shards=lambda: _shards_done(layouts)):  # fmt: skip
            pipeline = beam.Pipeline(options=pipeline_options(beam_args, num_ranges=len(todo)))
            build_several_graph(pipeline, CorpusPlan(corpus.files, todo), branches)
            run_to_end(pipeline)


def _finish(plan: EncodePlan, reporter: Reporter, lease: Lease) -> dict:
    """One folder's manifest, the format's own files and COMPLETED, as the single-tokenizer job finishes."""
    layout, fmt = plan.layout, plan.layout.format
    manifest = build_manifest(plan)
    if plan.job.settings.merge:
        manifest["merged"] = fmt.merge(layout, manifest)
    if fmt.finish is not None:
        fmt.finish(layout, manifest)
    verify_before_completed(layout, lease)  # still our lease, every shard as recorded: else no COMPLETED
    finish_output(plan.job.out, manifest)
    remove(layout.path(TMP_DIR))
    reporter.stage("done", out=plan.job.out, tokens=manifest.get("tokens"))
    return manifest


def _shards_done(layouts: list[ShardLayout]) -> tuple[int, int]:
    return sum(len(glob(layout.stats_glob())) for layout in layouts), sum(layout.num_shards for layout in layouts)
