"""What the pipeline sub-commands (``train``, ``encode --input``, ``demo``) share: the corpus flags, ``--verbose``,
and the one-line report of a run that failed.

Both pipelines read a corpus the same way (:mod:`pipeline.corpus.plan`), so its flags are declared once here. A
failed run is reported in one line that says what failed, in what state the output directory is and what a rerun
does; the traceback (ours, Beam's logged one, and those of Beam's threads) only with ``-v`` or
``BEAM_BPE_VERBOSE=1``: a worker killed under multi_processing otherwise ended in 80 lines of Beam internals.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pipeline.corpus.formats import FORMATS as CORPUS_FORMATS
from pipeline.corpus.names import AUTO, format_of_name
from pipeline.corpus.plan import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    DEFAULT_RANGE_BYTES,
    FORMATS,
    TEXT_UNITS,
    CorpusSpec,
)
from pipeline.errors import CorpusError, UsageError
from pipeline.launch.sizes import size_argument

VERBOSE_ENV = "BEAM_BPE_VERBOSE"
_SUFFIXES_HELP = ", ".join("/".join(f.suffixes) for f in CORPUS_FORMATS.values())  # .txt/.text/.md/.rst, ...


BEAM_OPTIONS = """any other --flag is a Beam pipeline option and passes through, e.g. --runner FnApiRunner (the
default, in this process; --workers N for N worker processes on this machine), --runner DaskRunner
--dask_client_address HOST:PORT, --runner DataflowRunner --project P --region R --temp_location gs://..."""
EXIT_CODES = (
    "Exit code 0: done; exit code 2: refused or failed (one line says why); exit code 3: the run finished but "
    "wrote nothing (no document was read, or every document read was a dead letter)."
)


def nothing_written(command: str, read: int, dead: int, where: str) -> str:
    """The message of exit code 3: what was read, where the dead letters are, what to check."""
    what = "no document was read" if read == 0 else f"all {read:,} documents read were dead letters ({where})"
    return (
        f"{command} wrote nothing: {what}; check --format (or the files' suffixes), --text-field / --text-column "
        "and --max-document-bytes"
    )


# What a failed run leaves in --out and what a rerun of the same command does, as each pipeline guarantees
# (tests/reliability/test_faults.py checks both for every stage of each).
AFTER_FAILURE = {
    "train": "no file in {out} is partial and there is neither manifest.json nor COMPLETED; rerun the same command "
    "to run it again from the start (training does not resume)",
    "encode": "no file in {out} is partial and there is neither manifest.json nor COMPLETED; rerun the same command "
    "to resume: the shards already complete are kept, the others written",
}
AFTER_FAILURE["demo"] = AFTER_FAILURE["train"]
AFTER_FAILURE["report"] = AFTER_FAILURE["train"].replace("training does not resume", "a report does not resume")
BEAM_STEP_MARKER = "[while running '"  # Beam appends it to an exception raised inside a step


def _not_apitools_warning(record: logging.LogRecord) -> bool:
    """False for the warning Beam logs on the root logger whenever it is imported without its GCP extra
    (apache_beam/io/gcp/internal/clients/bigquery/__init__.py): it was shown on every pipeline command to users who
    do not use GCP. Dataflow's launch checks say what is missing where the extra is needed."""
    return not (record.name == "root" and isinstance(record.msg, str) and record.msg.startswith("apitools not found"))


# installed before any command imports Beam (a root-logger filter sees what logging.warning() logs)
if _not_apitools_warning not in logging.getLogger().filters:
    logging.getLogger().addFilter(_not_apitools_warning)


def add_corpus_arguments(p: argparse.ArgumentParser, *, title: str, range_help: str) -> argparse._ArgumentGroup:
    """The corpus flags (``--input``, ``--format``, ... ``--range-bytes``) in a group ``title``; returns the group."""
    src = p.add_argument_group(title)
    src.add_argument(
        "--input", action="append", default=[], metavar="GLOB", help="file, directory, glob or fsspec URL (repeatable)"
    )
    src.add_argument("--format", choices=FORMATS, default=None,
                     help=f"default: each file's own name ({_SUFFIXES_HELP}, "
                          "each optionally .gz/.bz2/.zst); a file whose name says none is refused unless --format "
                          "is given (every file is then read as that format)")  # fmt: skip
    src.add_argument(
        "--text-field",
        default=None,
        help="JSONL field or Parquet column holding the text; dotted for a nested JSONL field (default: text)",
    )
    src.add_argument("--text-column", default=None, help="deprecated: --text-field (one flag for JSONL and Parquet)")
    src.add_argument(
        "--text-unit", choices=TEXT_UNITS, default="line", help="plain text: one document per line or per file"
    )
    src.add_argument(
        "--max-document-bytes",
        type=size_argument("--max-document-bytes"),
        default=DEFAULT_MAX_DOCUMENT_BYTES,
        metavar="N",
        help="a longer document is a dead letter, skipped without being held in memory (default: 32 MiB)",
    )
    src.add_argument("--range-bytes", type=size_argument("--range-bytes"), default=DEFAULT_RANGE_BYTES,
                     metavar="SIZE", help=range_help + " (bytes, or a size such as 4MiB)")  # fmt: skip
    return src


def corpus_spec(args: argparse.Namespace) -> CorpusSpec:
    """The CorpusSpec of the corpus flags (``--format`` read off the input names where it is not given)."""
    fmt = args.format or infer_format(args.input)
    said = sorted({f for f in map(format_of_name, args.input) if f})
    if args.format and said and said != [args.format]:
        named = " and ".join(said)
        print(f"beam-bpe: warning: --format {args.format}, but the --input names say {named} (e.g. "
              f"{args.input[0]!r}): every line is read as {args.format}; drop --format if the files hold {named}",
              file=sys.stderr)  # fmt: skip
    field = text_field(args)
    return CorpusSpec(fmt, field, field, args.text_unit, max_document_bytes=args.max_document_bytes)


def text_field(args: argparse.Namespace) -> str:
    """The field (JSONL) or column (Parquet) holding the text: ``--text-field``, or the deprecated ``--text-column``
    (with a warning); the two naming different fields are refused."""
    if args.text_column is None:
        return args.text_field or "text"
    warn_deprecated("--text-column", "--text-field", "one flag names the JSONL field and the Parquet column")
    if args.text_field is not None and args.text_field != args.text_column:
        raise CorpusError(
            f"--text-field {args.text_field} and --text-column {args.text_column} name different fields: one flag "
            "names both the JSONL field and the Parquet column now; give --text-field alone"
        )
    return args.text_column


_WARNED: set[str] = set()


def warn_deprecated(old: str, new: str, why: str) -> None:
    """One warning per process that ``old`` is a deprecated spelling of ``new`` (it still works)."""
    if old not in _WARNED:
        _WARNED.add(old)
        print(f"beam-bpe: warning: {old} is deprecated: use {new} ({why}); {old} still works for now", file=sys.stderr)


def special_tokens_policy(args: argparse.Namespace) -> str:
    """``--special-tokens ordinary|allowed`` (default ordinary), or the deprecated ``--allow-special`` (allowed, with
    a warning); ``--allow-special --special-tokens ordinary`` is refused."""
    if not getattr(args, "allow_special", False):
        return args.special_tokens or "ordinary"
    warn_deprecated("--allow-special", "--special-tokens allowed", "one flag for --text and --input")
    if args.special_tokens not in (None, "allowed"):
        raise UsageError(f"--allow-special and --special-tokens {args.special_tokens} contradict each other: give "
                         "--special-tokens allowed or ordinary alone")  # fmt: skip
    return "allowed"


def add_special_tokens_argument(p, *, choices: tuple[str, ...], what: str) -> None:
    """``--special-tokens`` and its deprecated alias ``--allow-special``."""
    p.add_argument("--special-tokens", choices=choices, default=None,
                   help=f"text spelling a special token{what}: encoded as ordinary text (default) or as the control "
                        "token")  # fmt: skip
    p.add_argument("--allow-special", action="store_true", help="deprecated: --special-tokens allowed")


def infer_format(patterns: list[str]) -> str:
    """The format every input's name says (``data/*.txt.gz`` -> text); where they do not all say one (a directory,
    ``data/*``, names of two formats): ``auto``, each file read by its own name (pipeline/corpus/names.py), a file
    whose name says none refused by name."""
    formats = {format_of_name(p) for p in patterns}
    return formats.pop() if len(formats) == 1 and None not in formats else AUTO


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of workers: give a whole number of at least 1")
    return value


def add_workers_argument(group) -> None:
    """``--workers N``: Beam's multi-process runner on this machine (the CLI turns it into Beam's options)."""
    group.add_argument("--workers", type=positive_int, metavar="N",
                       help="run on N worker processes on this machine (Beam's multi-process runner; default: one "
                            "process, the in-process runner); not with --runner or --direct_* options")  # fmt: skip


def add_verbose_argument(p: argparse.ArgumentParser, *, default=False) -> None:
    """``-v/--verbose``; a sub-command passes ``default=argparse.SUPPRESS`` so as not to undo ``beam-bpe -v CMD``."""
    p.add_argument("-v", "--verbose", action="store_true", default=default,
                   help=f"on failure, print the tracebacks too (or set {VERBOSE_ENV}=1)")  # fmt: skip


def add_progress_argument(group) -> None:
    """``--no-progress``: no live bars on a terminal (the stage lines stay); off a terminal there are none anyway."""
    group.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bars on the terminal (none are drawn when stderr is not a terminal)",
    )


def progress_reporter(args: argparse.Namespace):
    """The Reporter of a pipeline command: bars on a terminal unless ``--no-progress``."""
    from pipeline.launch.progress import Reporter

    return Reporter(progress=not getattr(args, "no_progress", False))


def is_verbose(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "verbose", False)) or os.environ.get(VERBOSE_ENV, "") not in ("", "0")


def in_a_pipeline_step(exc: BaseException) -> bool:
    """Whether Beam raised ``exc`` out of a running step (an OSError there is a failed run, not a bad argument)."""
    return BEAM_STEP_MARKER in str(exc)


def failure_line(command: str, exc: BaseException, out: str, thread_errors: list[str]) -> str:
    """One line: what failed, the output directory's state and what a rerun does, where to find the traceback."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    message = " ... ".join(dict.fromkeys([lines[0], lines[-1]])) if lines else ""
    what = [f"{type(exc).__name__}: {message}".rstrip(".") if message else type(exc).__name__]
    what += [_explain(e) for e in dict.fromkeys(thread_errors)]  # e.g. which worker process died, and how
    after = AFTER_FAILURE[command].format(out=out)
    return (
        f"beam-bpe {command}: error: the run failed: {'; '.join(what)}.{_notes(exc)} {after[0].upper()}{after[1:]}. "
        f"-v or {VERBOSE_ENV}=1 shows the traceback"
    )


def interrupted_line(command: str, exc: BaseException, out: str) -> str:
    """The one line of a run stopped by Ctrl-C: what is complete and what rerunning the same command does."""
    after = AFTER_FAILURE[command].format(out=out)
    return f"beam-bpe {command}: stopped (Ctrl-C).{_notes(exc)} {after[0].upper()}{after[1:]}"


def was_interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is Ctrl-C: a KeyboardInterrupt, or Beam's RuntimeError wrapping the one a step received."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt) or str(exc).startswith("KeyboardInterrupt"):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _notes(exc: BaseException) -> str:
    """What the job added to the exception (shards complete, part files removed or left), as sentences."""
    notes = [n.rstrip(".") for n in getattr(exc, "__notes__", ()) if n.strip()]
    return "".join(f" {n[0].upper()}{n[1:]}." for n in notes)


def _explain(error: str) -> str:
    if "return code 137" in error or "return code -9" in error:
        return error + ": killed by SIGKILL, often the kernel's out-of-memory killer"
    return error


@contextmanager
def quiet_tracebacks(enabled: bool) -> Iterator[list[str]]:
    """If ``enabled``: Beam's logged tracebacks are cut to their message, and an exception ending one of Beam's
    threads (``Worker subprocess exited with return code 137``) is collected into the list yielded, not printed."""
    errors: list[str] = []
    if not enabled:
        yield errors
        return
    # Beam's PipelineOptions calls logging.basicConfig(); where nothing has configured logging yet, this is that
    # handler. Where something has (without the GCP extra, importing Beam logs "apitools not found" through the root
    # logger, whose basicConfig() made a handler before we ran), the filter goes on the handlers that exist: only
    # filtering a handler of our own kept Beam's traceback in exactly the installs without that extra.
    if not logging.root.handlers:
        logging.basicConfig()
    handlers = list(logging.root.handlers)
    for handler in handlers:
        handler.addFilter(_without_traceback)
    # Handlers made later are not filtered: importing Dask's distributed (DASK_LOGGING__APACHE_BEAM, --log-level)
    # puts a handler of its own on the apache_beam logger, which printed a killed worker's traceback. Beam's records
    # lose their traceback where they are made instead, whatever handler prints them.
    make_record = logging.getLogRecordFactory()

    def record_without_traceback(name, *args, **kwargs):
        record = make_record(name, *args, **kwargs)
        if name.startswith("apache_beam"):
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        return record

    logging.setLogRecordFactory(record_without_traceback)
    previous = threading.excepthook

    def collect(a: threading.ExceptHookArgs) -> None:
        if str(a.exc_value).strip():  # a gRPC reader's empty RpcError after a worker died says nothing more
            errors.append(f"{a.exc_type.__name__} in thread {a.thread.name if a.thread else '?'}: {a.exc_value}")

    threading.excepthook = collect
    try:
        yield errors
    finally:
        threading.excepthook = previous
        logging.setLogRecordFactory(make_record)
        for handler in handlers:
            handler.removeFilter(_without_traceback)


def _without_traceback(record: logging.LogRecord) -> bool:
    if record.name.startswith("apache_beam") and "KeyboardInterrupt" in str(record.msg):
        return False  # Ctrl-C: the command says it in its one line
    if record.name.startswith("apache_beam"):
        record.exc_info, record.exc_text, record.stack_info = None, None, None
    return True
