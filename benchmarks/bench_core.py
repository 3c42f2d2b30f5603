"""Benchmark of bpe_core against its peers, measured in one run on the same data (not a test).

    python benchmarks/bench_core.py [--data ../shared/data] [--vocab-size 8192] [--encode-mb 8] [--repeat 3]

Prints: train time on docs_python_rst (split on "\\n") vs Hugging Face `tokenizers` (BpeTrainer) and `rustbpe`;
encode throughput (MB/s, one thread) vs `tiktoken` on the shared corpora, for cl100k and o200k. Each figure is the
best of --repeat runs (the machine is shared and noisy: the minimum is the least disturbed run). Ratios > 1 mean
bpe_core is faster.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import benchlib
from benchlib import iter_records, load_docs, text_mb, tiktoken_encoding, timed
from native_cases import load_ours

import bpe_core
from bpe_core.pretokenize.presets import GPT2_HF_PATTERN


def bench_train(vocab_size: int, repeat: int) -> None:
    import rustbpe
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    lines = [line for doc in (r["text"] for r in iter_records("docs_python_rst")) for line in doc.split("\n")]
    mb = sum(len(s.encode()) for s in lines) / 1e6
    print(f"\n== train: docs_python_rst, {mb:.1f} MB, vocab {vocab_size}, GPT-2 pattern ==")

    def ours(backend):
        counts = bpe_core.count_chunks(lines, GPT2_HF_PATTERN)
        return bpe_core.train(counts, vocab_size, min_frequency=1, backend=backend)

    def hf():
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=1,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
        tok.train_from_iterator(lines, trainer)

    def rust():
        rustbpe.Tokenizer().train_from_iterator(iter(lines), vocab_size, pattern=GPT2_HF_PATTERN)

    t_py, _ = timed(lambda: ours("python"), repeat)
    t_native, _ = timed(lambda: ours("native"), repeat)
    t_hf, _ = timed(hf, repeat)
    t_rust, _ = timed(rust, repeat)
    print("(ratio = peer time / bpe_core time: > 1 means bpe_core is faster)")
    print(f"bpe_core python reference (count + train) {t_py:7.2f} s")
    print(f"bpe_core native (count + train)           {t_native:7.2f} s")
    for peer, t in (("tokenizers BpeTrainer", t_hf), ("rustbpe", t_rust)):
        print(f"{peer:42s}{t:7.2f} s   ratio vs python {t / t_py:.2f}x, vs native {t / t_native:.2f}x")


def bench_encode(encode_mb: float, repeat: int) -> None:
    docs = load_docs(encode_mb)
    mb = text_mb(docs)
    print(f"\n== encode: {len(docs)} documents, {mb:.1f} MB from all shared corpora, one thread ==")
    for preset in ("cl100k", "o200k"):
        ref = tiktoken_encoding(preset)

        def ours(backend: str, preset: str = preset) -> tuple[float, list]:
            """Best of ``repeat`` runs, each with a fresh tokenizer built untimed (its chunk cache starts cold:
            tiktoken has none)."""
            best, ids = float("inf"), []
            for _ in range(repeat):
                tok = load_ours(preset, backend=backend)
                tok.encode_ordinary("warm-up")  # builds the native tables outside the timed run
                t, ids = timed(lambda tok=tok: [tok.encode_ordinary(d) for d in docs])
                best = min(best, t)
            return best, ids

        t_ref, ref_ids = timed(lambda r=ref: [r.encode_ordinary(d) for d in docs], repeat)
        t_batch, _ = timed(lambda r=ref: r.encode_ordinary_batch(docs, num_threads=1), repeat)
        print(
            f"{preset}: tiktoken encode_ordinary {mb / t_ref:6.2f} MB/s, "
            f"encode_ordinary_batch(num_threads=1) {mb / t_batch:6.2f} MB/s"
        )
        for backend in ("python", "native"):
            t_ours, ours_ids = ours(backend)
            same = "same ids" if ours_ids == ref_ids else "IDS DIFFER"
            print(
                f"  bpe_core {backend:6s} encode_ordinary {mb / t_ours:6.2f} MB/s: ratio vs tiktoken "
                f"encode_ordinary {t_ref / t_ours:.2f}x, vs encode_ordinary_batch {t_batch / t_ours:.2f}x ({same})"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(benchlib.DATA), help="the shared data folder (or BEAM_BPE_TEST_DATA)")
    parser.add_argument("--vocab-size", type=int, default=8192)
    parser.add_argument("--encode-mb", type=float, default=8.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=("train", "encode"))
    args = parser.parse_args()
    benchlib.DATA = Path(args.data)  # read by every loader of benchlib
    benchlib.data_file("corpora")
    print(f"bpe_core {bpe_core.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} cores")
    if args.only != "encode":
        bench_train(args.vocab_size, args.repeat)
    if args.only != "train":
        bench_encode(args.encode_mb, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
