"""``beam-bpe train``: flags -> TrainJob; every flag Beam knows (``--runner``, ``--direct_num_workers``, ...) passes
through unchanged."""

from __future__ import annotations

import argparse

from bpe_core import TIE_BREAKS
from pipeline.cli.common import (
    BEAM_OPTIONS,
    EXIT_CODES,
    add_corpus_arguments,
    add_progress_argument,
    add_verbose_argument,
    add_workers_argument,
    corpus_spec,
    progress_reporter,
)
from pipeline.corpus.plan import InputSpec
from pipeline.errors import CorpusError, UsageError
from pipeline.train.settings import load_config, parse_vocab_sizes, train_settings

EPILOG = BEAM_OPTIONS[0].upper() + BEAM_OPTIONS[1:] + ". " + EXIT_CODES


def add_train_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "train", help="train a tokenizer on a corpus with Apache Beam", epilog=EPILOG, allow_abbrev=False
    )
    src = add_corpus_arguments(p, title="corpus", range_help="bytes per range of uncompressed text/JSONL")
    src.add_argument(
        "--weight",
        action="append",
        default=[],
        metavar="GLOB=N",
        help="integer weight of the documents of one --input (repeat the --input value exactly)",
    )
    algo = p.add_argument_group("algorithm (override --config)")
    algo.add_argument("--config", help="TOML or YAML file of algorithm settings (see configs/)")
    algo.add_argument(
        "--vocab-size",
        type=parse_vocab_sizes,
        metavar="N[,N...]",
        help="vocabulary size; several (32000,64000,128000): one run, DIR/v{N}/ per size",
    )
    algo.add_argument("--pretokenizer", help="preset (cl100k, o200k, r50k, llama3, qwen2, ...) or a regex")
    algo.add_argument("--normalizer", choices=("NFC", "NFKC"))
    algo.add_argument("--tie-break", choices=TIE_BREAKS)
    algo.add_argument(
        "--special-token",
        action="append",
        dest="special_tokens",
        metavar="NAME[=ID]",
        help="a special token (repeatable): NAME=ID puts it at id ID (as convert does), NAME alone at the next id "
        "after the merges, in the order given; a NAME holding '=' needs its =ID",
    )
    algo.add_argument("--min-frequency", type=int, help="the trainer's pair threshold (default 2)")
    algo.add_argument("--min-chunk-count", type=int, help="drop chunks counted fewer times, after the global reduce")
    algo.add_argument("--max-chunks", type=int, help="keep the most frequent chunks only (ties: smallest bytes first)")
    algo.add_argument("--name", help="tokenizer name recorded in the artifact")
    algo.add_argument(
        "--superword-merges",
        type=int,
        metavar="N",
        help="a superword tokenizer (SuperBPE): a word model of --vocab-size minus N tokens, then N supermerges "
        "across pre-tokens; writes tokenizer.bpe only",
    )
    algo.add_argument(
        "--superword-from",
        type=int,
        metavar="T",
        help="several sizes: one word model of T tokens, the supermerges up to each size (each a truncation)",
    )
    algo.add_argument(
        "--min-run-count",
        type=int,
        metavar="K",
        help="superword: drop runs counted fewer than K times before the supermerge loop (default 0: keep all; "
        "the chunks keep --min-chunk-count), with an exact report in manifest.json",
    )
    out = p.add_argument_group("output")
    out.add_argument("--out", help="output directory (local path or fsspec URL); not needed with --estimate")
    out.add_argument("--counts-only", action="store_true", help="count and write counts/, do not train")
    out.add_argument("--from-counts", metavar="DIR", help="train from the counts/ of an earlier run (no pipeline)")
    out.add_argument(
        "--count-shards", type=int, default=0, help="number of counts files (default: one per GiB of input)"
    )
    out.add_argument("--overwrite", action="store_true", help="replace a finished output in --out")
    add_progress_argument(out)
    add_workers_argument(out)
    rep = p.add_argument_group("report (needs the report extra: pip install 'beam-bpe[report]')")
    rep.add_argument(
        "--report", action="store_true", help="hold out a sample, write report.json, report.md, compression.png"
    )
    rep.add_argument(
        "--eval-fraction",
        type=float,
        metavar="F",
        help="share of the documents held out for the report, chosen by a hash of their id (default 0.01)",
    )
    rep.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="PATH",
        help="a reference tokenizer file for the report (repeatable), e.g. cl100k_base.tiktoken; loaded before "
        "anything is written",
    )
    rep.add_argument(
        "--compare-pretokenizer",
        metavar="P",
        help="the pre-tokenizer of a --compare rank file that is not OpenAI's (a .tiktoken file carries none): "
        "cl100k, o200k, ...",
    )
    pre = p.add_argument_group("pre-flight (a line at the start of every counting run)")
    pre.add_argument(
        "--estimate",
        action="store_true",
        help="sample the corpus, print the predicted unique chunks, driver memory and merge-loop time, and stop",
    )
    pre.add_argument(
        "--driver-memory",
        metavar="SIZE",
        help="refuse, before counting, a run whose driver is predicted to need more (16GiB, 500MB; default 80%% "
        "of this machine's memory; 0: no check)",
    )
    add_verbose_argument(p, default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_train, takes_beam_args=True)
    return p


def _inputs(args: argparse.Namespace) -> list[InputSpec]:
    weights: dict[str, int] = {}
    for item in args.weight:
        pattern, sep, value = item.rpartition("=")
        if not sep or not value.strip().isdigit() or int(value) < 1:
            raise CorpusError(
                f"--weight {item!r}: expected GLOB=N with N a positive integer, e.g. --weight 'de/*.txt=3'"
            )
        if pattern not in args.input:
            raise CorpusError(
                f"--weight {item!r} names {pattern!r}, which is not one of the --input values {args.input}"
            )
        weights[pattern] = int(value)
    return [InputSpec(pattern, weights.get(pattern, 1)) for pattern in args.input]


def job_from_args(args: argparse.Namespace):
    from pipeline.train.job import TrainJob  # imports Apache Beam: only for this command

    flags = {
        key: getattr(args, key)
        for key in ("vocab_size", "pretokenizer", "normalizer", "tie_break", "special_tokens", "min_frequency")
        + ("min_chunk_count", "max_chunks", "name", "superword_merges", "superword_from", "min_run_count")
    }
    config = load_config(args.config) if args.config else {}
    settings = train_settings(config, flags, source=args.config)
    return TrainJob(
        out=args.out,
        settings=settings,
        inputs=tuple(_inputs(args)),
        corpus=corpus_spec(args),
        range_bytes=args.range_bytes,
        count_shards=args.count_shards,
        counts_only=args.counts_only,
        from_counts=args.from_counts,
        overwrite=args.overwrite,
        pretokenizer_given=any(v is not None for v in (args.pretokenizer, args.normalizer)),
        report=args.report,
        eval_fraction=args.eval_fraction,
        compare=tuple(args.compare),
        compare_pretokenizer=args.compare_pretokenizer,
        driver_memory=_driver_memory(args.driver_memory),
    )


def _driver_memory(text: str | None) -> int | None:
    """``--driver-memory SIZE`` as bytes (sizes as ``--shard-size``; 0 turns the check off), None when not given."""
    from pipeline.encode.settings import parse_size

    if text is None or text.strip() == "0":
        return None if text is None else 0
    try:
        return parse_size(text)
    except UsageError as exc:
        raise UsageError(str(exc).replace("--shard-size", "--driver-memory")) from None


def cmd_estimate(args: argparse.Namespace, beam_args: list[str]) -> int:
    """``train --estimate``: the pre-flight's report, nothing counted or written."""
    from pipeline.corpus.plan import plan_corpus
    from pipeline.launch.logs import HARNESS_FLAG
    from pipeline.train.estimate import default_driver_memory, estimate_corpus, report

    beam_args = [a for a in beam_args if a.split("=", 1)[0] != HARNESS_FLAG]  # --log-level's, added for any run
    if args.from_counts or args.counts_only or beam_args:
        given = "--from-counts" if args.from_counts else "--counts-only" if args.counts_only else " ".join(beam_args)
        raise UsageError(f"--estimate samples the corpus on this machine and stops: {given} would do nothing; drop it")
    if not args.input:
        raise UsageError("--estimate samples the corpus: pass --input PATH_OR_GLOB (repeatable)")
    job = job_from_args(argparse.Namespace(**{**vars(args), "out": args.out or "."}))  # nothing is written
    plan = plan_corpus(list(job.inputs), job.corpus, range_bytes=job.range_bytes)
    limit = default_driver_memory() if job.driver_memory is None else job.driver_memory
    print(report(estimate_corpus(plan, job.corpus, job.settings), job.settings, limit))
    return 0


def cmd_train(args: argparse.Namespace, beam_args: list[str]) -> int:
    from pipeline.train.job import run_train

    if args.estimate:
        return cmd_estimate(args, beam_args)
    if not args.out:
        raise UsageError("--out DIR is required to train (or pass --estimate to only see the pre-flight's figures)")

    if args.report:  # before any work: the report's plot needs matplotlib
        from pipeline.report.render import check_report_extra

        check_report_extra()
    manifest = run_train(job_from_args(args), beam_args, reporter=progress_reporter(args))
    what = (
        "counted"
        if args.counts_only
        else f"trained {manifest.get('merges')} merges (n_vocab {manifest.get('n_vocab')})"
    )
    reached = manifest.get("vocab_size_reached")
    if reached and not args.counts_only:  # the merge loop ran out of pairs: said once, here
        what += (
            f", a vocabulary of {reached['reached']:,} tokens, not the {reached['asked']:,} of --vocab-size: no pair "
            "occurs --min-frequency times any more (train on more text or lower --min-frequency)"
        )
    superword = manifest.get("superword")
    if superword and not args.counts_only:  # say what was not written, and why
        what += (
            f" with {superword['supermerges']} supermerges over {superword['unique_runs']} unique runs; "
            "tokenizer.bpe only (a rank file or tokenizer.json cannot hold supermerges)"
        )
    held_out = manifest.get("documents_held_out", 0)
    held = f", {held_out} held out for the report" if held_out else ""
    print(
        f"{what}: {manifest['documents_counted']} documents counted, {manifest['dead_letters']} dead letters{held}, "
        f"of {manifest['documents_read']} read -> {args.out}"
    )
    return 0
