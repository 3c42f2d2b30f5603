"""Superword tokenizers (SuperBPE) on the shared corpora: compression on held-out documents and encode rate.

    python benchmarks/bench_superword.py [--data ../shared/data] [--rules letter-run,...] [--only rate] [--rounds 3]

Compression: every 20th document of each corpus is held out; the plain tokenizer of V tokens and the superword
tokenizer of V tokens with N supermerges (its word model the plain one's first V - N) are trained on the others
(cl100k pieces); the figure is how many fewer tokens the superword one takes on the held-out documents.
Rate: ``encode_ordinary_flat`` on one thread over all documents, warm, in MB per CPU second: the superword
tokenizer (16,000 ids, 2,000 supermerges) against the plain tokenizer of the same size and against its own word
model, interleaved, best of ``--rounds``; the superword ids checked against the reference on every 50th document and
equal to the flat call on three threads. Timings move with the load: the load average is printed beside them.
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


def rate(corpora: dict[str, list[str]], rounds: int) -> None:
    """One thread, warm (each tokenizer's first call is made and not timed): the superword tokenizer of 16,000 ids
    against its own word model and against the plain tokenizer of the same size, all on the same documents, runs
    interleaved; the best of ``rounds``."""
    docs = [d for texts in corpora.values() for d in texts]
    train_docs = docs[::20]
    counts = bpe_core.count_chunks(train_docs, "cl100k")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = bpe_core.train_superword(counts, 16000, 2000, train_docs)
    plain = bpe_core.train(counts, 16000)
    args = sw.word_model_arguments(tok)
    word = bpe_core.Tokenizer(args.pop("vocab"), **args)
    size = sum(len(d.encode("utf-8", "surrogateescape")) for d in docs)
    ref_ids, ref_offsets = tok.encode_ordinary_flat(docs, num_threads=3)
    expected = [sw.encode_reference(word, tok.superword, d) for d in docs[::50]]
    got = [ref_ids[a:b].tolist() for a, b in zip(ref_offsets[:-1], ref_offsets[1:], strict=True)][::50]
    assert got == expected, "the superword ids differ from the reference's"
    best = {"word": float("inf"), "plain": float("inf"), "superword": float("inf")}
    runners = {"word": word, "plain": plain, "superword": tok}
    for t in runners.values():
        t.encode_ordinary_flat(docs[:50], num_threads=1)
    for _ in range(rounds):
        for name, t in runners.items():
            start = time.process_time()
            ids, offsets = t.encode_ordinary_flat(docs, num_threads=1)
            best[name] = min(best[name], time.process_time() - start)
            if name == "superword":
                assert np.array_equal(ids, ref_ids) and np.array_equal(offsets, ref_offsets)
    rate_of = {k: size / v / 1e6 for k, v in best.items()}
    print(
        f"one thread, {size / 1e6:.1f} MB, MB per CPU second (best of {rounds}): superword 16,000 "
        f"{rate_of['superword']:.1f}, its word model {rate_of['word']:.1f}, plain 16,000 {rate_of['plain']:.1f}; "
        f"superword / plain {rate_of['superword'] / rate_of['plain']:.2f}x, superword / word model "
        f"{rate_of['superword'] / rate_of['word']:.2f}x (load {os.getloadavg()[0]:.2f})",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("BEAM_BPE_TEST_DATA", "../shared/data"))
    parser.add_argument("--rules", default=",".join(sw.RULES))
    parser.add_argument("--only", choices=("compression", "rate"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    corpora = load(args.data)
    if args.only != "rate":
        compression(corpora, args.rules.split(","))
    if args.only != "compression":
        rate(corpora, args.rounds)


if __name__ == "__main__":
    main()
