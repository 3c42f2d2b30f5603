"""The beam-bpe command line: train, encode, decode, inspect, count-tokens, report, info, convert and demo.

The library commands need only ``bpe_core``; Apache Beam is imported by the pipeline commands alone.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import traceback
from collections.abc import Sequence

import bpe_core
from bpe_core import Tokenizer, TokenizerFileError
from pipeline.cli.common import (
    add_verbose_argument,
    failure_line,
    in_a_pipeline_step,
    interrupted_line,
    is_verbose,
    quiet_tracebacks,
    special_tokens_policy,
    was_interrupted,
)
from pipeline.errors import UsageError


def _load(args: argparse.Namespace) -> Tokenizer:
    return Tokenizer.from_file(args.tokenizer, pretokenizer=getattr(args, "pretokenizer", None))


def cmd_info(args: argparse.Namespace) -> int:
    info = _load(args).describe()
    info["file"] = args.tokenizer
    print(json.dumps(info, indent=2, ensure_ascii=False))
    return 0


def cmd_encode(args: argparse.Namespace, beam_args: list[str]) -> int:
    if args.input or args.out:  # a corpus: the encoding pipeline
        from pipeline.cli.encode import cmd_encode_corpus

        return cmd_encode_corpus(args, beam_args)
    if beam_args:
        raise UsageError(f"unrecognized arguments: {' '.join(beam_args)} (Beam options go with --input)")
    _refuse_corpus_flags(args)
    if len(args.tokenizer) > 1:
        raise UsageError(
            f"--text takes one tokenizer, got {len(args.tokenizer)} ({', '.join(args.tokenizer)}): give one, or "
            "encode a corpus (--input) with several"
        )
    args.tokenizer = args.tokenizer[0]
    tok = _load(args)
    text = args.text if args.text is not None else _stdin_text()
    allowed = special_tokens_policy(args) == "allowed"
    ids = tok.encode(text, allowed_special="all") if allowed else tok.encode_ordinary(text)
    print(" ".join(map(str, ids)))
    return 0


# The flags of the encoding pipeline, which ``encode --text`` would silently ignore.
CORPUS_ONLY = (
    "format",
    "text_field",
    "text_column",
    "text_unit",
    "max_document_bytes",
    "range_bytes",
    "shard_format",
    "shard_size",
    "merge",
    "prefix",
    "bos",
    "eos",
    "verify",
    "pack_length",
    "pack",
    "pack_rows",
    "overwrite",
    "no_progress",
    "workers",
)


def _refuse_corpus_flags(args: argparse.Namespace) -> None:
    given = [flag for dest, flag in args.given_flags if dest in CORPUS_ONLY]
    if given:
        one = len(given) == 1
        verb, does, them = ("belongs", "does", "it") if one else ("belong", "do", "them")
        raise UsageError(
            f"{', '.join(given)} {verb} to the encoding pipeline (--input ... --out DIR) and {does} "
            f"nothing with --text or stdin: drop {them}"
        )


def _given_flags(
    parser: argparse.ArgumentParser, args: argparse.Namespace, argv: Sequence[str]
) -> list[tuple[str, str]]:
    """(dest, flag) of every option of the chosen sub-command that appears in ``argv``."""
    by_flag = {flag: dest for dest, flag in _all_flags(parser, args)}
    return [(by_flag[a.split("=", 1)[0]], a.split("=", 1)[0]) for a in argv if a.split("=", 1)[0] in by_flag]


def cmd_demo(args: argparse.Namespace, beam_args: list[str]) -> int:
    from pipeline.cli.demo import run_demo

    return run_demo(out_dir=args.out, vocab_size=args.vocab_size, max_mb=args.max_mb, beam_args=beam_args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="beam-bpe", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"beam-bpe {bpe_core.__version__}")
    add_verbose_argument(parser)
    sub = parser.add_subparsers(dest="command", required=True)

    def with_tokenizer(name: str, help_text: str, *, several: str = "") -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--tokenizer", required=True, help="tokenizer file (tokenizer.bpe, .tiktoken, ...)" + several,
                       action="append" if several else "store")  # fmt: skip
        p.add_argument("--pretokenizer", help="pre-tokenizer for rank-only files (.tiktoken): cl100k, o200k, ...")
        return p

    with_tokenizer("info", "describe a tokenizer file").set_defaults(func=cmd_info)
    from pipeline.cli.decode import add_decode_parser
    from pipeline.cli.encode import add_encode_corpus_arguments

    p = with_tokenizer("encode", "print the ids of a text, or encode a corpus into token-id shards (--input)",
                       several="; with --input, repeat it to encode with several in one read: OUT/<file name>/ "
                       "each, as separate runs would write")  # fmt: skip
    p.add_argument("--text", help="text to encode (default: stdin)")
    add_encode_corpus_arguments(p)
    p.set_defaults(func=cmd_encode, takes_beam_args=True)
    add_decode_parser(sub)
    from pipeline.cli.convert import add_convert_parser

    add_convert_parser(sub)
    from pipeline.cli.train import add_train_parser

    add_train_parser(sub)
    from pipeline.cli.count_tokens import add_count_tokens_parser
    from pipeline.cli.inspect import add_inspect_parser

    add_inspect_parser(sub)
    add_count_tokens_parser(sub)
    from pipeline.cli.report import add_report_parser

    add_report_parser(sub)
    from pipeline.cli.verify import add_verify_parser

    add_verify_parser(sub)
    from pipeline.cli.pack import add_pack_parser

    add_pack_parser(sub)
    from pipeline.launch.logs import add_log_level_flag

    for name in ("train", "encode", "report", "count-tokens"):  # the commands that run Beam
        add_log_level_flag(sub.choices[name])
    p = sub.add_parser("demo", help="train with the Beam pipeline on the Python standard library, encode and decode")
    p.add_argument("--out", default="demo-out", help="output directory (default: demo-out)")
    p.add_argument("--vocab-size", type=int, default=2048)
    p.add_argument("--max-mb", type=float, default=4.0, help="megabytes of standard-library source to train on")
    add_verbose_argument(p, default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_demo, takes_beam_args=True)
    return parser


def _subparser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    return sub.choices[args.command]


def _all_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[tuple[str, str]]:
    """(dest, flag) of every option of the chosen sub-command."""
    return [(a.dest, s) for a in _subparser(parser, args)._actions for s in a.option_strings]  # noqa: SLF001


def runs_a_pipeline(args: argparse.Namespace) -> bool:
    """Whether the command runs a Beam pipeline (train, demo, report, encode of a corpus), whose failure leaves an
    output directory to report on."""
    return args.command in ("train", "demo", "report") or (args.command == "encode" and bool(args.input or args.out))


def _worker_tokenizers(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """The tokenizers a command's workers load, as their ``TokenizerRef`` names them (an absolute path or a URL,
    and the ``--pretokenizer``), for the fork server to load first; none for a command without ``--tokenizer``."""
    from pipeline.storage.paths import absolute

    given = getattr(args, "tokenizer", None)
    if args.command not in ("encode", "count-tokens") or not given:
        return []
    names = [given] if isinstance(given, str) else list(given)
    return [(absolute(name), getattr(args, "pretokenizer", None)) for name in names]


def _beam_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> list[str]:
    """The Beam options of a pipeline command: ``--workers N`` turned into Beam's, and every flag that neither we
    nor Beam parse refused before any work (Beam would log it and run on)."""
    takes_beam = runs_a_pipeline(args) or args.command == "count-tokens"
    if takes_beam:
        from pipeline.launch.workers import start_worker_server, uses_local_workers

        if uses_local_workers(getattr(args, "workers", None), extra):
            start_worker_server(args.command, _worker_tokenizers(args))  # beside the launcher's imports
    if getattr(args, "workers", None) is not None and takes_beam:
        from pipeline.launch.options import with_workers  # imports Apache Beam

        try:  # --workers N is Beam's multi-process runner: its options, before they are checked and passed on
            extra = with_workers(args.workers, extra)
        except UsageError as exc:
            _subparser(parser, args).error(str(exc))
    if extra and takes_beam:
        from pipeline.launch.options import check_beam_args  # imports Apache Beam

        try:  # what neither we nor Beam parse would be logged by Beam and ignored: refused before any work
            check_beam_args(extra, our_flags=[flag for _, flag in _all_flags(parser, args)])
        except UsageError as exc:
            _subparser(parser, args).error(str(exc))  # the sub-command's usage, not the top level's
    return extra


def _stdin_text() -> str:
    """stdin as UTF-8, refused where it is not (the pipelines make such a document a dead letter; U+FFFD would
    encode text that nobody wrote)."""
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"stdin is not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start} ({exc.reason}); the pipelines "
            "make such a document a dead letter. Convert the text to UTF-8 (e.g. iconv -t UTF-8), or pass --text"
        ) from None


def _log_level(args: argparse.Namespace, extra: list[str]) -> list[str]:
    """``--log-level``: Beam's loggers here, and the workers' harness level among the Beam options of a pipeline."""
    level = getattr(args, "log_level", None)
    if level is None:
        return extra
    from pipeline.launch.logs import harness_args, set_beam_log_level

    set_beam_log_level(level)
    pipeline = runs_a_pipeline(args) or (args.command == "count-tokens" and bool(extra))
    pipeline = pipeline and not getattr(args, "from_counts", None)  # train --from-counts runs no pipeline
    return harness_args(extra, level) if pipeline else extra


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "takes_beam_args", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.given_flags = _given_flags(parser, args, argv)
    extra = _beam_arguments(parser, args, extra)
    extra = _log_level(args, extra)
    pipeline, verbose = runs_a_pipeline(args), is_verbose(args)
    with quiet_tracebacks(pipeline and not verbose) as thread_errors:
        try:
            if getattr(args, "takes_beam_args", False):
                code = args.func(args, extra)  # the flags argparse does not know are Beam pipeline options
            else:
                code = args.func(args)
        except (TokenizerFileError, ValueError, OSError, MemoryError) as exc:
            if pipeline and in_a_pipeline_step(exc):
                return _report_failure(args, exc, thread_errors, verbose)
            # MemoryError: the trainer's refusal of a merge loop that would not fit, with its estimate and the fix
            print(f"beam-bpe {args.command}: error: {as_cli_message(exc)}", file=sys.stderr)
            return getattr(exc, "exit_code", 2)  # 3: NothingWrittenError, the run wrote nothing
        except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - a failed or stopped run: one line
            if not pipeline:
                raise
            if not was_interrupted(exc):
                return _report_failure(args, exc, thread_errors, verbose)
            if verbose:  # Ctrl-C: what is complete and that a rerun resumes
                traceback.print_exception(exc, file=sys.stderr)
            print(interrupted_line(args.command, exc, args.out), file=sys.stderr)
            return 130
    for error in thread_errors:  # a Beam thread ended with an error, yet the run completed
        print(f"beam-bpe {args.command}: warning: {error}", file=sys.stderr)
    return code


_LIBRARY_ARGUMENTS = (  # bpe_core's messages name its arguments; the command line has flags for them
    (re.compile(r"\bpretokenizer=('[^']*'|\S+)"), r"--pretokenizer \1"),
    (re.compile(r"drop rare chunks from chunk_counts"), "train --min-chunk-count K or --max-chunks M"),
)


def as_cli_message(exc: BaseException) -> str:
    """A library error as the command line says it: the flag in place of the argument it names."""
    message = str(exc) or type(exc).__name__
    for pattern, flag in _LIBRARY_ARGUMENTS:
        message = pattern.sub(flag, message)
    return message


def _report_failure(args: argparse.Namespace, exc: Exception, thread_errors: list[str], verbose: bool) -> int:
    if verbose:
        traceback.print_exception(exc, file=sys.stderr)
    print(failure_line(args.command, exc, args.out, thread_errors), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
