"""``beam-bpe count-tokens``: documents, bytes and tokens per input file and in total, on this machine.

The files are read as the pipelines read them (the same corpus flags and readers, dead letters counted, not
encoded) and encoded with the library's flat encoder on every core, a batch of documents per call; special-token
text counts as ordinary text, as the encoding pipeline encodes it by default. No Beam pipeline runs: for a corpus
that needs more than one machine, ``beam-bpe encode --input`` writes the counts into its manifest.

    $ beam-bpe count-tokens --tokenizer cl100k_base.tiktoken --input 'data/*.jsonl.gz'
    file               documents    bytes  tokens  bytes/token
    data/a.jsonl.gz        1,000  250,112  61,203         4.09
    total                  1,000  250,112  61,203         4.09
"""

from __future__ import annotations

import argparse
import json
import sys

from bpe_core import Tokenizer
from pipeline.cli.common import (
    EXIT_CODES,
    add_corpus_arguments,
    add_progress_argument,
    add_workers_argument,
    corpus_spec,
    nothing_written,
    progress_reporter,
)
from pipeline.corpus.plan import InputSpec, plan_corpus
from pipeline.errors import UsageError

COLUMNS = ("documents", "bytes", "tokens", "dead_letters")


def add_count_tokens_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "count-tokens",
        help="documents, bytes and tokens per input file and in total",
        epilog="With Beam pipeline options (--runner, --direct_running_mode multi_processing, "
        "--direct_num_workers N, --dask_client_address, ...) the count runs as a Beam pipeline, per range and "
        "combined per file; without them, on this machine's cores. Both print the same table and total. " + EXIT_CODES,
        allow_abbrev=False,
    )
    p.add_argument("--tokenizer", required=True, help="tokenizer file (tokenizer.bpe, .tiktoken, tokenizer.json ...)")
    p.add_argument("--pretokenizer", help="pre-tokenizer for rank-only files (.tiktoken): cl100k, o200k, ...")
    add_corpus_arguments(p, title="corpus", range_help="bytes per range read at a time (uncompressed text/JSONL)")
    p.add_argument("--json", action="store_true", help="print JSON (files and total) instead of a table")
    p.add_argument("--threads", type=int, default=None, help="encoder threads (default: every usable core)")
    add_progress_argument(p)  # the bar of a count run as a pipeline (the local count draws none)
    add_workers_argument(p)
    p.set_defaults(func=cmd_count_tokens, takes_beam_args=True)
    return p


def count_tokens(tok: Tokenizer, args: argparse.Namespace) -> dict:
    """``{"files": [{"file", "documents", "bytes", "tokens", "dead_letters"}, ...], "total": {...}}``; bytes are
    the UTF-8 bytes of the documents' text."""
    from pipeline.corpus.readers import read_range  # pyarrow: only for this command

    spec = corpus_spec(args)
    plan = plan_corpus([InputSpec(p) for p in args.input], spec, range_bytes=args.range_bytes)
    rows = {f.path: dict.fromkeys(COLUMNS, 0) for f in plan.files}
    for rng in plan.ranges:
        row = rows[rng.source]
        for batch in read_range(rng, spec):
            row["documents"] += len(batch.texts)
            row["dead_letters"] += len(batch.dead_letters)
            if batch.texts:
                ids, offsets = tok.encode_ordinary_flat(batch.texts, num_threads=args.threads)
                row["tokens"] += int(offsets[-1])
                row["bytes"] += sum(len(t.encode("utf-8", "surrogatepass")) for t in batch.texts)
    files = [{"file": path, **row} for path, row in rows.items()]
    total = {key: sum(row[key] for row in rows.values()) for key in COLUMNS}
    return {"tokenizer": args.tokenizer, "files": files, "total": total}


def table(result: dict) -> str:
    """The counts as an aligned table, with bytes per token and a total row."""
    rows = [(r["file"], r) for r in result["files"]] + [("total", result["total"])]
    cells = [("file", "documents", "bytes", "tokens", "bytes/token")]
    for name, r in rows:
        ratio = f"{r['bytes'] / r['tokens']:.2f}" if r["tokens"] else "-"
        cells.append((name, f"{r['documents']:,}", f"{r['bytes']:,}", f"{r['tokens']:,}", ratio))
    widths = [max(len(row[k]) for row in cells) for k in range(5)]
    lines = [
        "  ".join(
            c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in cells
    ]
    dead = result["total"]["dead_letters"]
    if dead:
        lines.append(f"{dead:,} records could not be read (dead letters, not counted); `beam-bpe encode` lists them")
    return "\n".join(lines)


def count_tokens_pipeline(args: argparse.Namespace, beam_args: list[str]) -> dict:
    """The same counts as ``count_tokens``, from a Beam pipeline on the runner ``beam_args`` name."""
    from pipeline.encode.count_tokens import count_tokens_job
    from pipeline.encode.tokenizer import open_tokenizer
    from pipeline.storage.paths import absolute

    if args.threads is not None:
        raise UsageError(
            "--threads sets the encoder threads of the count on this machine: with Beam options the runner's "
            "workers count (--direct_num_workers N, --workers N); drop --threads"
        )
    _, ref = open_tokenizer(absolute(args.tokenizer), args.pretokenizer)  # workers may run in another directory
    spec = corpus_spec(args)
    plan = plan_corpus([InputSpec(p) for p in args.input], spec, range_bytes=args.range_bytes)
    reporter = progress_reporter(args)
    return {"tokenizer": args.tokenizer, **count_tokens_job(plan, spec, ref, beam_args, reporter=reporter)}


def cmd_count_tokens(args: argparse.Namespace, beam_args: list[str]) -> int:
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be a positive integer, got {args.threads}")
    if beam_args:
        result = count_tokens_pipeline(args, beam_args)
    else:
        tok = Tokenizer.from_file(args.tokenizer, pretokenizer=args.pretokenizer)
        result = count_tokens(tok, args)
    sys.stdout.write((json.dumps(result, indent=2) if args.json else table(result)) + "\n")
    total = result["total"]
    if total["documents"]:
        return 0
    read = total["documents"] + total["dead_letters"]
    message = nothing_written("count-tokens", read, total["dead_letters"], "beam-bpe encode lists them")
    print(f"beam-bpe count-tokens: {message}", file=sys.stderr)
    return 3
