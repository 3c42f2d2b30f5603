"""``beam-bpe train``: flags -> TrainJob; every flag Beam knows (``--runner``, ``--direct_num_workers``, ...) passes
through unchanged."""

from __future__ import annotations

import argparse

from pipeline.config import load_config, merge_settings
from pipeline.corpus_plan import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    DEFAULT_RANGE_BYTES,
    FORMATS,
    TEXT_UNITS,
    CorpusError,
    CorpusSpec,
    InputSpec,
)

EPILOG = """Any other --flag is a Beam pipeline option and passes through, e.g. --runner FnApiRunner (the default),
--direct_running_mode multi_processing --direct_num_workers 2, --runner DaskRunner --dask_client_address HOST:PORT,
--runner DataflowRunner --project P --region R --temp_location gs://..."""


def add_train_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("train", help="train a tokenizer on a corpus with Apache Beam", epilog=EPILOG, allow_abbrev=False)
    src = p.add_argument_group("corpus")
    src.add_argument("--input", action="append", default=[], metavar="GLOB", help="file, directory, glob or fsspec URL (repeatable)")
    src.add_argument("--weight", action="append", default=[], metavar="GLOB=N", help="integer weight of the documents of one --input (repeat the --input value exactly)")
    src.add_argument("--format", choices=FORMATS, default="jsonl")
    src.add_argument("--text-field", default="text", help="JSONL field holding the text; dotted for nested (default: text)")
    src.add_argument("--text-column", default="text", help="Parquet column holding the text (default: text)")
    src.add_argument("--text-unit", choices=TEXT_UNITS, default="line", help="plain text: one document per line or per file")
    src.add_argument("--max-document-bytes", type=int, default=DEFAULT_MAX_DOCUMENT_BYTES, metavar="N",
                     help="a longer document is a dead letter, skipped without being held in memory (default: 32 MiB)")
    src.add_argument("--range-bytes", type=int, default=DEFAULT_RANGE_BYTES, help="bytes per range of uncompressed text/JSONL")
    algo = p.add_argument_group("algorithm (override --config)")
    algo.add_argument("--config", help="TOML or YAML file of algorithm settings (see configs/)")
    algo.add_argument("--vocab-size", type=int)
    algo.add_argument("--pretokenizer", help="preset (cl100k, o200k, r50k, llama3, qwen2, ...) or a regex")
    algo.add_argument("--normalizer", choices=("NFC", "NFKC"))
    algo.add_argument("--tie-break", choices=("ids", "huggingface", "bytes"))
    algo.add_argument("--special-token", action="append", dest="special_tokens", metavar="S", help="repeatable; ids follow the merges in the order given")
    algo.add_argument("--min-frequency", type=int, help="the trainer's pair threshold (default 2)")
    algo.add_argument("--min-chunk-count", type=int, help="drop chunks counted fewer times, after the global reduce")
    algo.add_argument("--max-chunks", type=int, help="keep the most frequent chunks only (ties: smallest bytes first)")
    algo.add_argument("--name", help="tokenizer name recorded in the artifact")
    out = p.add_argument_group("output")
    out.add_argument("--out", required=True, help="output directory (local path or fsspec URL)")
    out.add_argument("--counts-only", action="store_true", help="count and write counts/, do not train")
    out.add_argument("--from-counts", metavar="DIR", help="train from the counts/ of an earlier run (no pipeline)")
    out.add_argument("--count-shards", type=int, default=0, help="number of counts files (default: one per GiB of input)")
    out.add_argument("--overwrite", action="store_true", help="replace a finished output in --out")
    p.set_defaults(func=cmd_train, takes_beam_args=True)
    return p


def _inputs(args: argparse.Namespace) -> list[InputSpec]:
    weights: dict[str, int] = {}
    for item in args.weight:
        pattern, sep, value = item.rpartition("=")
        if not sep or not value.strip().isdigit() or int(value) < 1:
            raise CorpusError(f"--weight {item!r}: expected GLOB=N with N a positive integer, e.g. --weight 'de/*.txt=3'")
        if pattern not in args.input:
            raise CorpusError(f"--weight {item!r} names {pattern!r}, which is not one of the --input values {args.input}")
        weights[pattern] = int(value)
    return [InputSpec(pattern, weights.get(pattern, 1)) for pattern in args.input]


def job_from_args(args: argparse.Namespace):
    from pipeline.train_pipeline import TrainJob  # imports Apache Beam: only for this command

    flags = {
        key: getattr(args, key)
        for key in ("vocab_size", "pretokenizer", "normalizer", "tie_break", "special_tokens", "min_frequency")
        + ("min_chunk_count", "max_chunks", "name")
    }
    settings = merge_settings(load_config(args.config) if args.config else {}, flags)
    corpus = CorpusSpec(args.format, args.text_field, args.text_column, args.text_unit, max_document_bytes=args.max_document_bytes)
    return TrainJob(
        out=args.out,
        settings=settings,
        inputs=_inputs(args),
        corpus=corpus,
        range_bytes=args.range_bytes,
        count_shards=args.count_shards,
        counts_only=args.counts_only,
        from_counts=args.from_counts,
        overwrite=args.overwrite,
        pretokenizer_given=args.pretokenizer is not None,
    )


def cmd_train(args: argparse.Namespace, beam_args: list[str]) -> int:
    from pipeline.train_pipeline import run_train

    manifest = run_train(job_from_args(args), beam_args)
    what = "counted" if args.counts_only else f"trained {manifest.get('merges')} merges (n_vocab {manifest.get('n_vocab')})"
    print(
        f"{what}: {manifest['documents_counted']} documents counted, {manifest['dead_letters']} dead letters, "
        f"of {manifest['documents_read']} read -> {args.out}"
    )
    return 0
