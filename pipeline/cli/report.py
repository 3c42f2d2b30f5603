"""``beam-bpe report``: the training report on any tokenizers (trained ones, cl100k, a tokenizer.json ...) over the
held-out sample of a corpus: bytes per token, tokens per word, bytes inside multi-byte tokens, tokens never used
and unreachable, the longest tokens, the first and last merges; written as report.json, report.md and
compression.png into --out. The sample is the one ``train --report`` leaves out of its counts (the same
``--eval-fraction`` picks the same documents); ``--eval-fraction 1`` measures every document.

    $ beam-bpe report --tokenizer out/v32000/tokenizer.bpe --tokenizer cl100k_base.tiktoken \\
          --input 'data/*.jsonl.gz' --out report/
"""

from __future__ import annotations

import argparse

from pipeline.cli.common import (
    BEAM_OPTIONS,
    add_corpus_arguments,
    add_verbose_argument,
    add_workers_argument,
    corpus_spec,
)
from pipeline.report.fraction import DEFAULT_EVAL_FRACTION


def add_report_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("report", help="compare tokenizers on the held-out sample of a corpus (Apache Beam)",
                       epilog=BEAM_OPTIONS[0].upper() + BEAM_OPTIONS[1:], allow_abbrev=False)  # fmt: skip
    p.add_argument("--tokenizer", action="append", required=True, metavar="PATH", help="a tokenizer file (repeatable)")
    p.add_argument("--pretokenizer", help="pre-tokenizer for rank-only files (.tiktoken) that are not OpenAI's")
    add_corpus_arguments(p, title="corpus", range_help="bytes per range of uncompressed text/JSONL")
    p.add_argument(
        "--eval-fraction",
        type=float,
        default=DEFAULT_EVAL_FRACTION,
        help=f"share of the documents in the sample, chosen by a hash of their id (default {DEFAULT_EVAL_FRACTION})",
    )
    p.add_argument("--out", required=True, help="directory for report.json, report.md and compression.png")
    add_workers_argument(p)
    add_verbose_argument(p, default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_report, takes_beam_args=True)
    return p


def cmd_report(args: argparse.Namespace, beam_args: list[str]) -> int:
    from pipeline.corpus.plan import InputSpec, plan_corpus
    from pipeline.launch.checks import check_launch
    from pipeline.report.fraction import check_fraction
    from pipeline.report.render import check_report_extra
    from pipeline.report.run import run_report
    from pipeline.report.specs import TokenizerSpec, unique_labels
    from pipeline.storage.paths import absolute

    check_report_extra("beam-bpe report")
    fraction = check_fraction(args.eval_fraction)
    paths = [absolute(p) for p in args.tokenizer]
    specs = tuple(
        TokenizerSpec(label, path, args.pretokenizer) for label, path in zip(unique_labels(paths), paths, strict=True)
    )
    for spec in specs:
        spec.load()  # a file that cannot be read fails here, before any work
    inputs = [InputSpec(absolute(p)) for p in args.input]
    out = absolute(args.out)
    check_launch(beam_args, paths={"--input": [i.pattern for i in inputs], "--out": [out]})
    spec = corpus_spec(args)
    corpus = plan_corpus(inputs, spec, range_bytes=args.range_bytes)
    report = run_report(corpus, spec, specs, {}, fraction, out, beam_args)
    for row in report["tokenizers"]:
        print(f"{row['label']}: {row['bytes_per_token']} bytes per token, {row['tokens_per_word']} tokens per word")
    print(f"report of {report['sample']['documents']:,} held-out documents -> {args.out}")
    return 0
