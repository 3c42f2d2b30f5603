"""``beam-bpe decode``: the text of ids given with ``--ids``, streamed on stdin (``--stream``), or of one document of
an encoding output (``--shards DIR --doc ID``).

``--raw`` writes the decoded bytes exactly as the tokens hold them: no newline added, and no UTF-8 repair (a
document cut inside a character keeps its bytes). ``--stream`` reads stdin as it arrives, ids separated by spaces,
commas or newlines (a JSON list's brackets are separators too), and writes each piece of text as soon as its ids
have been read: a chunk of stdin at a time, so memory does not grow with the input, one line of 20 MB of ids
included. ``--shards`` takes the tokenizer the manifest names when ``--tokenizer`` is not given, and checks the
tokenizer's digest against the manifest's in both cases.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import BinaryIO

from bpe_core import StreamingDecoder, Tokenizer
from pipeline.errors import ShardFileError, UsageError

CHUNK = 1 << 16  # bytes of stdin read at a time by --stream
LONGEST_ID = 24  # digits: a longer word is no token id, refused before it grows
SEPARATORS = bytes.maketrans(b",[]", b"   ")


def add_decode_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("decode", help="print the text of ids, of a stream of ids, or of a document of an encoding run")
    p.add_argument("--tokenizer", help="tokenizer file (tokenizer.bpe, .tiktoken, ...); with --shards, default: the "
                   "one the output's manifest names (its digest is checked either way)")  # fmt: skip
    p.add_argument("--pretokenizer", help="pre-tokenizer for rank-only files (.tiktoken): cl100k, o200k, ...")
    p.add_argument("--ids", help='ids, e.g. "1 2 3", "1,2,3" or "[1, 2, 3]"')
    p.add_argument("--stream", action="store_true",
                   help="read ids from stdin as they arrive (separated by spaces, commas or newlines) and write the "
                        "text as soon as it is complete, in bounded memory")  # fmt: skip
    p.add_argument(
        "--raw",
        action="store_true",
        help="write the decoded bytes exactly: no newline added, no repair of a cut UTF-8 character",
    )
    p.add_argument("--skip-special", action="store_true", help="leave special tokens out of the text")
    p.add_argument(
        "--shards", metavar="DIR", help="the --out of an encoding run: print one document of it (with --doc)"
    )
    p.add_argument("--doc", metavar="ID", help="document id (PATH@OFFSET, PATH#ROW) or 0-based document number")
    p.set_defaults(func=cmd_decode)
    return p


def parse_ids(text: str) -> list[int]:
    """Ids written as ``1 2 3``, ``1,2,3`` or a JSON list; anything else is named in the error.

    >>> parse_ids("[15339, 1917]"), parse_ids("1,2 3")
    ([15339, 1917], [1, 2, 3])
    """
    text = text.strip()
    words = json.loads(text) if text.startswith("[") else text.replace(",", " ").split()
    try:
        return [int(i) for i in words]
    except (TypeError, ValueError):
        bad = next(w for w in words if not str(w).lstrip("-").isdigit())
        raise UsageError(f'{bad!r} is not a token id: ids are integers, e.g. "15339 1917" or [15339, 1917]') from None


def stream_ids(stream: BinaryIO, chunk: int = CHUNK) -> Iterator[list[int]]:
    """The ids of ``stream`` a read at a time, as soon as each read returns (``read1``: what has arrived, at most
    ``chunk`` bytes); an id cut by a read waits for the rest. Memory holds one read, never the input.

    >>> import io
    >>> list(stream_ids(io.BufferedReader(io.BytesIO(b"[1, 22,\\n333 4]")), chunk=5))
    [[1], [22], [333, 4]]
    """
    read = getattr(stream, "read1", stream.read)
    carry = b""
    while True:
        data = read(chunk)
        if not data:
            break
        words = (carry + data).translate(SEPARATORS).split()
        carry = b""
        if words and not data[-1:].translate(SEPARATORS).isspace():  # the last word may go on in the next read
            carry = words.pop()
            if len(carry) > LONGEST_ID:
                raise BadIdError(_refusal(carry), _ints(words))
        if words:
            yield _ints(words)
    if carry:
        yield _ints([carry])


def _ints(words: list[bytes]) -> list[int]:
    try:
        return [int(w) for w in words]
    except ValueError:
        bad = next(i for i, w in enumerate(words) if not w.lstrip(b"-").isdigit())
        raise BadIdError(_refusal(words[bad]), [int(w) for w in words[:bad]]) from None


class BadIdError(UsageError):
    """A word of the stream that is not an id; ``before`` holds the ids of its read that precede it."""

    def __init__(self, message: str, before: list[int]) -> None:
        super().__init__(message)
        self.before = before


def _refusal(word: bytes) -> str:
    shown = word[:40].decode("utf-8", "replace") + ("..." if len(word) > 40 else "")
    return (
        f"{shown!r} is not a token id: --stream reads integers separated by spaces, commas or newlines, e.g. "
        '"15339 1917" or "15339,1917"'
    )


def cmd_decode(args: argparse.Namespace) -> int:
    if args.shards:  # one document of an encoding output
        return decode_shards(args)
    if args.tokenizer is None:
        raise UsageError("decode needs --tokenizer FILE (only --shards DIR takes the one its manifest names)")
    tok = Tokenizer.from_file(args.tokenizer, pretokenizer=args.pretokenizer)
    if args.stream:
        if args.ids is not None:
            raise UsageError("give --ids (ids on the command line) or --stream (ids on stdin), not both")
        return _stream(tok, args)
    if args.ids is None:
        raise UsageError('decode needs --ids "1 2 3" or --stream')
    _write(tok, parse_ids(args.ids), args)
    return 0


def _stream(tok: Tokenizer, args: argparse.Namespace) -> int:
    """Decode stdin as it arrives. Every valid id before an invalid one (a word that is no id, an id outside the
    vocabulary) is written, however the input was cut into reads, and the error says how many were decoded."""
    out = sys.stdout.buffer if args.raw else sys.stdout
    decoder = None if args.raw else StreamingDecoder(tok, skip_special=args.skip_special)
    decoded = 0

    def write(ids: list[int]) -> None:
        nonlocal decoded
        try:
            _write_ids(tok, decoder, out, ids, args)
        except ValueError:  # an id outside the vocabulary: the ones before it go out first, one by one
            for i, token in enumerate(ids):
                try:
                    _write_ids(tok, decoder, out, [token], args)
                except ValueError:
                    decoded += i
                    raise UsageError(f"{token} is not an id of this tokenizer (0 to {tok.n_vocab - 1})") from None
        decoded += len(ids)
        out.flush()

    try:
        for ids in stream_ids(_binary(sys.stdin)):
            write(ids)
    except BadIdError as exc:
        write(exc.before)
        _flush(decoder, out)
        raise UsageError(f"{exc}; the {decoded:,} id(s) before it were decoded and written") from None
    except UsageError as exc:
        _flush(decoder, out)
        raise UsageError(f"{exc}; the {decoded:,} id(s) before it were decoded and written") from None
    _flush(decoder, out)
    return 0


def _write_ids(tok: Tokenizer, decoder, out, ids: list[int], args: argparse.Namespace) -> None:
    if decoder is None:
        out.write(tok.decode_bytes(_without_special(tok, ids) if args.skip_special else ids))
    else:
        out.write(decoder.feed(ids))


def _flush(decoder, out) -> None:
    if decoder is not None:
        out.write(decoder.flush())
    out.flush()


class _Encoded:
    """A text stream read as UTF-8 bytes (stdin replaced by a text object, as in a notebook or a test)."""

    def __init__(self, text) -> None:
        self.text = text

    def read(self, n: int) -> bytes:
        return self.text.read(n).encode("utf-8")


def _binary(stream):
    return getattr(stream, "buffer", None) or _Encoded(stream)


def _without_special(tok: Tokenizer, ids: list[int]) -> list[int]:
    return [i for i in ids if not tok.is_special(i)]


def _write(tok: Tokenizer, ids: list[int], args: argparse.Namespace) -> None:
    """The text of ``ids`` and a newline, or with ``--raw`` their bytes alone."""
    if args.skip_special:
        ids = _without_special(tok, ids)
    if args.raw:
        sys.stdout.flush()
        sys.stdout.buffer.write(tok.decode_bytes(ids))
        sys.stdout.buffer.flush()
    else:
        sys.stdout.write(tok.decode(ids) + "\n")


def decode_shards(args: argparse.Namespace) -> int:
    """Print one document of an encoding output, decoded with ``--tokenizer`` or the tokenizer its manifest names
    (either checked against the manifest's digest)."""
    from pipeline.encode.readback import find_document, load_manifest

    if args.doc is None:
        raise UsageError("--shards DIR needs --doc ID (PATH@OFFSET, PATH#ROW or a document number)")
    if args.stream or args.ids is not None:
        raise UsageError("--shards DIR --doc ID decodes a document of the output: drop --ids/--stream")
    manifest = load_manifest(args.shards)
    recorded = manifest["tokenizer"]
    wanted = recorded.get("digest")
    if wanted is None:
        raise ShardFileError(
            f"{args.shards}/manifest.json records no tokenizer digest: it was written by an older beam-bpe"
        )
    tok = _tokenizer_of(args, recorded)
    if tok.digest() != wanted:
        given = (
            f"{args.tokenizer} is not"
            if args.tokenizer
            else f"{recorded.get('path')} (named in the manifest) is no longer"
        )
        raise ShardFileError(
            f"{given} the tokenizer {args.shards} was encoded with (digest {wanted[:12]}...): pass "
            f"--tokenizer {recorded.get('path', 'PATH') if args.tokenizer else 'PATH'} (the file the job encoded with)"
        )
    doc_id, ids = find_document(args.shards, args.doc)
    ids = [int(i) for i in ids]
    print(f"# {doc_id}: {len(ids)} tokens", file=sys.stderr)
    _write(tok, ids, args)
    return 0


def _tokenizer_of(args: argparse.Namespace, recorded: dict) -> Tokenizer:
    if args.tokenizer:
        return Tokenizer.from_file(args.tokenizer, pretokenizer=args.pretokenizer)
    path = recorded.get("path")
    if not path:
        raise ShardFileError(f"{args.shards}/manifest.json names no tokenizer file: pass --tokenizer PATH")
    pretokenizer = args.pretokenizer or recorded.get("pretokenizer_option")
    try:
        return Tokenizer.from_file(path, pretokenizer=pretokenizer)
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"{args.shards}/manifest.json names the tokenizer {path}, which cannot be loaded here ({exc}): pass "
            "--tokenizer PATH (the file the job encoded with; its digest is checked)"
        ) from None
