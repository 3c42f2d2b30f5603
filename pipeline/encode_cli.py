"""``beam-bpe encode --input ...`` (the encoding pipeline) and ``beam-bpe decode --shards DIR --doc ID``.

The single-text ``encode --text S`` and ``decode --ids/--stream`` stay in :mod:`pipeline.cli`; these functions add
the corpus flags to the same sub-commands, and ``pipeline.cli`` dispatches on ``--input`` and ``--shards``. Every
flag argparse does not know is a Beam pipeline option and passes through unchanged.
"""

from __future__ import annotations

import argparse
import sys

from pipeline.corpus_plan import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    DEFAULT_RANGE_BYTES,
    FORMATS,
    TEXT_UNITS,
    CorpusSpec,
    InputSpec,
)

EPILOG = """With --input, any other --flag is a Beam pipeline option and passes through, e.g. --runner FnApiRunner
(the default), --direct_running_mode multi_processing --direct_num_workers 2, --runner DaskRunner
--dask_client_address HOST:PORT, --runner DataflowRunner --project P --region R --temp_location gs://..."""


def add_encode_corpus_arguments(p: argparse.ArgumentParser) -> None:
    """The encoding pipeline's flags, on the ``encode`` sub-command (which also takes ``--text``)."""
    p.allow_abbrev = False  # a Beam flag must never be taken for an abbreviation of ours
    p.epilog = EPILOG
    src = p.add_argument_group("corpus (the encoding pipeline; same flags as train)")
    src.add_argument("--input", action="append", default=[], metavar="GLOB", help="file, directory, glob or fsspec URL (repeatable)")
    src.add_argument("--format", choices=FORMATS, default="jsonl")
    src.add_argument("--text-field", default="text", help="JSONL field holding the text; dotted for nested (default: text)")
    src.add_argument("--text-column", default="text", help="Parquet column holding the text (default: text)")
    src.add_argument("--text-unit", choices=TEXT_UNITS, default="line", help="plain text: one document per line or per file")
    src.add_argument("--max-document-bytes", type=int, default=DEFAULT_MAX_DOCUMENT_BYTES, metavar="N",
                     help="a longer document is a dead letter, skipped without being held in memory (default: 32 MiB)")
    src.add_argument("--range-bytes", type=int, default=DEFAULT_RANGE_BYTES, help="bytes per range of uncompressed text/JSONL: one output shard per range")
    out = p.add_argument_group("output")
    out.add_argument("--out", help="output directory (local path or fsspec URL)")
    out.add_argument("--shard-format", choices=("parquet", "megatron"), default="parquet")
    out.add_argument("--prefix", default="tokens", help="shard file prefix: {prefix}-00000-of-00008.parquet (default: tokens)")
    out.add_argument("--bos", nargs="?", const="auto", metavar="TOKEN", help="add a BOS token to every document (the tokenizer's usual one, or TOKEN)")
    out.add_argument("--eos", nargs="?", const="auto", metavar="TOKEN", help="add an EOS token to every document (the tokenizer's usual one, or TOKEN)")
    out.add_argument("--special-tokens", choices=("ordinary", "allowed"), default="ordinary",
                     help="text spelling a special token: encoded as ordinary text (default) or as the control token")
    out.add_argument("--verify", action="store_true", help="decode every document back (streaming) and compare it with its text")
    out.add_argument("--overwrite", action="store_true", help="start afresh: replace what an earlier encoding run left in --out (another job's or this one's)")


def add_decode_shards_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shards", metavar="DIR", help="the --out of an encoding run: print one document of it (with --doc)")
    p.add_argument("--doc", metavar="ID", help="document id (PATH@OFFSET, PATH#ROW) or 0-based document number")


def cmd_encode_corpus(args: argparse.Namespace, beam_args: list[str]) -> int:
    from pipeline.encode_pipeline import EncodeJob, run_encode, summary_line  # imports Apache Beam: only here

    if args.text is not None:
        raise SystemExit("beam-bpe encode: give --text (one text) or --input (a corpus), not both")
    if not args.input:
        raise SystemExit("beam-bpe encode: --out DIR needs --input GLOB (the corpus to encode); for one text: --text")
    if not args.out:
        raise SystemExit("beam-bpe encode: --input needs --out DIR")
    job = EncodeJob(
        tokenizer=args.tokenizer,
        inputs=[InputSpec(pattern) for pattern in args.input],
        out=args.out,
        corpus=CorpusSpec(args.format, args.text_field, args.text_column, args.text_unit, max_document_bytes=args.max_document_bytes),
        shard_format=args.shard_format,
        pretokenizer=args.pretokenizer,
        special_tokens=args.special_tokens,
        bos=args.bos,
        eos=args.eos,
        range_bytes=args.range_bytes,
        verify=args.verify,
        prefix=args.prefix,
        overwrite=args.overwrite,
    )
    manifest = run_encode(job, beam_args)
    print(f"{summary_line(manifest)} -> {job.out}")
    return 0


def cmd_decode_shards(args: argparse.Namespace) -> int:
    """Print one document of an encoding output, decoded with ``--tokenizer`` (checked against the manifest)."""
    from bpe_core import Tokenizer
    from pipeline.encode_documents import tokenizer_digest
    from pipeline.encode_shard_io import ShardError, find_document, load_manifest

    if args.doc is None:
        raise SystemExit("beam-bpe decode: --shards DIR needs --doc ID (PATH@OFFSET, PATH#ROW or a document number)")
    manifest = load_manifest(args.shards)
    tok = Tokenizer.from_file(args.tokenizer, pretokenizer=args.pretokenizer)
    wanted = manifest["tokenizer"].get("digest")
    if wanted is None:
        raise ShardError(f"{args.shards}/manifest.json records no tokenizer digest: it was written by an older beam-bpe")
    if tokenizer_digest(tok) != wanted:
        raise ShardError(
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
