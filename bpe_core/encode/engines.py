"""The two encoding engines behind a :class:`~bpe_core.tokenizer.Tokenizer`, chosen once as an object.

An engine is built from a level (:class:`bpe_core.model.level.Level`: the tables and merges), the special-token
finder and the pre-tokenizer, never from the Tokenizer: :class:`NativeBackend` (the C++ core, ``bpe_core/_native``)
or :class:`ReferenceBackend` (the pure-Python reference, the oracle: the regex split, the chunk cache and the merge
kernel). Both give the same ids, text and errors; the tokenizer, :mod:`bpe_core.encode.flat` and
:mod:`bpe_core.encode.stream` call these methods instead of branching on ``tok.backend``.

Every method takes texts whose special tokens the tokenizer has already resolved: ``allowed`` and ``disallowed``
are frozensets of special-token strings (``TokenFinder.resolve_allowed``/``resolve_disallowed``).
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from bpe_core import native
from bpe_core.model.level import Level
from bpe_core.model.special_tokens import TokenFinder
from bpe_core.pretokenize.pretokenizer import PreTokenizer
from bpe_core.pretokenize.text import Text
from bpe_core.pretokenize.text import as_str as _as_str
from bpe_core.pretokenize.text import as_text as _as_text

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

CHUNK_CACHE_LIMIT = 1 << 18  # pieces in the reference's chunk cache before it is cleared

# Python-split pieces per call into the native encoder when the core cannot split the texts itself (about 1 MB of
# text; the pieces of a 20 MB batch held at once cost 530 MB).
NATIVE_BATCH_PIECES = 1 << 18


class ReferenceBackend:
    """The pure-Python reference: the regex split, the chunk cache and the merge kernel (``Level.encode_bytes``)."""

    name = "python"

    def __init__(self, level: Level, finder: TokenFinder, pretokenizer: PreTokenizer | None) -> None:
        self.level, self.finder, self.pretokenizer = level, finder, pretokenizer
        self._chunk_cache: dict[str, list[int]] = {}

    def encode(self, text: Text, allowed: frozenset[str], disallowed: frozenset[str]) -> list[int]:
        text = _as_str(text)
        self.finder.check_disallowed(text, disallowed)
        return self.encode_text(text, allowed)

    def encode_ordinary(self, text: Text) -> list[int]:
        return self.encode_text(_as_str(text), frozenset())

    def encode_text(self, text: str, allowed: frozenset[str]) -> list[int]:
        """The reference: segments, then the regex split and BPE of each (with the chunk cache)."""
        out: list[int] = []
        for segment in self.finder.segments(text, allowed):
            if isinstance(segment, int):
                out.append(segment)
            else:
                out += self._encode_segment(segment)
        return out

    def pieces(self, text: str, allowed: frozenset[str]) -> list[str | int]:
        """What the native encoder takes: the pre-tokenizer's pieces of each segment, token ids between them."""
        items: list[str | int] = []
        for segment in self.finder.segments(text, allowed):
            if isinstance(segment, int):
                items.append(segment)
            else:
                items += self.split(segment)
        return items

    def split(self, text: str) -> list[str]:
        if self.pretokenizer is None:
            raise ValueError(
                "this tokenizer has no pre-tokenizer: give the one its counts were made with, e.g. "
                "train(counts, vocab_size, pretokenizer='cl100k'), or Tokenizer.from_tiktoken(path, pretokenizer=...)"
            )
        return self.pretokenizer.split(text)

    def _encode_segment(self, text: str) -> list[int]:
        """Ordinary text: normalize, pre-tokenize, then BPE each piece (with the chunk cache)."""
        cache = self._chunk_cache
        out: list[int] = []
        for piece in self.split(text):
            ids = cache.get(piece)
            if ids is None:
                ids = self.level.encode_bytes(piece.encode("utf-8", "surrogateescape"))
                if len(cache) >= CHUNK_CACHE_LIMIT:
                    cache.clear()
                cache[piece] = ids
            out += ids
        return out

    def batch(
        self, texts: Iterable[Text], allowed: frozenset[str], disallowed: frozenset[str], threads: int
    ) -> list[list[int]]:
        return [self.encode(t, allowed, disallowed) for t in texts]

    def flat(self, texts: list, disallowed: frozenset[str], threads: int, dtype: np.dtype) -> None:
        """(ids, offsets) where this engine splits and encodes the whole texts itself; None: not this one."""
        return None

    def splits_whole_texts(self, allowed: frozenset[str]) -> bool:
        """True where :meth:`flat` and :meth:`flat_arrow` take the texts (no token to find, no normalizer)."""
        return False

    def ready(self) -> None:
        """Build now what the first call would build (a loader calls it: ``Tokenizer.from_data``)."""

    def merge_piece(self, data: bytes, stats: list[int] | None) -> list[int]:
        return self.level.merge_bytes(data, stats)

    def decode_bytes(self, ids: Sequence) -> bytes | None:
        """The bytes of ``ids``, or None where this engine leaves them to the tokenizer's checked path."""
        return None

    def decode_flat(self, ids: np.ndarray, offsets: np.ndarray, errors: str) -> list[str]:
        n_ids = len(ids)
        if offsets[0] < 0 or offsets[-1] > n_ids or (offsets[1:] < offsets[:-1]).any():
            raise ValueError(f"offsets must rise from 0 to at most len(ids) = {n_ids}; got {offsets.tolist()[:10]}")
        bounds = offsets.tolist()
        decode = self.level.decode
        return [decode(ids[a:b].tolist()).decode("utf-8", errors) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def stream_state(self, errors: str, skip_special: bool) -> ReferenceStream:
        return ReferenceStream(self.level, errors, skip_special)


class ReferenceStream:
    """The byte state of a StreamingDecoder in Python: codecs' incremental UTF-8 decoder. Bad ids raise the
    tokenizer's own errors (the methods never return None)."""

    native = False

    def __init__(self, level: Level, errors: str, skip_special: bool) -> None:
        self._level = level
        self._skip_special = skip_special
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors)

    def step(self, token_id: int) -> str:
        if self._skip_special and token_id in self._level.special_ids:
            return ""
        return self._decoder.decode(self._level.token(token_id))

    def feed(self, ids: list) -> str:
        if self._skip_special:
            ids = [i for i in ids if i not in self._level.special_ids]
        return self._decoder.decode(self._level.decode(ids))

    def flush(self) -> str:
        text = self._decoder.decode(b"", final=True)
        self._decoder.reset()
        return text

    @property
    def pending(self) -> bytes:
        return self._decoder.getstate()[0]


class NativeBackend(ReferenceBackend):
    """The C++ core. Its encoder and decoder are built on first use; ``kind`` is the hand-written pre-tokenizer's
    name (None: the texts are split by the Python pre-tokenizer and the core gets the pieces)."""

    name = "native"

    def __init__(self, level: Level, finder: TokenFinder, pretokenizer: PreTokenizer | None) -> None:
        super().__init__(level, finder, pretokenizer)
        self._encoder: Any = None
        self._decoder: Any = None
        self.kind: str | None = None  # set with the encoder
        self._literals = False  # the core cuts texts at the added tokens (set with the encoder)

    def encoder(self) -> Any:
        if self._encoder is None:
            level = self.level
            pairs = None if level.rank_only else level.pairs
            encoder = native.make_encoder(level.encodable_vocab(), pairs, level.ignore_merges)
            pre = self.pretokenizer
            self.kind = None if pre is None else getattr(pre, "native_kind", None)
            literals = self._native_literals()
            if literals:
                encoder.set_literals(literals)
            self._literals = bool(literals)
            self._encoder = encoder
        return self._encoder

    def _native_literals(self) -> list[tuple[bytes, int]] | None:
        """The added tokens as (bytes, id) for the core to cut texts at (issue 31 item 3: GGUF user-defined tokens,
        flagless added tokens; mpt's runs of spaces), where that is exactly what the TokenFinder does for an
        ordinary encode: one leftmost-longest pass over the raw text. Not with a normalizer, flags (lstrip, rstrip,
        single_word), a mix of normalized and raw tokens (two passes), or a token without UTF-8."""
        finder = self.finder
        if self.kind is None or not finder.added_tokens:
            return None
        if self.pretokenizer is not None and self.pretokenizer.normalizer:
            return None
        flags = [finder.flags(t) for t in finder.added_tokens]
        if any(f.lstrip or f.rstrip or f.single_word for f in flags) or len({f.normalized for f in flags}) > 1:
            return None
        try:
            return [(t.encode("utf-8"), i) for t, i in sorted(finder.added_tokens.items(), key=lambda kv: kv[1]) if t]
        except UnicodeEncodeError:
            return None

    def _cut_natively(self, allowed: frozenset[str]) -> bool:
        """True where the core takes whole texts: nothing to find, or only the added tokens it finds itself."""
        return self.finder.is_plain(allowed) or (self._literals and not allowed)

    def ready(self) -> None:
        """The encoder built at load, not inside the first call (issue 37 item 1: 0.08 s for cl100k, 0.18 s for
        o200k, 0.5-0.6 s for qwen35 and deepseek-v3 of a first call's time). A build that fails is left to the first
        call, which raises its error as before."""
        try:
            self.encoder()
        except Exception:  # noqa: BLE001 - raised again, where it always was, by the first encode
            self._encoder = None

    def decoder(self) -> Any:
        if self._decoder is None:
            self._decoder = native.make_decoder(self.level.token_bytes, self.level.special_ids)
        return self._decoder

    # ------------------------------------------------------------------------------------------- encoding
    def encode(self, text: Text, allowed: frozenset[str], disallowed: frozenset[str]) -> list[int]:
        text = _as_text(text)
        self.finder.check_disallowed(text, disallowed)
        encoder = self.encoder()
        return encoder.encode(self.request(text, allowed), self.kind)

    def encode_ordinary(self, text: Text) -> list[int]:
        encoder = self.encoder()
        return encoder.encode(self.request(_as_text(text), frozenset()), self.kind)

    def batch(
        self, texts: Iterable[Text], allowed: frozenset[str], disallowed: frozenset[str], threads: int
    ) -> list[list[int]]:
        """Whole texts go to the native encoder in one call when it splits them itself; else one call per
        NATIVE_BATCH_PIECES Python-split pieces."""
        encoder = self.encoder()
        kind = self.kind
        finder = self.finder
        if kind is not None and self._cut_natively(allowed):
            docs = self._whole_texts(texts, disallowed)
            return encoder.encode_batch(docs, kind, threads)
        out: list[list[int]] = []
        requests: list[Text | Sequence[Text | int]] = []
        pending = 0
        for text in texts:
            text = _as_text(text)
            finder.check_disallowed(text, disallowed)
            requests.append(self.request(text, allowed))
            pending += len(requests[-1])
            if pending >= NATIVE_BATCH_PIECES:
                out += encoder.encode_batch(requests, kind, threads)
                requests, pending = [], 0
        return out + encoder.encode_batch(requests, kind, threads) if requests else out

    def splits_whole_texts(self, allowed: frozenset[str]) -> bool:
        self.encoder()  # sets kind
        return self.kind is not None and self._cut_natively(allowed)

    def flat(self, texts: list, disallowed: frozenset[str], threads: int, dtype: np.dtype) -> tuple:
        """(ids, offsets) of whole texts, split and encoded by the core (only where ``splits_whole_texts``)."""
        import numpy as np

        docs = self._whole_texts(texts, disallowed)
        return self.encoder().encode_flat(docs, self.kind, threads, dtype == np.uint32)

    def flat_arrow(
        self, offsets_addr: int, width: int, data_addr: int, data_size: int, n: int, threads: int, dtype: np.dtype
    ) -> tuple:
        """encode_flat_arrow of the core: (ids, offsets), or (None, index, problem, byte offset) for a bad text."""
        import numpy as np

        return self.encoder().encode_flat_arrow(
            offsets_addr, width, data_addr, data_size, n, self.kind, threads, dtype == np.uint32
        )

    def _whole_texts(self, texts: Iterable[Text], disallowed: frozenset[str]) -> list:
        docs = [t if type(t) is str or type(t) is bytes else _as_text(t) for t in texts]
        for text in docs if disallowed else ():
            self.finder.check_disallowed(text, disallowed)
        return docs

    def request(self, text: Text, allowed: frozenset[str]) -> Text | Sequence[Text | int]:
        """What the native encoder takes for one text. With a hand-written pre-tokenizer: the text itself when it
        is one plain segment (bytes stay bytes: invalid UTF-8 splits as its surrogateescape decoding), else its
        normalized segments and token ids. Otherwise the pieces of the regex split and token ids."""
        finder = self.finder
        kind = self.kind
        if kind is not None and self._cut_natively(allowed):
            return text
        text = _as_str(text)
        if kind is None:
            return self.pieces(text, allowed)
        pre = self.pretokenizer
        if pre is None or not pre.normalizer:
            return list(finder.segments(text, allowed))
        return [s if isinstance(s, int) else pre.normalize(s) for s in finder.segments(text, allowed)]

    def merge_piece(self, data: bytes, stats: list[int] | None) -> list[int]:
        ids, pushes, pops = self.encoder().merge_bytes(bytes(data), stats is not None)
        if stats is not None:
            stats[:] = [pushes, pops]
        return ids

    # ------------------------------------------------------------------------------------------- decoding
    def decode_bytes(self, ids: Sequence) -> bytes | None:
        return self.decoder().decode_bytes(ids)

    def decode_flat(self, ids: np.ndarray, offsets: np.ndarray, errors: str) -> list[str]:
        texts, bad = self.decoder().decode_flat(ids, offsets, errors)
        if texts is not None:
            return texts
        self.level.decode(ids[offsets[bad] : offsets[bad + 1]].tolist())  # raises the reference's error
        raise AssertionError("decode_flat: the native decoder refused ids that decode_bytes took")  # pragma: no cover

    def stream_state(self, errors: str, skip_special: bool) -> Any:
        """The core's StreamState: the same pending bytes and CPython's stateful UTF-8 decoder, without a Python
        call per token; a bad id gives None (the StreamingDecoder then raises the reference's error)."""
        return native.make_stream_state(self.decoder(), errors, skip_special)


def make_backend(name: str, level: Level, finder: TokenFinder, pretokenizer: PreTokenizer | None) -> ReferenceBackend:
    """The engine named by ``native.resolve_backend`` (``"native"`` or ``"python"``) of one level."""
    return (NativeBackend if name == "native" else ReferenceBackend)(level, finder, pretokenizer)


__all__ = ["NATIVE_BATCH_PIECES", "NativeBackend", "ReferenceBackend", "ReferenceStream", "make_backend"]
