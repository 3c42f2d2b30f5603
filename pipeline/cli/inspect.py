"""``beam-bpe inspect``: the pieces of a text as a tokenizer cuts them, and its first merges.

Each piece is shown with its id, as text (escaped where it is not printable or not whole UTF-8) and in GPT-2's
byte-to-unicode form (``Ġ`` for a space), the form vocabulary files and BPE tutorials use. On a terminal the pieces
alternate colours, so that where one token ends and the next begins shows in the text itself; in a pipe (or with
``NO_COLOR`` set, or ``--color never``) the output is plain text.

    $ beam-bpe inspect --tokenizer cl100k_base.tiktoken --text "Hello world"
    |Hello| world|
      id  text      byte-level
    9906  'Hello'   Hello
    1917  ' world'  Ġworld
    2 tokens, 11 bytes, 5.50 bytes per token
"""

from __future__ import annotations

import argparse
import os
import sys

from bpe_core import Tokenizer
from bpe_core.model.bytelevel import bytes_to_token_string
from pipeline.cli.common import add_special_tokens_argument, special_tokens_policy

# Background colours that keep text readable in light and dark terminals (black text on each).
COLOURS = ("\x1b[30;46m", "\x1b[30;43m")
RESET = "\x1b[0m"


def add_inspect_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("inspect", help="show the pieces of a text with their ids, and the first merges")
    p.add_argument("--tokenizer", required=True, help="tokenizer file (tokenizer.bpe, .tiktoken, tokenizer.json ...)")
    p.add_argument("--pretokenizer", help="pre-tokenizer for rank-only files (.tiktoken): cl100k, o200k, ...")
    given = p.add_mutually_exclusive_group()
    given.add_argument("--text", help="the text to cut into pieces")
    given.add_argument("--file", help="a UTF-8 file whose text to cut into pieces")
    p.add_argument("--merges", type=int, metavar="N", help="list the first N merges as left + right -> token (id)")
    add_special_tokens_argument(p, choices=("ordinary", "allowed"), what="")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="alternate colours per piece (auto: on a terminal, unless NO_COLOR is set)")  # fmt: skip
    p.set_defaults(func=cmd_inspect)
    return p


def cmd_inspect(args: argparse.Namespace) -> int:
    if args.text is None and args.file is None and args.merges is None:
        raise ValueError("inspect needs --text S or --file F (the text to show), or --merges N")
    if args.merges is not None and args.merges < 0:
        raise ValueError(f"--merges must be a non-negative integer, got {args.merges}")
    tok = Tokenizer.from_file(args.tokenizer, pretokenizer=args.pretokenizer)
    colour = _use_colour(args.color, sys.stdout)
    out: list[str] = []
    if args.text is not None or args.file is not None:
        text = args.text if args.text is not None else _read_text(args.file)
        allowed = special_tokens_policy(args) == "allowed"
        ids = tok.encode(text, allowed_special="all") if allowed else tok.encode_ordinary(text)
        out += piece_lines(tok, ids, colour=colour)
    if args.merges is not None:
        out += merge_lines(tok, args.merges)
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def _read_text(path: str) -> str:
    from pipeline.storage.files import read_bytes

    data = read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 4]!r})") from None


def _use_colour(choice: str, stream) -> bool:
    if choice != "auto":
        return choice == "always"
    return bool(getattr(stream, "isatty", lambda: False)()) and not os.environ.get("NO_COLOR")


def show_bytes(data: bytes) -> str:
    """A token's bytes as readable text: whole UTF-8 as itself, control characters and stray bytes escaped.

    >>> show_bytes(b"a\\n\\xe4")
    'a\\\\n\\\\xe4'
    """
    text = data.decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def piece_lines(tok: Tokenizer, ids: list[int], *, colour: bool) -> list[str]:
    """The text with its pieces marked (coloured, or between ``|`` when plain), one row per piece, the totals."""
    pieces = [tok.token_bytes(i) for i in ids]
    if colour:
        paint = [COLOURS[k % 2] + "{}" + RESET for k in range(len(ids))]
        lines = ["".join(p.format(show_bytes(b)) for p, b in zip(paint, pieces, strict=True))]
        lines.append("".join(p.format(_byte_level(tok, i, b)) for p, i, b in zip(paint, ids, pieces, strict=True)))
    else:
        paint = ["{}"] * len(ids)
        lines = ["|" + "|".join(show_bytes(b) for b in pieces) + "|"]
    shown = [f"'{show_bytes(b)}'" for b in pieces]
    id_width, text_width = max([len(str(i)) for i in ids] + [2]), max([len(s) for s in shown] + [4])
    lines.append(f"{'id':>{id_width}}  {'text':<{text_width}}  byte-level")
    for p, i, s, b in zip(paint, ids, shown, pieces, strict=True):
        lines.append(f"{i:>{id_width}}  " + p.format(f"{s:<{text_width}}") + f"  {_byte_level(tok, i, b)}")
    total = sum(len(b) for b in pieces)
    per_token = f"{total / len(ids):.2f}" if ids else "-"
    lines.append(f"{len(ids)} tokens, {total} bytes, {per_token} bytes per token")
    return lines


def _byte_level(tok: Tokenizer, token_id: int, data: bytes) -> str:
    return data.decode("utf-8", "replace") if tok.is_special(token_id) else bytes_to_token_string(data)


def merge_lines(tok: Tokenizer, n: int) -> list[str]:
    """The first ``n`` merges as ``left + right -> token (id)``, in byte-level form."""
    merges = tok.merges
    lines = [f"the first {min(n, len(merges))} of {len(merges)} merges (rank  left + right -> token (id)):"]
    for rank, (left, right) in enumerate(merges[:n]):
        made = tok.token_id(left + right)
        lines.append(
            f"{rank:>6}  {bytes_to_token_string(left)} + {bytes_to_token_string(right)} -> "
            f"{bytes_to_token_string(left + right)} ({made})"
        )
    return lines
