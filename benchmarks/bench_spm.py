"""SentencePiece-style BPE, one thread: our ``encode_ordinary_flat`` against ``sentencepiece``'s ``encode`` on the
same documents, ids checked (the ``sentencepiece`` section of ``make bench-native``; issue 32's target: >= 20x).

    .venv/bin/python benchmarks/bench_spm.py [--mb 4] [--model ../shared/data/spm/tokenizer.model.v1]

MB per CPU second (``time.process_time``: waiting for a core is not the library's); the first call (the native
tables built, the word table empty) and the best of the warm calls; the load average printed beside them.
"""

from __future__ import annotations

import argparse
import os
import time

from benchlib import data_file, load_records, utf8_len

DEFAULT_MODELS = ("spm/tokenizer.model.v1", "spm/mistral_instruct_tokenizer_240323.model.v3")


def cpu(fn):
    start = time.process_time()
    out = fn()
    return time.process_time() - start, out


def bench_model(path: str, docs: list[str], warm: int = 3) -> dict:
    import sentencepiece

    from bpe_core import Tokenizer

    sp = sentencepiece.SentencePieceProcessor(model_file=path)
    ref_seconds, expected = cpu(lambda: sp.encode(docs, num_threads=1))
    ref_seconds = min([ref_seconds] + [cpu(lambda: sp.encode(docs, num_threads=1))[0] for _ in range(1)])
    tok = Tokenizer.from_file(path)
    first, (ids, offsets) = cpu(lambda: tok.encode_ordinary_flat(docs, num_threads=1))
    best = min(cpu(lambda: tok.encode_ordinary_flat(docs, num_threads=1))[0] for _ in range(warm))
    bounds = offsets.tolist()
    same = all(ids[a:b].tolist() == e for a, b, e in zip(bounds[:-1], bounds[1:], expected, strict=True))
    return {"sentencepiece": ref_seconds, "first": first, "warm": best, "same_ids": same}


def print_sentencepiece(mb: float, models=DEFAULT_MODELS) -> bool:
    docs = [record["text"] for _, record in load_records(mb)]
    size = sum(utf8_len(d) for d in docs) / 1e6
    print(f"\nSentencePiece-style BPE, one thread, {size:.1f} MB, MB per CPU second (load {os.getloadavg()[0]:.1f})")
    good = True
    for model in models:
        r = bench_model(str(data_file(*model.split("/"))), docs)
        ratio_first, ratio_warm = r["sentencepiece"] / r["first"], r["sentencepiece"] / r["warm"]
        print(f"  {os.path.basename(model):45s} sentencepiece {size / r['sentencepiece']:6.1f}  ours first "
              f"{size / r['first']:6.1f} ({ratio_first:.1f}x)  warm {size / r['warm']:6.1f} ({ratio_warm:.1f}x)  "
              f"ids {'identical' if r['same_ids'] else 'DIFFER'}")  # fmt: skip
        good = good and r["same_ids"]
    return good


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=4.0)
    parser.add_argument("--model", action="append")
    args = parser.parse_args()
    raise SystemExit(0 if print_sentencepiece(args.mb, tuple(args.model or DEFAULT_MODELS)) else 1)
