"""The engine of a superword tokenizer: its first level's engine, then the superword pass over its second level
(the supermerges), native where the core aligns ids with pieces and the reference (``superword.reference``) where
it cannot; decoding is the engine of the whole vocabulary's."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from bpe_core.pretokenize.text import Text
from bpe_core.pretokenize.text import as_str as _as_str
from bpe_core.superword.reference import Supermerges, SuperwordPass, WordModel, encode_reference


def _is_bytes(text: Text) -> bool:
    return isinstance(text, (bytes, bytearray, memoryview))


class SuperwordBackend:
    """The engine of a superword tokenizer, built from its two levels: ``word``, the first level's engine
    (bpe_core/encode/engines.py), and the second level's supermerges; decoding is ``plain``'s, the engine of the
    second level's tables (the whole vocabulary).

    Where the core can align ids with pieces (``SuperwordPass.native_pass``: a hand-written pre-tokenizer, no
    normalizer), the second level is attached to the word engine's own native encoder (issue 37 item 6): it applies
    the supermerges to each run as it writes the word ids, so every call (one text, a batch, flat, Arrow) is the
    word engine's call, with no second split and no second buffer. That engine is this backend's own (made for it
    by Tokenizer._make_backend), so nothing else sees its ids. Elsewhere the reference encodes."""

    def __init__(self, word: Any, plain: Any, finder: Any, supermerges: Supermerges) -> None:
        self._word = word
        self._plain = plain
        self._finder = finder
        self._supermerges = supermerges
        self.name = plain.name
        self._model = WordModel(word.level, finder, word.pretokenizer, word)
        self._pass = SuperwordPass(self._model, supermerges)
        self._attached = False

    @property
    def kind(self) -> str | None:
        return getattr(self._word, "kind", None)

    def _fused(self) -> Any:
        """The word engine with the second level attached, or None where the reference encodes."""
        if self._pass.native_pass is None:
            return None
        if not self._attached:
            self._pass.attach(self._word.encoder())
            self._attached = True
        return self._word

    def ready(self) -> None:
        """The encoder built (and its second level attached) at load, as NativeBackend.ready: a build that fails
        is left to the first call, which raises its error."""
        try:
            self._fused()
        except Exception:  # noqa: BLE001 - raised again by the first encode
            pass

    def encoder(self) -> Any:
        return self._fused().encoder() if self._pass.native_pass is not None else self._word.encoder()

    def decoder(self) -> Any:
        return self._plain.decoder()

    # ------------------------------------------------------------------------------------------- encoding
    def encode(self, text: Text, allowed: frozenset[str], disallowed: frozenset[str]) -> list[int]:
        fused = self._fused()
        if fused is not None:
            return fused.encode(text, allowed, disallowed)
        self._finder.check_disallowed(_as_str(text), disallowed)
        return encode_reference(self._model, self._supermerges, bytes(text) if _is_bytes(text) else text, allowed)

    def encode_ordinary(self, text: Text) -> list[int]:
        fused = self._fused()
        if fused is not None:
            return fused.encode_ordinary(text)
        return encode_reference(self._model, self._supermerges, bytes(text) if _is_bytes(text) else text)

    def batch(
        self, texts: Iterable[Text], allowed: frozenset[str], disallowed: frozenset[str], threads: int
    ) -> list[list[int]]:
        fused = self._fused()
        if fused is not None:
            return fused.batch(texts, allowed, disallowed, threads)
        return [self.encode(t, allowed, disallowed) for t in texts]

    def splits_whole_texts(self, allowed: frozenset[str]) -> bool:
        fused = self._fused()
        return fused is not None and fused.splits_whole_texts(allowed)

    def flat(self, texts: list, disallowed: frozenset[str], threads: int, dtype: Any) -> tuple:
        return self._fused().flat(texts, disallowed, threads, dtype)

    def flat_arrow(
        self, offsets_addr: int, width: int, data_addr: int, data_size: int, n: int, threads: int, dtype: Any
    ) -> tuple:
        return self._fused().flat_arrow(offsets_addr, width, data_addr, data_size, n, threads, dtype)

    def merge_piece(self, data: bytes, stats: list[int] | None) -> list[int]:
        return self._word.merge_piece(data, stats)

    # ------------------------------------------------------------------------------------------- decoding
    def decode_bytes(self, ids: Sequence) -> bytes | None:
        return self._plain.decode_bytes(ids)

    def decode_flat(self, ids: Any, offsets: Any, errors: str) -> list[str]:
        return self._plain.decode_flat(ids, offsets, errors)

    def stream_state(self, errors: str, skip_special: bool) -> Any:
        return self._plain.stream_state(errors, skip_special)
