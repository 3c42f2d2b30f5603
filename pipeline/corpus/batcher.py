"""The batcher every corpus reader fills: documents and dead letters of one range, cut into batches of about
``batch_bytes`` (``CorpusSpec.batch_bytes``), and the dead-letter reasons the readers share."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pipeline.corpus.plan import CorpusSpec
from pipeline.corpus.records import CorpusRange, DeadLetter, DocumentBatch
from pipeline.corpus.texts import TextColumn

EXCERPT_CHARS = 120
# What a document costs in a batch beyond its text (str header, position int, list slots), counted towards
# batch_bytes: without it, 20 M empty lines (a 20 KB gzip file) made one batch and took 1.3 GB.
DOCUMENT_OVERHEAD = 64


class Batcher:
    """Collects documents and dead letters of one range and cuts them into batches of about ``batch_bytes``.

    Documents come as Arrow columns (the fast paths) or one by one as Python strings (the exact paths); a batch's
    texts are concatenated into one ``large_string`` array, in file order, when it is taken.
    """

    def __init__(self, rng: CorpusRange, spec: CorpusSpec, position_kind: str) -> None:
        self.rng, self.spec, self.kind = rng, spec, position_kind
        self.source, self.source_index = rng.source, rng.source_index
        self.runs: list[list] = []  # [source, source_index, documents] of the batch's documents, by file
        self.columns: list[pa.Array] = []
        self.column_positions: list[np.ndarray] = []
        self.positions: list[int] = []
        self.texts: list[str] = []
        self.dead: list[DeadLetter] = []
        self.read = self.bytes = self.batch_index = 0
        self.pending = 0

    def begin_file(self, source: str, source_index: int) -> None:
        """The documents and dead letters from here on are of this file (a range of several files)."""
        self.source, self.source_index = source, source_index

    def _count(self, documents: int) -> None:
        if self.runs and self.runs[-1][1] == self.source_index:
            self.runs[-1][2] += documents
        else:
            self.runs.append([self.source, self.source_index, documents])

    def add(self, position: int, text: str, size: int) -> None:
        self._count(1)
        self.positions.append(position)
        self.texts.append(text)
        self.read += 1
        self.bytes += size
        self.pending += size + DOCUMENT_OVERHEAD

    def add_column(self, positions: np.ndarray, texts: pa.Array, size: int) -> None:
        """Documents parsed together: their positions (int64) and texts (valid UTF-8, no nulls), ``size`` bytes."""
        if not len(texts):
            return
        self._close_strings()
        self._count(len(texts))
        self.column_positions.append(positions.astype(np.int64, copy=False))
        self.columns.append(texts if texts.type == pa.large_string() else texts.cast(pa.large_string()))
        self.read += len(texts)
        self.bytes += size
        self.pending += size + DOCUMENT_OVERHEAD * len(texts)

    def _close_strings(self) -> None:
        if self.texts:
            self.column_positions.append(np.asarray(self.positions, dtype=np.int64))
            self.columns.append(pa.array(self.texts, pa.large_string()))
            self.positions, self.texts = [], []

    def reject(self, position: int, reason: str, raw: bytes | str = b"", size: int = 0) -> None:
        self._count(0)  # a file with dead letters only still has its run
        self.dead.append(DeadLetter(self.source, position, self.kind, reason, _excerpt(raw)))
        self.read += 1
        self.bytes += size
        self.pending += min(size, EXCERPT_CHARS * 4) + DOCUMENT_OVERHEAD

    def add_dead(self, dead: DeadLetter) -> None:
        """A dead letter found elsewhere (a joined block's, pipeline/corpus/packed.py), of the current file."""
        self._count(0)
        self.dead.append(dead)
        self.read += 1
        self.pending += len(dead.excerpt) * 4 + DOCUMENT_OVERHEAD

    def full(self) -> bool:
        return self.pending >= self.spec.batch_bytes

    def take(self, *, last: bool = False) -> DocumentBatch:
        r = self.rng
        self._close_strings()
        texts = pa.concat_arrays(self.columns) if self.columns else pa.array([], pa.large_string())
        positions = np.concatenate(self.column_positions) if self.column_positions else np.zeros(0, np.int64)
        source, source_index = (self.runs[0][0], self.runs[0][1]) if self.runs else (self.source, self.source_index)
        batch = DocumentBatch(
            r.index, self.batch_index, last, source, source_index, r.weight, self.kind,
            positions, TextColumn(texts), self.dead, self.read, self.bytes,
            tuple(map(tuple, self.runs)) if len(self.runs) > 1 else (),
        )  # fmt: skip
        self.columns, self.column_positions, self.dead, self.runs = [], [], [], []
        self.read = self.bytes = self.pending = 0
        self.batch_index += 1
        return batch


def too_long(size: int, limit: int) -> str:
    return f"document of {size} bytes is longer than --max-document-bytes {limit}"


def _excerpt(raw: bytes | str) -> str:
    if isinstance(raw, bytes):
        raw = raw[: EXCERPT_CHARS * 4].decode("utf-8", "backslashreplace")
    return raw[:EXCERPT_CHARS]
