"""Superword tokenizers (SuperBPE) on the shared corpora: compression on held-out documents and encode rate.

    python benchmarks/bench_superword.py [--data ../shared/data] [--rules letter-run,letter-token]

Compression: every 20th document of each corpus is held out; the plain tokenizer of V tokens and the superword
tokenizer of V tokens with N supermerges (its word model the plain one's first V - N) are trained on the others
(cl100k pieces); the figure is how many fewer tokens the superword one takes on the held-out documents.
Rate: ``encode_ordinary_flat`` on one thread over all documents, the superword tokenizer against its own word model
(the plain encoder on the same vocabulary), ids checked equal to the flat call on three threads. Timings move with
the load: the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import time
import warnings

import numpy as np

import bpe_core
from bpe_core.superword import reference as sw
from bpe_core.train.trainer import superword_from_runs

SIZES = ((16000, 2000), (8000, 2000), (8000, 1000))


def load(data: str) -> dict[str, list[str]]:
    out = {}
    for path in sorted(glob.glob(os.path.join(data, "corpora", "*.jsonl.gz"))):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            out[os.path.basename(path).split(".")[0]] = [json.loads(line)["text"] for line in f]
    return out


def compression(corpora: dict[str, list[str]], rules: list[str]) -> None:
    train_docs = [d for docs in corpora.values() for i, d in enumerate(docs) if i % 20]
    held = {name: [d for i, d in enumerate(docs) if i % 20 == 0] for name, docs in corpora.items()}
    counts = bpe_core.count_chunks(train_docs, "cl100k")
    for vocab_size, n in SIZES:
        plain = bpe_core.train(counts, vocab_size)
        word = bpe_core.train(counts, vocab_size - n)
        for rule in rules:
            t0 = time.perf_counter()
            runs = sw.SuperwordPass(word, None, rule).count_runs(train_docs)
            t1 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tok = superword_from_runs(word, runs, n, rule=rule)
            t2 = time.perf_counter()
            parts, total_plain, total_super = [], 0, 0
            for name, docs in held.items():
                p = len(plain.encode_ordinary_flat(docs)[0])
                s = len(tok.encode_ordinary_flat(docs)[0])
                total_plain, total_super = total_plain + p, total_super + s
                parts.append(f"{name} {100 * (1 - s / p):.1f}%")
            print(
                f"{vocab_size}/{n} {rule}: {100 * (1 - total_super / total_plain):.2f}% fewer held-out tokens "
                f"({total_plain:,} -> {total_super:,}); {len(runs):,} unique runs counted in {t1 - t0:.1f} s, "
                f"phase 2 {t2 - t1:.1f} s; " + ", ".join(parts),
                flush=True,
            )


def rate(corpora: dict[str, list[str]]) -> None:
    docs = [d for texts in corpora.values() for d in texts]
    train_docs = docs[::20]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = bpe_core.train_superword(bpe_core.count_chunks(train_docs, "cl100k"), 16000, 2000, train_docs)
    args = sw.word_model_arguments(tok)
    word = bpe_core.Tokenizer(args.pop("vocab"), **args)
    size = sum(len(d.encode("utf-8", "surrogateescape")) for d in docs)
    ref_ids, ref_offsets = tok.encode_ordinary_flat(docs, num_threads=3)
    for _ in range(2):
        t = time.perf_counter()
        word.encode_ordinary_flat(docs, num_threads=1)
        plain_s = time.perf_counter() - t
        t = time.perf_counter()
        ids, offsets = tok.encode_ordinary_flat(docs, num_threads=1)
        super_s = time.perf_counter() - t
        assert np.array_equal(ids, ref_ids) and np.array_equal(offsets, ref_offsets)
        print(
            f"one thread, {size / 1e6:.1f} MB: word model {size / plain_s / 1e6:.1f} MB/s, superword "
            f"{size / super_s / 1e6:.1f} MB/s: {plain_s / super_s:.2f}x the plain rate (load {os.getloadavg()})",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("BEAM_BPE_TEST_DATA", "../shared/data"))
    parser.add_argument("--rules", default=",".join(sw.RULES))
    parser.add_argument("--only", choices=("compression", "rate"))
    args = parser.parse_args()
    corpora = load(args.data)
    if args.only != "rate":
        compression(corpora, args.rules.split(","))
    if args.only != "compression":
        rate(corpora)


if __name__ == "__main__":
    main()
