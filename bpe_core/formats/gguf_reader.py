"""The metadata (key-value) section of a GGUF file, read as a stream: the tensors after it are never touched.

Layout (GGUF v2 and v3, https://github.com/ggml-org/ggml/blob/master/docs/gguf.md): ``GGUF`` magic, uint32 version,
uint64 tensor count, uint64 key-value count, then per key: a string key (uint64 length + UTF-8), a uint32 value
type and the value (scalars, strings, or typed arrays). Files written on big-endian machines have a byte-swapped
version, which is how they are recognised (as the ``gguf`` package does).

Why not ``gguf.GGUFReader``: it memory-maps the file and builds a numpy view per string, 26 s for the Llama 3
vocabulary (128,256 tokens + 280,147 merges) against about 0.5 s here; and it needs a local path.
"""

from __future__ import annotations

import struct

from bpe_core._io import open_input
from bpe_core.errors import TokenizerFileError

MAGIC = b"GGUF"
STRING, ARRAY = 8, 9
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_MAX_LENGTH = 1 << 31  # a longer string or array than this means a corrupt length field
_CHUNK = 1 << 20


def read_gguf_metadata(path: str) -> dict[str, object]:
    """All metadata keys of a GGUF file; raises TokenizerFileError naming the file and the problem.

    >>> read_gguf_metadata("ggml-vocab-gpt-2.gguf")["tokenizer.ggml.model"]  # doctest: +SKIP
    'gpt2'
    """
    with open_input(str(path)) as f:
        stream = _Stream(f, str(path))
        if stream.take(4) != MAGIC:
            raise TokenizerFileError(path, "does not start with the GGUF magic bytes: not a GGUF file")
        stream.order = _byte_order(stream, path)
        stream.scalar("Q")  # tensor count
        count = stream.scalar("Q")
        if count > _MAX_LENGTH:
            raise TokenizerFileError(path, f"header declares {count} metadata keys: the header is corrupt")
        meta: dict[str, object] = {}
        for _ in range(count):
            key = stream.string("a metadata key")
            if key in meta:
                raise TokenizerFileError(path, f"metadata key {key!r} appears twice: the header is corrupt")
            meta[key] = stream.value(stream.scalar("I"), key)
        return meta


def _byte_order(stream: _Stream, path: str) -> str:
    raw = stream.take(4)
    version = struct.unpack("<I", raw)[0]
    order = "<"
    if version & 0xFFFF == 0:
        version, order = struct.unpack(">I", raw)[0], ">"
    if version not in (2, 3):
        raise TokenizerFileError(
            path, f"GGUF version {version} is not supported (versions 2 and 3 are); re-convert with a current llama.cpp"
        )
    return order


class _Stream:
    """Little reads over a file object, refilled a megabyte at a time."""

    def __init__(self, f, path: str) -> None:
        self.f, self.path, self.buf, self.pos, self.order = f, path, b"", 0, "<"

    def _need(self, n: int, what: str) -> None:
        if len(self.buf) - self.pos >= n:
            return
        parts = [self.buf[self.pos :]]
        have = len(parts[0])
        while have < n:
            # bounded reads: a corrupt length must end in 'truncated', not in one read of the length it declares
            chunk = self.f.read(max(_CHUNK, min(n - have, 16 * _CHUNK)))
            if not chunk:
                raise TokenizerFileError(self.path, f"file ends inside {what}: it is truncated or corrupt")
            parts.append(chunk)
            have += len(chunk)
        self.buf, self.pos = b"".join(parts), 0

    def take(self, n: int, what: str = "the header") -> bytes:
        self._need(n, what)
        data = self.buf[self.pos : self.pos + n]
        self.pos += n
        return data

    def scalar(self, code: str, what: str = "the header"):
        size = struct.calcsize(code)
        self._need(size, what)
        value = struct.unpack_from(self.order + code, self.buf, self.pos)[0]
        self.pos += size
        return value

    def string(self, what: str) -> str:
        length = self.scalar("Q", what)
        if length > _MAX_LENGTH:
            raise TokenizerFileError(self.path, f"{what} has length {length}: the file is corrupt")
        data = self.take(length, what)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise TokenizerFileError(self.path, f"{what} is not UTF-8: {data[:40]!r}") from None

    def strings(self, count: int, what: str) -> list[str]:
        """``count`` strings in a row; the hot loop of a vocabulary (400k strings for Llama 3). The native core reads
        what the buffer holds (Qwen 3.5's 303k strings: 0.10-0.12 s -> 0.039 s); a string it stops at (past the buffer,
        not UTF-8, too long) is read by the loop below, with its errors."""
        fast = _native_strings()
        if fast is None:
            return self._strings(count, what)
        out: list[str] = []
        while len(out) < count:
            got, self.pos = fast(self.buf, self.pos, count - len(out), self.order == ">", _MAX_LENGTH)
            out += got
            if len(out) < count:
                out += self._strings(1, what)
        return out

    def _strings(self, count: int, what: str) -> list[str]:
        unpack = struct.Struct(self.order + "Q").unpack_from
        raw: list[bytes] = []
        buf, pos = self.buf, self.pos
        for _ in range(count):
            if pos + 8 > len(buf):
                self.pos = pos
                self._need(8, what)
                buf, pos = self.buf, self.pos
            length = unpack(buf, pos)[0]
            pos += 8
            if pos + length > len(buf):
                if length > _MAX_LENGTH:
                    raise TokenizerFileError(self.path, f"{what} has length {length}: the file is corrupt")
                self.pos = pos
                self._need(length, what)
                buf, pos = self.buf, self.pos
            raw.append(buf[pos : pos + length])
            pos += length
        self.pos = pos
        try:
            return [b.decode("utf-8") for b in raw]
        except UnicodeDecodeError:
            bad = next(b for b in raw if not _is_utf8(b))
            raise TokenizerFileError(self.path, f"{what} is not UTF-8: {bad[:40]!r}") from None

    def value(self, kind: int, key: str):
        if kind in _SCALARS:
            return self.scalar(_SCALARS[kind], f"the value of {key!r}")
        if kind == STRING:
            return self.string(f"the value of {key!r}")
        if kind == ARRAY:
            return self.array(key)
        raise TokenizerFileError(self.path, f"metadata key {key!r} has unknown value type {kind}: the file is corrupt")

    def array(self, key: str) -> list:
        kind = self.scalar("I", f"the array {key!r}")
        count = self.scalar("Q", f"the array {key!r}")
        if count > _MAX_LENGTH:
            raise TokenizerFileError(self.path, f"array {key!r} declares {count} elements: the file is corrupt")
        if kind in _SCALARS:
            code = _SCALARS[kind]
            size = struct.calcsize(code) * count
            self._need(size, f"the array {key!r}")
            values = list(struct.unpack_from(f"{self.order}{count}{code}", self.buf, self.pos))
            self.pos += size
            return values
        if kind == STRING:
            return self.strings(count, f"an element of {key!r}")
        if kind == ARRAY:
            return [self.array(key) for _ in range(count)]
        raise TokenizerFileError(self.path, f"array {key!r} has unknown element type {kind}: the file is corrupt")


def _native_strings():
    """The core's reader of GGUF string arrays, or None where the core did not load (the Python loop reads)."""
    from bpe_core import native

    return getattr(native._core, "gguf_strings", None) if native.available() else None


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
