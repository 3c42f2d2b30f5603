"""``beam-bpe demo``: train on a corpus every machine has (the Python standard library), encode, decode back."""

from __future__ import annotations

import os
import sysconfig
import time
from collections.abc import Iterator

import bpe_core


def stdlib_corpus(max_bytes: int) -> Iterator[str]:
    """The standard library's own ``.py`` files, in sorted path order, up to ``max_bytes`` of text."""
    root = sysconfig.get_paths()["stdlib"]
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "test", "tests", "__pycache__"))
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as f:
                text = f.read()
            yield text
            total += len(text)
            if total >= max_bytes:
                return


def run_demo(*, out_dir: str, vocab_size: int, max_mb: float) -> int:
    os.makedirs(out_dir, exist_ok=True)
    docs = list(stdlib_corpus(int(max_mb * 1e6)))
    size_mb = sum(map(len, docs)) / 1e6
    print(f"[1/4] corpus: {len(docs)} standard-library files, {size_mb:.1f} MB")
    t0 = time.perf_counter()
    counts = bpe_core.count_chunks(docs, "cl100k")
    print(f"[2/4] pre-tokenized with cl100k: {len(counts)} distinct chunks in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    tok = bpe_core.train(counts, vocab_size, special_tokens=["<|endoftext|>"], name="demo")
    path = os.path.join(out_dir, "tokenizer.bpe")
    tok.save(path)
    tok.to_tiktoken(os.path.join(out_dir, "tokenizer.tiktoken"))
    print(f"[3/4] trained {len(tok.merges)} merges (vocab {tok.n_vocab}) in {time.perf_counter() - t0:.1f} s -> {path}")
    sample = 'def greet(name: str) -> str:\n    return f"Hello, {name}!"  # naïve café ☕\n'
    loaded = bpe_core.Tokenizer.load(path)
    ids = loaded.encode(sample)
    back = loaded.decode(ids)
    print(f"[4/4] encoded a {len(sample.encode())}-byte sample into {len(ids)} tokens: {ids[:16]} ...")
    print("      first tokens:", [loaded.token_bytes(i).decode("utf-8", "replace") for i in ids[:10]])
    print(f"      decoded back identical: {back == sample}")
    return 0 if back == sample else 1
