"""The driver's side of an encoding run into one or more output folders, shared by one tokenizer (job.py) and
several (several.py): what each folder still needs, the one pipeline, and the one end of a run.

    prepare_output (under the folder's lease): finished as it is, or the shards to write and why
    encode_outputs: one pipeline (pipeline/encode/write.py) for every shard any folder needs
    finish_encode: per folder, manifest.json, --merge, the format's own files, the inputs read again, COMPLETED

A run stopped here (Ctrl-C, a failure) notes on the exception what each folder keeps (``stopped``); the CLI prints it
in its one line. No Beam at import time beyond the stage's.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import apache_beam as beam

from pipeline.encode.integrity import moved_inputs, verify_before_completed
from pipeline.encode.layout import TMP_DIR, ShardLayout
from pipeline.encode.manifest import build_manifest
from pipeline.encode.resume import complete_shards, note_stopped_run, prepare_encode_output
from pipeline.encode.write import ShardOutput, WriteShards, shard_units
from pipeline.launch.options import pipeline_options, run_to_end, runner_name
from pipeline.launch.progress import Reporter
from pipeline.storage.files import COMPLETED, glob, remove
from pipeline.storage.manifest import finish_output


@dataclass
class Output:
    """One output folder of a run: its plan (an ``EncodePlan``), its lease, and what it still needs."""

    plan: object
    lease: object
    finished: dict | None = None  # the manifest of a folder already complete (this very job)
    todo: frozenset[int] = frozenset()  # the shards to write
    changed: dict = field(default_factory=dict)  # {input changed at the same size: [shards redone]}
    redo: dict = field(default_factory=dict)  # {shard index: why it is written again}, on a resume

    @property
    def layout(self) -> ShardLayout:
        return self.plan.layout


def prepare_output(plan, lease) -> Output:
    """What the folder of ``plan`` needs (checked and cleaned under its ``lease``: pipeline/encode/resume.py)."""
    job, layout = plan.job, plan.layout
    out = Output(plan, lease)
    out.finished = prepare_encode_output(layout, plan.identity, overwrite=job.overwrite, corpus=plan.corpus,
                                         recheck=job.recheck, changed=out.changed, redo=out.redo)  # fmt: skip
    if out.finished is None:
        out.todo = frozenset(range(layout.num_shards)) - complete_shards(layout)
    return out


def encode_outputs(outputs: list[Output], beam_args: list[str], reporter: Reporter) -> None:
    """One pipeline that writes every shard any of ``outputs`` still needs, each shard read once for all."""
    working = [o for o in outputs if o.todo]
    if outputs[0].layout.shuffle is not None:  # the seeded order: every shard from every range (shuffle.py)
        from pipeline.encode.shuffle import encode_shuffled

        return encode_shuffled(outputs, beam_args, reporter)
    corpus = outputs[0].plan.corpus
    units = shard_units(corpus.ranges, [o.layout for o in working], [set(o.todo) for o in working]) if working else []
    ranges = [r for u in units for r in u.ranges]
    if all(o.finished is not None for o in outputs):
        return
    done = sum(o.layout.num_shards - len(o.todo) for o in outputs)
    reporter.stage("resume", shards=sum(o.layout.num_shards for o in outputs), complete=done,
                   todo=sum(len(o.todo) for o in outputs), ranges=len(ranges))  # fmt: skip
    if not units:
        return
    specs = [
        ShardOutput(o.plan.ref, o.plan.policy, o.layout, verify=o.plan.job.settings.verify,
                    fail_at_shard=o.plan.job.fail_at_shard)
        for o in working
    ]  # fmt: skip
    sizes = {f.path: f.size for f in corpus.files}
    layouts = [o.layout for o in working]
    with reporter.pipeline("encode", ranges=ranges, file_sizes=sizes, beam_args=beam_args,
                           shards=lambda: _shards_done(layouts)):  # fmt: skip
        pipeline = beam.Pipeline(options=pipeline_options(beam_args, num_ranges=len(units)))
        _ = pipeline | "WriteShards" >> WriteShards(units, specs, outputs[0].plan.job.corpus)
        run_to_end(pipeline)


def build_encode_graph(pipeline: beam.Pipeline, plan):
    """The stages of one tokenizer's run on ``pipeline`` (every shard of the plan): the Dataflow translation's."""
    layout = plan.layout
    if layout.shuffle is not None:
        from pipeline.encode.shuffle import shuffled_graph

        return shuffled_graph(pipeline, plan)
    units = shard_units(plan.corpus.ranges, [layout], [set(range(layout.num_shards))])
    spec = ShardOutput(plan.ref, plan.policy, layout, verify=plan.job.settings.verify)
    return pipeline | "WriteShards" >> WriteShards(units, [spec], plan.job.corpus)


@contextlib.contextmanager
def stopped(outputs: list[Output]) -> Iterator[None]:
    """On the way out by an exception (Ctrl-C included): note what each folder keeps and what became of its
    temporary files, for the CLI's one line."""
    try:
        yield
    except BaseException as exc:
        for o in outputs:
            note_stopped_run(o.layout, exc)
        raise


def finish_encode(out: Output, reporter: Reporter, beam_args: list[str], started: float) -> dict:
    """The one end of a run for one folder: the manifest (plus the printed ``run`` section) of a folder that is
    complete after this run, whether it was already (then only the format's own files are rewritten: a moved folder
    gets its new absolute paths), needs ``--merge`` added, or has just been written. Before ``COMPLETED``: every
    input's identity read again, the lease still ours, every shard as recorded."""
    plan, layout, fmt = out.plan, out.layout, out.layout.format
    merge = plan.job.settings.merge
    if out.finished is not None and not (merge and "merged" not in out.finished):
        if fmt.finish is not None:  # e.g. megatron_data_path.txt: absolute, rewritten for a moved folder
            fmt.finish(layout, out.finished)
        reporter.stage("done", out=plan.job.out, already_complete=True)
        return dict(out.finished, run=run_info(beam_args, 0.0, layout.num_shards, already_complete=True))
    if out.finished is not None:  # --merge given to a finished output: COMPLETED goes first, the shards stay
        remove(layout.path(COMPLETED))
        manifest, skipped = dict(out.finished), layout.num_shards
    else:
        moved_inputs(layout, plan.corpus)  # an input that changed while the run read it: no COMPLETED
        manifest, skipped = build_manifest(plan), layout.num_shards - len(out.todo)
    if merge:
        started_merge = time.perf_counter()
        manifest["merged"] = fmt.merge(layout, manifest)
        reporter.stage("merge", files=len(manifest["merged"]["files"]), tokens=manifest["merged"]["tokens"],
                       seconds=round(time.perf_counter() - started_merge, 3))  # fmt: skip
    if fmt.finish is not None:
        fmt.finish(layout, manifest)  # megatron_data_path.txt
    # a shard writer killed mid-write (a lost worker whose unit a Dask retry redid) leaves its temporary file; the
    # lease makes this run the folder's only writer, so every one left now is dead
    for tmp in glob(layout.path(f".tmp-*-{layout.prefix}-*")):
        remove(tmp)
    verify_before_completed(layout, out.lease)  # still our lease, every shard as recorded: else no COMPLETED
    finish_output(plan.job.out, manifest)
    remove(layout.path(TMP_DIR))
    seconds = round(time.perf_counter() - started, 3)
    reporter.stage("done", out=plan.job.out, seconds=seconds)
    run = run_info(beam_args, seconds, skipped, already_complete=False)
    if out.changed:
        run["inputs_changed"] = out.changed
    if out.redo:
        run["redone"] = {layout.name(i): why for i, why in sorted(out.redo.items())}
    return dict(manifest, run=run)


def run_info(beam_args: list[str], seconds: float, skipped: int, *, already_complete: bool) -> dict:
    """The ``run`` section: printed, never written."""
    return {
        "runner": runner_name(beam_args),
        "seconds": seconds,
        "shards_skipped": skipped,
        "already_complete": already_complete,
    }


def _shards_done(layouts: list[ShardLayout]) -> tuple[int, int]:
    """(shards with a stats file, shards) for the progress bar: a listing, no file read."""
    return sum(len(glob(layout.stats_glob())) for layout in layouts), sum(layout.num_shards for layout in layouts)
