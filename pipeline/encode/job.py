"""Entry point: encode a corpus into token-id shards with Apache Beam (``beam-bpe encode --input ...``).

    tokenizer check, plan, resume check (driver)
    ReadCorpus -> EncodeDocuments -> WriteShards                       (Beam, any runner, one terminal branch)
    shard stats -> manifest.json -> the format's own files -> COMPLETED  (driver)

Output shards of about ``--shard-size`` input bytes (as stored) each, made of consecutive ranges in input order and
fixed by the plan before anything runs (pipeline/encode/layout.py). A rerun into the same directory skips the shards
that are complete and rewrites the rest; the result is byte-identical to an uninterrupted run. A directory holding
(part of) a job with another tokenizer, input list or settings is refused (pipeline/encode/resume.py).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass

import apache_beam as beam

import bpe_core
from pipeline.corpus.plan import CorpusPlan, plan_corpus
from pipeline.corpus.read import ReadCorpus
from pipeline.encode.documents import EncodeDocuments
from pipeline.encode.formats import get_format
from pipeline.encode.integrity import verify_before_completed
from pipeline.encode.layout import TMP_DIR, ShardLayout, assign_shards, common_root
from pipeline.encode.manifest import build_manifest
from pipeline.encode.policy import job_policy
from pipeline.encode.resume import (
    complete_shards,
    job_identity,
    note_stopped_run,
    prepare_encode_output,
    sha256_json,
)
from pipeline.encode.settings import EncodeJob
from pipeline.encode.tokenizer import open_tokenizer
from pipeline.encode.write import WriteShards
from pipeline.launch.checks import check_launch
from pipeline.launch.options import pipeline_options, run_to_end, runner_name
from pipeline.launch.progress import Reporter
from pipeline.storage.files import COMPLETED, glob, remove
from pipeline.storage.lease import Lease
from pipeline.storage.manifest import finish_output


@dataclass(frozen=True)
class EncodePlan:
    """What an encoding run will do, fixed before anything runs; the same for every runner and the Dataflow
    translation (hence the same fingerprint)."""

    job: EncodeJob
    tok: bpe_core.Tokenizer
    ref: object  # the TokenizerRef the workers load
    policy: object  # the resolved special-token / BOS / EOS policy
    corpus: CorpusPlan
    identity: dict
    layout: ShardLayout


def plan_encode(job: EncodeJob, beam_args: list[str]) -> EncodePlan:
    """Check the runner options and the tokenizer, plan the corpus and the shards: what can fail before any work."""
    paths = {"--input": [i.pattern for i in job.inputs], "--tokenizer": [job.tokenizer], "--out": [job.out]}
    check_launch(beam_args, paths=paths)  # a runner option that cannot work fails here, before any work
    s = job.settings
    tok, ref = open_tokenizer(job.tokenizer, s.pretokenizer)  # a bad hash or version stops here, before any work
    policy = job_policy(tok, s)  # the flags and the separators the shard format implies
    corpus = plan_corpus(list(job.inputs), job.corpus, range_bytes=job.range_bytes)
    dtype = get_format(s.shard_format).dtype(tok.n_vocab)
    identity = job_identity(job, ref.digest, corpus, dataclasses.asdict(policy), dtype)
    fingerprint = sha256_json(identity)
    range_to_shard = assign_shards(corpus.ranges, job.shard_size)
    num_shards = range_to_shard[-1] + 1 if range_to_shard else 0
    root = common_root([f.path for f in corpus.files])
    layout = ShardLayout(
        job.out, s.prefix, num_shards, s.shard_format, dtype, ref.digest, fingerprint, range_to_shard, root=root
    )
    return EncodePlan(job, tok, ref, policy, corpus, identity, layout)


def run_encode(job: EncodeJob, beam_args: list[str] | None = None, *, reporter: Reporter | None = None) -> dict:
    """Check, plan, encode (Beam) and finish the output directory; return the manifest (plus a ``run`` section
    that is printed, not written: runner, seconds, shards skipped as already complete).

    >>> run_encode(EncodeJob("tok.bpe", (InputSpec("c/*.jsonl.gz"),), "out"))  # doctest: +SKIP
    """
    beam_args = list(beam_args or [])
    reporter = reporter or Reporter()
    started = time.perf_counter()
    plan = plan_encode(job, beam_args)
    job, corpus, layout = plan.job, plan.corpus, plan.layout
    reporter.stage(
        "plan",
        files=len(corpus.files),
        ranges=len(corpus.ranges),
        bytes=corpus.total_bytes,
        fingerprint=layout.fingerprint[:16],
    )
    with Lease(job.out, command="encode") as lease:  # one job per output: a second one is refused here
        return _encode_leased(plan, beam_args, reporter, lease, started)


def _encode_leased(plan: EncodePlan, beam_args: list[str], reporter: Reporter, lease: Lease, started: float) -> dict:
    job, corpus, layout = plan.job, plan.corpus, plan.layout
    changed: dict[str, list[int]] = {}
    finished = prepare_encode_output(
        layout, plan.identity, overwrite=job.overwrite, corpus=corpus, recheck=job.recheck, changed=changed
    )
    if finished is not None and job.settings.merge and "merged" not in finished:
        return _merge_finished(plan, finished, reporter, lease, beam_args, started)
    if finished is not None:
        if layout.format.finish is not None:  # e.g. megatron_data_path.txt: absolute, rewritten for a moved folder
            layout.format.finish(layout, finished)
        reporter.stage("done", out=job.out, already_complete=True)
        return dict(finished, run=_run_info(beam_args, 0.0, layout.num_shards, already_complete=True))
    try:
        return _encode_and_finish(plan, beam_args, reporter, lease, started, changed)
    except BaseException as exc:  # Ctrl-C included: what is complete, and the part files removed or named
        note_stopped_run(layout, exc)
        raise


def _encode_and_finish(plan: EncodePlan, beam_args, reporter: Reporter, lease: Lease, started, changed) -> dict:
    job, corpus, layout = plan.job, plan.corpus, plan.layout
    done = complete_shards(layout)
    todo = [r for r in corpus.ranges if layout.shard_of(r.index) not in done]
    reporter.stage(
        "resume", shards=layout.num_shards, complete=len(done), todo=layout.num_shards - len(done), ranges=len(todo)
    )
    if todo:
        sizes = {f.path: f.size for f in corpus.files}
        shards = functools.partial(_shards_done, layout)
        with reporter.pipeline("encode", ranges=todo, file_sizes=sizes, beam_args=beam_args, shards=shards):
            _run_pipeline(dataclasses.replace(plan, corpus=CorpusPlan(corpus.files, todo)), beam_args)
    manifest = build_manifest(plan)
    fmt = layout.format
    if job.settings.merge:
        started_merge = time.perf_counter()
        manifest["merged"] = fmt.merge(layout, manifest)
        reporter.stage("merge", files=len(manifest["merged"]["files"]), tokens=manifest["merged"]["tokens"],
                       seconds=round(time.perf_counter() - started_merge, 3))  # fmt: skip
    if fmt.finish is not None:
        fmt.finish(layout, manifest)  # megatron_data_path.txt
    verify_before_completed(layout, lease)  # still our lease, every shard as recorded: else no COMPLETED
    finish_output(job.out, manifest)
    remove(layout.path(TMP_DIR))
    seconds = round(time.perf_counter() - started, 3)
    reporter.stage("done", out=job.out, seconds=seconds)
    run = _run_info(beam_args, seconds, len(done), already_complete=False)
    return dict(manifest, run=dict(run, inputs_changed=changed) if changed else run)


def _merge_finished(plan: EncodePlan, finished: dict, reporter: Reporter, lease: Lease, beam_args, started) -> dict:
    """``--merge`` given to a finished output written without it: its shards merged, nothing encoded again. Its
    ``COMPLETED`` goes first, so an interrupted merge is resumed as any unfinished run (the shards are kept)."""
    layout, fmt = plan.layout, plan.layout.format
    remove(layout.path(COMPLETED))
    manifest = dict(finished)
    started_merge = time.perf_counter()
    manifest["merged"] = fmt.merge(layout, manifest)
    reporter.stage("merge", files=len(manifest["merged"]["files"]), tokens=manifest["merged"]["tokens"],
                   seconds=round(time.perf_counter() - started_merge, 3), shards_encoded=0)  # fmt: skip
    if fmt.finish is not None:
        fmt.finish(layout, manifest)
    verify_before_completed(layout, lease)
    finish_output(plan.job.out, manifest)
    seconds = round(time.perf_counter() - started, 3)
    reporter.stage("done", out=plan.job.out, seconds=seconds)
    return dict(manifest, run=_run_info(beam_args, seconds, layout.num_shards, already_complete=False))


def _run_info(beam_args: list[str], seconds: float, skipped: int, *, already_complete: bool) -> dict:
    """The ``run`` section: printed, never written."""
    return {
        "runner": runner_name(beam_args),
        "seconds": seconds,
        "shards_skipped": skipped,
        "already_complete": already_complete,
    }


def _shards_done(layout: ShardLayout) -> tuple[int, int]:
    """(shards with a stats file, shards) for the progress bar: a listing, no file read."""
    return len(glob(layout.stats_glob())), layout.num_shards


def build_encode_graph(pipeline: beam.Pipeline, plan: EncodePlan):
    """Add the encoding stages to ``pipeline``; return the terminal collection (one ShardWritten per shard)."""
    job, layout = plan.job, plan.layout
    batches = pipeline | "ReadCorpus" >> ReadCorpus(plan.corpus, job.corpus)
    encoded = batches | "EncodeDocuments" >> EncodeDocuments(
        plan.ref, plan.policy, layout.dtype, verify=job.settings.verify
    )
    return encoded | "WriteShards" >> WriteShards(layout, fail_at_shard=job.fail_at_shard)


def _run_pipeline(plan: EncodePlan, beam_args: list[str]) -> None:
    pipeline = beam.Pipeline(options=pipeline_options(beam_args, num_ranges=len(plan.corpus.ranges)))
    build_encode_graph(pipeline, plan)
    run_to_end(pipeline)
