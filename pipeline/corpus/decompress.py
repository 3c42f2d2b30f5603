"""Read a compressed corpus file as a stream, telling a damaged file apart from a failed read.

Why not fsspec's ``compression=``: its zstd reader (``zstandard.stream_reader``) returns a truncated ``.zst`` file's
bytes as if the file were whole (no error at all: the cut last line became a document), and bz2 reports a corrupt
stream as a bare ``OSError``, the same type as a network failure. Here the decompressors are driven one step at a
time, so that every error they raise is damage (the rest of the file becomes a dead letter) while an error reading
the compressed bytes propagates unchanged (the bundle fails and the runner retries it), and a stream that ends
before its end marker is damage too. Concatenated gzip members, bz2 streams and zstd frames are read in order.

Memory per step is bounded: gzip and bz2 take ``max_length``; zstd has no such argument, so it is fed 1 KiB of
compressed input at a time (zstd's largest ratio, run-length blocks, is ~32,768: at most ~32 MiB per step for a
bomb). Measured on fortunes_multi (18 MB as .zst): 1 KiB steps 0.029 s, ``stream_reader`` 0.032 s (loaded machine).
"""

from __future__ import annotations

import bisect
import bz2
import struct
import zlib
from collections.abc import Iterator

import zstandard

RAW_BLOCK = 1 << 16  # compressed bytes read from the source at a time
OUT_BLOCK = 1 << 20  # most decompressed bytes one gzip or bz2 step returns
ZSTD_STEP = 1 << 10


class DamagedStream(Exception):
    """The compressed bytes are corrupt or end early; the decompressed bytes before the damage are good."""


class _Gzip:
    def __init__(self) -> None:
        self.d, self.eof = zlib.decompressobj(wbits=31), False  # 31: gzip header and CRC-32/size trailer checked

    def step(self, data: bytes) -> tuple[bytes, bytes, bool]:
        out = self.d.decompress(data, OUT_BLOCK)
        self.eof = self.d.eof
        rest = self.d.unused_data if self.eof else self.d.unconsumed_tail
        return out, rest, not self.eof and len(out) == OUT_BLOCK


class _Bz2:
    def __init__(self) -> None:
        self.d, self.eof = bz2.BZ2Decompressor(), False

    def step(self, data: bytes) -> tuple[bytes, bytes, bool]:
        out = self.d.decompress(data, OUT_BLOCK)
        self.eof = self.d.eof
        return out, self.d.unused_data if self.eof else b"", not self.eof and not self.d.needs_input


class _Zstd:
    def __init__(self) -> None:
        self.d, self.eof = zstandard.ZstdDecompressor().decompressobj(), False

    def step(self, data: bytes) -> tuple[bytes, bytes, bool]:
        out = self.d.decompress(data[:ZSTD_STEP])
        self.eof = self.d.eof
        rest = data[ZSTD_STEP:]
        return out, (self.d.unused_data + rest) if self.eof else rest, False


_DECODERS = {"gzip": _Gzip, "bz2": _Bz2, "zstd": _Zstd}


def decompressed_chunks(raw, compression: str) -> Iterator[bytes]:
    """The decompressed bytes of ``raw`` (a binary file object), in pieces; DamagedStream where the damage is."""
    new = _DECODERS[compression]
    decoder, started, more, data = new(), False, False, b""
    while True:
        if not data and not more:
            data = raw.read(RAW_BLOCK)  # an error here is the source's, not the stream's: it propagates
            if not data:
                break
        if not started and compression == "gzip":
            data = data.lstrip(b"\0")  # zero padding after a member, as gzip.GzipFile allows
            if not data:
                continue
        started = started or bool(data)
        try:
            out, data, more = decoder.step(data)
        except Exception as exc:  # noqa: BLE001 - whatever a decompressor raises, the compressed bytes are bad
            raise DamagedStream(f"{type(exc).__name__}: {exc}") from exc
        if out:
            yield out
        if decoder.eof:
            decoder, started, more = new(), False, False
    if started:
        raise DamagedStream("EOFError: the compressed stream ends before its end marker (the file is truncated)")


class DecompressedFile:
    """``read(n)`` and ``read1(n)`` over :func:`decompressed_chunks` (all that the line reader needs)."""

    def __init__(self, raw, compression: str) -> None:
        self._chunks, self._head = decompressed_chunks(raw, compression), b""

    def read1(self, n: int = OUT_BLOCK) -> bytes:
        if not self._head:
            self._head = next(self._chunks, b"")
        out, self._head = self._head[:n], self._head[n:]
        return out

    def read(self, n: int) -> bytes:
        parts, size = [], 0
        while size < n:
            part = self.read1(n - size)
            if not part:
                break
            parts.append(part)
            size += len(part)
        return b"".join(parts)


WINDOW_RAW_STEP = 1 << 14  # compressed bytes per read when windows are placed: the positions' resolution


class _Counting:
    """A binary file object that counts the bytes read from it (the compressed position of a stream), read in
    steps of ``WINDOW_RAW_STEP`` (at RAW_BLOCK, a file of under 64 KiB put every window at its start)."""

    def __init__(self, raw) -> None:
        self.raw, self.position, self.offset = raw, 0, 0  # bytes read; where in the file the next read starts

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(WINDOW_RAW_STEP if n < 0 else min(n, WINDOW_RAW_STEP))
        self.position += len(data)
        self.offset += len(data)
        return data

    def seek(self, offset: int) -> None:
        self.raw.seek(offset)
        self.offset = offset


SEEKABLE_MAGIC = 0x8F92EAB1  # the footer of zstd's seekable format (contrib/seekable_format: its seek table)


def zstd_frame_starts(raw, size: int) -> list[int] | None:
    """The compressed offsets at which the frames of a zstd file in the seekable format start, from its seek table
    (a skippable frame at the end: an entry per frame, then frames, descriptor and magic); None where the file has
    no seek table. Each frame decompresses alone, so a window far into the file starts at its frame."""
    if size < 17:
        return None
    raw.seek(size - 9)
    frames, descriptor, magic = struct.unpack("<IBI", raw.read(9))
    entry = 12 if descriptor & 0x80 else 8
    table = 8 + frames * entry + 9
    if magic != SEEKABLE_MAGIC or not frames or table > size:
        raw.seek(0)
        return None
    raw.seek(size - table + 8)
    data = raw.read(frames * entry)
    raw.seek(0)
    starts, at = [], 0
    for i in range(frames):
        starts.append(at)
        at += struct.unpack_from("<I", data, i * entry)[0]
    return starts if at == size - table else None


class StreamWindows:
    """Windows of whole lines spread through a compressed file's decompressed bytes, for the training pre-flight.

    A stream cannot be entered in the middle (a deflate or zstd block needs what came before it), so the file is
    decompressed from its start and what lies between the windows is discarded as it comes: memory is one window
    and one decompressor step. Window ``i`` starts at the first line that begins after the compressed position
    ``starts[i]`` (compressed bytes stand for decompressed ones: the ratio of a file varies little along it) and
    holds the lines that start within ``window`` bytes of it, the last one whole (up to ``longest`` bytes more;
    none where the window lies inside one long line: ``b""``, as a byte window of an uncompressed file reads).
    After the last window nothing more is read. A zstd file in the seekable format (a seek table at its end, given
    ``size``) is entered at the frame holding each window instead: only the frames of the windows are read. A
    damaged stream ends the windows where the damage is (the count stage makes the rest a dead letter).

    ``compressed`` and ``decompressed`` count what was read, so the caller knows the file's ratio so far.

    >>> import io, zlib
    >>> z = zlib.compressobj(wbits=31)
    >>> data = z.compress(b"".join(b"line %d\\n" % i for i in range(100000))) + z.flush()
    >>> ws = list(StreamWindows(io.BytesIO(data), "gzip").windows([0, len(data) // 2], 16))
    >>> [w.startswith(b"line 0\\n") for w in ws], all(w.endswith(b"\\n") for w in ws)
    ([True, False], True)
    """

    def __init__(self, raw, compression: str, *, size: int = 0) -> None:
        self._raw, self._compression = _Counting(raw), compression
        self.decompressed = 0
        seekable = size and compression == "zstd" and getattr(raw, "seekable", lambda: False)()
        self._frames = zstd_frame_starts(raw, size) if seekable else None

    @property
    def compressed(self) -> int:
        return self._raw.position

    def windows(self, starts, window: int, *, longest: int = 32 << 20) -> Iterator[bytes]:
        chunks, pending, at_start = decompressed_chunks(self._raw, self._compression), b"", True
        try:
            for start in starts:
                frame = self._frame_before(start)
                if frame is not None:  # a seek table: start at the window's frame, not at the file's start
                    self._raw.seek(frame)
                    chunks, pending, at_start = decompressed_chunks(self._raw, self._compression), b"", frame == 0
                while self._raw.offset < start or not pending:  # read and discard up to the window
                    pending = next(chunks, None)
                    if pending is None:
                        return
                    self.decompressed += len(pending)
                    at_start = at_start and self.decompressed == len(pending)
                skipped = 0
                if not at_start:  # the line cut by the compressed position belongs to the window before
                    pending, skipped = self._after_newline(chunks, pending)
                at_start = False
                if skipped >= window:  # no line starts in this window (inside a long one): an empty window
                    yield b""
                    continue
                block, pending = self._take(chunks, pending, window - skipped, window - skipped + longest)
                yield block
            self._drain(chunks)
        except DamagedStream:
            return

    def _frame_before(self, start: int) -> int | None:
        """The start of the frame holding ``start`` where a seek table has one ahead of what was read, else None."""
        if not self._frames:
            return None
        frame = self._frames[max(0, bisect.bisect_right(self._frames, start) - 1)]
        return frame if frame > self._raw.offset or (frame == 0 and self._raw.offset == 0) else None

    def _drain(self, chunks) -> None:
        """Decompress what the last compressed read holds, so that ``decompressed / compressed`` is the ratio of
        the bytes read (a small file's one read holds it whole: its ratio was off by the unread rest)."""
        position = self._raw.position
        for chunk in chunks:
            if self._raw.position != position:  # this one came from a further read: not counted, not read on
                return
            self.decompressed += len(chunk)

    def _after_newline(self, chunks, data: bytes) -> tuple[bytes, int]:
        """The bytes after the next newline, and how many were skipped to reach them."""
        skipped = 0
        while True:
            cut = data.find(b"\n")
            if cut >= 0:
                return data[cut + 1 :], skipped + cut + 1
            skipped += len(data)
            data = next(chunks, b"")
            self.decompressed += len(data)
            if not data:
                return b"", skipped

    def _take(self, chunks, data: bytes, window: int, most: int) -> tuple[bytes, bytes]:
        """The lines that start in the ``window`` bytes from ``data`` on (as a byte window of an uncompressed file
        reads: the last one whole, up to ``most`` bytes in all: a longer line is cut), and the bytes after them."""
        parts, size = [], 0
        while True:
            if size < window:
                part = data[: window - size]
            else:
                cut = data.find(b"\n", 0, most - size)
                part = data[: cut + 1] if cut >= 0 else data[: most - size]
            parts.append(part)
            size += len(part)
            data = data[len(part) :]
            if (size >= window and part.endswith(b"\n")) or size >= most:
                return b"".join(parts), data
            if not data:
                data = next(chunks, b"")
                self.decompressed += len(data)
                if not data:
                    return b"".join(parts), b""
