"""Entry point: train a tokenizer on a corpus with Apache Beam (``beam-bpe train``).

    plan (driver) -> ReadCorpus -> PreTokenizeAndCount ─┐
                          └──── SelectDeadLetters ──────┴─> Flatten -> WriteCounts      (Beam, any runner)
    counts (streaming) -> bpe_core.train -> tokenizer files, manifest.json, COMPLETED  (driver)

The graph has one terminal branch, every DoFn emits from ``process()`` and reads through fsspec, so it runs
unchanged on the FnApiRunner (in-process or multi-process), Dask, Dataflow, Flink and Spark.
"""

from __future__ import annotations

import dataclasses
import math
import posixpath
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import fsspec

from pipeline.corpus.plan import DEFAULT_RANGE_BYTES, CorpusPlan, CorpusSpec, InputSpec, plan_corpus
from pipeline.errors import NothingWrittenError, ShardFileError, UsageError
from pipeline.launch.progress import Reporter
from pipeline.report.fraction import DEFAULT_EVAL_FRACTION, check_fraction
from pipeline.report.render import REPORT_FILES
from pipeline.storage.files import glob, prepare_output
from pipeline.storage.lease import Lease
from pipeline.storage.manifest import finish_output
from pipeline.storage.paths import absolute, join
from pipeline.train.counts_files import (
    counts_pretokenizer,
    load_chunk_table,
    read_stats,
    write_missing_shards,
)
from pipeline.train.driver import TOKENIZER_FILES, train_tokenizer, write_tokenizers
from pipeline.train.settings import TrainSettings

if TYPE_CHECKING:
    import apache_beam as beam

# Apache Beam is imported only by the functions that count (plan checks, graph, run): `train --from-counts` runs
# without it, so its peak memory is the merge loop's own (Beam's import alone is about 100 MB of RSS).

COUNT_SHARD_BYTES = 1 << 30  # one counts shard per GiB of input: shards stay far below a worker's memory


@dataclass(frozen=True)
class TrainJob:
    """Everything a training run needs besides the Beam options, checked once when it is made.

    Local paths are made absolute (workers of another process or directory must find the same files) and flag
    combinations that cannot run are refused here; nothing later re-checks or rewrites the job.
    """

    out: str
    settings: TrainSettings
    inputs: tuple[InputSpec, ...] = ()
    corpus: CorpusSpec = field(default_factory=CorpusSpec)
    range_bytes: int = DEFAULT_RANGE_BYTES
    count_shards: int = 0  # 0: one per GiB of input
    counts_only: bool = False
    from_counts: str | None = None
    overwrite: bool = False
    pretokenizer_given: bool = False  # with --from-counts: check it against the counts' own pre-tokenizer
    report: bool = False  # hold out eval_fraction of the documents, measure every size (and compare) on them
    eval_fraction: float | None = None  # None: DEFAULT_EVAL_FRACTION with --report
    compare: tuple[str, ...] = ()
    compare_pretokenizer: str | None = None  # the pre-tokenizer of a rank-only .tiktoken --compare file
    driver_memory: int | None = None  # refuse a driver predicted over it (bytes); None: 80% of this machine; 0: off

    def __post_init__(self) -> None:
        inputs = tuple(InputSpec(absolute(i.pattern), i.weight) for i in self.inputs)
        object.__setattr__(self, "compare", tuple(absolute(p) for p in self.compare))
        if self.report and self.eval_fraction is None:
            object.__setattr__(self, "eval_fraction", DEFAULT_EVAL_FRACTION)
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "out", absolute(self.out))
        object.__setattr__(self, "from_counts", None if self.from_counts is None else absolute(self.from_counts))
        check_job(self)


@dataclass(frozen=True)
class TrainPlan:
    """What a training run will do, fixed before anything runs; the same for every runner and the Dataflow
    translation. ``job.settings`` are final (with ``--from-counts``, the pre-tokenizer of the counts)."""

    job: TrainJob
    corpus: CorpusPlan | None  # None with --from-counts: nothing is read
    num_shards: int
    counts_dir: str
    compare: tuple = ()  # the --compare files as the report loads them (TokenizerSpec), each loaded once already


def plan_train(job: TrainJob, beam_args: list[str]) -> TrainPlan:
    """Check the runner options and the counts, plan the corpus: everything that can fail before any work."""
    counts_dir = _counts_folder(job.from_counts) if job.from_counts else join(job.out, "counts")
    if job.from_counts:
        if job.driver_memory is not None:
            raise UsageError(
                "--driver-memory checks the estimate made before counting: with --from-counts the merge loop checks "
                "the memory it needs itself (and names --min-chunk-count / --max-chunks); drop --driver-memory"
            )
        if beam_args and not job.inputs:  # with --input (superword): phase 2's pass when runs/ does not fit
            raise UsageError(
                f"--from-counts trains on this machine with no pipeline: the Beam options {' '.join(beam_args)} "
                "would do nothing; drop them"
            )
        job = dataclasses.replace(job, settings=_counts_settings(counts_dir, job))
        if not job.inputs:
            return TrainPlan(job, None, 0, counts_dir)
    from pipeline.launch.checks import check_launch

    check_launch(beam_args, paths={"--input": [i.pattern for i in job.inputs], "--out": [job.out]})
    plan = plan_corpus(list(job.inputs), job.corpus, range_bytes=job.range_bytes)
    num_shards = job.count_shards or max(1, min(1024, math.ceil(plan.total_bytes / COUNT_SHARD_BYTES)))
    from pipeline.train.upfront import compare_specs

    compare = compare_specs(job.compare, job.compare_pretokenizer)  # loaded now: training does not resume
    return TrainPlan(job, plan, num_shards, counts_dir, compare)


def build_train_graph(pipeline: beam.Pipeline, plan: TrainPlan):
    """Add the counting stages to ``pipeline``; return the terminal collection (paths written)."""
    import apache_beam as beam

    from pipeline.corpus.read import ReadCorpus, SelectDeadLetters
    from pipeline.report.sample import HoldOutSample
    from pipeline.train.count import PreTokenizeAndCount
    from pipeline.train.write_counts import WriteCounts

    job, pre = plan.job, plan.job.settings.pre
    batches = pipeline | "ReadCorpus" >> ReadCorpus(plan.corpus, job.corpus)
    if job.report:  # the report's sample is never counted
        batches = batches | "HoldOutSample" >> HoldOutSample(job.eval_fraction)
    counts = batches | "PreTokenizeAndCount" >> PreTokenizeAndCount(pre, plan.num_shards)
    dead = batches | "SelectDeadLetters" >> SelectDeadLetters()
    return (counts, dead) | "FlattenResults" >> beam.Flatten() | "WriteCounts" >> WriteCounts(job.out, pre)


def count_corpus(plan: TrainPlan, beam_args: list[str]) -> dict:
    """Run the counting pipeline; return the corpus statistics, checked to reconcile."""
    import apache_beam as beam

    from pipeline.launch.options import pipeline_options, run_to_end, runner_name

    job, num_shards = plan.job, plan.num_shards
    pipeline = beam.Pipeline(options=pipeline_options(beam_args, num_ranges=len(plan.corpus.ranges)))
    build_train_graph(pipeline, plan)
    run_to_end(pipeline)
    counts_dir = join(job.out, "counts")
    try:
        stats = read_stats(counts_dir)
    except ShardFileError:
        raise RuntimeError(
            f"the pipeline finished but wrote no statistics to {counts_dir}: the runner "
            f"({runner_name(beam_args)}) did not run the writing step; "
            "see the runner notes in pipeline/launch/options.py"
        ) from None
    write_missing_shards(counts_dir, num_shards, job.settings.pre)
    stats["count_shards"] = num_shards
    stats["dead_letter_files"] = len(glob(join(job.out, "dead_letters", "*.jsonl")))
    check_reconciled(stats)
    return stats


def check_reconciled(stats: dict) -> None:
    read, counted, dead = stats["documents_read"], stats["documents_counted"], stats["dead_letters"]
    if read != counted + dead:
        raise RuntimeError(
            f"counts do not reconcile: documents_read={read} but documents_counted={counted} + dead_letters={dead}; "
            "a stage lost documents: this is a bug, please report it with the manifest"
        )


def run_train(job: TrainJob, beam_args: list[str] | None = None, *, reporter: Reporter | None = None) -> dict:
    """Plan, count (Beam), train (driver) and write the output directory; return the manifest.

    >>> run_train(TrainJob("out", train_settings({}, {"vocab_size": 1000}), (InputSpec("c/*.txt"),),
    ...                    CorpusSpec("text")))  # doctest: +SKIP
    """
    beam_args = list(beam_args or [])
    reporter = reporter or Reporter()
    started = time.perf_counter()
    plan = plan_train(job, beam_args)  # a runner option or counts that cannot work fail here, before any work
    with Lease(plan.job.out, command="train") as lease:  # one job per output: a second one is refused here
        return _train_leased(plan, beam_args, reporter, lease, started)


def _train_leased(plan: TrainPlan, beam_args: list[str], reporter: Reporter, lease: Lease, started: float) -> dict:
    job = plan.job
    manifest: dict = {"kind": "beam-bpe train", "settings": job.settings.to_manifest()}
    if job.from_counts:
        prepare_output(
            job.out,
            owned=owned_files(job.out),
            overwrite=job.overwrite,
            keep=("counts", "runs") if _same(plan.counts_dir, join(job.out, "counts")) else (),
        )
        stats = read_stats(plan.counts_dir)
        manifest.update(runner=None, counts_from=job.from_counts)  # no pipeline ran
    else:
        from pipeline.launch.options import runner_name

        corpus = plan.corpus
        manifest["runner"] = runner_name(beam_args)
        reporter.stage("plan", files=len(corpus.files), ranges=len(corpus.ranges), bytes=corpus.total_bytes)
        manifest["estimate"] = _estimate_stage(plan, reporter)  # may refuse the run: only the sample was read
        prepare_output(job.out, owned=owned_files(job.out), overwrite=job.overwrite)
        t0 = time.perf_counter()
        sizes = {f.path: f.size for f in corpus.files}
        with reporter.pipeline("count", ranges=corpus.ranges, file_sizes=sizes, beam_args=beam_args):
            stats = count_corpus(plan, beam_args)
        manifest["corpus"] = dict(corpus.describe(), format=job.corpus.format, text_unit=job.corpus.text_unit)
        manifest["count_seconds"] = round(time.perf_counter() - t0, 3)
        reporter.stage("count", seconds=manifest["count_seconds"], **_summary(stats))
    manifest.update({k: stats[k] for k in ("documents_read", "documents_counted", "dead_letters")}, stats=stats)
    if stats["documents_counted"] == 0 and not job.counts_only:  # --counts-only keeps them, to be looked at
        raise NothingWrittenError(
            f"no document could be read: all {stats['dead_letters']:,} were dead letters (reasons in "
            f"{join(job.out, 'dead_letters')}); check --format ({job.corpus.format} here), "
            "--text-field / --text-column "
            "and --max-document-bytes"
        )
    if job.settings.superword:  # phase 2 is a second pass over the corpus (pipeline/train/runs.py)
        from pipeline.train.runs import superword_stage

        manifest.update(superword_stage(plan, beam_args, reporter))
    elif not job.counts_only:
        manifest.update(_train_stage(plan.counts_dir, job, reporter))
    if job.report:
        manifest.update(_report_stage(plan, beam_args, reporter))
        manifest["documents_read"] += manifest["documents_held_out"]  # read = counted + dead letters + held out
    manifest["wall_seconds"] = round(time.perf_counter() - started, 3)
    lease.verify()  # still this run's output: else no COMPLETED
    finish_output(job.out, manifest)
    reporter.stage("done", out=job.out, seconds=manifest["wall_seconds"])
    return manifest


def _estimate_stage(plan: TrainPlan, reporter: Reporter) -> dict:
    """The pre-flight (pipeline/train/estimate.py): predicted unique chunks, driver memory and merge time, as the
    run's first line; a driver predicted over ``--driver-memory`` is refused here, before the count."""
    from pipeline.train.estimate import default_driver_memory, preflight

    job = plan.job
    limit = default_driver_memory() if job.driver_memory is None else job.driver_memory
    est = preflight(plan.corpus, job.corpus, job.settings, limit=0 if job.counts_only else limit, reporter=reporter)
    # the same on every runner and rerun: not the launcher's memory, which the stage line shows
    keys = ("chunks", "words", "loop_memory", "seconds", "sample_text_bytes", "exact", "growth_a", "growth_b")
    return {key: value for key, value in est.to_manifest().items() if key in keys}


def _train_stage(counts_dir: str, job: TrainJob, reporter: Reporter) -> dict:
    t0 = time.perf_counter()
    s = job.settings
    counts, report = load_chunk_table(counts_dir, min_chunk_count=s.min_chunk_count, max_chunks=s.max_chunks)
    reporter.stage("read_counts", chunks=report["chunks_kept"], seconds=round(time.perf_counter() - t0, 3))
    t1 = time.perf_counter()
    from pipeline.train.upfront import unreachable_size_quiet

    with unreachable_size_quiet():  # said once, in the summary, from vocab_size_reached
        tok = train_tokenizer(counts, s, reporter)
    reached = (
        {"vocab_size_reached": {"asked": s.vocab_size, "reached": tok.n_vocab}} if tok.n_vocab < s.vocab_size else {}
    )
    written = write_tokenizers(tok, s, job.out)
    seconds = round(time.perf_counter() - t1, 3)
    reporter.stage("train", merges=len(tok.merges), n_vocab=tok.n_vocab, seconds=seconds)
    return {
        "chunk_filter": report,
        "merges": len(tok.merges),
        "n_vocab": tok.n_vocab,
        **reached,
        **written,
        "train_seconds": seconds,
    }


def _report_stage(plan: TrainPlan, beam_args: list[str], reporter: Reporter) -> dict:
    """Measure every size (and the --compare tokenizers) on the held-out sample; write the report files."""
    from pipeline.report.run import run_report
    from pipeline.report.specs import TokenizerSpec

    job, t0 = plan.job, time.perf_counter()
    sizes = job.settings.vocab_sizes
    trained = [TokenizerSpec(f"v{n}", join(job.out, f"v{n}" if len(sizes) > 1 else "", "tokenizer.bpe")) for n in sizes]
    compare = list(plan.compare)
    roles = {spec.label: "trained" for spec in trained}
    if job.settings.superword:  # the plain tokenizer of each size, from the same counts (pipeline/train/runs.py)
        plain = [TokenizerSpec(f"plain v{n}", join(job.out, "plain", f"v{n}", "tokenizer.bpe")) for n in sizes]
        trained += plain
        roles.update({spec.label: "plain" for spec in plain})
    report = run_report(plan.corpus, job.corpus, tuple(trained + compare), roles, job.eval_fraction, job.out, beam_args)
    seconds = round(time.perf_counter() - t0, 3)
    reporter.stage("report", documents=report["sample"]["documents"], seconds=seconds)
    files = list(REPORT_FILES)
    return {
        "documents_held_out": report["sample"]["documents"],
        "report": {"eval_fraction": job.eval_fraction, "files": files, "seconds": seconds},
    }


def owned_files(out: str) -> tuple[str, ...]:
    """What a train run writes into ``out`` (besides the manifest and ``COMPLETED``), as names in ``out``: what
    ``prepare_output`` clears before a run. The folder of each size of an earlier multi-size run (``v{N}``) is
    found by listing ``out``."""
    fs, path = fsspec.core.url_to_fs(out)
    folders = [posixpath.basename(f) for f in fs.glob(path.rstrip("/") + "/v[0-9]*") if fs.isdir(f)]
    sizes = tuple(name for name in folders if name[1:].isdigit())
    return ("counts", "runs", "plain", "dead_letters", *TOKENIZER_FILES, *REPORT_FILES, *sizes)


def _counts_folder(from_counts: str) -> str:
    """The counts of ``--from-counts DIR``: ``DIR/counts``, or DIR itself when it is that folder (holds the files)."""
    if glob(join(from_counts, "counts-*.parquet")):
        return from_counts
    return join(from_counts, "counts")


def _summary(stats: dict) -> dict:
    keys = ("documents_read", "documents_counted", "dead_letters", "chunk_occurrences")
    return {k: stats[k] for k in keys}


def _same(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def check_job(job: TrainJob) -> None:
    """Refuse flag combinations that cannot run or would do nothing, naming the flags and the fix."""
    if job.from_counts and job.inputs and not job.settings.superword:  # superword: the corpus of phase 2's runs
        raise UsageError("--from-counts trains from existing counts: do not also pass --input")
    if not job.from_counts and not job.inputs:
        raise UsageError("nothing to read: pass --input PATH_OR_GLOB (repeatable), or --from-counts DIR")
    if job.counts_only and job.from_counts:
        raise UsageError("--counts-only and --from-counts together do nothing: drop one of them")
    if job.from_counts and job.count_shards:
        raise UsageError(
            "--count-shards sets how a counting run writes its counts: with --from-counts it would do nothing; drop it"
        )
    if job.counts_only and (job.settings.min_chunk_count or job.settings.max_chunks or job.settings.min_run_count):
        raise UsageError(
            "--min-chunk-count, --max-chunks and --min-run-count apply when training from the counts: with "
            "--counts-only they would do nothing; pass them to the later run with --from-counts"
        )
    _check_report_flags(job)
    if job.settings.superword and job.settings.vocab_size is None:
        raise UsageError("--superword-merges / --superword-from need --vocab-size: the word model is its prefix")
    if not job.counts_only and job.settings.vocab_size is None:
        raise UsageError("--vocab-size is required to train (or set vocab_size in --config, or pass --counts-only)")


def _check_report_flags(job: TrainJob) -> None:
    """--report, --eval-fraction, --compare and --compare-pretokenizer go together, and the fraction is below 1."""
    if (job.eval_fraction is not None or job.compare) and not job.report:
        raise UsageError("--eval-fraction and --compare set up the report: pass --report too (or drop them)")
    if job.report and (job.counts_only or job.from_counts):
        raise UsageError(
            "--report measures the trained sizes on documents held out of the count: it needs a run that counts and "
            "trains; for counts made earlier, run `beam-bpe report --tokenizer OUT/tokenizer.bpe --input ...`"
        )
    if job.report:
        check_fraction(job.eval_fraction)
        if job.eval_fraction >= 1:
            raise UsageError(
                f"--eval-fraction {job.eval_fraction:g} holds out every document: nothing would be counted or "
                "trained; give a share below 1, e.g. 0.01 (to measure tokenizers on a whole corpus: beam-bpe report)"
            )
    if job.compare_pretokenizer is not None and not job.compare:
        raise UsageError("--compare-pretokenizer names the pre-tokenizer of a --compare rank file: pass --compare too")


def _counts_settings(counts_dir: str, job: TrainJob) -> TrainSettings:
    """The settings with the pre-tokenizer the counts were made with; a different one given is refused."""
    made_with = counts_pretokenizer(counts_dir)
    wanted = job.settings.pre
    if job.pretokenizer_given and made_with != wanted:
        raise UsageError(
            f"the counts in {counts_dir} were made with pre-tokenizer {made_with.describe()}, not "
            f"{wanted.describe()}: drop --pretokenizer and --normalizer, or count again with them"
        )
    return job.settings.with_pretokenizer(made_with)
