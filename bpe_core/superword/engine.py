"""The engine of a superword tokenizer: its first level's engine, then the superword pass over its second level
(the supermerges), native where the core aligns ids with pieces and the reference (``superword.reference``) where
it cannot; decoding is the engine of the whole vocabulary's."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from bpe_core.pretokenize.text import Text
from bpe_core.pretokenize.text import as_str as _as_str
from bpe_core.superword.reference import Supermerges, SuperwordPass, WordModel, encode_reference


class SuperwordBackend:
    """The engine of a superword tokenizer, built from its two levels: ``word``, the first level's engine
    (bpe_core/encode/engines.py), for the ids of each pre-token, then the superword pass over the second level's
    supermerges (native where it aligns, else the reference); decoding is ``plain``'s, the engine of the second
    level's tables (the whole vocabulary)."""

    def __init__(self, word: Any, plain: Any, finder: Any, supermerges: Supermerges) -> None:
        self._word = word
        self._plain = plain
        self._finder = finder
        self._supermerges = supermerges
        self.name = plain.name
        self._model = WordModel(word.level, finder, word.pretokenizer, word)
        self._pass = SuperwordPass(self._model, supermerges)

    @property
    def kind(self) -> str | None:
        return getattr(self._word, "kind", None)

    def encoder(self) -> Any:
        return self._word.encoder()

    def decoder(self) -> Any:
        return self._plain.decoder()

    # ------------------------------------------------------------------------------------------- encoding
    def encode(self, text: Text, allowed: frozenset[str], disallowed: frozenset[str]) -> list[int]:
        self._finder.check_disallowed(_as_str(text), disallowed)
        return self._segments(text, allowed)

    def encode_ordinary(self, text: Text) -> list[int]:
        return self._segments(text, frozenset())

    def _segments(self, text: Text, allowed: frozenset[str]) -> list[int]:
        """Bytes stay bytes to the pass (invalid UTF-8 reads as its surrogateescape characters, as the plain engine
        reads it); a str's lone surrogates read as U+FFFD (the reference, through as_str)."""
        sup = self._supermerges
        raw = isinstance(text, (bytes, bytearray, memoryview))
        if raw:
            text = bytes(text)
        if self._pass.native_pass is None:
            return encode_reference(self._model, sup, text, allowed)
        segments = list(self._finder.segments(_as_str(text), allowed))
        pieces = [s.encode("utf-8", "surrogateescape") if raw else s for s in segments if not isinstance(s, int)]
        ids, offsets = self._pass.encode_flat(pieces, 1)
        bounds = offsets.tolist()
        out: list[int] = []
        k = 0
        for s in segments:
            if isinstance(s, int):
                out.append(s)
            else:
                out += ids[bounds[k] : bounds[k + 1]].tolist()
                k += 1
        return out

    def batch(
        self, texts: Iterable[Text], allowed: frozenset[str], disallowed: frozenset[str], threads: int
    ) -> list[list[int]]:
        texts = list(texts)
        if not self.splits_whole_texts(allowed):
            return [self.encode(t, allowed, disallowed) for t in texts]
        for text in texts if disallowed else ():
            self._finder.check_disallowed(_as_str(text), disallowed)
        ids, offsets = self._pass.encode_flat(texts, threads)
        bounds = offsets.tolist()
        return [ids[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def splits_whole_texts(self, allowed: frozenset[str]) -> bool:
        return self._pass.native_pass is not None and self._word.splits_whole_texts(allowed)

    def flat(self, texts: list, disallowed: frozenset[str], threads: int, dtype: Any) -> tuple:
        for text in texts if disallowed else ():
            self._finder.check_disallowed(_as_str(text), disallowed)
        ids, offsets = self._pass.encode_flat(texts, threads)
        return ids.astype(dtype, copy=False), offsets

    def flat_arrow(
        self, offsets_addr: int, width: int, data_addr: int, data_size: int, n: int, threads: int, dtype: Any
    ) -> tuple:
        """The Arrow array read in place by the word model's engine, its bytes viewed for the pass."""
        import ctypes

        import numpy as np

        result = self._word.flat_arrow(offsets_addr, width, data_addr, data_size, n, threads, np.uint32)
        if result[0] is None:
            return result
        kind = ctypes.c_int64 if width == 8 else ctypes.c_int32
        offsets = np.ctypeslib.as_array((kind * (n + 1)).from_address(offsets_addr)).astype(np.int64)
        data = np.ctypeslib.as_array((ctypes.c_uint8 * max(data_size, 1)).from_address(data_addr or 1))
        data = data[offsets[0] : offsets[-1]] if data_size else np.zeros(0, dtype=np.uint8)
        texts = [bytes(data[a:b]) for a, b in zip((offsets - offsets[0])[:-1], (offsets - offsets[0])[1:], strict=True)]
        ids, out_offsets = self._pass.encode_flat(texts, threads, word_flat=lambda _docs: (result[0], result[1]))
        return ids.astype(dtype, copy=False), out_offsets

    def merge_piece(self, data: bytes, stats: list[int] | None) -> list[int]:
        return self._word.merge_piece(data, stats)

    # ------------------------------------------------------------------------------------------- decoding
    def decode_bytes(self, ids: Sequence) -> bytes | None:
        return self._plain.decode_bytes(ids)

    def decode_flat(self, ids: Any, offsets: Any, errors: str) -> list[str]:
        return self._plain.decode_flat(ids, offsets, errors)

    def stream_state(self, errors: str, skip_special: bool) -> Any:
        return self._plain.stream_state(errors, skip_special)
