"""Stage: encode documents. Document batches in, encoded batches (flat token arrays) out.

The tokenizer travels to the workers as a small reference (URL, pre-tokenizer, digest) and is loaded once per
worker process in ``setup()``, its digest checked again there; documents are encoded a slice of about 1 MiB at a
time through ``Tokenizer.encode_ordinary_batch`` (one call into the native core per slice), and the ids are
packed into one flat numpy array per batch (plus one length per document) rather than lists of Python ints.

The special-token policy is resolved in exactly one place, :func:`resolve_policy`, into an :class:`EncodePolicy`:
by default text that spells a special token is encoded as ordinary text; ``special_tokens="allowed"`` opts in to
control tokens; BOS/EOS ids are added per document on request.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import apache_beam as beam
import fsspec
import numpy as np
from apache_beam.metrics import Metrics

from bpe_core import StreamingDecoder, Tokenizer
from pipeline.corpus.records import DeadLetter, DocumentBatch

NAMESPACE = "beam_bpe.encode_documents"
SPECIAL_POLICIES = ("ordinary", "allowed")
AUTO = "auto"
# Special tokens taken for --bos / --eos without a value, in this order of preference.
BOS_NAMES = ("<|begin_of_text|>", "<|startoftext|>", "<s>", "<bos>", "<|bos|>")
EOS_NAMES = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eos|>")
SLICE_BYTES = 1 << 20
VERIFY_CHUNKS = (1, 2, 3, 5, 8, 13)  # ids fed to the streaming decoder per call, cycling: splits of every kind
EXCERPT_CHARS = 120


class EncodeError(ValueError):
    """The encoding job cannot run as asked (tokenizer, policy, token names); the message says the fix."""


# ------------------------------------------------------------------ the tokenizer, by reference
@dataclass(frozen=True)
class TokenizerRef:
    """What a worker needs to load the tokenizer: its path or URL (any file or folder ``Tokenizer.from_file``
    reads), the pre-tokenizer for rank-only files, and the digest of what the launcher loaded. Small and
    picklable; the tokenizer itself never travels."""

    url: str
    digest: str
    pretokenizer: str | None = None

    def load(self) -> Tokenizer:
        """The tokenizer, loaded once per process (shared by the DoFn instances of the process) and checked to be
        the one the launcher saw."""
        with _CACHE_LOCK:
            tok = _CACHE.get(self)
            if tok is None:
                tok = Tokenizer.from_file(self.url, pretokenizer=self.pretokenizer)
                digest = tok.digest()
                if digest != self.digest:
                    raise EncodeError(
                        f"the tokenizer {self.url} changed since the job started (digest {digest[:12]}..., expected "
                        f"{self.digest[:12]}...): rerun the job, or keep the file unchanged while it runs"
                    )
                _CACHE[self] = tok
            return tok


_CACHE: dict[TokenizerRef, Tokenizer] = {}
_CACHE_LOCK = threading.Lock()


def open_tokenizer(url: str, pretokenizer: str | None = None) -> tuple[Tokenizer, TokenizerRef]:
    """Load a tokenizer on the launching machine: a file failing its hash or version check fails here, before any
    work. In-process runners reuse this very object (loading cl100k takes 0.7 s, a third of encoding 4 MB).

    >>> tok, ref = open_tokenizer("out/tokenizer.bpe")  # doctest: +SKIP
    """
    tok = Tokenizer.from_file(url, pretokenizer=pretokenizer)
    ref = TokenizerRef(url, tok.digest(), pretokenizer)
    with _CACHE_LOCK:
        _CACHE.setdefault(ref, tok)
    return tok, ref


def file_sha256(url: str) -> str | None:
    """sha256 of a tokenizer file's bytes (None for a folder), for the manifest."""
    fs, path = fsspec.core.url_to_fs(url)
    if not fs.isfile(path):
        return None
    digest = hashlib.sha256()
    with fs.open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ------------------------------------------------------------------ the special-token policy
@dataclass(frozen=True)
class EncodePolicy:
    """How documents become ids: special-token text ordinary (default) or allowed, and the BOS/EOS ids to add."""

    special_tokens: str = "ordinary"
    bos_id: int | None = None
    eos_id: int | None = None

    def encode(self, tok: Tokenizer, texts: list[str]) -> list[list[int]]:
        """The ids of each text, without BOS/EOS: the one place where the policy meets the tokenizer."""
        # One thread per call: the runner already runs one bundle per core (workers x harness threads), and the
        # native threads of encode_batch on top would oversubscribe every core and hold a chunk cache each.
        if self.special_tokens == "allowed":
            return tok.encode_batch(texts, allowed_special="all", disallowed_special=(), num_threads=1)
        return tok.encode_ordinary_batch(texts, num_threads=1)

    @property
    def extra_tokens(self) -> int:
        return (self.bos_id is not None) + (self.eos_id is not None)


def resolve_policy(tok: Tokenizer, *, special_tokens: str = "ordinary", bos: str | None = None, eos: str | None = None) -> EncodePolicy:
    """Check the flags against the tokenizer and fix the ids: ``bos``/``eos`` are None (off), ``"auto"`` (the
    tokenizer's usual token) or a token's text.

    >>> resolve_policy(tok, eos="auto")  # doctest: +SKIP
    EncodePolicy(special_tokens='ordinary', bos_id=None, eos_id=50256)
    """
    if special_tokens not in SPECIAL_POLICIES:
        raise EncodeError(f"--special-tokens must be one of {', '.join(SPECIAL_POLICIES)}, got {special_tokens!r}")
    return EncodePolicy(special_tokens, _token_id(tok, bos, BOS_NAMES, "--bos"), _token_id(tok, eos, EOS_NAMES, "--eos"))


def _token_id(tok: Tokenizer, name: str | None, usual: tuple[str, ...], flag: str) -> int | None:
    if name is None:
        return None
    specials = sorted(tok.special_tokens)
    if name == AUTO:
        found = [t for t in usual if t in tok.special_tokens]
        if not found:
            raise EncodeError(
                f"{flag}: the tokenizer has none of the usual tokens {list(usual)} among its special tokens "
                f"{specials}: name one, e.g. {flag} '<|endoftext|>' (a .tiktoken file has no special tokens: convert "
                "it with the special tokens it is used with)"
            )
        return tok.special_tokens[found[0]]
    token_id = tok.special_tokens.get(name, tok.added_tokens.get(name))
    if token_id is None:
        raise EncodeError(f"{flag} {name!r} is not a special or added token of the tokenizer; its special tokens: {specials}")
    return token_id


# ------------------------------------------------------------------ encoding a batch (no Beam)
class EncodedBatch(NamedTuple):
    """The documents of one document batch as ids: flat ``tokens`` and one length and position per document.

    Documents keep their order; rejected ones (the reader's, failed encodes, failed round trips) are in
    ``dead_letters``. ``documents_read == len(lengths) + len(dead_letters)``.
    """

    range_index: int
    batch_index: int
    last: bool
    source: str
    position_kind: str
    positions: np.ndarray  # int64, one per written document
    lengths: np.ndarray  # int64, tokens per written document (BOS/EOS included)
    tokens: np.ndarray  # all ids back to back, in the shard's dtype
    dead_letters: list[DeadLetter]
    documents_read: int
    text_bytes: int  # UTF-8 bytes of the written documents
    verified: int  # documents whose round trip was checked (and passed)


def encode_batch(tok: Tokenizer, batch: DocumentBatch, policy: EncodePolicy, dtype, *, verify: bool = False) -> EncodedBatch:
    """Encode one document batch; a document that fails to encode or to round-trip becomes a dead letter."""
    dead = list(batch.dead_letters)
    positions, lengths, arrays = [], [], []
    text_bytes = verified = 0
    for start, stop in _slices(batch.texts, SLICE_BYTES):
        texts, kept = batch.texts[start:stop], []
        for i, (text, ids) in enumerate(zip(texts, _encode_slice(tok, texts, policy), strict=True)):
            position = batch.positions[start + i]
            reason = ids if isinstance(ids, str) else (verify_round_trip(tok, text, ids) if verify else None)
            if reason is not None:
                dead.append(DeadLetter(batch.source, position, batch.position_kind, reason, text[:EXCERPT_CHARS]))
                continue
            verified += verify
            kept.append(_with_bos_eos(ids, policy))
            positions.append(position)
            lengths.append(len(kept[-1]))
            text_bytes += len(text.encode("utf-8", "surrogatepass"))
        # packed per slice: the Python lists of one slice (~1 MiB of text), not of the whole batch, are alive at once
        arrays.append(np.fromiter(itertools.chain.from_iterable(kept), dtype=dtype, count=sum(map(len, kept))))
    dead.sort(key=lambda d: d.position)
    tokens = np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)
    return EncodedBatch(
        batch.range_index, batch.batch_index, batch.last, batch.source, batch.position_kind,
        np.asarray(positions, dtype=np.int64), np.asarray(lengths, dtype=np.int64), tokens,
        dead, batch.documents_read, text_bytes, verified,
    )  # fmt: skip


def _slices(texts: list[str], limit: int) -> Iterator[tuple[int, int]]:
    start, size = 0, 0
    for i, text in enumerate(texts):
        size += len(text)
        if size >= limit:
            yield start, i + 1
            start, size = i + 1, 0
    if start < len(texts):
        yield start, len(texts)


def _encode_slice(tok: Tokenizer, texts: list[str], policy: EncodePolicy) -> list[list[int] | str]:
    """Ids per text; if the batch call fails, each text alone, so that only the bad ones fail (as a reason)."""
    try:
        return policy.encode(tok, texts)
    except Exception:  # noqa: BLE001 - any failure is re-run per document below, where it is reported exactly
        pass
    out: list[list[int] | str] = []
    for text in texts:
        try:
            out.append(policy.encode(tok, [text])[0])
        except Exception as exc:  # noqa: BLE001 - a document the tokenizer rejects is a dead letter, not a crash
            out.append(f"encode failed: {type(exc).__name__}: {exc}")
    return out


def _with_bos_eos(ids: list[int], policy: EncodePolicy) -> list[int]:
    if policy.bos_id is not None:
        ids = [policy.bos_id, *ids]
    if policy.eos_id is not None:
        ids = [*ids, policy.eos_id]
    return ids


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
    if got == expected:
        return None
    at = first_difference(expected, got)
    byte = len(expected[:at].encode("utf-8", "surrogatepass"))
    return (
        f"round trip differs at character {at} (byte {byte}): expected {expected[at : at + 20]!r}, "
        f"decoded {got[at : at + 20]!r}"
    )


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
        self.documents.inc(len(encoded.lengths))
        self.bytes.inc(encoded.text_bytes)
        self.tokens.inc(int(encoded.lengths.sum()))
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
