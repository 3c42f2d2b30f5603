"""Phase 2 of a superword tokenizer (SuperBPE): the runs of every document counted as chunks are, then the driver's
supermerge loop.

    plan (same corpus) -> ReadCorpus -> [HoldOutSample] -> CountRuns -> SumRuns -> WriteRuns    (Beam, any runner)
    runs/ -> bpe_core.train.trainer.superword_from_runs -> tokenizer.bpe                               (driver)

A run (``bpe_core.superword``) is a maximal run of two or more pre-tokens that the word model encodes as one token
each, where the rule takes it; runs never cross a document. ``CountRunsFn`` builds the word model once per worker
(from its artifact bytes) and emits each batch's runs as sorted Arrow tables per hash shard, keyed by the run's ids
as little-endian u32 (``chunk: binary, count: int64``, 64-bit, weighted as chunks are); the reduce is the count
stage's own ``MergeCountsFn``. ``runs/_word_model.json`` names the word model (its digest) and the rule, so that
``--from-counts`` reuses ``runs/`` only when it was made with the same word model. ``runs/`` holds every run; the
driver drops those counted fewer than ``--min-run-count`` times (``load_run_columns``, with an exact report) and
hands the rest to the merge loop as columns.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterator

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.metrics import Metrics

from bpe_core import Tokenizer
from bpe_core.formats.artifact import dumps_artifact, loads_artifact
from bpe_core.superword.reference import RunColumns
from bpe_core.train.sorted_counts import shard_of
from pipeline.corpus.records import CorpusStats, DocumentBatch, ShardCounts
from pipeline.errors import ShardFileError
from pipeline.storage.files import glob, read_bytes, remove, write_atomic
from pipeline.storage.paths import join
from pipeline.train.count import STATS_KEY, MergeCountsFn, PartialCount, _to_record
from pipeline.train.counts_files import SCHEMA, _record_batches, _sizes, _system_memory_pool, table_columns

NAMESPACE = "beam_bpe.count_runs"
RUNS_DIR = "runs"
WORD_MODEL_FILE = "_word_model.json"


def runs_shard_name(shard: int, num_shards: int) -> str:
    return f"runs-{shard:05d}-of-{num_shards:05d}.parquet"


class CountRunsFn(beam.DoFn):
    """Document batch -> ``(shard, sorted Arrow table of runs)`` and one ``("stats", {...})`` record."""

    def __init__(self, word_artifact: bytes, rule: str, num_shards: int) -> None:
        self.word_artifact, self.rule, self.num_shards = word_artifact, rule, num_shards
        self.documents = Metrics.counter(NAMESPACE, "documents")
        self.partials = Metrics.counter(NAMESPACE, "partial_counts_out")
        self.runs = None

    def setup(self) -> None:
        from bpe_core.superword.reference import SuperwordPass

        word = Tokenizer.from_data(loads_artifact(self.word_artifact, "<word model>"))
        self.runs = SuperwordPass(word, None, self.rule)

    def process(self, batch: DocumentBatch) -> Iterator[PartialCount]:
        if self.runs is None:
            self.setup()
        counts = self.runs.count_runs(batch.texts, num_threads=1)  # one thread: the runner runs one per core
        by_shard: dict[int, list[bytes]] = {}
        for key in sorted(counts):
            by_shard.setdefault(shard_of(key, self.num_shards), []).append(key)
        occurrences = 0
        for shard in sorted(by_shard):
            keys = by_shard[shard]
            values = [counts[k] * batch.weight for k in keys]
            occurrences += sum(values)
            self.partials.inc()
            yield shard, pa.table([pa.array(keys, pa.binary()), pa.array(values, pa.int64())], schema=SCHEMA)
        self.documents.inc(len(batch.texts))
        yield STATS_KEY, {"documents_counted": len(batch.texts), "run_occurrences": occurrences}


class CountRuns(beam.PTransform):
    """``PCollection[DocumentBatch] -> PCollection[ShardCounts | CorpusStats]``: the runs of every document,
    reduced per hash shard (exact int64 counts, sorted by key)."""

    def __init__(self, word_artifact: bytes, rule: str, num_shards: int = 1) -> None:
        super().__init__()
        self.word_artifact, self.rule, self.num_shards = word_artifact, rule, num_shards

    def expand(self, batches):
        n = self.num_shards
        return (
            batches
            | "CountRunsInBatch" >> beam.ParDo(CountRunsFn(self.word_artifact, self.rule, n))
            | "SumRuns" >> beam.CombinePerKey(MergeCountsFn())
            | "ToRunRecords" >> beam.Map(_to_record, n)
        )


class WriteRunsFn(beam.DoFn):
    """One shard of runs -> ``runs/runs-{i}-of-{n}.parquet``; the statistics -> ``runs/_stats.json``."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir

    def process(self, element) -> Iterator[str]:
        if isinstance(element, ShardCounts):
            path = join(self.out_dir, RUNS_DIR, runs_shard_name(element.shard, element.num_shards))
            write_atomic(path, runs_parquet(element.table))
        elif isinstance(element, CorpusStats):
            path = join(self.out_dir, RUNS_DIR, "_stats.json")
            write_atomic(path, json.dumps(dict(sorted(element.name_to_value.items())), indent=1).encode())
        else:
            raise TypeError(f"WriteRuns got an element it cannot write: {type(element).__name__}")
        yield path


def runs_parquet(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table.cast(SCHEMA), sink, compression="zstd")
    return sink.getvalue().to_pybytes()


def count_runs_pass(plan, word: Tokenizer, rule: str, beam_args: list[str]) -> dict:
    """Run phase 2's pipeline over the plan's corpus; write ``runs/`` and its word-model record; return the stats."""
    from pipeline.corpus.read import ReadCorpus
    from pipeline.launch.options import pipeline_options, run_to_end
    from pipeline.report.sample import HoldOutSample

    job = plan.job
    remove(join(job.out, RUNS_DIR))  # runs of another word model (--out is the --from-counts folder) must not stay
    artifact = dumps_artifact(word)
    pipeline = beam.Pipeline(options=pipeline_options(beam_args, num_ranges=len(plan.corpus.ranges)))
    batches = pipeline | "ReadCorpus" >> ReadCorpus(plan.corpus, job.corpus)
    if job.report:  # the report's sample is never counted, in either phase
        batches = batches | "HoldOutSample" >> HoldOutSample(job.eval_fraction)
    _ = (
        batches
        | "CountRuns" >> CountRuns(artifact, rule, plan.num_shards)
        | "WriteRuns" >> beam.ParDo(WriteRunsFn(job.out))
    )
    run_to_end(pipeline)
    for shard in range(plan.num_shards):  # the layout is complete: an empty shard is an empty file
        path = join(job.out, RUNS_DIR, runs_shard_name(shard, plan.num_shards))
        if not glob(path):
            write_atomic(path, runs_parquet(SCHEMA.empty_table()))
    write_atomic(
        join(job.out, RUNS_DIR, WORD_MODEL_FILE),
        json.dumps({"word_model": word.digest(), "rule": rule}, indent=1).encode(),
    )
    return json.loads(read_bytes(join(job.out, RUNS_DIR, "_stats.json")))


def runs_made_with(runs_dir: str, word: Tokenizer, rule: str) -> bool:
    """True where ``runs_dir`` holds runs counted with this word model and rule (``--from-counts`` reuses them)."""
    try:
        made = json.loads(read_bytes(join(runs_dir, WORD_MODEL_FILE)))
    except (FileNotFoundError, ValueError):
        return False
    return made == {"word_model": word.digest(), "rule": rule}


def load_run_columns(runs_dir: str, *, min_run_count: int = 0) -> tuple[RunColumns, dict]:
    """Every run of ``runs_dir`` as :class:`bpe_core.superword.reference.RunColumns` (no Python object per run) and the
    report: runs and occurrences reduced, dropped below ``min_run_count`` and kept (exact).

    The shards' record batches go into columns sized once from the Parquet metadata: 4 bytes per id, 8 per offset,
    8 per count (16 per run plus 4 per id; the dict this replaces cost about 200 bytes per run). Shards hold
    disjoint runs, each sorted; they are concatenated in shard order (the merge loop does not depend on the order).
    """
    paths = run_shard_paths(runs_dir)
    rows, data = _sizes(paths)
    ids = np.empty(data // 4, np.uint32)
    offsets, counts = np.zeros(rows + 1, np.int64), np.empty(rows, np.int64)
    n = m = 0  # runs and ids kept so far
    t = {"rows": 0, "occurrences": 0, "low_rows": 0, "low_occurrences": 0}
    with _system_memory_pool():
        for path in paths:
            for batch in _record_batches(path):
                cols = table_columns(batch)
                if not len(cols):
                    continue
                lengths = np.diff(cols.offsets.astype(np.int64))
                if (lengths % 4).any() or (lengths < 8).any():
                    raise ShardFileError(f"{path}: a run key is not two or more little-endian u32 ids: count again")
                keep = cols.counts >= min_run_count
                t["rows"] += len(cols)
                t["occurrences"] += _exact_sum(cols.counts)
                t["low_rows"] += int(len(cols) - keep.sum())
                t["low_occurrences"] += _exact_sum(cols.counts[~keep])
                start = int(cols.offsets[0])
                batch_ids = cols.data[start : int(cols.offsets[-1])].view("<u4") if start % 4 == 0 else None
                if batch_ids is None:
                    batch_ids = np.frombuffer(cols.data[start : int(cols.offsets[-1])].tobytes(), "<u4")
                kept_lengths = lengths[keep] // 4
                kept_ids = batch_ids[np.repeat(keep, lengths // 4)]
                k = int(keep.sum())
                if m + len(kept_ids) > len(ids):  # the metadata under-counted: grow (doubling)
                    ids = _grown(ids, m + len(kept_ids))
                if n + k > len(counts):
                    offsets, counts = _grown(offsets, n + k + 1), _grown(counts, n + k)
                ids[m : m + len(kept_ids)] = kept_ids
                np.cumsum(kept_lengths, out=offsets[n + 1 : n + k + 1])
                offsets[n + 1 : n + k + 1] += m
                counts[n : n + k] = cols.counts[keep]
                n, m = n + k, m + len(kept_ids)
    columns = RunColumns(ids[:m], offsets[: n + 1], counts[:n])
    report = {
        "min_run_count": min_run_count,
        "runs_reduced": t["rows"],
        "occurrences_reduced": t["occurrences"],
        "dropped_below_min_run_count": {"runs": t["low_rows"], "occurrences": t["low_occurrences"]},
        "unique_runs": n,
        "run_occurrences": t["occurrences"] - t["low_occurrences"],
    }
    return columns, report


def _grown(array: np.ndarray, needed: int) -> np.ndarray:
    """``array`` with room for at least ``needed`` items, doubled (its items kept, the rest uninitialised)."""
    out = np.empty(max(needed, 2 * len(array)), array.dtype)
    out[: len(array)] = array
    return out


def _exact_sum(counts: np.ndarray) -> int:
    """The exact sum of non-negative int64 counts (a record batch's: at most 2**31 rows), as a Python int."""
    return (int((counts >> 32).sum()) << 32) + int((counts & 0xFFFFFFFF).sum())


def run_shard_paths(runs_dir: str) -> list[str]:
    """The runs shards, checked to be the complete set ``0..n-1 of n``."""
    names = sorted(posixpath.basename(p) for p in glob(join(runs_dir, "runs-*-of-*.parquet")))
    if not names:
        raise ShardFileError(f"no runs-*.parquet files in {runs_dir}: count the runs again over the corpus")
    total = int(names[0].rsplit("-of-", 1)[1].split(".")[0])
    expected = [runs_shard_name(i, total) for i in range(total)]
    if names != expected:
        missing = sorted(set(expected) - set(names))
        raise ShardFileError(f"incomplete runs in {runs_dir}: expected {total} shards, missing {missing[:5]}")
    return [join(runs_dir, name) for name in names]


def superword_stage(plan, beam_args: list[str], reporter) -> dict:
    """Phase 1's word model from ``counts/``, phase 2's runs (counted over the corpus, or reused from the
    ``--from-counts`` folder when made with this word model), the supermerge loop, ``tokenizer.bpe`` per size."""
    import dataclasses
    import time

    from bpe_core.train.trainer import superword_from_runs
    from pipeline.errors import UsageError
    from pipeline.train.counts_files import load_chunk_table, read_stats
    from pipeline.train.driver import train_tokenizer, write_tokenizers

    job, s = plan.job, plan.job.settings
    rule = "letter-run"
    t0 = time.perf_counter()
    counts, chunk_report = load_chunk_table(plan.counts_dir, min_chunk_count=s.min_chunk_count, max_chunks=s.max_chunks)
    word_settings = dataclasses.replace(s, vocab_size=s.word_size, vocab_sizes=(s.word_size,))
    word = train_tokenizer(counts, word_settings, reporter)
    word_seconds = round(time.perf_counter() - t0, 3)
    reporter.stage("word_model", n_vocab=word.n_vocab, seconds=word_seconds)
    runs_dir = None
    if job.from_counts:
        reused = join(plan.counts_dir.rstrip("/").rpartition("/")[0] or ".", RUNS_DIR)
        if runs_made_with(reused, word, rule):
            runs_dir = reused
            reporter.stage("runs_reused", runs=reused, **({"input_not_read": True} if job.inputs else {}))
        elif not job.inputs:
            raise UsageError(
                f"{reused} holds no runs made with this word model ({s.word_size} tokens, rule {rule}): pass the "
                "corpus with --input ... to count them again over it (phase 2 only: the counts are reused), or "
                "train without --from-counts"
            )
    counted = {}
    if runs_dir is None:
        t1 = time.perf_counter()
        sizes = {f.path: f.size for f in plan.corpus.files}
        with reporter.pipeline("count_runs", ranges=plan.corpus.ranges, file_sizes=sizes, beam_args=beam_args):
            run_stats = count_runs_pass(plan, word, rule, beam_args)
        reporter.stage("count_runs", seconds=round(time.perf_counter() - t1, 3), **run_stats)
        runs_dir = join(job.out, RUNS_DIR)
        counted = {"runs_counted": dict(run_stats, seconds=round(time.perf_counter() - t1, 3))}
        phase1 = read_stats(plan.counts_dir)["documents_counted"] if job.from_counts else run_stats["documents_counted"]
        if phase1 != run_stats["documents_counted"]:  # --input is not the corpus the counts were made from
            docs = run_stats["documents_counted"]
            reporter.stage("warning", message=f"phase 2 counted runs in {docs:,} documents, the counts of "
                           f"{plan.counts_dir} came from {phase1:,}: is --input their corpus?")  # fmt: skip
    superword = {"rule": rule, "word_model": s.word_size, "word_model_seconds": word_seconds, **counted}
    out = {"chunk_filter": chunk_report, "superword": superword}
    if job.counts_only:
        return out
    t2 = time.perf_counter()
    runs, run_report = load_run_columns(runs_dir, min_run_count=s.min_run_count)
    run_report["read_runs_seconds"] = round(time.perf_counter() - t2, 3)
    n = s.vocab_size - s.word_size
    tok = superword_from_runs(
        word, runs, n, rule=rule, min_frequency=s.min_frequency, tie_break=s.tie_break, name=s.name
    )
    written = write_tokenizers(tok, s, job.out)
    if job.report:  # the plain tokenizer of each size from the same counts, for the report to show beside it
        counts, _ = load_chunk_table(plan.counts_dir, min_chunk_count=s.min_chunk_count, max_chunks=s.max_chunks)
        plain = train_tokenizer(counts, s, reporter)
        for size in s.vocab_sizes:
            plain.truncated(min(size, plain.n_vocab)).save(join(job.out, "plain", f"v{size}", "tokenizer.bpe"))
    seconds = round(time.perf_counter() - t2, 3)
    reporter.stage("train_superword", supermerges=len(tok.superword.merges), n_vocab=tok.n_vocab, seconds=seconds)
    out["superword"].update(
        run_report,
        supermerges=len(tok.superword.merges),
        not_written=["tokenizer.tiktoken", "tokenizer.json"],
        why="a rank file or tokenizer.json cannot hold supermerges (they join whole pre-tokens)",
    )
    return {
        **out,
        "merges": len(tok.merge_ids),
        "n_vocab": tok.n_vocab,
        **written,
        "train_seconds": seconds,
    }
