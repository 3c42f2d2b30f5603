"""The engine of a SentencePiece-style :class:`~bpe_core.Tokenizer` (``tok.sentencepiece`` set).

The same methods as :mod:`bpe_core.encode.engines`' backends. Special and added tokens are found by the tokenizer's
``TokenFinder`` as for every vocabulary; each stretch of ordinary text between them is normalized and merged by
the model (:mod:`bpe_core.model.sentencepiece`), with the dummy prefix where the rules put it: at the start of the
text only (``sentencepiece``, Hugging Face's ``prepend_scheme="first"``), or also after each token found in the
text (llama.cpp). The native core (``bpe_core/_native/spm.cpp``) encodes whole texts where no token is to be found
and the normalizer is one it runs (identity, or ``precompiled_charsmap`` applied here first); the reference
merge otherwise, and always with ``backend="python"``.

Decoding follows ``sentencepiece``'s ``Decode``: the pieces' bytes joined (``▁`` as a space, ``<0xNN>`` as its byte,
each invalid byte of a byte run one U+FFFD), the leading space of the first piece dropped where the model adds a
dummy prefix; control and unknown tokens show their text as every special token does here.
"""

from __future__ import annotations

import codecs
import weakref
from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import Any

from bpe_core import native
from bpe_core.model.sentencepiece import BYTE, CONTROL, SPACE, SpmModel, spm_errors
from bpe_core.pretokenize.text import Text
from bpe_core.pretokenize.text import as_str as _as_str

Tokenizer = Any


class SentencePieceBackend:
    """Encode, decode and stream for a SentencePiece-style vocabulary."""

    def __init__(self, tok: Tokenizer, name: str) -> None:
        self._tok = weakref.proxy(tok)
        self.model: SpmModel = tok.sentencepiece
        self.name = name
        self._native: Any = None
        self._native_tried = False
        self.kind = None
        if name == "native":  # the core's tables with the tokenizer, as sentencepiece builds its own at load
            self.native_encoder()

    # ------------------------------------------------------------------------------------------- encoding
    def encode(self, text: Text, allowed: frozenset[str], disallowed: frozenset[str]) -> list[int]:
        text = _as_str(text)
        self._tok.token_finder.check_disallowed(text, disallowed)
        return self._encode_text(text, allowed)

    def encode_ordinary(self, text: Text) -> list[int]:
        return self._encode_text(_as_str(text), frozenset())

    def _encode_text(self, text: str, allowed: frozenset[str]) -> list[int]:
        model = self.model
        out: list[int] = []
        prefix = True
        at_start = True
        for segment in self._tok.token_finder.segments(text, allowed):
            if isinstance(segment, int):
                out.append(segment)
                prefix = model.prefix_after_special
            else:
                out += self.encode_segment(segment, prefix and (at_start or model.prefix_after_special))
                prefix = False
            at_start = False
        return out

    def encode_segment(self, text: str, prefix: bool) -> list[int]:
        """One stretch of ordinary text."""
        if not text:
            return []
        encoder = self.native_encoder()
        if encoder is not None:
            if self.model.charsmap:
                return encoder.encode(self.model.normalize(text, prefix).encode("utf-8", "surrogatepass"), False, False)
            return encoder.encode(text.encode("utf-8", "surrogatepass"), True, prefix)
        return self.model.encode_normalized(self.model.normalize(text, prefix))

    def batch(
        self, texts: Iterable[Text], allowed: frozenset[str], disallowed: frozenset[str], threads: int
    ) -> list[list[int]]:
        texts = list(texts)
        if self.splits_whole_texts(allowed) and not disallowed:
            import numpy as np

            ids, offsets = self.flat(texts, disallowed, threads, np.dtype(np.uint32))
            bounds = offsets.tolist()
            flat = ids.tolist()
            return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        return [self.encode(t, allowed, disallowed) for t in texts]

    def splits_whole_texts(self, allowed: frozenset[str]) -> bool:
        return (
            self.native_encoder() is not None and not self.model.charsmap and self._tok.token_finder.is_plain(allowed)
        )

    def flat(self, texts: list, disallowed: frozenset[str], threads: int, dtype) -> tuple:
        import numpy as np

        for text in texts if disallowed else ():
            self._tok.token_finder.check_disallowed(text, disallowed)
        docs = [_as_str(t) for t in texts]
        return self.native_encoder().encode_flat(docs, threads, dtype == np.uint32)

    def flat_arrow(self, offsets_addr, width, data_addr, data_size, n, threads, dtype) -> tuple:
        import numpy as np

        return self.native_encoder().encode_flat_arrow(
            offsets_addr, width, data_addr, data_size, n, threads, dtype == np.uint32
        )

    def native_encoder(self) -> Any:
        """The core's SpmEncoder, or None (python backend, or a model the core does not run)."""
        if not self._native_tried:
            self._native_tried = True
            if self.name == "native" and native.available():
                from bpe_core.encode.spm_native import make_spm_encoder

                self._native = make_spm_encoder(self.model)
        return self._native

    def merge_piece(self, data: bytes, stats: list[int] | None) -> list[int]:
        return self.model.encode_normalized(bytes(data).decode("utf-8", "surrogateescape"))

    # ------------------------------------------------------------------------------------------- decoding
    def decode_bytes(self, ids: Sequence) -> bytes | None:
        ids = list(ids)
        table = self.decode_table
        try:
            if ids and min(ids) < 0:
                raise IndexError
            data = b"".join([table[i] for i in ids])  # type: ignore[misc]
        except (IndexError, TypeError):
            data = self._tok.levels[-1].decode(ids)  # raises the reference's error for a bad id
        strip = self._leading_strip(ids)
        return data[strip:] if strip else data

    @cached_property
    def decode_table(self) -> list[bytes | None]:
        """The tokenizer's bytes per id, with sentencepiece's surface for ``<unk>`` (`` ⁇ ``) in a ``.model``'s
        rules (Hugging Face and llama.cpp show the piece)."""
        table = list(self._tok.levels[-1].token_bytes)
        model = self.model
        if model.rules == "sentencepiece" and model.unk_id is not None:
            table[model.unk_id] = model.unk_surface.encode("utf-8")
        return table

    def _leading_strip(self, ids: Sequence[int]) -> int:
        """Bytes to drop at the start: the space of a first piece that begins with ``▁`` (sentencepiece's
        ``is_bos_ws``), control tokens before it invisible to the rule (their own text is kept: here, at the
        front, it is the text itself that would be cut, so nothing is dropped then)."""
        model = self.model
        if not model.strips_prefix():
            return 0
        for i in ids:
            i = int(i)
            kind = model.types[i] if 0 <= i < len(model.types) else 0
            if kind == CONTROL:
                return 0 if self._tok.levels[-1].token_bytes[i] else 0
            if kind == BYTE or kind not in (1, 4, 5):
                return 0
            return 1 if model.pieces[i].startswith(SPACE) and model.escape_whitespaces else 0
        return 0

    def decode_flat(self, ids, offsets, errors: str) -> list[str]:
        n_ids = len(ids)
        if offsets[0] < 0 or offsets[-1] > n_ids or (offsets[1:] < offsets[:-1]).any():
            raise ValueError(f"offsets must rise from 0 to at most len(ids) = {n_ids}; got {offsets.tolist()[:10]}")
        bounds = offsets.tolist()
        tok = self._tok
        return [tok.decode(ids[a:b].tolist(), errors) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def stream_state(self, errors: str, skip_special: bool) -> SpmStream:
        return SpmStream(self._tok, self, errors, skip_special)


class SpmStream:
    """A StreamingDecoder's state: the prefix rule decided on the first piece, then an incremental UTF-8 decoder
    (an incomplete ``<0x..>`` run waits for its next bytes)."""

    native = False

    def __init__(self, tok: Tokenizer, backend: SentencePieceBackend, errors: str, skip_special: bool) -> None:
        self._tok = tok
        self._backend = backend
        self._skip_special = skip_special
        self._errors = errors
        self._decoder = codecs.getincrementaldecoder("utf-8")(spm_errors(errors))
        self._started = False

    def step(self, token_id: int) -> str:
        return self.feed([token_id])

    def feed(self, ids: list) -> str:
        if self._skip_special:
            ids = [i for i in ids if not self._tok.is_special(i)]
        if not ids:
            return ""
        if self._started:
            if _has_bad(ids, self._backend.decode_table):
                self._tok.levels[-1].decode(ids)  # raises the reference's error
            table = self._backend.decode_table
            data = b"".join([table[i] for i in ids])  # type: ignore[misc]
        else:
            data = self._backend.decode_bytes(ids)  # the prefix rule, decided on the first piece
            self._started = True
        return self._decoder.decode(data)

    def flush(self) -> str:
        text = self._decoder.decode(b"", final=True)
        self._decoder.reset()
        self._started = False
        return text

    @property
    def pending(self) -> bytes:
        return self._decoder.getstate()[0]


def _has_bad(ids: list, table: list) -> bool:
    """An id that is not an int in the table's range or has no bytes (the checked path then raises its error)."""
    n = len(table)
    return any(not isinstance(i, int) or not 0 <= i < n or table[i] is None for i in ids)


__all__ = ["SentencePieceBackend", "SpmStream"]
