"""Benchmark the training pipeline (not a test): one command, prints ratios measured in the same run.

    .venv/bin/python benchmarks/bench_train_pipeline.py [--vocab-size 8192] [--corpora all]

On all shared corpora (~63 MB of text, decompressed once to JSONL in a temporary folder so that files are cut into
ranges), each phase runs in a fresh subprocess that reports its wall time, CPU time (its own plus its children's)
and peak RSS (imports excluded from the times, included in the RSS):

- loop: the same counting in a plain in-process loop (json.loads + bpe_core.count_chunks, summed in a dict);
- pipeline in_memory / multi_processing (2 workers): ``beam-bpe train --counts-only``;
- end-to-end training (pipeline + bpe_core.train) vs tokenizers' BpeTrainer and rustbpe on the same documents,
  all with Hugging Face's GPT-2 ByteLevel regex so the three do the same work.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from benchlib import jsonl_workdir, pipeline_parser, run_phase, usage

MULTI = ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]


def _docs(work: Path) -> list[str]:
    return [json.loads(line)["text"] for path in sorted(work.glob("*.jsonl")) for line in path.open(encoding="utf-8")]


def phase(name: str, work: Path, vocab: int) -> dict:
    import rustbpe
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    import bpe_core  # imports stay outside the timed region (apache_beam alone takes ~2 s to import)
    from bpe_core.pretokenize.presets import GPT2_HF_PATTERN
    from pipeline.cli import main

    inputs = [a for p in sorted(work.glob("*.jsonl")) for a in ("--input", str(p))]
    common = ["--pretokenizer", GPT2_HF_PATTERN, "--overwrite", "--out", str(work / f"out-{name}")]
    cpu0, _ = usage()
    start = time.perf_counter()
    if name == "loop":
        total: dict[bytes, int] = {}
        for path in sorted(work.glob("*.jsonl")):
            texts = [json.loads(line)["text"] for line in path.open(encoding="utf-8")]
            for chunk, n in bpe_core.count_chunks(texts, GPT2_HF_PATTERN).items():
                total[chunk] = total.get(chunk, 0) + n
        extra = {"chunks": len(total)}
    elif name in ("pipeline_in_memory", "pipeline_multi_processing", "train_ours"):
        mode = MULTI if name == "pipeline_multi_processing" else ["--direct_running_mode", "in_memory"]
        what = ["--vocab-size", str(vocab)] if name == "train_ours" else ["--counts-only"]
        assert main(["train", *inputs, *common, *what, *mode]) == 0
        extra = {}
    elif name == "train_tokenizers":
        hf = Tokenizer(models.BPE())
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        trainer = trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
        hf.train_from_iterator(_docs(work), trainer)
        extra = {}
    elif name == "train_rustbpe":
        rustbpe.Tokenizer().train_from_iterator(iter(_docs(work)), vocab, pattern=GPT2_HF_PATTERN)
        extra = {}
    else:
        raise SystemExit(f"unknown phase {name}")
    wall = time.perf_counter() - start
    cpu, rss_kb = usage()
    return {"wall": wall, "cpu": cpu - cpu0, "rss_mb": rss_kb / 1024, **extra}


def _run_phase(name: str, work: Path, vocab: int) -> dict:
    return run_phase(__file__, ["--phase", name, "--work", str(work), "--vocab-size", str(vocab)])


def main() -> None:
    parser = pipeline_parser(__doc__)
    parser.add_argument("--vocab-size", type=int, default=8192)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(phase(args.phase, Path(args.work), args.vocab_size)))
        return
    with jsonl_workdir("bench-train-", args.corpora) as (work, mb):
        print(f"corpus: {args.corpora} = {mb:.1f} MB of text; vocab {args.vocab_size}; {os.cpu_count()} cores")
        names = [
            "loop",
            "pipeline_in_memory",
            "pipeline_multi_processing",
            "train_ours",
            "train_tokenizers",
            "train_rustbpe",
        ]
        results = {}
        for name in names:
            results[name] = r = _run_phase(name, work, args.vocab_size)
            print(
                f"  {name:27s} wall {r['wall']:7.1f} s  cpu {r['cpu']:7.1f} s  peak RSS {r['rss_mb']:7.0f} MB  "
                f"({mb / r['wall']:.2f} MB/s)"
            )
        _print_ratios(results)


def _print_ratios(r: dict) -> None:
    loop = r["loop"]
    print("ratios (lower is better):")
    for name in ("pipeline_in_memory", "pipeline_multi_processing"):
        print(f"  {name} / loop: wall {r[name]['wall'] / loop['wall']:.2f}x, cpu {r[name]['cpu'] / loop['cpu']:.2f}x, "
              f"peak RSS {r[name]['rss_mb'] / loop['rss_mb']:.2f}x")  # fmt: skip
    ours = r["train_ours"]["wall"]
    for peer in ("train_tokenizers", "train_rustbpe"):
        print(
            f"  end-to-end train ours / {peer[6:]}: wall {ours / r[peer]['wall']:.2f}x, "
            f"cpu {r['train_ours']['cpu'] / r[peer]['cpu']:.2f}x"
        )


if __name__ == "__main__":
    main()
