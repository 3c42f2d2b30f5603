"""SentencePiece's ``precompiled_charsmap`` normalizer: the Darts-clone double-array trie of replacements that
``Normalizer::NormalizePrefix`` walks (read from sentencepiece's normalizer.cc and reimplemented here)."""

from __future__ import annotations

import struct

MAX_TRIE_RESULTS = 32  # sentencepiece's Normalizer::kMaxTrieResultsSize


class PrecompiledCharsmap:
    """sentencepiece's ``precompiled_charsmap``: a uint32 size, a Darts-clone double-array trie of that many bytes
    (uint32 units, little endian) mapping UTF-8 prefixes to offsets into the NUL-terminated replacement strings that
    follow. ``normalize_prefix`` is ``Normalizer::NormalizePrefix``: the longest match among the first 32 results
    of a common-prefix search, else the character itself."""

    def __init__(self, blob: bytes) -> None:
        if len(blob) <= 4:
            raise ValueError("precompiled_charsmap is broken (shorter than its size field)")
        (size,) = struct.unpack_from("<I", blob, 0)
        if size >= len(blob) or size % 4:
            raise ValueError(f"precompiled_charsmap is broken (trie size {size} for {len(blob)} bytes)")
        self.units = struct.unpack_from(f"<{size // 4}I", blob, 4)
        self.strings = blob[4 + size :]

    def _lookup(self, key: bytes, start: int) -> tuple[int, int]:
        """(length, value) of the longest match at ``key[start:]`` among the first 32 results, (0, 0) if none."""
        units = self.units
        node = 0
        unit = units[0]
        node ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
        best = (0, 0)
        found = 0
        for i in range(start, len(key)):
            c = key[i]
            node ^= c
            if node >= len(units):
                break
            unit = units[node]
            if (unit & ((1 << 31) | 0xFF)) != c:
                break
            node ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
            if (unit >> 8) & 1:
                if found < MAX_TRIE_RESULTS and node < len(units):
                    length = i + 1 - start
                    if best[0] == 0 or length > best[0]:
                        best = (length, units[node] & ((1 << 31) - 1))
                found += 1
        return best

    def _string(self, offset: int) -> str:
        end = self.strings.find(b"\0", offset)
        return self.strings[offset : end if end >= 0 else len(self.strings)].decode("utf-8", "replace")

    def normalize_prefix(self, text: str, i: int, data: bytes | None = None) -> tuple[str, int]:
        """(replacement, characters consumed) at character ``i`` of ``text``."""
        # The trie works on bytes; a match always ends on a character boundary of valid UTF-8 keys.
        chunk = text[i : i + 64]
        key = chunk.encode("utf-8", "surrogatepass")
        length, value = self._lookup(key, 0)
        if length == 0:
            return text[i], 1
        consumed = len(key[:length].decode("utf-8", "ignore"))
        return self._string(value), max(consumed, 1)
