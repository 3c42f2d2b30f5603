"""Stage: encode documents. Document batches in, encoded batches (flat token arrays) out.

The tokenizer travels to the workers as a small reference (URL, pre-tokenizer, digest) and is loaded once per
worker process in ``setup()``, its digest checked again there; a batch's texts (one Arrow column from the readers)
are encoded by one call of the flat API (``Tokenizer.encode_ordinary_flat`` / ``encode_flat``, read in place, one
thread), which returns the ids and offsets as two numpy arrays: no Python int per token, no str per document.
A document the batch call refuses (``InvalidTextError`` names it; any other failure is re-run per document) is a
dead letter and the others are encoded; BOS/EOS are inserted into the flat arrays with numpy; ``--verify`` decodes
the flat arrays with ``Tokenizer.decode_flat`` and compares each document with its text.

The special-token policy and the separators are resolved in pipeline/encode/policy.py (:class:`EncodePolicy`); the
tokenizer's reference is pipeline/encode/tokenizer.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import NamedTuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.metrics import Metrics

from bpe_core import InvalidTextError, StreamingDecoder, Tokenizer
from pipeline.corpus.records import DeadLetter, DocumentBatch, per_document
from pipeline.corpus.texts import TextColumn, text_bytes
from pipeline.encode.policy import EncodePolicy
from pipeline.encode.tokenizer import TokenizerRef

NAMESPACE = "beam_bpe.encode_documents"
VERIFY_CHUNKS = (1, 2, 3, 5, 8, 13)  # ids fed to the streaming decoder per call, cycling: splits of every kind
EXCERPT_CHARS = 120


# ------------------------------------------------------------------ encoding a batch (no Beam)
class EncodedBatch(NamedTuple):
    """The documents of one document batch as ids: flat ``tokens`` and ``offsets`` (document i is
    ``tokens[offsets[i]:offsets[i + 1]]``, BOS/EOS included) and one position per document.

    Documents keep their order; rejected ones (the reader's, failed encodes, failed round trips) are in
    ``dead_letters``. ``documents_read == len(positions) + len(dead_letters)``.
    """

    range_index: int
    batch_index: int
    last: bool
    source: str
    position_kind: str
    positions: np.ndarray  # int64, one per written document
    offsets: np.ndarray  # int64, one more than the written documents, from 0 to len(tokens)
    tokens: np.ndarray  # all ids back to back, in the shard's dtype
    dead_letters: list[DeadLetter]
    documents_read: int
    text_bytes: int  # UTF-8 bytes of the written documents
    verified: int  # documents whose round trip was checked (and passed)
    # where the documents come from several files: (source, source_index, documents, tokens, text_bytes) of the
    # written documents, by file (DocumentBatch.source_runs with their counts)
    source_runs: tuple = ()
    doc_text_bytes: np.ndarray | None = None  # UTF-8 bytes of each written document (the --shuffle stage's sums)

    @property
    def lengths(self) -> np.ndarray:
        """Tokens per written document (int64)."""
        return np.diff(self.offsets)


def encode_batch(
    tok: Tokenizer, batch: DocumentBatch, policy: EncodePolicy, dtype, *, verify: bool = False
) -> EncodedBatch:
    """Encode one document batch with one flat call; a document that fails to encode or to round-trip becomes a
    dead letter."""
    texts = batch.texts.arrow if isinstance(batch.texts, TextColumn) else batch.texts
    ids, offsets, reasons = _encode_all(tok, texts, policy)
    verified = 0
    if verify:
        failed = _verify(tok, texts, ids, offsets, reasons)
        verified = len(texts) - len(reasons) - len(failed)
        reasons.update(failed)
    positions = np.asarray(batch.positions, dtype=np.int64)
    dead = list(batch.dead_letters)
    sources = per_document(batch.source_runs) if batch.source_runs else None
    for i, reason in reasons.items():
        source = sources[i] if sources else batch.source
        dead.append(DeadLetter(source, int(positions[i]), batch.position_kind, reason, _excerpt(texts, i)))
    keep = np.ones(len(texts), dtype=bool)
    keep[list(reasons)] = False
    if reasons:
        ids, offsets = _select(ids, offsets, keep)
    ids, offsets = _with_bos_eos(ids, offsets, policy)
    kept_bytes = text_bytes(texts)[keep]
    dead.sort(key=lambda d: (d.source, d.position) if batch.source_runs else d.position)
    return EncodedBatch(
        batch.range_index, batch.batch_index, batch.last, batch.source, batch.position_kind,
        positions[keep], offsets, ids.astype(dtype, copy=False), dead, batch.documents_read,
        int(kept_bytes.sum()), verified, _kept_runs(batch.source_runs, keep, offsets, kept_bytes), kept_bytes,
    )  # fmt: skip


def _kept_runs(runs: tuple, keep: np.ndarray, offsets: np.ndarray, kept_bytes: np.ndarray) -> tuple:
    """A batch's source runs after its rejected documents are dropped (runs left empty go), with the tokens and
    text bytes of each."""
    if not runs:
        return ()
    out, start, at = [], 0, 0
    for source, source_index, n in runs:
        kept = int(keep[start : start + n].sum())
        start += n
        if kept:
            tokens = int(offsets[at + kept] - offsets[at])
            out.append((source, source_index, kept, tokens, int(kept_bytes[at : at + kept].sum())))
            at += kept
    return tuple(out)


def _excerpt(texts, i: int) -> str:
    """The start of text ``i``; from an Arrow array as bytes, since the text may be what is not valid UTF-8."""
    if isinstance(texts, list):
        return texts[i][:EXCERPT_CHARS]
    raw = texts.slice(i, 1).cast(pa.large_binary())[0].as_py() or b""
    return raw[: EXCERPT_CHARS * 4].decode("utf-8", "backslashreplace")[:EXCERPT_CHARS]


def _encode_all(tok: Tokenizer, texts, policy: EncodePolicy) -> tuple[np.ndarray, np.ndarray, dict[int, str]]:
    """``(ids, offsets)`` of every text (a refused one gets no ids) and the reason of each refused text.

    One flat call for the batch; where it raises InvalidTextError, the named text is set aside and the call
    resumes after it; any other failure is re-run per text, so that only the bad ones fail.
    """
    reasons: dict[int, str] = {}
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    start = 0
    while start < len(texts) or not parts:
        try:
            parts.append(policy.encode_flat(tok, texts[start:]))
            break
        except InvalidTextError as exc:
            bad = start + exc.index
            parts.append(policy.encode_flat(tok, texts[start:bad]))
            reasons[bad] = f"encode failed: {exc}"
            parts.append((np.zeros(0, np.uint32), np.zeros(2, np.int64)))
            start = bad + 1
        except Exception:  # noqa: BLE001 - any failure is re-run per document below, where it is reported exactly
            parts.append(_encode_each(tok, texts, start, policy, reasons))
            break
    return (*_join(parts), reasons)


def _encode_each(
    tok: Tokenizer, texts, start: int, policy: EncodePolicy, reasons: dict[int, str]
) -> tuple[np.ndarray, np.ndarray]:
    parts = []
    for i in range(start, len(texts)):
        try:
            parts.append(policy.encode_flat(tok, texts[i : i + 1]))
        except Exception as exc:  # noqa: BLE001 - a document the tokenizer rejects is a dead letter, not a crash
            reasons[i] = f"encode failed: {type(exc).__name__}: {exc}"
            parts.append((np.zeros(0, np.uint32), np.zeros(2, np.int64)))
    return _join(parts)


def _join(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """One (ids, offsets) from consecutive pieces."""
    if len(parts) == 1:
        return parts[0]
    dtype = np.result_type(*(ids.dtype for ids, _ in parts))
    bases = np.cumsum([0] + [len(ids) for ids, _ in parts[:-1]])
    offsets = np.concatenate([np.zeros(1, np.int64)] + [o[1:] + b for (_, o), b in zip(parts, bases, strict=True)])
    return np.concatenate([ids.astype(dtype, copy=False) for ids, _ in parts]), offsets


def _select(ids: np.ndarray, offsets: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The documents where ``keep`` is true (the others' ids removed)."""
    lengths = np.diff(offsets)
    kept_ids = ids[np.repeat(keep, lengths)]
    new_offsets = np.zeros(int(keep.sum()) + 1, np.int64)
    np.cumsum(lengths[keep], out=new_offsets[1:])
    return kept_ids, new_offsets


def _with_bos_eos(ids: np.ndarray, offsets: np.ndarray, policy: EncodePolicy) -> tuple[np.ndarray, np.ndarray]:
    """The flat arrays with a BOS before and an EOS after every document, placed with numpy."""
    extra = policy.extra_tokens
    if not extra:
        return ids, offsets
    n = len(offsets) - 1
    lengths = np.diff(offsets)
    new_offsets = offsets + extra * np.arange(n + 1, dtype=np.int64)
    dtype = np.result_type(ids.dtype, np.min_scalar_type(max(policy.bos_id or 0, policy.eos_id or 0)))
    out = np.empty(len(ids) + extra * n, dtype=dtype)
    shift = np.repeat(extra * np.arange(n, dtype=np.int64) + (policy.bos_id is not None), lengths)
    out[np.arange(len(ids)) + shift] = ids
    if policy.bos_id is not None:
        out[new_offsets[:-1]] = policy.bos_id
    if policy.eos_id is not None:
        out[new_offsets[1:] - 1] = policy.eos_id
    return out, new_offsets


def _verify(tok: Tokenizer, texts, ids: np.ndarray, offsets: np.ndarray, refused: dict[int, str]) -> dict[int, str]:
    """The reasons of the documents whose ids do not decode (``decode_flat``, from the flat arrays) to their text."""
    decoded = tok.decode_flat(ids, offsets)
    expected = texts.to_pylist() if not isinstance(texts, list) else texts
    pre = tok.pretokenizer
    if pre is not None and pre.normalizer:
        expected = [pre.normalize(t) for t in expected]
    return {
        i: _difference(want, got)
        for i, (want, got) in enumerate(zip(expected, decoded, strict=True))
        if want != got and i not in refused
    }


def _difference(expected: str, got: str) -> str:
    at = first_difference(expected, got)
    byte = len(expected[:at].encode("utf-8", "surrogatepass"))
    return (
        f"round trip differs at character {at} (byte {byte}): expected {expected[at : at + 20]!r}, "
        f"decoded {got[at : at + 20]!r}"
    )


def verify_round_trip(tok: Tokenizer, text: str, ids: list[int]) -> str | None:
    """Decode ``ids`` with a StreamingDecoder fed in small chunks; None if it gives ``text`` back, else the reason
    with the first differing offset. Normalizing tokenizers are compared with the normalized text."""
    decoder = StreamingDecoder(tok)
    pieces, pos = [], 0
    for size in itertools.cycle(VERIFY_CHUNKS):
        if pos >= len(ids):
            break
        pieces.append(decoder.feed(ids[pos : pos + size]))
        pos += size
    pieces.append(decoder.flush())
    got = "".join(pieces)
    pre = tok.pretokenizer
    expected = pre.normalize(text) if pre is not None and pre.normalizer else text
    return None if got == expected else _difference(expected, got)


def first_difference(a: str, b: str) -> int:
    """The first index where ``a`` and ``b`` differ (the shorter length if one is a prefix of the other).

    >>> first_difference("hello", "help")
    3
    """
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while hi - lo > 1:  # invariant: a[:lo] == b[:lo] and a[:hi] != b[:hi]
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


# ------------------------------------------------------------------ the Beam stage
class EncodeDocumentsFn(beam.DoFn):
    """Document batch -> encoded batch. Counts documents, bytes, tokens, dead letters and verified documents."""

    def __init__(self, tokenizer: TokenizerRef, policy: EncodePolicy, dtype: str, *, verify: bool = False) -> None:
        self.tokenizer, self.policy, self.dtype, self.verify = tokenizer, policy, dtype, verify
        self.documents = Metrics.counter(NAMESPACE, "documents")
        self.bytes = Metrics.counter(NAMESPACE, "bytes")
        self.tokens = Metrics.counter(NAMESPACE, "tokens")
        self.dead_letters = Metrics.counter(NAMESPACE, "dead_letters")
        self.verified = Metrics.counter(NAMESPACE, "verified")
        self.tok: Tokenizer | None = None

    def setup(self) -> None:
        self.tok = self.tokenizer.load()

    def process(self, batch: DocumentBatch) -> Iterator[EncodedBatch]:
        if self.tok is None:  # runners that skip setup() (none known; cheap to guard)
            self.setup()
        encoded = encode_batch(self.tok, batch, self.policy, np.dtype(self.dtype), verify=self.verify)
        self.documents.inc(len(encoded.positions))
        self.bytes.inc(encoded.text_bytes)
        self.tokens.inc(int(encoded.offsets[-1]))
        self.dead_letters.inc(len(encoded.dead_letters))
        self.verified.inc(encoded.verified)
        yield encoded


class EncodeDocuments(beam.PTransform):
    """``PCollection[DocumentBatch] -> PCollection[EncodedBatch]``: every document as ids, in order.

    >>> encoded = batches | "EncodeDocuments" >> EncodeDocuments(ref, EncodePolicy(), "uint16")  # doctest: +SKIP
    """

    def __init__(self, tokenizer: TokenizerRef, policy: EncodePolicy, dtype: str, *, verify: bool = False) -> None:
        super().__init__()
        self.tokenizer, self.policy, self.dtype, self.verify = tokenizer, policy, dtype, verify

    def expand(self, batches):
        fn = EncodeDocumentsFn(self.tokenizer, self.policy, self.dtype, verify=self.verify)
        return batches | "EncodeBatches" >> beam.ParDo(fn)
