"""Stage and job: documents, bytes and tokens per input file as a Beam pipeline (``beam-bpe count-tokens`` with Beam
options: ``--runner``, ``--direct_running_mode``, ``--workers``, ...).

    plan (driver) -> ReadCorpus -> CountTokens: per batch (file, documents, bytes, tokens, dead letters),
                                   summed per file (CombinePerKey) -> one JSON row per file -> driver

Each batch is encoded with the job's tokenizer (special-token text as ordinary text, as the local path and the
encoding pipeline by default) and only its four integers leave the DoFn: no id is kept beyond a batch. The rows
travel back as small files (Dask's runner has no metrics, and up to Beam 2.77 drops ``finish_bundle`` output): in a
temporary folder on this machine for the local runners, under ``--temp_location`` for remote ones. The result is the
local path's layout, ``{"files": [...], "total": {...}}``, in the plan's file order, the same on every runner.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Iterable, Iterator, Sequence

import apache_beam as beam
import fsspec
import numpy as np
import pyarrow.compute as pc
from apache_beam.metrics import Metrics

from pipeline.corpus.plan import CorpusPlan, CorpusSpec
from pipeline.corpus.records import DocumentBatch, split_by_source
from pipeline.corpus.texts import text_bytes as batch_text_bytes
from pipeline.encode.tokenizer import TokenizerRef
from pipeline.storage.files import glob, read_bytes, remove
from pipeline.storage.paths import join

NAMESPACE = "beam_bpe.count_tokens"
COLUMNS = ("documents", "bytes", "tokens", "dead_letters")


def text_bytes(texts) -> int:
    """UTF-8 bytes of a batch's texts (an Arrow column where the reader made one; the readers check UTF-8)."""
    arrow = getattr(texts, "arrow", None)
    if arrow is not None:
        return int(pc.sum(pc.binary_length(arrow)).as_py() or 0)
    return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)


class CountBatchTokensFn(beam.DoFn):
    """Document batch -> ``(source index, (documents, bytes, tokens, dead letters))``; the ids are dropped here."""

    def __init__(self, tokenizer: TokenizerRef) -> None:
        self.tokenizer_ref = tokenizer
        self.tok = None
        self.batches = Metrics.counter(NAMESPACE, "batches")
        self.tokens = Metrics.counter(NAMESPACE, "tokens")

    def setup(self) -> None:
        self.tok = self.tokenizer_ref.load()

    def process(self, batch: DocumentBatch) -> Iterator[tuple[int, tuple[int, int, int, int]]]:
        if self.tok is None:
            self.setup()
        offsets = sizes = None
        if len(batch.texts):
            texts = getattr(batch.texts, "arrow", batch.texts)
            # one thread: the runner already runs one bundle per core
            _, offsets = self.tok.encode_ordinary_flat(texts, num_threads=1)
            sizes = np.concatenate([[0], np.cumsum(batch_text_bytes(texts))])
        self.batches.inc()
        for _, source_index, lo, hi, dead in split_by_source(batch):  # a batch of several small files: one row each
            tokens = int(offsets[hi] - offsets[lo]) if hi > lo else 0
            size = int(sizes[hi] - sizes[lo]) if hi > lo else 0
            self.tokens.inc(tokens)
            yield source_index, (hi - lo, size, tokens, dead)


class SumColumnsFn(beam.CombineFn):
    """Tuples of integers summed column by column (exact Python ints)."""

    def create_accumulator(self) -> tuple[int, ...]:
        return (0,) * len(COLUMNS)

    def add_input(self, acc: tuple[int, ...], value: Sequence[int]) -> tuple[int, ...]:
        return tuple(a + b for a, b in zip(acc, value, strict=True))

    def merge_accumulators(self, accumulators: Iterable[tuple[int, ...]]) -> tuple[int, ...]:
        total = self.create_accumulator()
        for acc in accumulators:
            total = self.add_input(total, acc)
        return total

    def extract_output(self, acc: tuple[int, ...]) -> tuple[int, ...]:
        return acc


class CountTokens(beam.PTransform):
    """``PCollection[DocumentBatch] -> PCollection[(source index, (documents, bytes, tokens, dead letters))]``, one
    element per input file that gave a batch.

    >>> rows = batches | "CountTokens" >> CountTokens(ref)  # doctest: +SKIP
    """

    def __init__(self, tokenizer: TokenizerRef) -> None:
        super().__init__()
        self.tokenizer = tokenizer

    def expand(self, batches):
        return (
            batches
            | "CountBatchTokens" >> beam.ParDo(CountBatchTokensFn(self.tokenizer))
            | "SumPerFile" >> beam.CombinePerKey(SumColumnsFn())
        )


def _write_row(item: tuple[int, tuple[int, ...]], folder: str) -> str:
    index, values = item
    path = join(folder, f"row-{index:06d}.json")
    with fsspec.open(path, "wb", auto_mkdir=True) as f:  # a retried bundle writes the same row again
        f.write(json.dumps([index, list(values)]).encode())
    return path


def build_count_tokens_graph(pipeline: beam.Pipeline, plan: CorpusPlan, spec: CorpusSpec, ref: TokenizerRef, rows):
    """Add reading, counting and the per-file rows (written into the folder ``rows``) to ``pipeline``."""
    from pipeline.corpus.read import ReadCorpus

    return (
        pipeline
        | "ReadCorpus" >> ReadCorpus(plan, spec)
        | "CountTokens" >> CountTokens(ref)
        | "WriteRows" >> beam.Map(_write_row, rows)
    )


def rows_folder(beam_args: Sequence[str]) -> str:
    """Where the workers leave their rows: under ``--temp_location`` where given, else a local temporary folder."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions

    temp = PipelineOptions(list(beam_args)).view_as(GoogleCloudOptions).temp_location
    if temp:
        return join(temp, f"beam-bpe-count-tokens-{uuid.uuid4().hex}")
    return tempfile.mkdtemp(prefix="beam-bpe-count-tokens-")


def count_tokens_job(
    plan: CorpusPlan, spec: CorpusSpec, ref: TokenizerRef, beam_args: Sequence[str], *, reporter=None
) -> dict:
    """Run the pipeline; ``{"files": [{"file", "documents", "bytes", "tokens", "dead_letters"}], "total": {...}}``
    in the plan's file order (a file with no document has zeros). ``reporter`` (a ``Reporter``) draws the read's
    progress bar on a terminal (``--no-progress``: none)."""
    import contextlib

    from pipeline.launch.checks import check_launch
    from pipeline.launch.options import pipeline_options, run_to_end

    folder = rows_folder(beam_args)
    check_launch(list(beam_args), paths={"--input": [f.path for f in plan.files], "--temp_location": [folder]})
    try:
        sizes = {f.path: f.size for f in plan.files}
        bar = (reporter.pipeline("count-tokens", ranges=plan.ranges, file_sizes=sizes, beam_args=beam_args)
               if reporter is not None else contextlib.nullcontext())  # fmt: skip
        with bar:
            pipeline = beam.Pipeline(options=pipeline_options(list(beam_args), num_ranges=len(plan.ranges)))
            build_count_tokens_graph(pipeline, plan, spec, ref, folder)
            run_to_end(pipeline)
        found = {}
        for path in glob(join(folder, "row-*.json")):
            index, values = json.loads(read_bytes(path))
            found[index] = values
    finally:
        remove(folder)
    files = [{"file": f.path, **dict(zip(COLUMNS, found.get(i, [0] * len(COLUMNS)), strict=True))}
             for i, f in enumerate(plan.files)]  # fmt: skip
    total = {key: sum(row[key] for row in files) for key in COLUMNS}
    return {"files": files, "total": total}
