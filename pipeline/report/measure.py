"""Stage: encode the held-out documents with every tokenizer of the report and sum what each one makes of them.

Each batch is encoded once per tokenizer with the flat encoder (one native call per batch, one thread: the runner
runs a bundle per core), and reduced inside ``process()`` to a few integers and a per-id use count; a CombineFn
sums them over the corpus, so the sample may be as large as the corpus (the figures are the same on any split).

    batches -> HoldOutSample(keep_held_out) -> MeasureFn -> CombineGlobally(SumMeasuresFn) -> WriteMeasures
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics

from pipeline.corpus.records import DocumentBatch
from pipeline.report.sample import HoldOutSample
from pipeline.report.specs import TokenizerSpec
from pipeline.storage.files import write_atomic

NAMESPACE = "beam_bpe.report"
SCALARS = ("documents", "bytes", "words", "tokens", "multibyte_bytes")


def measure_texts(tok, token_lengths: np.ndarray, texts: list[str]) -> dict:
    """The figures of one tokenizer on ``texts``: documents, bytes, words, tokens, bytes inside multi-byte tokens,
    and ``uses`` (int64 per id)."""
    ids, _ = tok.encode_ordinary_flat(texts, num_threads=1)
    lengths = token_lengths[ids]
    return {
        "documents": len(texts),
        "bytes": sum(len(t.encode("utf-8", "surrogatepass")) for t in texts),
        "words": sum(len(t.split()) for t in texts),
        "tokens": int(len(ids)),
        "multibyte_bytes": int(lengths[lengths > 1].sum()),
        "uses": np.bincount(ids, minlength=len(token_lengths)).astype(np.int64),
    }


class MeasureFn(beam.DoFn):
    """Document batch -> ``{label: figures}`` for every tokenizer (loaded once per worker, in ``setup``)."""

    def __init__(self, specs: tuple[TokenizerSpec, ...]) -> None:
        self.specs = specs
        self.documents = Metrics.counter(NAMESPACE, "documents_measured")
        self.tokenizers: list | None = None

    def setup(self) -> None:
        self.tokenizers = []
        for spec in self.specs:
            tok = spec.load()
            lengths = np.array([len(b or b"") for b in (_bytes_or_none(tok, i) for i in range(tok.n_vocab))], np.int64)
            self.tokenizers.append((spec.label, tok, lengths))

    def process(self, batch: DocumentBatch) -> Iterator[dict]:
        if self.tokenizers is None:
            self.setup()
        if not batch.texts:
            return
        self.documents.inc(len(batch.texts))
        yield {label: measure_texts(tok, lengths, batch.texts) for label, tok, lengths in self.tokenizers}


def _bytes_or_none(tok, token_id: int) -> bytes | None:
    try:
        return tok.token_bytes(token_id)
    except ValueError:  # an id without a token (cl100k's 100256)
        return None


def add_figures(acc: dict, figures: dict) -> dict:
    for label, f in figures.items():
        mine = acc.get(label)
        if mine is None:
            acc[label] = {**f, "uses": f["uses"].copy()}
            continue
        for key in SCALARS:
            mine[key] += f[key]
        mine["uses"] += f["uses"]
    return acc


class SumMeasuresFn(beam.CombineFn):
    """Sum the figures of every tokenizer (integers and use counts: exact, independent of how the input splits)."""

    def create_accumulator(self) -> dict:
        return {}

    def add_input(self, acc: dict, figures: dict) -> dict:
        return add_figures(acc, figures)

    def merge_accumulators(self, accumulators: Iterable[dict]) -> dict:
        merged: dict = {}
        for acc in accumulators:
            merged = add_figures(merged, acc)
        return merged

    def extract_output(self, acc: dict) -> dict:
        return acc


def save_measures(measures: dict, path: str) -> str:
    """The summed figures as one ``.npz`` (scalars and use counts per label), read back by :func:`load_measures`."""
    arrays = {}
    for k, (label, f) in enumerate(sorted(measures.items())):
        arrays[f"label_{k}"] = np.array(label)
        arrays[f"scalars_{k}"] = np.array([f[key] for key in SCALARS], np.int64)
        arrays[f"uses_{k}"] = f["uses"]
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    write_atomic(path, buffer.getvalue())
    return path


def load_measures(path: str) -> dict:
    from pipeline.storage.files import read_bytes

    data = np.load(io.BytesIO(read_bytes(path)))
    out = {}
    k = 0
    while f"label_{k}" in data:
        scalars = data[f"scalars_{k}"].tolist()
        out[str(data[f"label_{k}"])] = {**dict(zip(SCALARS, scalars, strict=True)), "uses": data[f"uses_{k}"]}
        k += 1
    return out


class MeasureTokenizers(beam.PTransform):
    """``PCollection[DocumentBatch] -> PCollection[str]``: the held-out documents encoded by every tokenizer, the
    figures summed and written to ``path`` (one element: the path)."""

    def __init__(self, specs: tuple[TokenizerSpec, ...], fraction: float, path: str) -> None:
        super().__init__()
        self.specs, self.fraction, self.path = tuple(specs), fraction, path

    def expand(self, batches):
        return (
            batches
            | "SelectHeldOut" >> HoldOutSample(self.fraction, keep_held_out=True)
            | "EncodeHeldOut" >> beam.ParDo(MeasureFn(self.specs))
            | "SumMeasures" >> beam.CombineGlobally(SumMeasuresFn())
            | "WriteMeasures" >> beam.Map(save_measures, self.path)
        )
