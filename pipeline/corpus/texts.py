"""The texts of a document batch as one Arrow column (what the readers give and the flat encoder reads in place).

``DocumentBatch.texts`` (pipeline/corpus/records.py) is a :class:`TextColumn` when a reader made the batch, and
``positions`` an int64 numpy array; stages and tests that build batches by hand may pass lists of str and int.
A :class:`TextColumn` reads as a sequence of ``str`` for the callers that want Python strings, so that those
work unchanged on either.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa


class TextColumn(Sequence):
    """The texts of a batch as one Arrow ``large_string`` array (valid UTF-8, no nulls: the readers check).

    The encoder hands ``arrow`` to the flat API, which reads it in place; callers that want Python strings index,
    slice or iterate it as a sequence of ``str`` (converted once, on first iteration, and not pickled).

    >>> texts = TextColumn.from_strings(["a", "bc"])
    >>> len(texts), texts[1], list(texts[1:])
    (2, 'bc', ['bc'])
    """

    __slots__ = ("_list", "arrow")

    def __init__(self, arrow: pa.Array) -> None:
        self.arrow = arrow
        self._list: list[str] | None = None

    @classmethod
    def from_strings(cls, texts: list[str]) -> TextColumn:
        return cls(pa.array(texts, pa.large_string()))

    def __len__(self) -> int:
        return len(self.arrow)

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self.arrow))
            if step == 1:
                return TextColumn(self.arrow.slice(start, max(0, stop - start)))
            return TextColumn.from_strings(self.to_list()[index])
        return self.to_list()[index] if self._list is not None else self.arrow[index].as_py()

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_list())

    def to_list(self) -> list[str]:
        if self._list is None:
            self._list = self.arrow.to_pylist()
        return self._list

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TextColumn):
            return self.arrow.equals(other.arrow)
        return isinstance(other, (list, tuple)) and self.to_list() == list(other)

    __hash__ = None  # type: ignore[assignment] - mutable cache, compared by value

    def __reduce__(self):
        return TextColumn, (self.arrow,)

    def __repr__(self) -> str:
        return f"TextColumn({len(self)} texts)"


def text_bytes(texts) -> np.ndarray:
    """UTF-8 bytes of each text (int64), from the Arrow offsets where the texts are a column."""
    if isinstance(texts, TextColumn):
        texts = texts.arrow
    if isinstance(texts, pa.Array):
        if len(texts) == 0:
            return np.zeros(0, np.int64)
        offsets = np.frombuffer(texts.buffers()[1], np.int64 if pa.types.is_large_string(texts.type) else np.int32)
        return np.diff(offsets[texts.offset : texts.offset + len(texts) + 1]).astype(np.int64)
    return np.fromiter((len(t.encode("utf-8", "surrogatepass")) for t in texts), np.int64, len(texts))
