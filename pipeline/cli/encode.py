"""``beam-bpe encode --input ...`` (the encoding pipeline) and ``beam-bpe decode --shards DIR --doc ID``.

The single-text ``encode --text S`` and ``decode --ids/--stream`` stay in :mod:`pipeline.cli`; these functions add
the corpus flags to the same sub-commands, and ``pipeline.cli`` dispatches on ``--input`` and ``--shards``. Every
flag argparse does not know is a Beam pipeline option and passes through unchanged.
"""

from __future__ import annotations

import argparse
import sys

from pipeline.cli.common import (
    BEAM_OPTIONS,
    add_corpus_arguments,
    add_progress_argument,
    add_verbose_argument,
    add_workers_argument,
    corpus_spec,
    progress_reporter,
)
from pipeline.corpus.plan import InputSpec
from pipeline.encode.formats import DEFAULT as DEFAULT_FORMAT
from pipeline.encode.formats import FORMATS
from pipeline.encode.formats import help_text as formats_help
from pipeline.encode.policy import SPECIAL_POLICIES
from pipeline.errors import ShardFileError, UsageError

EPILOG = f"With --input, {BEAM_OPTIONS}"


def add_encode_corpus_arguments(p: argparse.ArgumentParser) -> None:
    """The encoding pipeline's flags, on the ``encode`` sub-command (which also takes ``--text``)."""
    p.allow_abbrev = False  # a Beam flag must never be taken for an abbreviation of ours
    p.epilog = EPILOG
    add_corpus_arguments(
        p,
        title="corpus (the encoding pipeline; same flags as train)",
        range_help="bytes per range of uncompressed text/JSONL (the unit of parallelism; shards hold many)",
    )
    out = p.add_argument_group("output")
    out.add_argument("--out", help="output directory (local path or fsspec URL)")
    out.add_argument(
        "--shard-format",
        choices=tuple(FORMATS),
        default=DEFAULT_FORMAT,
        help=formats_help(),
    )
    out.add_argument(
        "--shard-size",
        default="1GiB",
        metavar="SIZE",
        help="input bytes (as stored) per output shard: 1GiB (default), 256MiB, 500MB or bytes; consecutive "
        "ranges in input order, so about ceil(input bytes / SIZE) shards",
    )
    out.add_argument("--merge", action="store_true",
                     help="megatron: also merge the shards into one {prefix}.bin/.idx pair (streaming, bounded memory; "
                     "twice the disk) and name it in megatron_data_path.txt")  # fmt: skip
    out.add_argument(
        "--prefix", default="tokens", help="shard file prefix: {prefix}-00000-of-00008.parquet (default: tokens)"
    )
    out.add_argument(
        "--bos",
        nargs="?",
        const="auto",
        metavar="TOKEN",
        help="add a BOS token to every document (the tokenizer's usual one, or TOKEN)",
    )
    out.add_argument(
        "--eos",
        nargs="?",
        const="auto",
        metavar="TOKEN",
        help="add an EOS token to every document (the tokenizer's usual one, or TOKEN)",
    )
    out.add_argument(
        "--special-tokens",
        choices=SPECIAL_POLICIES,
        default=SPECIAL_POLICIES[0],
        help="text spelling a special token: encoded as ordinary text (default) or as the control token",
    )
    out.add_argument(
        "--verify", action="store_true", help="decode every document back (streaming) and compare it with its text"
    )
    out.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh: replace what an earlier encoding run left in --out (another job's or this one's)",
    )
    add_progress_argument(out)
    add_workers_argument(out)
    add_verbose_argument(p, default=argparse.SUPPRESS)


def add_decode_shards_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--shards", metavar="DIR", help="the --out of an encoding run: print one document of it (with --doc)"
    )
    p.add_argument("--doc", metavar="ID", help="document id (PATH@OFFSET, PATH#ROW) or 0-based document number")


def job_from_args(args: argparse.Namespace):
    """The EncodeJob of ``beam-bpe encode --input ...`` (also what ``python -m pipeline.cli.dataflow encode``
    translates)."""
    from pipeline.encode.settings import EncodeJob, EncodeSettings, parse_size

    if args.text is not None:
        raise UsageError("give --text (one text) or --input (a corpus), not both")
    if not args.input:
        raise UsageError("--out DIR needs --input GLOB (the corpus to encode); for one text: --text")
    if not args.out:
        raise UsageError("--input needs --out DIR")
    settings = EncodeSettings(
        shard_format=args.shard_format,
        pretokenizer=args.pretokenizer,
        special_tokens=args.special_tokens,
        bos=args.bos,
        eos=args.eos,
        verify=args.verify,
        prefix=args.prefix,
        merge=args.merge,
    )
    return EncodeJob(
        tokenizer=args.tokenizer,
        inputs=tuple(InputSpec(pattern) for pattern in args.input),
        out=args.out,
        corpus=corpus_spec(args),
        settings=settings,
        range_bytes=args.range_bytes,
        shard_size=parse_size(args.shard_size),
        overwrite=args.overwrite,
    )


def cmd_encode_corpus(args: argparse.Namespace, beam_args: list[str]) -> int:
    from pipeline.encode.job import run_encode  # imports Apache Beam: only for the pipeline
    from pipeline.encode.manifest import summary_line

    job = job_from_args(args)
    manifest = run_encode(job, beam_args, reporter=progress_reporter(args))
    print(f"{summary_line(manifest)} -> {job.out}")
    return 0


def cmd_decode_shards(args: argparse.Namespace) -> int:
    """Print one document of an encoding output, decoded with ``--tokenizer`` (checked against the manifest)."""
    from bpe_core import Tokenizer
    from pipeline.encode.readback import find_document, load_manifest

    if args.doc is None:
        raise UsageError("--shards DIR needs --doc ID (PATH@OFFSET, PATH#ROW or a document number)")
    manifest = load_manifest(args.shards)
    tok = Tokenizer.from_file(args.tokenizer, pretokenizer=args.pretokenizer)
    wanted = manifest["tokenizer"].get("digest")
    if wanted is None:
        raise ShardFileError(
            f"{args.shards}/manifest.json records no tokenizer digest: it was written by an older beam-bpe"
        )
    if tok.digest() != wanted:
        raise ShardFileError(
            f"{args.tokenizer} is not the tokenizer {args.shards} was encoded with (digest {wanted[:12]}...): pass "
            f"--tokenizer {manifest['tokenizer'].get('path', 'PATH')}"
        )
    doc_id, ids = find_document(args.shards, args.doc)
    ids = [int(i) for i in ids]
    if args.skip_special:
        ids = [i for i in ids if not tok.is_special(i)]
    print(f"# {doc_id}: {len(ids)} tokens", file=sys.stderr)
    sys.stdout.write(tok.decode(ids) + "\n")
    return 0
