"""``beam-bpe demo``: train with the Beam pipeline on a corpus every machine has (the Python standard library),
then encode and decode back with the artifact it wrote."""

from __future__ import annotations

import os
import sysconfig
from collections.abc import Iterator

import bpe_core


def stdlib_files(max_bytes: int) -> Iterator[str]:
    """Paths of the standard library's own ``.py`` files, in sorted path order, up to ``max_bytes`` of text."""
    root = sysconfig.get_paths()["stdlib"]
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "test", "tests", "__pycache__"))
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            yield path
            total += os.path.getsize(path)
            if total >= max_bytes:
                return


def run_demo(*, out_dir: str, vocab_size: int, max_mb: float, beam_args: list[str] | None = None) -> int:
    from pipeline.corpus.plan import CorpusSpec, InputSpec
    from pipeline.launch.progress import Reporter
    from pipeline.train.job import TrainJob, run_train
    from pipeline.train.settings import train_settings

    files = list(stdlib_files(int(max_mb * 1e6)))
    size_mb = sum(map(os.path.getsize, files)) / 1e6
    print(f"[1/3] corpus: {len(files)} standard-library files, {size_mb:.1f} MB (one document per file)")
    settings = train_settings({}, {"vocab_size": vocab_size, "special_tokens": ["<|endoftext|>"], "name": "demo"})
    job = TrainJob(
        out_dir, settings, tuple(InputSpec(f) for f in files), CorpusSpec("text", text_unit="file"), overwrite=True
    )
    manifest = run_train(job, beam_args or [], reporter=Reporter())
    print(
        f"[2/3] Beam pipeline ({manifest['runner']}): {manifest['documents_counted']} documents counted, "
        f"{manifest['stats']['chunk_occurrences']} chunks in {manifest['count_seconds']:.1f} s; trained "
        f"{manifest['merges']} merges (vocab {manifest['n_vocab']}) in {manifest['train_seconds']:.1f} s "
        f"-> {', '.join(sorted(manifest['artifacts']))} in {out_dir}"
    )
    sample = 'def greet(name: str) -> str:\n    return f"Hello, {name}!"  # naïve café ☕\n'
    loaded = bpe_core.Tokenizer.load(os.path.join(out_dir, "tokenizer.bpe"))
    ids = loaded.encode(sample)
    back = loaded.decode(ids)
    print(f"[3/3] encoded a {len(sample.encode())}-byte sample into {len(ids)} tokens: {ids[:16]} ...")
    print("      first tokens:", [loaded.token_bytes(i).decode("utf-8", "replace") for i in ids[:10]])
    print(f"      decoded back identical: {back == sample}")
    return 0 if back == sample else 1
