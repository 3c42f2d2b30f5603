"""SentencePiece-style BPE: the model, its normalizer, the reference merge and the decode rules.

A vocabulary over characters, not bytes: the text is normalized (``precompiled_charsmap``, spaces as ``▁``
U+2581, a dummy prefix ``▁``), cut into characters, and adjacent symbols merge while their concatenation is a piece,
best first. Three rule sets, as the three ecosystems apply them:

- ``"sentencepiece"`` (``.model`` files, as ``sentencepiece``'s ``bpe_model.cc``): merges only into NORMAL,
  USER_DEFINED and UNUSED pieces, by the merged piece's score, ties to the leftmost pair; USER_DEFINED pieces are
  frozen symbols found in the normalized text; UNUSED pieces are split back by the pair that made them; a symbol
  without a piece is ``<unk>`` (runs of them one ``<unk>``), or its UTF-8 bytes as ``<0x..>`` with byte_fallback.
- ``"llama.cpp"`` (GGUF ``llama``, as ``llm_tokenizer_spm_session``): merges into any token by score, a symbol
  without a token becomes byte tokens; user-defined tokens are matched in the raw text before (added tokens).
- ``"merges"`` (GGUF ``gemma4``, Hugging Face BPE with byte_fallback): pairs merge by their rank in an explicit
  merge list, ties to the leftmost; GGUF ``gemma4`` cuts the text into runs of newlines and of other characters.

The fast engine (``bpe_core/_native/spm.cpp``) gives the same ids; this module is its oracle.
"""

from __future__ import annotations

import codecs
import heapq
import re
import struct
from dataclasses import dataclass, field
from functools import cached_property

from bpe_core.model.spm_charsmap import PrecompiledCharsmap

SPACE = "\u2581"
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
RULES = ("sentencepiece", "llama.cpp", "merges")
UNK_SURFACE = " \u2047 "
_BYTE_PIECE = re.compile(r"<0x([0-9A-F]{2})>")


def byte_of_piece(piece: str) -> int | None:
    """The byte a ``<0xNN>`` piece stands for, else None."""
    m = _BYTE_PIECE.fullmatch(piece)
    return int(m.group(1), 16) if m else None


@dataclass(frozen=True)
class SpmModel:
    """What a SentencePiece-style vocabulary holds. ``pieces[i]``, ``scores[i]``, ``types[i]`` (1 normal, 2
    unknown, 3 control, 4 user-defined, 5 unused, 6 byte) describe id ``i``; ``merges`` (left id, right id) in rank
    order for ``rules == "merges"``."""

    pieces: tuple[str, ...]
    scores: tuple[float, ...]
    types: tuple[int, ...]
    rules: str = "sentencepiece"
    merges: tuple[tuple[int, int], ...] = ()
    byte_fallback: bool = True
    unk_id: int | None = 0
    bos_id: int | None = None
    eos_id: int | None = None
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = False
    escape_whitespaces: bool = True
    treat_whitespace_as_suffix: bool = False
    charsmap: bytes = b""
    prefix_after_special: bool = False  # llama.cpp: the prefix space also after each special/user token
    split_newlines: bool = False  # GGUF gemma4: BPE inside runs of "\n" and runs of other characters
    unk_surface: str = UNK_SURFACE
    frozen_users: bool = False  # USER_DEFINED pieces frozen in the normalized text also outside sentencepiece's rules
    _cache: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    def identity(self) -> dict:
        """What decides the ids besides the pieces (for the tokenizer's digest)."""
        import hashlib

        return {
            "rules": self.rules,
            "scores": hashlib.sha256(struct.pack(f"<{len(self.scores)}f", *self.scores)).hexdigest(),
            "types": hashlib.sha256(bytes(self.types)).hexdigest(),
            "pieces": hashlib.sha256("\0".join(self.pieces).encode("utf-8", "surrogatepass")).hexdigest(),
            "merges": hashlib.sha256(struct.pack(f"<{2 * len(self.merges)}i", *sum(self.merges, ()))).hexdigest(),
            "byte_fallback": self.byte_fallback,
            "unk_id": self.unk_id,
            "add_dummy_prefix": self.add_dummy_prefix,
            "remove_extra_whitespaces": self.remove_extra_whitespaces,
            "escape_whitespaces": self.escape_whitespaces,
            "treat_whitespace_as_suffix": self.treat_whitespace_as_suffix,
            "charsmap": hashlib.sha256(self.charsmap).hexdigest(),
            "prefix_after_special": self.prefix_after_special,
            "split_newlines": self.split_newlines,
            "frozen_users": self.frozen_users,
        }

    def describe(self) -> dict:
        """What ``beam-bpe info`` shows of the model."""
        return {
            "rules": self.rules,
            "pieces": len(self.pieces),
            "merges": len(self.merges) if self.rules == "merges" else None,
            "byte_fallback": self.byte_fallback,
            "unk_id": self.unk_id,
            "bos_id": self.bos_id,
            "eos_id": self.eos_id,
            "add_dummy_prefix": self.add_dummy_prefix,
            "remove_extra_whitespaces": self.remove_extra_whitespaces,
            "precompiled_charsmap": bool(self.charsmap),
            "treat_whitespace_as_suffix": self.treat_whitespace_as_suffix,
        }

    # ------------------------------------------------------------------------------------------- tables
    @cached_property
    def mergeable(self) -> dict[str, int]:
        """Piece text -> id of what a merge may make (sentencepiece's ``pieces_``; llama.cpp: every token, the last
        id of a repeated text winning, as its ``token_to_id``)."""
        if self.rules == "sentencepiece":
            keep = (NORMAL, USER_DEFINED, UNUSED)
            return {p: i for i, (p, t) in enumerate(zip(self.pieces, self.types, strict=True)) if t in keep}
        return {p: i for i, p in enumerate(self.pieces)}

    @cached_property
    def reserved(self) -> dict[str, int]:
        keep = (NORMAL, USER_DEFINED, UNUSED)
        return {p: i for i, (p, t) in enumerate(zip(self.pieces, self.types, strict=True)) if t not in keep}

    @cached_property
    def byte_ids(self) -> list[int]:
        """Id of ``<0xNN>`` per byte, -1 where absent."""
        out = [-1] * 256
        for i, (p, t) in enumerate(zip(self.pieces, self.types, strict=True)):
            b = byte_of_piece(p)
            if b is not None and (t == BYTE or self.rules != "sentencepiece") and out[b] < 0:
                out[b] = i
        return out

    @cached_property
    def pair_ranks(self) -> dict[tuple[int, int], int]:
        return {pair: rank for rank, pair in reversed(list(enumerate(self.merges)))}

    @cached_property
    def user_matcher(self) -> re.Pattern | None:
        """sentencepiece: the USER_DEFINED pieces, longest first (its PrefixMatcher)."""
        if self.rules != "sentencepiece" and not self.frozen_users:
            return None
        users = sorted({p for p, t in zip(self.pieces, self.types, strict=True) if t == USER_DEFINED}, key=len)
        return re.compile("|".join(re.escape(u) for u in reversed(users))) if users else None

    @cached_property
    def charsmap_trie(self) -> PrecompiledCharsmap | None:
        return PrecompiledCharsmap(self.charsmap) if self.charsmap else None

    # ------------------------------------------------------------------------------------------- normalize
    def normalize(self, text: str, prefix: bool) -> str:
        """The text the merge runs on (sentencepiece's ``Normalizer::Normalize``; llama.cpp's and gemma4's space
        escaping and prefix)."""
        if self.rules != "sentencepiece":
            text = (" " + text) if prefix and self.add_dummy_prefix else text
            return text.replace(" ", SPACE) if self.escape_whitespaces else text
        return normalize_spm(self, text, prefix)

    # ------------------------------------------------------------------------------------------- encode
    def encode_normalized(self, normalized: str) -> list[int]:
        """The ids of normalized text (the reference merge)."""
        if self.split_newlines:
            out: list[int] = []
            for run in re.findall(r"[^\n]+|\n+", normalized):
                if set(run) == {"\n"} and run in self.mergeable:  # llama.cpp's gemma4 whole-newline-run rule
                    out.append(self.mergeable[run])
                else:
                    out += self._merge(run)
            return out
        return self._merge(normalized)

    def _symbols(self, text: str) -> list[tuple[str, bool]]:
        matcher = self.user_matcher
        if matcher is None:
            return [(c, False) for c in text]
        out: list[tuple[str, bool]] = []
        pos = 0
        while pos < len(text):
            m = matcher.match(text, pos)
            if m:
                out.append((m.group(), True))
                pos = m.end()
            else:
                out.append((text[pos], False))
                pos += 1
        return out

    def _merge(self, text: str) -> list[int]:
        if not text:
            return []
        syms = self._symbols(text)
        pieces = [s for s, _ in syms]
        frozen = [f for _, f in syms]
        n = len(pieces)
        nxt = list(range(1, n)) + [-1]
        prv = list(range(-1, n - 1))
        heap: list[tuple] = []
        rev: dict[str, tuple[str, str]] = {}
        by_rank = self.rules == "merges"
        table = self.mergeable
        ranks = self.pair_ranks
        scores = self.scores
        types = self.types

        def add(left: int, right: int) -> None:
            if left < 0 or right < 0 or frozen[left] or frozen[right]:
                return
            joined = pieces[left] + pieces[right]
            if by_rank:
                a, b = table.get(pieces[left]), table.get(pieces[right])
                rank = None if a is None or b is None else ranks.get((a, b))
                if rank is None:
                    return
                heapq.heappush(heap, (rank, left, right, len(joined)))
                return
            tid = table.get(joined)
            if tid is None:
                return
            heapq.heappush(heap, (-scores[tid], left, right, len(joined)))
            if types[tid] == UNUSED:
                rev[joined] = (pieces[left], pieces[right])

        for i in range(1, n):
            add(i - 1, i)
        self._run(heap, pieces, nxt, prv, add)
        return self._finish(pieces, nxt, rev)

    @staticmethod
    def _run(heap: list, pieces: list[str], nxt: list[int], prv: list[int], add) -> None:
        while heap:
            _, left, right, size = heapq.heappop(heap)
            if not pieces[left] or not pieces[right] or len(pieces[left]) + len(pieces[right]) != size:
                continue
            pieces[left] += pieces[right]
            pieces[right] = ""
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prv[nxt[right]] = left
            add(prv[left], left)
            add(left, nxt[left])

    def _finish(self, pieces: list[str], nxt: list[int], rev: dict) -> list[int]:
        out: list[int] = []
        i = 0
        prev_unk = False
        while i != -1:
            prev_unk = self._emit(pieces[i], rev, out, prev_unk)
            i = nxt[i]
        return out

    def _emit(self, piece: str, rev: dict, out: list[int], prev_unk: bool) -> bool:
        """Append the ids of one final symbol; returns whether it was an unknown one (sentencepiece fuses runs)."""
        if self.rules == "sentencepiece":
            tid = self.reserved.get(piece, self.mergeable.get(piece))
            if tid is not None and self.types[tid] == UNUSED and piece in rev:
                left, right = rev[piece]
                self._emit(left, rev, out, False)
                self._emit(right, rev, out, False)
                return False
            if tid is not None and self.types[tid] != UNKNOWN:
                out.append(tid)
                return False
            if self.byte_fallback:
                out += [self.byte_ids[b] for b in piece.encode("utf-8", "surrogatepass")]
                return True
            if not prev_unk:
                out.append(self.unk_id if self.unk_id is not None else 0)
            return True
        tid = self.mergeable.get(piece)
        if tid is not None:
            out.append(tid)
            return False
        for b in piece.encode("utf-8", "surrogatepass"):
            bid = self.byte_ids[b]
            if bid >= 0:
                out.append(bid)
            elif self.rules == "llama.cpp" and self.unk_id is not None:
                out.append(self.unk_id)
        return True

    # ------------------------------------------------------------------------------------------- decode
    def token_bytes_table(self) -> dict[int, bytes]:
        """id -> the bytes it decodes to (▁ as a space, ``<0xNN>`` as its byte), control and unknown left out."""
        out: dict[int, bytes] = {}
        for i, (p, t) in enumerate(zip(self.pieces, self.types, strict=True)):
            if t in (CONTROL, UNKNOWN):
                continue
            b = byte_of_piece(p) if t == BYTE or (self.rules != "sentencepiece" and t in (BYTE,)) else None
            if t == BYTE and b is not None:
                out[i] = bytes([b])
            else:
                out[i] = (p.replace(SPACE, " ") if self.escape_whitespaces else p).encode("utf-8", "surrogatepass")
        return out

    def strips_prefix(self) -> bool:
        return (self.add_dummy_prefix or self.remove_extra_whitespaces) and not self.treat_whitespace_as_suffix


def normalize_spm(model: SpmModel, text: str, prefix: bool) -> str:
    """sentencepiece's ``Normalizer::Normalize`` (normalizer.cc), character for character."""
    prefix_at = _prefix_reader(model, text)
    escape, remove = model.escape_whitespaces, model.remove_extra_whitespaces
    pos, n = 0, len(text)
    while remove and pos < n:
        s, used = prefix_at(pos)
        if s != " ":
            break
        pos += used
    if pos >= n:
        return ""
    space = SPACE if escape else " "
    dummy = prefix and model.add_dummy_prefix
    out: list[str] = [space] if dummy and not model.treat_whitespace_as_suffix else []
    prev_space = remove
    while pos < n:
        s, used = prefix_at(pos)
        if prev_space:
            s = s.lstrip(" ")
        if s:
            out.append(s.replace(" ", SPACE) if escape else s)
            prev_space = s.endswith(" ")
        pos += used
        prev_space = prev_space and remove
    result = "".join(out)
    while remove and result.endswith(space):
        result = result[: -len(space)]
    return result + space if dummy and model.treat_whitespace_as_suffix else result


def _prefix_reader(model: SpmModel, text: str):
    """``NormalizePrefix``: (replacement, characters consumed) at a position: a USER_DEFINED piece as it is, else
    the charsmap's longest match, else the character."""
    trie, matcher = model.charsmap_trie, model.user_matcher

    def prefix_at(i: int) -> tuple[str, int]:
        if matcher is not None:
            m = matcher.match(text, i)
            if m:
                return m.group(), m.end() - i
        if trie is not None:
            return trie.normalize_prefix(text, i)
        return text[i], 1

    return prefix_at


# ----------------------------------------------------------------------------------------------- decoding


def _per_byte_replace(error: UnicodeDecodeError) -> tuple[str, int]:
    """sentencepiece replaces each invalid byte of a byte-piece run with U+FFFD (Python: each maximal subpart)."""
    return "\ufffd" * (error.end - error.start), error.end


SPM_REPLACE = "beam_bpe_spm_replace"
codecs.register_error(SPM_REPLACE, _per_byte_replace)


def spm_errors(errors: str) -> str:
    return SPM_REPLACE if errors == "replace" else errors


__all__ = [
    "BYTE",
    "CONTROL",
    "NORMAL",
    "RULES",
    "SPACE",
    "UNKNOWN",
    "UNUSED",
    "USER_DEFINED",
    "PrecompiledCharsmap",
    "SpmModel",
    "byte_of_piece",
    "normalize_spm",
    "spm_errors",
]
