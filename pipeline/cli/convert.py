"""``beam-bpe convert``: any loadable tokenizer file into the format ``--out`` names by its suffix.

``.bpe`` the own artifact (holds everything), ``.json`` a Hugging Face ``tokenizer.json``, ``.tiktoken`` an OpenAI
rank file, a folder (``--out DIR/``, or a path without a suffix) GPT-2's ``vocab.json`` + ``merges.txt``. What a
format cannot hold is refused with the reason, before anything is left at ``--out``: the file is written beside
its place, read back as its users read it (a rank file or GPT-2's files with the same ``--pretokenizer``) and
compared with the tokenizer converted; only a file that gives the same ids and special tokens is moved into place.
A rank file and GPT-2's files never hold the pre-tokenizer: the summary line names the one to load them with.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import warnings

from bpe_core import Tokenizer
from pipeline.errors import UsageError

# --out's suffix -> what it writes; the suffixes are those of the tokenizer-file registry (bpe_core/formats/detect.py)
SUFFIXES = {".bpe": "tokenizer.bpe", ".json": "tokenizer.json", ".tiktoken": ".tiktoken rank file"}
FOLDER = "vocab.json + merges.txt"


def add_convert_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("convert", help="write a tokenizer as .bpe, .tiktoken, tokenizer.json or GPT-2's files")
    p.add_argument("--tokenizer", required=True, help="tokenizer file (tokenizer.bpe, .tiktoken, ...)")
    p.add_argument("--pretokenizer", help="pre-tokenizer for rank-only files (.tiktoken): cl100k, o200k, ...")
    p.add_argument("--out", required=True,
                   help="the file to write, its format by suffix: .bpe (the own artifact), .json (Hugging Face "
                        "tokenizer.json), .tiktoken (rank file); a folder (DIR/ or no suffix): vocab.json + "
                        "merges.txt. What the format cannot hold is refused with the reason")  # fmt: skip
    p.add_argument("--special-token", action="append", default=[], metavar="NAME=ID",
                   help="a special token of a .tiktoken rank file (repeatable; OpenAI's published files get "
                        "tiktoken's by default, and these replace them)")  # fmt: skip
    p.set_defaults(func=cmd_convert)
    return p


def target(out: str) -> str:
    """The format ``--out`` names: a key of :data:`SUFFIXES`, or ``folder``.

    >>> target("a/tok.bpe"), target("gpt2/"), target("gpt2")
    ('.bpe', 'folder', 'folder')
    """
    if out.endswith(("/", os.sep)) or os.path.isdir(out):
        return "folder"
    suffix = os.path.splitext(out)[1].lower()
    if not suffix:
        return "folder"
    if suffix not in SUFFIXES:
        raise UsageError(
            f"--out {out}: the suffix {suffix} names no tokenizer format; give .bpe (the own artifact), .json "
            "(tokenizer.json), .tiktoken (rank file) or a folder (DIR/: vocab.json + merges.txt)"
        )
    return suffix


def cmd_convert(args: argparse.Namespace) -> int:
    tok = _load_with_special_tokens(args) if args.special_token else _load(args)
    kind = target(args.out)
    _refuse_what_cannot_be_held(tok, kind, args.out)
    staging = tempfile.mkdtemp(prefix=".convert-", dir=os.path.dirname(os.path.abspath(args.out.rstrip("/"))) or ".")
    try:
        written = _write(tok, kind, staging)
        with warnings.catch_warnings():  # the reader's notes on the file are about our staging copy
            warnings.simplefilter("ignore")
            back = _read_back(written, kind, tok)
        _compare(tok, back, kind, args.out)
        _move_into_place(written, kind, args.out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    pre = tok.pretokenizer.describe() if tok.pretokenizer is not None else "none"
    what = SUFFIXES.get(kind, FOLDER)
    note = (
        f" (a {what} holds no pre-tokenizer: load it with --pretokenizer {pre})"
        if kind in (".tiktoken", "folder")
        else ""
    )
    print(f"wrote {args.out} ({what}): {tok.kind}, n_vocab={tok.n_vocab}, pre-tokenizer {pre}{note}")
    if kind == ".tiktoken" and tok.special_tokens:  # the ranks as train's tokenizer.tiktoken holds them
        specials = ", ".join(f"{t}={i}" for t, i in tok.special_tokens.items())
        print(f"beam-bpe convert: note: {args.out} holds the ranks only, as train's tokenizer.tiktoken does; the "
              f"special tokens it leaves out: {specials} (pass them to tiktoken.Encoding, or load the file with "
              "--special-token NAME=ID)", file=sys.stderr)  # fmt: skip
    return 0


def _refuse_what_cannot_be_held(tok: Tokenizer, kind: str, out: str) -> None:
    if kind not in (".tiktoken", "folder"):
        return  # .bpe holds everything; tokenizer.json's writer refuses what it cannot say itself
    what = SUFFIXES.get(kind, FOLDER)
    lost = []
    if tok.pretokenizer is not None and tok.pretokenizer.normalizer:
        lost.append(f"the normalizer {tok.pretokenizer.normalizer}")
    if tok.added_tokens:
        lost.append(f"{len(tok.added_tokens)} added token(s) ({', '.join(list(tok.added_tokens)[:3])})")
    if lost:
        raise UsageError(
            f"--out {out}: a {what} cannot hold {' or '.join(lost)}, so the file would give other ids: write .bpe "
            "or .json, which hold them"
        )


def _write(tok: Tokenizer, kind: str, staging: str) -> str:
    if kind == "folder":
        tok.to_gpt2_files(staging)
        return staging
    path = os.path.join(staging, "tokenizer" + kind)
    {".bpe": tok.save, ".json": tok.to_huggingface, ".tiktoken": tok.to_tiktoken}[kind](path)
    return path


def _read_back(path: str, kind: str, tok: Tokenizer) -> Tokenizer:
    pre = tok.pretokenizer
    if kind == ".tiktoken":
        return Tokenizer.from_tiktoken(path, pretokenizer=pre) if pre is not None else Tokenizer.from_tiktoken(path)
    if kind == "folder":
        return Tokenizer.from_gpt2_files(os.path.join(path, "vocab.json"), pretokenizer=pre)
    return Tokenizer.from_file(path)


def _compare(tok: Tokenizer, back: Tokenizer, kind: str, out: str) -> None:
    what = SUFFIXES.get(kind, FOLDER)
    if back.special_tokens != tok.special_tokens and kind != ".tiktoken":  # a rank file holds ranks only, as train's
        missing = {t: i for t, i in tok.special_tokens.items() if back.special_tokens.get(t) != i}
        shown = ", ".join(f"{t}={i}" for t, i in list(missing.items())[:3]) + (" ..." if len(missing) > 3 else "")
        raise UsageError(
            f"--out {out}: a {what} cannot hold the special tokens ({shown}): it would load without them; write "
            ".bpe or .json, which hold them (a .tiktoken file's user passes them to tiktoken.Encoding himself)"
        )
    if back.vocab != tok.vocab or back.encode_ordinary_batch(_probe(tok)) != tok.encode_ordinary_batch(_probe(tok)):
        raise UsageError(
            f"--out {out}: read back, the {what} would not give this tokenizer's ids (its merges or vocabulary "
            "cannot be said in this format); write .bpe or .json"
        )


PROBE = "Hello world! naïve café, 日本語のテキスト, ☕ 123 4567 'quotes' \"and\" tabs\tand\nnewlines  x  "


def _probe(tok: Tokenizer) -> list[str]:
    """Texts whose ids the converted file must reproduce: every token that is valid UTF-8 alone, and a mixed line."""
    texts = [PROBE]
    for data in tok.vocab.values():
        try:
            texts.append(data.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    return texts


def _move_into_place(written: str, kind: str, out: str) -> None:
    if kind == "folder":
        os.makedirs(out, exist_ok=True)
        for name in ("vocab.json", "merges.txt"):
            os.replace(os.path.join(written, name), os.path.join(out, name))
    else:
        os.replace(written, out)


def _load(args: argparse.Namespace) -> Tokenizer:
    return Tokenizer.from_file(args.tokenizer, pretokenizer=args.pretokenizer)


def _load_with_special_tokens(args: argparse.Namespace) -> Tokenizer:
    """A .tiktoken rank file with the special tokens given as --special-token NAME=ID (other formats carry theirs)."""
    from bpe_core._io import read_bytes
    from bpe_core.formats.detect import sniff

    if sniff(read_bytes(args.tokenizer)) != "tiktoken":
        raise ValueError(
            f"--special-token is for .tiktoken rank files, which carry no special tokens; {args.tokenizer} carries "
            "its own (see `beam-bpe info`)"
        )
    specials: dict[str, int] = {}
    for item in args.special_token:
        token, sep, value = item.rpartition("=")
        if not sep or not token or not value.isdigit():
            raise ValueError(f"--special-token {item!r}: expected NAME=ID, e.g. --special-token '<|endoftext|>=100257'")
        specials[token] = int(value)
    return Tokenizer.from_tiktoken(args.tokenizer, pretokenizer=args.pretokenizer, special_tokens=specials)
