"""``beam-bpe encode --input ...``: the encoding pipeline.

The single-text ``encode --text S`` stays in :mod:`pipeline.cli` (``decode`` is :mod:`pipeline.cli.decode`); these
functions add the corpus flags to the same sub-command, and ``pipeline.cli`` dispatches on ``--input``. Every flag
argparse does not know is a Beam pipeline option and passes through unchanged.
"""

from __future__ import annotations

import argparse
import sys

from pipeline.cli.common import (
    BEAM_OPTIONS,
    EXIT_CODES,
    add_corpus_arguments,
    add_progress_argument,
    add_special_tokens_argument,
    add_verbose_argument,
    add_workers_argument,
    corpus_spec,
    nothing_written,
    progress_reporter,
    special_tokens_policy,
)
from pipeline.corpus.plan import InputSpec
from pipeline.encode.formats import DEFAULT as DEFAULT_FORMAT
from pipeline.encode.formats import FORMATS
from pipeline.encode.formats import help_text as formats_help
from pipeline.encode.policy import SPECIAL_POLICIES
from pipeline.errors import UsageError

EPILOG = f"With --input, {BEAM_OPTIONS}. {EXIT_CODES}"


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
    blend_help = (
        "a mixture file (YAML or JSON: seed, total_tokens, sources with name, input, format, text_field, "
        "weight or tokens) instead of --input: OUT/<name>/ per source, OUT/blend.json"
    )
    out.add_argument("--blend", metavar="MIX.yaml", help=blend_help)
    out.add_argument(
        "--shard-format",
        choices=tuple(FORMATS),
        default=DEFAULT_FORMAT,
        help=formats_help(),
    )
    out.add_argument(
        "--shard-size",
        default=None,
        metavar="SIZE",
        help="input bytes (as stored) per output shard: 1GiB, 256MiB, 500MB or bytes; consecutive ranges in input "
        "order, so about ceil(input bytes / SIZE) shards, each one unit of work, complete as soon as written. "
        "Default: the input's size / 16, between 32MiB and 1GiB",
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
    add_special_tokens_argument(out, choices=SPECIAL_POLICIES, what=" (with --text or --input)")
    out.add_argument(
        "--verify", action="store_true", help="decode every document back (streaming) and compare it with its text"
    )
    out.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh: replace what an earlier encoding run left in --out (another job's or this one's; never "
        "a running job's: its lease refuses a second run)",
    )
    out.add_argument(
        "--recheck",
        action="store_true",
        help="on resume, also compare the sha256 of the shards taken as complete with their records (their sizes "
        "are always checked); reads every shard",
    )
    out.add_argument("--shuffle", metavar="SEED",
                     help="write the documents in a seeded order over the whole corpus (an integer seed: the order is "
                     "the same on every runner, sharding and worker count); any shard format but megatron")  # fmt: skip
    from pipeline.cli.pack import add_pack_arguments

    add_pack_arguments(p.add_argument_group("packing (an index beside the shards: pipeline/encode/packing.py)"),
                       length_flag="--pack-length")  # fmt: skip
    add_progress_argument(out)
    add_workers_argument(out)
    add_verbose_argument(p, default=argparse.SUPPRESS)


def job_from_args(args: argparse.Namespace, *, several: bool = False):
    """The EncodeJob of ``beam-bpe encode --input ...`` (also what ``python -m pipeline.cli.dataflow encode``
    translates)."""
    from pipeline.encode.settings import EncodeJob, EncodeSettings, parse_size
    from pipeline.encode.shuffle_keys import parse_seed

    if args.text is not None:
        raise UsageError("give --text (one text) or --input (a corpus), not both")
    if getattr(args, "blend", None):
        return _blend_job(args, several=several)
    if not args.input:
        raise UsageError("--out DIR needs --input GLOB (the corpus to encode); for one text: --text")
    if not args.out:
        raise UsageError("--input needs --out DIR")
    settings = EncodeSettings(
        shard_format=args.shard_format,
        pretokenizer=args.pretokenizer,
        special_tokens=special_tokens_policy(args),
        bos=args.bos,
        eos=args.eos,
        verify=args.verify,
        prefix=args.prefix,
        merge=args.merge,
        shuffle=None if getattr(args, "shuffle", None) is None else parse_seed(args.shuffle),
    )
    return EncodeJob(
        tokenizer=_one_tokenizer(args.tokenizer, several=several),
        inputs=tuple(InputSpec(pattern) for pattern in args.input),
        out=args.out,
        corpus=corpus_spec(args),
        settings=settings,
        range_bytes=args.range_bytes,
        shard_size=None if args.shard_size is None else parse_size(args.shard_size),
        overwrite=args.overwrite,
        recheck=args.recheck,
    )


def _blend_job(args: argparse.Namespace, *, several: bool):
    """The EncodeJob template of ``encode --blend`` (each source replaces its inputs, format and text field)."""
    if args.input:
        raise UsageError("--blend names the inputs of every source: give --blend or --input, not both")
    if not several:
        raise UsageError(
            "this translates one encoding job, and --blend is one per source: run `beam-bpe encode "
            "--blend` (any runner's options pass through), or translate each source's job on its own"
        )
    if not isinstance(args.tokenizer, str) and len(args.tokenizer) > 1:
        raise UsageError(
            f"--blend encodes one mixture with one tokenizer, and {len(args.tokenizer)} --tokenizer values were "
            "given: run one --blend per tokenizer (--out OUT/NAME each)"
        )
    if not args.out:
        raise UsageError("--blend needs --out DIR")
    if getattr(args, "shuffle", None) is not None:
        raise UsageError(
            "--shuffle with --blend: a blend's sources are written per epoch in input order (a trainer's "
            "loader samples across them); drop --shuffle, or shuffle each source with its own encode run"
        )
    from pipeline.encode.blend_spec import load_blend

    spec = load_blend(args.blend)
    blend, args.input, args.blend = args.blend, list(spec.sources[0].inputs), None
    try:
        return job_from_args(args, several=several), spec
    finally:
        args.input, args.blend = [], blend


def _implied_eos(shard_format: str, args: argparse.Namespace) -> str | None:
    """The EOS after each document: --eos, or the one the shard format adds by itself (npy, datatrove)."""
    from pipeline.encode.formats import get_format

    return get_format(shard_format).separators((), args.bos, args.eos)[1]


def cmd_encode_corpus(args: argparse.Namespace, beam_args: list[str]) -> int:
    from pipeline.cli.pack import pack_settings, run_pack
    from pipeline.encode.job import run_encode  # imports Apache Beam: only for the pipeline
    from pipeline.encode.manifest import summary_line

    job = job_from_args(args, several=True)
    if isinstance(job, tuple):  # --blend
        return _run_blend(args, beam_args, *job)
    pack = pack_settings(args.pack_length, args.pack, args.pack_rows, length_flag="--pack-length")
    if pack is not None and pack.method == "concat" and _implied_eos(job.settings.shard_format, args) is None:
        raise UsageError(
            "--pack concat joins the documents into one stream, and without an EOS after each document their "
            "boundaries are lost in it: add --eos, or use --pack ffd"
        )
    if len(args.tokenizer) > 1 and job.settings.shuffle is not None:
        raise UsageError("--shuffle encodes with one --tokenizer per run: run one job per tokenizer (--out OUT/NAME)")
    if len(args.tokenizer) > 1:  # one read, one folder per tokenizer
        from pipeline.encode.several import run_encode_several
        from pipeline.storage.paths import join

        manifests = run_encode_several(job, args.tokenizer, beam_args, reporter=progress_reporter(args))
        for stem, manifest in manifests.items():
            print(f"{summary_line(manifest)} -> {join(job.out, stem)}")
            if pack is not None and manifest["documents_written"]:
                print(run_pack(join(job.out, stem), pack, overwrite=True))
        return max(_nothing_written(m, join(job.out, stem)) for stem, m in manifests.items())
    manifest = run_encode(job, beam_args, reporter=progress_reporter(args))
    print(f"{summary_line(manifest)} -> {job.out}")
    if pack is not None and manifest["documents_written"]:
        print(run_pack(job.out, pack, overwrite=True))  # the run's own pack: a rerun makes it again
    return _nothing_written(manifest, job.out)


def _run_blend(args: argparse.Namespace, beam_args: list[str], job, spec) -> int:
    from pipeline.encode.blend_job import run_encode_blend

    if args.pack_length is not None:
        raise UsageError("--pack-length with --blend: pack each source folder afterwards (beam-bpe pack OUT/<name>)")
    manifest = run_encode_blend(job, spec, beam_args, reporter=progress_reporter(args))
    shares = ", ".join(f"{n} {b['tokens']} tokens ({100 * b['share']:.2f}%, {b['epochs']} epochs)"
                       for n, b in manifest["blend"].items())  # fmt: skip
    print(f"blend of {len(manifest['blend'])} sources, {manifest['tokens']} tokens: {shares} -> {job.out}")
    return 0 if manifest["documents_written"] else 3


def _nothing_written(manifest: dict, out: str) -> int:
    """3 (and why, on stderr) for an output that holds no document; else 0."""
    if manifest["documents_written"]:
        return 0
    message = nothing_written("encode", manifest["documents_read"], manifest["dead_letters"], f"{out}/dead_letters")
    print(f"beam-bpe encode: {message}", file=sys.stderr)
    return 3


def _one_tokenizer(tokenizers: str | list[str], *, several: bool) -> str:
    """The job's tokenizer; several only where the caller encodes them all (not the Dataflow translation)."""
    if isinstance(tokenizers, str):
        return tokenizers
    if len(tokenizers) > 1 and not several:
        raise UsageError(
            f"this translates one encoding job, and {len(tokenizers)} --tokenizer values were given: translate one "
            "job per tokenizer (--out OUT/NAME each), or run `beam-bpe encode` with all of them (one read)"
        )
    return tokenizers[0]
