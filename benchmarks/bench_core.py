"""Benchmark of bpe_core against its peers, measured in one run on the same data (not a test).

    python benchmarks/bench_core.py [--data ../shared/data] [--vocab-size 8192] [--encode-mb 8] [--repeat 3]

Prints: train time on docs_python_rst (split on "\\n") vs Hugging Face `tokenizers` (BpeTrainer) and `rustbpe`;
encode throughput (MB/s, one thread) vs `tiktoken` on the shared corpora, for cl100k and o200k. Each figure is the
best of --repeat runs (the machine is shared and noisy: the minimum is the least disturbed run). Ratios > 1 mean
bpe_core is faster.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bpe_core  # noqa: E402
from bpe_core.presets import GPT2_HF_PATTERN  # noqa: E402

CORPORA = ("en_bible_kjv", "docs_python_rst", "multi_udhr", "code_cpython", "fortunes_multi")


def best_of(repeat: int, fn) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def load_docs(data: Path, name: str) -> list[str]:
    with gzip.open(data / "corpora" / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def bench_train(data: Path, vocab_size: int, repeat: int) -> None:
    import rustbpe
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    lines = [line for doc in load_docs(data, "docs_python_rst") for line in doc.split("\n")]
    mb = sum(len(s.encode()) for s in lines) / 1e6
    print(f"\n== train: docs_python_rst, {mb:.1f} MB, vocab {vocab_size}, GPT-2 pattern ==")

    def ours(backend):
        counts = bpe_core.count_chunks(lines, GPT2_HF_PATTERN)
        return bpe_core.train(counts, vocab_size, min_frequency=1, backend=backend)

    def hf():
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=1, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train_from_iterator(lines, trainer)

    def rust():
        rustbpe.Tokenizer().train_from_iterator(iter(lines), vocab_size, pattern=GPT2_HF_PATTERN)

    t_py, _ = best_of(repeat, lambda: ours("python"))
    t_native, _ = best_of(repeat, lambda: ours("native"))
    t_hf, _ = best_of(repeat, hf)
    t_rust, _ = best_of(repeat, rust)
    print("(ratio = peer time / bpe_core time: > 1 means bpe_core is faster)")
    print(f"bpe_core python reference (count + train) {t_py:7.2f} s")
    print(f"bpe_core native (count + train)           {t_native:7.2f} s")
    for peer, t in (("tokenizers BpeTrainer", t_hf), ("rustbpe", t_rust)):
        print(f"{peer:42s}{t:7.2f} s   ratio vs python {t / t_py:.2f}x, vs native {t / t_native:.2f}x")


def bench_encode(data: Path, encode_mb: float, repeat: int) -> None:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    table = json.loads((data / "tiktoken" / "encodings.json").read_text())
    docs, size = [], 0
    per_corpus = encode_mb * 1e6 / len(CORPORA)
    for name in CORPORA:
        taken = 0
        for doc in load_docs(data, name):
            docs.append(doc)
            taken += len(doc.encode())
            if taken >= per_corpus:
                break
        size += taken
    mb = size / 1e6
    print(f"\n== encode: {len(docs)} documents, {mb:.1f} MB from all shared corpora, one thread ==")
    for preset, name in (("cl100k", "cl100k_base"), ("o200k", "o200k_base")):
        entry = table[name]
        path = str(data / "tiktoken" / entry["rank_file"])
        ref = tiktoken.Encoding(name, pat_str=entry["pat_str"], mergeable_ranks=load_tiktoken_bpe(path),
                                special_tokens=entry["special_tokens"])

        def ours(backend, path=path, preset=preset):
            # A fresh tokenizer each run, so that the chunk cache starts cold as tiktoken's does.
            tok = bpe_core.Tokenizer.from_tiktoken(path, pretokenizer=preset, backend=backend)
            return [tok.encode_ordinary(d) for d in docs]

        t_ref, ref_ids = best_of(repeat, lambda r=ref: [r.encode_ordinary(d) for d in docs])
        t_batch, _ = best_of(repeat, lambda r=ref: r.encode_ordinary_batch(docs, num_threads=1))
        print(f"{preset}: tiktoken encode_ordinary {mb / t_ref:6.2f} MB/s, "
              f"encode_ordinary_batch(num_threads=1) {mb / t_batch:6.2f} MB/s")
        for backend in ("python", "native"):
            t_ours, ours_ids = best_of(repeat, lambda b=backend: ours(b))
            same = "same ids" if ours_ids == ref_ids else "IDS DIFFER"
            print(f"  bpe_core {backend:6s} encode_ordinary {mb / t_ours:6.2f} MB/s: ratio vs tiktoken "
                  f"encode_ordinary {t_ref / t_ours:.2f}x, vs encode_ordinary_batch {t_batch / t_ours:.2f}x ({same})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_data = os.environ.get("BEAM_BPE_TEST_DATA", str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--data", default=default_data)
    parser.add_argument("--vocab-size", type=int, default=8192)
    parser.add_argument("--encode-mb", type=float, default=8.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=("train", "encode"))
    args = parser.parse_args()
    data = Path(args.data)
    if not (data / "corpora").is_dir():
        print(f"shared data not found at {data}: pass --data or set BEAM_BPE_TEST_DATA", file=sys.stderr)
        return 2
    print(f"bpe_core {bpe_core.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} cores")
    if args.only != "encode":
        bench_train(data, args.vocab_size, args.repeat)
    if args.only != "train":
        bench_encode(data, args.encode_mb, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
