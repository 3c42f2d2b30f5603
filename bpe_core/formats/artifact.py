"""The project's own tokenizer artifact (``tokenizer.bpe``): versioned, text-first, hashed, never pickled.

Layout (UTF-8, one record per line, values that are strings or lists written as JSON)::

    beam-bpe-tokenizer
    format_version 1
    name "my-tokenizer"
    kind merges                      # or "ranks" (rank-only, as tiktoken files)
    normalizer null                  # or "NFC", "NFKC"
    pretokenizer ["regex 1", ...]    # applied in order
    pretokenizer_name "cl100k"
    ignore_merges false
    beam_bpe_version "0.1.0"
    regex_version "2026.11.19"
    regex_unicode_version "17.0"
    vocab 300                        # then one line per token: id, base64 of its bytes
    0 AA==
    merges 44                        # kind merges only: left id, right id, in rank order
    32 116
    special_tokens 1                 # id, JSON string[, JSON object of Hugging Face matching flags]
    300 "<|endoftext|>"
    added_tokens 1
    301 "<mask>" {"lstrip": true, "normalized": false, "rstrip": false, "single_word": false}
    sha256 <hex digest of every byte above this line>

Format version 2 is version 1 plus one section before the hash, written only where the vocabulary has tokens
spelled as raw text (``Tokenizer.unreachable_tokens()``: their bytes are not theirs to produce)::

    unreachable 1403                 # one id per line
    264

Format version 3 is version 2 (its ``unreachable`` section always written, 0 where empty) plus a superword
tokenizer's phase 2 (SuperBPE, :mod:`bpe_core.superword`), before the hash: the eligibility rule and the size of
the word model (ids below it are word tokens, made by the ``merges``), then the supermerges in rank order::

    superword "letter-run" 14000
    supermerges 2000                 # left id, right id, in rank order (the result: the token of their bytes)
    262 1820

Readers of versions 1 and 2 refuse it by its version line (a superword tokenizer encoded without its supermerges
would give other ids). Every other tokenizer is still written as version 1 or 2, byte for byte as before. Nothing in
it depends on paths, times or the machine beyond the library versions, so the same training gives a byte-identical
file.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import warnings
from typing import TYPE_CHECKING

from bpe_core._io import read_bytes, write_bytes_atomic
from bpe_core._versions import BEAM_BPE_VERSION, regex_unicode_version, regex_version
from bpe_core.errors import TokenizerFileError
from bpe_core.model.added_tokens import DEFAULT_FLAGS, AddedTokenFlags
from bpe_core.model.data import TokenizerData, TokenizerLike, text_spelled_ids

if TYPE_CHECKING:
    from bpe_core.pretokenize.pretokenizer import PreTokenizer

MAGIC = "beam-bpe-tokenizer"
FORMAT_VERSION = 3  # the newest this version reads and writes; 1 where there is nothing unreachable to say
FORMAT_VERSIONS = (1, 2, 3)


def dumps_artifact(tok: TokenizerLike) -> bytes:
    pre = tok.pretokenizer
    textual = text_spelled_ids(tok)
    superword = getattr(tok, "superword", None)
    version = 3 if superword is not None else 2 if textual else 1
    lines = [
        MAGIC,
        f"format_version {version}",
        f"name {json.dumps(tok.name)}",
        f"kind {tok.kind}",
        f"normalizer {json.dumps(pre.normalizer if pre else None)}",
        f"pretokenizer {json.dumps(list(pre.patterns) if pre else None)}",
        f"pretokenizer_name {json.dumps(pre.name if pre else None)}",
        f"ignore_merges {json.dumps(tok.ignore_merges)}",
        f"beam_bpe_version {json.dumps(BEAM_BPE_VERSION)}",
        f"regex_version {json.dumps(regex_version())}",
        f"regex_unicode_version {json.dumps(regex_unicode_version())}",
    ]
    vocab = tok.vocab
    lines.append(f"vocab {len(vocab)}")
    lines += [f"{tid} {base64.b64encode(vocab[tid]).decode('ascii')}" for tid in sorted(vocab)]
    if tok.kind == "merges":
        merges = tok.merge_ids
        lines.append(f"merges {len(merges)}")
        lines += [f"{a} {b}" for a, b in merges]
    for section, table in (("special_tokens", tok.special_tokens), ("added_tokens", tok.added_tokens)):
        lines.append(f"{section} {len(table)}")
        lines += [_named_line(tok, text, tid) for text, tid in sorted(table.items(), key=lambda kv: kv[1])]
    if version >= 2:
        lines.append(f"unreachable {len(textual)}")
        lines += [str(i) for i in textual]
    if superword is not None:
        lines.append(f"superword {json.dumps(superword.rule)} {superword.word_size}")
        lines.append(f"supermerges {len(superword.merges)}")
        lines += [f"{a} {b}" for a, b in superword.merges]
    body = ("\n".join(lines) + "\n").encode("utf-8")
    return body + f"sha256 {hashlib.sha256(body).hexdigest()}\n".encode("ascii")


def _named_line(tok: TokenizerLike, text: str, tid: int) -> str:
    flags = tok.token_flags.get(text)
    suffix = "" if flags is None else " " + json.dumps(flags.as_dict(), sort_keys=True)
    return f"{tid} {json.dumps(text)}{suffix}"


def save_artifact(tok: TokenizerLike, path: str) -> None:
    write_bytes_atomic(path, dumps_artifact(tok))


def load_artifact(path: str) -> TokenizerData:
    return loads_artifact(read_bytes(path), path)


def loads_artifact(data: bytes, path: str = "<bytes>") -> TokenizerData:
    """Parse and verify an artifact; raises TokenizerFileError naming the file and line of any problem (the
    Tokenizer built from the result names them too: a duplicate token, a merge of a missing token)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TokenizerFileError(path, f"not UTF-8 at byte {exc.start}: not a beam-bpe tokenizer file") from None
    lines = text.split("\n")
    if lines[0] != MAGIC:
        raise TokenizerFileError(path, f"first line is not {MAGIC!r}: not a beam-bpe tokenizer file", line=1)
    reader = _Reader(path, lines)
    version = reader.field("format_version", int)
    if version not in FORMAT_VERSIONS:
        raise TokenizerFileError(
            path,
            f"format version {version} is not supported (this beam-bpe {BEAM_BPE_VERSION} reads versions "
            f"{FORMAT_VERSIONS[0]} to {FORMAT_VERSION})",
            line=2,
        )
    _verify_hash(path, data, lines)
    name = reader.field("name", json.loads)
    kind = reader.field("kind", str)
    if kind not in ("merges", "ranks"):
        raise TokenizerFileError(path, f"kind {kind!r} is not 'merges' or 'ranks'", line=reader.pos)
    normalizer = reader.field("normalizer", json.loads)
    patterns = reader.field("pretokenizer", json.loads)
    pre_name = reader.field("pretokenizer_name", json.loads)
    ignore_merges = reader.field("ignore_merges", json.loads)
    made_with = {
        key: reader.field(key, json.loads) for key in ("beam_bpe_version", "regex_version", "regex_unicode_version")
    }
    _warn_other_unicode(path, made_with["regex_unicode_version"])
    vocab = dict(reader.section("vocab", _parse_vocab_line))
    if len(vocab) != reader.last_count:
        raise TokenizerFileError(path, "duplicate token id in the vocab section", line=reader.pos)
    merges = reader.section("merges", _parse_merge_line) if kind == "merges" else None
    specials = reader.section("special_tokens", _parse_named_line)
    added = reader.section("added_tokens", _parse_named_line)
    unreachable = reader.section("unreachable", lambda parts: int(parts[0])) if version >= 2 else []
    superword = _superword(reader, vocab) if version >= 3 else None
    return TokenizerData(
        vocab,
        merges=merges,
        pretokenizer=_pretokenizer(path, patterns, normalizer, pre_name),
        special_tokens={t: i for i, t, _ in specials},
        added_tokens={t: i for i, t, _ in added},
        token_flags={t: f for _, t, f in specials + added if f is not None},
        ignore_merges=bool(ignore_merges),
        name=name,
        unreachable=frozenset(unreachable),
        source=str(path),
        superword=superword,
    )


def _warn_other_unicode(path, recorded) -> None:
    """A file trained where the pre-tokenizer's Unicode tables were of another version: the characters assigned in
    between are letters or numbers to one and unassigned to the other, so they split (and encode) differently."""
    current = regex_unicode_version()
    if isinstance(recorded, str) and recorded != current:
        warnings.warn(
            f"beam-bpe: {path} was written where the pre-tokenizer's Unicode tables were Unicode {recorded}; this "
            f"beam-bpe splits with Unicode {current} (the regex module's): text with characters assigned between the "
            "two may split, and so encode, differently from where the file was made",
            RuntimeWarning,
            stacklevel=4,
        )


def _superword(reader: _Reader, vocab: dict[int, bytes]):
    """The ``superword`` line and the ``supermerges`` section (format version 3)."""
    from bpe_core.superword.reference import RULES, Supermerges

    line = reader.pos + 1
    rule, word_size = reader.field("superword", _parse_superword_line)
    if rule not in RULES:
        raise TokenizerFileError(
            reader.path,
            f"superword eligibility rule {rule!r} is not one this beam-bpe {BEAM_BPE_VERSION} knows ({RULES}): "
            "the file was written by a newer version",
            line=line,
        )
    if not 0 < word_size <= len(vocab):
        raise TokenizerFileError(reader.path, f"superword word-model size {word_size} is not between 1 and the "
                                 f"vocabulary's {len(vocab)} ids", line=line)  # fmt: skip
    merges = reader.section("supermerges", _parse_merge_line)
    first = reader.pos - len(merges) + 1  # the line of supermerge 0
    seen: dict[tuple[int, int], int] = {}
    for rank, pair in enumerate(merges):  # as strict as the merges: a pair merged twice is a damaged file
        if pair in seen:
            raise TokenizerFileError(reader.path, f"duplicate supermerge {pair[0]} {pair[1]} (rank {rank}, first at "
                                     f"rank {seen[pair]})", line=first + rank)  # fmt: skip
        seen[pair] = rank
    try:
        return Supermerges.from_vocab(merges, vocab, word_size, rule)
    except ValueError as exc:
        bad = next((r for r, (a, b) in enumerate(merges) if a not in vocab or b not in vocab
                    or vocab[a] + vocab[b] not in set(vocab.values())), None)  # fmt: skip
        raise TokenizerFileError(reader.path, str(exc), line=reader.pos if bad is None else first + bad) from None


def _parse_superword_line(value: str) -> tuple[str, int]:
    rule, end = json.JSONDecoder().raw_decode(value)
    if not isinstance(rule, str):
        raise ValueError("the rule is not a JSON string")
    return rule, int(value[end:])


def _verify_hash(path: str, data: bytes, lines: list[str]) -> None:
    while lines and lines[-1] == "":
        lines.pop()
    last = lines[-1] if lines else ""
    if not last.startswith("sha256 "):
        raise TokenizerFileError(path, "no final 'sha256' line: the file is truncated", line=len(lines))
    body = data[: data.rfind(b"sha256 ")]
    if hashlib.sha256(body).hexdigest() != last[len("sha256 ") :].strip():
        raise TokenizerFileError(
            path, "sha256 does not match the content: the file was changed or damaged", line=len(lines)
        )
    lines.pop()  # the reader must not see the hash line as content


def _pretokenizer(path: str, patterns, normalizer, name) -> PreTokenizer | None:
    from bpe_core.pretokenize.pretokenizer import PreTokenizer

    if patterns is None:
        return None
    try:
        return PreTokenizer(patterns, normalizer=normalizer, name=name)
    except (ValueError, TypeError) as exc:
        raise TokenizerFileError(path, f"bad pre-tokenizer: {exc}") from None


def _parse_vocab_line(parts: list[str]) -> tuple[int, bytes]:
    tid, b64 = parts
    return int(tid), base64.b64decode(b64, validate=True)


def _parse_merge_line(parts: list[str]) -> tuple[int, int]:
    left, right = parts
    return int(left), int(right)


def _parse_named_line(parts: list[str]) -> tuple[int, str, AddedTokenFlags | None]:
    tid, rest = parts
    value, end = json.JSONDecoder().raw_decode(rest)
    if not isinstance(value, str):
        raise ValueError("token text is not a JSON string")
    flags = None
    if rest[end:].strip():
        raw = json.loads(rest[end:])
        if not isinstance(raw, dict) or not set(raw) <= set(DEFAULT_FLAGS.as_dict()):
            raise ValueError(f"token flags must be an object with keys {sorted(DEFAULT_FLAGS.as_dict())}")
        flags = AddedTokenFlags(**{k: bool(v) for k, v in raw.items()})
    return int(tid), value, flags


class _Reader:
    """Reads ``key value`` lines and counted sections, raising with the line number of any problem."""

    def __init__(self, path: str, lines: list[str]) -> None:
        self.path, self.lines, self.pos, self.last_count = path, lines, 1, 0

    def _next(self, what: str) -> str:
        if self.pos >= len(self.lines):
            raise TokenizerFileError(self.path, f"file ends before {what}: it is truncated", line=self.pos)
        line = self.lines[self.pos]
        self.pos += 1
        return line

    def field(self, key: str, parse):
        line = self._next(f"the {key!r} line")
        found, _, value = line.partition(" ")
        if found != key:
            raise TokenizerFileError(self.path, f"expected {key!r}, found {line[:60]!r}", line=self.pos)
        try:
            return parse(value)
        except ValueError as exc:
            raise TokenizerFileError(self.path, f"bad value for {key!r}: {exc}", line=self.pos) from None

    def section(self, key: str, parse) -> list:
        count = self.field(key, int)
        if count < 0 or count > len(self.lines) - self.pos:
            raise TokenizerFileError(
                self.path, f"{key} declares {count} entries but the file has fewer lines", line=self.pos
            )
        self.last_count = count
        out = []
        for _ in range(count):
            line = self._next(f"the end of the {key} section")
            try:
                out.append(parse(line.split(" ", 1)))
            except (ValueError, binascii.Error) as exc:
                raise TokenizerFileError(self.path, f"bad {key} entry {line[:60]!r}: {exc}", line=self.pos) from None
        return out
