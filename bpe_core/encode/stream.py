"""Streaming decoding: text out as soon as it is complete, incomplete UTF-8 held back.

Works on bytes with the standard library's incremental UTF-8 decoder, not on a U+FFFD heuristic: a real U+FFFD in
the text passes through, an incomplete sequence waits for its next bytes, and a sequence that can no longer
complete becomes U+FFFD at once. For every split of a token stream, the concatenated output equals
``tokenizer.decode(ids, errors="replace")`` (tested over all splits with hypothesis).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from bpe_core.encode.engines import ReferenceStream
from bpe_core.model.vocab import as_token_id

if TYPE_CHECKING:  # the floor below the Tokenizer: its shape (model/data.py), not the class
    from bpe_core.model.data import TokenizerLike as Tokenizer

__all__ = ["StreamingDecoder", "as_token_id"]


class StreamingDecoder:
    """Decode a stream of token ids incrementally.

    >>> dec = StreamingDecoder(tok)  # doctest: +SKIP
    >>> dec.feed(ids[:3]) + dec.feed(ids[3:]) + dec.flush() == tok.decode(ids)  # doctest: +SKIP
    True

    ``skip_special=True`` drops special tokens from the output (they are shown by default).
    """

    def __init__(self, tokenizer: Tokenizer, *, skip_special: bool = False, errors: str = "replace") -> None:
        self.tokenizer = tokenizer
        self.skip_special = skip_special
        # The backend's byte state (bpe_core.encode.engines): the native one holds the same pending bytes and runs
        # CPython's stateful UTF-8 decoder without a Python call per token; its bad ids come back as None and are
        # reported here as the reference reports them. The reference's raises its errors itself.
        self._state = tokenizer.engine.stream_state(errors, skip_special)
        self._native = None if isinstance(self._state, ReferenceStream) else self._state

    def step(self, token_id: int) -> str:
        """Add one token; return the text that became complete."""
        token_id = as_token_id(token_id)
        try:
            text = self._state.step(token_id)
        except TypeError:  # not an integer at all (None, a float): reported below as the reference does
            if self._native is None:
                raise
            text = None
        if text is not None:
            return text
        self.tokenizer.token_bytes(token_id)  # raises the reference's error for a bad id
        raise ValueError(f"token id {token_id!r} is not in this vocabulary")

    def feed(self, ids: Iterable[int]) -> str:
        """Add several tokens; return the text that became complete."""
        ids = list(ids)
        text = self._state.feed(ids)
        if text is not None:
            return text
        self.tokenizer.decode_bytes(ids)  # raises the reference's error for a bad id
        raise ValueError(f"token ids not in this vocabulary: {ids[:10]}")

    def flush(self) -> str:
        """End of stream: held-back bytes become U+FFFD (with errors='replace'); the decoder is reset."""
        return self._state.flush()

    @property
    def pending(self) -> bytes:
        """The bytes held back, waiting for the rest of a UTF-8 sequence."""
        return self._state.pending
