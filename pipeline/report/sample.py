"""The held-out sample: documents chosen by a hash of their id, so that every run, runner and sharding picks the
same ones, and training can leave them out of its counts.

A document's id is its file and position (``path@offset``, ``path#row``; see
:func:`pipeline.corpus.records.document_id`), so the sample is a property of the corpus files as planned, never of
the order or the batches in which they are read.

>>> is_held_out("data/a.jsonl@0", 1.0), is_held_out("data/a.jsonl@0", 0.0)
(True, False)
"""

from __future__ import annotations

import hashlib

import apache_beam as beam

from pipeline.corpus.records import DocumentBatch
from pipeline.report.fraction import DEFAULT_EVAL_FRACTION, check_fraction  # noqa: F401 (re-exported)

_SCALE = float(1 << 64)


def is_held_out(doc_id: str, fraction: float) -> bool:
    """Whether the document ``doc_id`` is in the held-out sample of ``fraction`` of the documents."""
    digest = hashlib.sha256(b"beam-bpe eval\0" + doc_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / _SCALE < fraction


def split_batch(batch: DocumentBatch, fraction: float, *, keep_held_out: bool) -> DocumentBatch:
    """The batch with only its held-out documents (``keep_held_out``) or only the others; ``documents_read``
    counts what the batch keeps plus its dead letters, so that the stages' statistics still reconcile."""
    ids = batch.document_ids()
    keep = [k for k, doc_id in enumerate(ids) if is_held_out(doc_id, fraction) == keep_held_out]
    if len(keep) == len(ids):
        return batch
    return batch._replace(
        positions=[batch.positions[k] for k in keep],
        texts=[batch.texts[k] for k in keep],
        documents_read=batch.documents_read - (len(ids) - len(keep)),
    )


class HoldOutSample(beam.PTransform):
    """``PCollection[DocumentBatch]`` without the held-out documents (training counts the rest), or with only them
    (``keep_held_out=True``: the report encodes those)."""

    def __init__(self, fraction: float, *, keep_held_out: bool = False) -> None:
        super().__init__()
        self.fraction, self.keep_held_out = check_fraction(fraction), keep_held_out

    def expand(self, batches):
        return batches | "SplitBatches" >> beam.Map(split_batch, self.fraction, keep_held_out=self.keep_held_out)
