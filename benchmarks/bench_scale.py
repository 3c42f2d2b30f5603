"""Scale benchmark (issue 16 item 4, not a test): the train and encode pipelines on growing corpora, one command.

    .venv/bin/python benchmarks/bench_scale.py [--sizes 0.1,0.3,1,2] [--parts train,encode,estimate,several,superword]
        [--work DIR]

The corpora (``scale-{GB}.jsonl``, cached in ``--work``) are built from the shared corpora: every pass over them
shuffles the documents and inserts numbered identifiers drawn from a range that widens with the bytes written, so
larger sizes hold new unique chunks at a Heaps-like rate (not the same text again). Every measured command runs as
a whole process, start to exit, through ``/usr/bin/time``-like accounting in a fresh wrapper process (wall, CPU of
the command and its children, peak RSS of the largest process). For each part and size it prints wall, CPU, peak
RSS, MB/s and unique chunks, the ratios the issue asks for and the fitted exponent of cost against size (1.0 is
linear), with the load average beside every figure.

Layout: corpus building (shared by the parts), the train part (``bench_train``), the encode part
(``bench_encode``), the training pre-flight's error (``bench_estimate``), several tokenizers in one read
(``bench_several``), superword training (``bench_superword``), ``main``. Each part keeps to its own functions.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import CORPORA, iter_records

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
MULTI = ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]


# ----------------------------------------------------------------------------------------------- corpus


def build_corpus(work: Path, gb: float, *, seed: int = 16) -> Path:
    """``work/scale-{gb}.jsonl`` of ``gb`` GB of text (built once, then reused): the shared corpora's documents,
    shuffled per pass, with numbered identifiers (``qbxe``: the number in letters, one per ~40 words) drawn uniformly
    from a range that grows as the square root of the bytes written, so unique chunks grow sublinearly, as in
    natural text."""
    path = work / f"scale-v2-{gb:g}.jsonl"
    if path.exists():
        return path
    pool = [r["text"] for name in CORPORA for r in iter_records(name)]
    rng = random.Random(seed)
    limit, written, ids_made = gb * 1e9, 0, 0
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        while written < limit:
            rng.shuffle(pool)
            for text in pool:
                if written >= limit:
                    break
                span = 1000 + int(30 * math.sqrt(written))
                words = text.split(" ")
                for k in range(0, len(words), 40):
                    words[k] = f"{words[k]} {_letters(rng.randrange(span))}"
                    ids_made += 1
                doc = " ".join(words)
                out.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
                written += len(doc.encode("utf-8", "surrogatepass"))
    tmp.rename(path)
    return path


def _letters(n: int) -> str:
    """``n`` as a lowercase word (``qa``, ``qb``, ...): letters only, so that every pre-tokenizer keeps it as one
    chunk (numbered identifiers with digits are cut into 1-3 digit pieces by cl100k: no new chunks)."""
    out = []
    while True:
        n, r = divmod(n, 26)
        out.append(chr(97 + r))
        if not n:
            return "q" + "".join(out)


def text_bytes(path: Path) -> int:
    """Bytes of text in a corpus (what MB/s is measured against): the JSONL size is close but not the same."""
    meta = path.with_suffix(".bytes")
    if not meta.exists():
        total = sum(
            len(json.loads(line)["text"].encode("utf-8", "surrogatepass")) for line in path.open(encoding="utf-8")
        )
        meta.write_text(str(total))
    return int(meta.read_text())


# ----------------------------------------------------------------------------------------------- measuring


def measure(cmd: list[str]) -> dict:
    """Run ``cmd`` to exit in a fresh wrapper process; its wall, CPU (with its children) and peak RSS."""
    proc = subprocess.run(
        [sys.executable, __file__, "--measure", "--", *cmd], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _measure_main(cmd: list[str]) -> None:
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        peaks = _sample_peaks(proc)
        out.seek(0), err.seek(0)
        run = subprocess.CompletedProcess(cmd, proc.returncode, out.read(), err.read())
    wall = time.perf_counter() - start
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        sys.stderr.write(run.stderr[-3000:])
        raise SystemExit(run.returncode)
    last = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else "{}"
    try:
        extra = json.loads(last)
    except json.JSONDecodeError:
        extra = {}
    result = {
        "wall": wall,
        "cpu": kids.ru_utime + kids.ru_stime,
        "rss": kids.ru_maxrss * 1024,
        "load": os.getloadavg()[0],
        "stages": _stage_seconds(run.stderr),
        **peaks,
    }
    print(json.dumps({**result, **(extra if isinstance(extra, dict) else {})}))


def _sample_peaks(proc: subprocess.Popen, every: float = 0.1) -> dict[str, int]:
    """Wait for ``proc``, sampling the RSS of it and of every process below it ``every`` s: the launcher's peak
    (``rss_launcher``) and the largest peak of any other process (``rss_worker``: a Beam worker, the fork server,
    a Dask worker). A peak shorter than the interval can be missed; ``rss`` (getrusage) is the exact maximum of
    the largest process."""
    import psutil

    launcher, worker = 0, 0
    try:
        root = psutil.Process(proc.pid)
    except psutil.Error:
        root = None
    while proc.poll() is None:
        if root is not None:
            try:
                launcher = max(launcher, root.memory_info().rss)
                for child in root.children(recursive=True):
                    try:
                        worker = max(worker, child.memory_info().rss)
                    except psutil.Error:
                        continue
            except psutil.Error:
                pass
        time.sleep(every)
    return {"rss_launcher": launcher, "rss_worker": worker}


def _stage_seconds(stderr: str) -> dict[str, float]:
    """The seconds of each pipeline stage that reports its own (the stage lines on stderr: count, encode, ...)."""
    found = {}
    for line in stderr.splitlines():
        if line.startswith("{") and '"stage"' in line:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record.get("seconds"), (int, float)) and record.get("stage") != "done":
                found[record["stage"]] = float(record["seconds"])
    return found


def exponent(sizes: list[float], costs: list[float]) -> float:
    """The least-squares slope of log(cost) against log(size): 1.0 is linear."""
    xs, ys = [math.log(s) for s in sizes], [math.log(max(c, 1e-9)) for c in costs]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else float("nan")


# ----------------------------------------------------------------------------------------------- train part

# The in-process peer of the count stage: the same JSONL read line by line and counted by bpe_core.count_chunks on
# 2 threads into one native counter (an iterator of texts: windows of 16M characters), whole process to exit.
COUNT_LOOP = """
import json, sys
import bpe_core
def texts(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)["text"]
counts = bpe_core.count_chunks(texts(sys.argv[1]), sys.argv[2], num_threads=2)
print(json.dumps({"unique": len(counts), "occurrences": sum(counts.values()),
                  "weighted": sum(len(c) * n for c, n in counts.items())}))
"""

# The counts a pipeline run wrote, summarised as COUNT_LOOP summarises its dict (checked equal, outside the timing).
COUNTS_SUMMARY = """
import glob, json, sys
import pyarrow.compute as pc, pyarrow.parquet as pq
unique = occurrences = weighted = 0
for path in sorted(glob.glob(sys.argv[1] + "/counts/counts-*.parquet")):
    t = pq.read_table(path)
    unique += t.num_rows
    occurrences += pc.sum(t["count"]).as_py() or 0
    weighted += pc.sum(pc.multiply(pc.binary_length(t["chunk"]).cast("int64"), t["count"])).as_py() or 0
print(json.dumps({"unique": unique, "occurrences": occurrences, "weighted": weighted}))
"""


def bench_train(work: Path, corpora: dict[float, Path], *, pretokenizer: str, vocab_size: int) -> list[dict]:
    """Per size: ``train --counts-only`` (2 workers) against the in-process count loop (2 threads), counts checked
    equal; ``train --from-counts`` peak RSS above ``beam-bpe --version`` per unique chunk."""
    cli = str(BIN / "beam-bpe")
    idle = measure([cli, "--version"])
    rows = []
    for gb, path in corpora.items():
        mb = text_bytes(path) / 1e6
        loop = measure([sys.executable, "-c", COUNT_LOOP, str(path), pretokenizer])
        out = work / f"counts-{gb:g}"
        count = measure([cli, "train", "--input", str(path), "--counts-only", "--pretokenizer", pretokenizer,
                         "--out", str(out), "--overwrite", *MULTI])  # fmt: skip
        summary = json.loads(subprocess.run([sys.executable, "-c", COUNTS_SUMMARY, str(out)], capture_output=True,
                                            text=True, check=True).stdout)  # fmt: skip
        same = summary == {k: loop[k] for k in ("unique", "occurrences", "weighted")}
        trained = measure([cli, "train", "--from-counts", str(out), "--out", str(work / f"train-{gb:g}"),
                           "--vocab-size", str(vocab_size), "--overwrite"])  # fmt: skip
        rows.append({"gb": gb, "mb": mb, "loop": loop, "count": count, "train": trained, "idle_rss": idle["rss"],
                     "unique": summary["unique"], "counts_equal": same})  # fmt: skip
        _print_train_row(rows[-1])
    _print_train_fit(rows)
    return rows


def _print_train_row(r: dict) -> None:
    mib = 1 << 20
    loop, count, trained = r["loop"], r["count"], r["train"]
    above = trained["rss"] - r["idle_rss"]
    print(
        f"\n{r['gb']:g} GB ({r['mb']:.0f} MB of text), {r['unique']:,} unique chunks, counts equal: {r['counts_equal']}"
    )
    for name, m in (("count loop, 2 threads", loop), ("train --counts-only, 2 workers", count),
                    ("train --from-counts", trained)):  # fmt: skip
        print(f"  {name:32s} wall {m['wall']:7.1f} s  cpu {m['cpu']:7.1f} s  peak RSS {m['rss'] / mib:7.0f} MiB  "
              f"{r['mb'] / m['wall']:6.1f} MB/s  {r['mb'] / m['cpu']:5.1f} MB/core-s  {_peaks(m)}"
              f"(load {m['load']:.1f})")  # fmt: skip
    print(f"  train --counts-only / loop: wall {count['wall'] / loop['wall']:.2f}x (target <= 1.5x), "
          f"cpu {count['cpu'] / loop['cpu']:.2f}x")  # fmt: skip
    stage = count.get("stages", {}).get("count")
    if stage:  # the command less its start (imports, plan) and the pre-flight's sample: the count stage's own line
        print(f"  the count stage alone (its stage line): {stage:.1f} s = {stage / loop['wall']:.2f}x the loop's wall, "
              f"{r['mb'] / stage / 2:.1f} MB per core-second on 2 workers")  # fmt: skip
    print(f"  from-counts peak RSS - beam-bpe --version ({r['idle_rss'] / mib:.0f} MiB): {above / mib:.0f} MiB = "
          f"{above / max(1, r['unique']):.0f} bytes per unique chunk (target <= 200)")  # fmt: skip


def _peaks(m: dict) -> str:
    """The sampled peaks of the launcher and of the largest other process (a worker), where there was one."""
    if not m.get("rss_worker"):
        return ""
    return f"[launcher {m['rss_launcher'] / 2**20:.0f} / worker {m['rss_worker'] / 2**20:.0f} MiB] "


def _print_train_fit(rows: list[dict]) -> None:
    if len(rows) < 2:
        return
    sizes = [r["mb"] for r in rows]
    print("\nfitted exponent against size (1.0 linear; target <= 1.1):")
    print(f"  unique chunks {exponent(sizes, [r['unique'] for r in rows]):.2f} (Heaps-like growth: below 1)")
    for label, key in (("count loop", "loop"), ("train --counts-only", "count"), ("train --from-counts", "train")):
        walls, cpus = [r[key]["wall"] for r in rows], [r[key]["cpu"] for r in rows]
        rss = [r[key]["rss"] - (rows[0]["idle_rss"] if key == "train" else 0) for r in rows]
        workers = [r[key].get("rss_worker") or 0 for r in rows]
        per_worker = f"  worker peak {exponent(sizes, workers):.2f}" if all(workers) else ""
        print(f"  {label:22s} wall {exponent(sizes, walls):.2f}  cpu {exponent(sizes, cpus):.2f}  "
              f"peak RSS {exponent(sizes, rss):.2f}{per_worker}")  # fmt: skip


# ----------------------------------------------------------------------------------------------- encode part

# Our in-process flat loop: the same JSONL read with json.loads, ~1 MiB of text per encode_ordinary_flat call on one
# thread, ids appended to one uint32 .bin (what the pipeline's CPU is compared with).
FLAT_LOOP = """
import json, sys
import numpy as np
import bpe_core
tok = bpe_core.Tokenizer.from_file(sys.argv[1], pretokenizer=sys.argv[2])
tokens, docs, size = 0, [], 0
with open(sys.argv[3], encoding="utf-8") as f, open(sys.argv[4], "wb") as out:
    def flush(docs):
        ids, _ = tok.encode_ordinary_flat(docs, num_threads=1)
        out.write(ids.astype(np.uint32).tobytes())
        return len(ids)
    for line in f:
        docs.append(json.loads(line)["text"]); size += len(docs[-1])
        if size >= 1 << 20:
            tokens += flush(docs); docs, size = [], 0
    tokens += flush(docs)
print(json.dumps({"tokens": tokens}))
"""

# The GigaToken script of issue 16: json.loads per line, gigatoken encode_batch (its default threads), one uint32 .bin.
GIGATOKEN_SCRIPT = """
import json, sys
import awkward as ak, numpy as np, gigatoken
gt = gigatoken.Tokenizer.from_tiktoken(sys.argv[1], pretokenizer=sys.argv[2], special_tokens={})
with open(sys.argv[3], encoding="utf-8") as f:
    docs = [json.loads(line)["text"] for line in f]
ids = ak.to_numpy(ak.flatten(gt.encode_batch(docs))).astype(np.uint32)
ids.tofile(sys.argv[4])
print(json.dumps({"tokens": int(ids.size)}))
"""


def bench_encode(work: Path, corpora: dict[float, Path], *, pretokenizer: str = "cl100k") -> list[dict]:
    """Per size: ``beam-bpe encode --shard-format megatron`` (2 workers, default --shard-size) against our in-process
    flat loop and the GigaToken script; token totals checked equal; ratios and the fitted exponents printed."""
    rank = str(ROOT.parent / "shared" / "data" / "tiktoken" / f"{pretokenizer}_base.tiktoken")
    rows = []
    for gb, path in sorted(corpora.items()):
        out = work / f"encode-{gb}"
        pipe = measure([str(BIN / "beam-bpe"), "encode", "--tokenizer", rank, "--pretokenizer", pretokenizer, "--input",
                        str(path), "--out", str(out), "--shard-format", "megatron", "--overwrite", *MULTI])  # fmt: skip
        pipe["tokens"] = json.loads((out / "manifest.json").read_text())["tokens"]
        flat = measure([sys.executable, "-c", FLAT_LOOP, rank, pretokenizer, str(path), str(work / "flat.bin")])
        giga = measure([sys.executable, "-c", GIGATOKEN_SCRIPT, rank, pretokenizer, str(path), str(work / "giga.bin")])
        if not pipe["tokens"] == flat["tokens"] == giga["tokens"]:
            print(
                f"  token totals differ at {gb} GB: pipeline {pipe['tokens']}, flat loop {flat['tokens']}, "
                f"gigatoken {giga['tokens']}"
            )
        row = {"gb": gb, "mb": text_bytes(path) / 1e6, "pipeline": pipe, "flat": flat, "gigatoken": giga}
        rows.append(row)
        _print_encode_row(row)
    if len(rows) > 1:
        sizes = [r["gb"] for r in rows]
        print(
            f"encode fit: exponent wall {exponent(sizes, [r['pipeline']['wall'] for r in rows]):.2f}, "
            f"cpu {exponent(sizes, [r['pipeline']['cpu'] for r in rows]):.2f}, "
            f"launcher peak {exponent(sizes, [r['pipeline']['rss_launcher'] for r in rows]):.2f}, "
            f"worker peak {exponent(sizes, [r['pipeline']['rss_worker'] or 1 for r in rows]):.2f} (1.0 is linear)"
        )
    return rows


def _print_encode_row(r: dict) -> None:
    p, f, g = r["pipeline"], r["flat"], r["gigatoken"]
    for name, m in (("pipeline 2 workers", p), ("in-process flat loop", f), ("gigatoken script", g)):
        print(
            f"encode {r['gb']:>4} GB {name:<21} wall {m['wall']:7.1f} s cpu {m['cpu']:7.1f} s "
            f"peak {m['rss'] / 2**20:6.0f} MiB "
            f"{r['mb'] / m['wall']:6.1f} MB/s {r['mb'] / m['cpu']:5.1f} MB/core-s {_peaks(m)}load {m['load']:.1f}"
        )
    print(
        f"encode {r['gb']:>4} GB ratios: wall pipeline/gigatoken {p['wall'] / g['wall']:.2f} (target <= 1.0), "
        f"cpu pipeline/flat loop {p['cpu'] / f['cpu']:.2f} (target <= 1.3)"
    )


# ----------------------------------------------------------------------------------------------- estimate part

# The pre-flight as `train` runs it (pipeline/train/estimate.py), in its own process: its JSON figures.
ESTIMATE_SCRIPT = """
import json, sys, time
from pipeline.corpus.plan import CorpusSpec, InputSpec, plan_corpus
from pipeline.train.estimate import estimate_corpus
from pipeline.train.settings import train_settings
spec = CorpusSpec("jsonl")
plan = plan_corpus([InputSpec(sys.argv[1])], spec)
settings = train_settings({}, {"vocab_size": int(sys.argv[3]), "pretokenizer": sys.argv[4]})
t = time.perf_counter()
est = estimate_corpus(plan, spec, settings, sample_bytes=int(sys.argv[2]) or None)
print(json.dumps({**est.to_manifest(), "estimate_seconds": time.perf_counter() - t}))
"""

# Words (chunks of two bytes or more) and their bytes in the counts a pipeline run wrote: what the merge loop gets.
WORDS_SUMMARY = """
import glob, json, sys
import pyarrow.compute as pc, pyarrow.parquet as pq
words = word_bytes = chunks = 0
for path in sorted(glob.glob(sys.argv[1] + "/counts/counts-*.parquet")):
    lengths = pc.binary_length(pq.read_table(path, columns=["chunk"])["chunk"])
    long = pc.greater_equal(lengths, 2)
    chunks += len(lengths)
    words += pc.sum(long.cast("int64")).as_py() or 0
    word_bytes += pc.sum(pc.filter(lengths, long).cast("int64")).as_py() or 0
print(json.dumps({"chunks": chunks, "words": words, "word_bytes": word_bytes}))
"""


def real_corpora(work: Path) -> dict[str, Path]:
    """The shared corpora concatenated into one JSONL file, in their order and reversed (``real-a``, ``real-b``):
    text of five kinds in long runs, where a prefix of the file is no sample of the whole."""
    out = {}
    for name, order in (("real-a", CORPORA), ("real-b", tuple(reversed(CORPORA)))):
        path = work / f"{name}.jsonl"
        if not path.exists():
            with open(path.with_suffix(".tmp"), "w", encoding="utf-8") as f:
                for corpus in order:
                    for record in iter_records(corpus):
                        f.write(json.dumps(record, ensure_ascii=False) + "\n")
            path.with_suffix(".tmp").rename(path)
        out[name] = path
    return out


def bench_estimate(work: Path, corpora: dict[float, Path], *, pretokenizer: str, vocab_size: int) -> list[dict]:
    """The training pre-flight against the run it predicts (issue 27 item 3), per corpus: the scale corpora with
    the default sample, the shared corpora concatenated in two orders with a 5% sample. Predicted against measured:
    unique chunks (the counts of ``train --counts-only``, 2 workers) and the driver's peak RSS (``train
    --from-counts``; predicted as ``beam-bpe --version``'s RSS plus the merge loop's). Prints the errors.

        .venv/bin/python benchmarks/bench_scale.py --parts estimate --sizes 0.3,1,2
    """
    cli = str(BIN / "beam-bpe")
    idle = measure([cli, "--version"])["rss"]
    cases = [(f"scale {gb:g} GB", path, 0) for gb, path in sorted(corpora.items())]
    cases += [(name, path, int(0.05 * path.stat().st_size)) for name, path in real_corpora(work).items()]
    rows = []
    for name, path, sample in cases:
        est = measure([sys.executable, "-c", ESTIMATE_SCRIPT, str(path), str(sample), str(vocab_size), pretokenizer])
        out = work / f"estimate-counts-{path.stem}"
        if not (out / "COMPLETED").exists():
            measure([cli, "train", "--input", str(path), "--counts-only", "--pretokenizer", pretokenizer, "--out",
                     str(out), "--overwrite", "--no-progress", *MULTI])  # fmt: skip
        truth = json.loads(subprocess.run([sys.executable, "-c", WORDS_SUMMARY, str(out)], capture_output=True,
                                          text=True, check=True).stdout)  # fmt: skip
        trained = measure([cli, "train", "--from-counts", str(out), "--out", str(work / f"estimate-train-{path.stem}"),
                           "--vocab-size", str(vocab_size), "--overwrite", "--no-progress"])  # fmt: skip
        manifest = json.loads((work / f"estimate-train-{path.stem}" / "manifest.json").read_text())
        row = {"name": name, "estimate": est, "truth": truth, "rss": trained["rss"], "idle": idle,
               "train_seconds": manifest["train_seconds"], "load": trained["load"]}  # fmt: skip
        rows.append(row)
        _print_estimate_row(row)
    worst = max(max(abs(r["chunk_error"]), abs(r["rss_error"])) for r in rows)
    print(f"\nworst error {worst:.0%} (target within 25%)")
    return rows


def _print_estimate_row(r: dict) -> None:
    mib = 1 << 20
    e, t = r["estimate"], r["truth"]
    predicted_rss = r["idle"] + e["loop_memory"]
    r["chunk_error"] = e["chunks"] / t["chunks"] - 1
    r["rss_error"] = predicted_rss / r["rss"] - 1
    how = "whole corpus read" if e["exact"] else f"{e['sample_text_bytes'] / 1e6:.1f} MB sample"
    print(
        f"\n{r['name']} ({e['file_bytes'] / 1e6:.0f} MB; {how}, {e['estimate_seconds']:.1f} s, "
        f"b = {e['growth_b']:.2f}):\n"
        f"  unique chunks   predicted {e['chunks']:>11,}  counted  {t['chunks']:>11,}  error {r['chunk_error']:+.1%}\n"
        f"  driver peak RSS predicted {predicted_rss / mib:9.0f} MiB measured {r['rss'] / mib:7.0f} MiB  "
        f"error {r['rss_error']:+.1%} (--version {r['idle'] / mib:.0f} MiB + merge loop "
        f"{e['loop_memory'] / mib:.0f} MiB)\n"
        f"  merge loop      predicted {e['seconds']:9.1f} s   train stage {r['train_seconds']:7.1f} s "
        f"(load {r['load']:.1f})"
    )


# ----------------------------------------------------------------------------------------------- several tokenizers


def bench_several(work: Path, corpora: dict[float, Path], *, presets: tuple[str, str] = ("cl100k", "o200k")) -> list:
    """One ``encode --tokenizer A --tokenizer B`` run against two single-tokenizer runs (issue 27 item 1): CPU
    seconds (the command and its workers) and wall, megatron shards, 2 workers, every file compared byte for byte
    (megatron_data_path.txt names its folder: compared with the folder's name taken out).

        .venv/bin/python benchmarks/bench_scale.py --parts several --sizes 1
    """
    ranks = [str(ROOT.parent / "shared" / "data" / "tiktoken" / f"{p}_base.tiktoken") for p in presets]
    stems = [f"{p}_base" for p in presets]
    common = ["--shard-format", "megatron", "--overwrite", "--no-progress", *MULTI]
    rows = []
    for gb, path in sorted(corpora.items()):
        one_out, two_out = work / f"several-one-{gb:g}", work / f"several-two-{gb:g}"
        tokens = [arg for rank in ranks for arg in ("--tokenizer", rank)]
        one = measure([str(BIN / "beam-bpe"), "encode", *tokens, "--input", str(path), "--out", str(one_out), *common])
        two = [measure([str(BIN / "beam-bpe"), "encode", "--tokenizer", rank, "--input", str(path), "--out",
                        str(two_out / stem), *common]) for rank, stem in zip(ranks, stems, strict=True)]  # fmt: skip
        same = all(_folder_files(one_out / s) == _folder_files(two_out / s) for s in stems)
        cpu2, wall2 = sum(m["cpu"] for m in two), sum(m["wall"] for m in two)
        rows.append({"gb": gb, "one": one, "two": two, "identical": same})
        print(
            f"\n{gb:g} GB, {' + '.join(presets)}: one run cpu {one['cpu']:.1f} s wall {one['wall']:.1f} s "
            f"(load {one['load']:.1f}); two runs cpu {cpu2:.1f} s wall {wall2:.1f} s (load "
            f"{two[0]['load']:.1f}, {two[1]['load']:.1f})\n  cpu one / two {one['cpu'] / cpu2:.2f} (target <= 0.9), "
            f"wall {one['wall'] / wall2:.2f}; files identical: {same}"
        )
    return rows


def _folder_files(folder: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes().replace(str(folder).encode(), b"OUT") for p in sorted(folder.rglob("*")) if p.is_file()
    }


# ----------------------------------------------------------------------------------------------- superword part


def bench_superword(work: Path, corpora: dict[float, Path], *, pretokenizer: str, vocab_size: int,
                    superword_merges: int = 2000) -> list[dict]:  # fmt: skip
    """Superword training at scale (issue 26 item 4), per size: ``train --counts-only --superword-merges N`` with 2
    workers (phase 1's count, the word model on the driver, phase 2's run count: ``counts/`` and ``runs/``), then on
    the driver ``train --from-counts`` twice: the plain word model alone (its peak RSS is the chunk table's) and the
    superword tokenizer (word model, runs read as columns, supermerge loop). Prints the time of each phase, unique
    chunks against unique runs, and the driver's peak RSS above the plain run's per unique run.

        .venv/bin/python benchmarks/bench_scale.py --parts superword --sizes 1
    """
    cli = str(BIN / "beam-bpe")
    word_size = vocab_size - superword_merges
    common = ["--pretokenizer", pretokenizer, "--overwrite", "--no-progress"]
    rows = []
    for gb, path in sorted(corpora.items()):
        counted, plain, sup = (work / f"superword-{name}-{gb:g}" for name in ("counts", "plain", "train"))
        sizes = ["--vocab-size", str(vocab_size), "--superword-merges", str(superword_merges)]
        count = measure([cli, "train", "--input", str(path), "--counts-only", *sizes, "--out", str(counted), *common,
                         *MULTI])  # fmt: skip
        word = measure([cli, "train", "--from-counts", str(counted), "--vocab-size", str(word_size), "--out",
                        str(plain), *common])  # fmt: skip
        train = measure([cli, "train", "--from-counts", str(counted), *sizes, "--out", str(sup), *common])
        m_count, m_train = (json.loads((d / "manifest.json").read_text()) for d in (counted, sup))
        row = {"gb": gb, "mb": text_bytes(path) / 1e6, "count": count, "word": word, "train": train,
               "count_seconds": m_count["count_seconds"], "runs": m_count["superword"]["runs_counted"],
               "superword": m_train["superword"], "chunk_filter": m_train["chunk_filter"],
               "train_seconds": m_train["train_seconds"]}  # fmt: skip
        rows.append(row)
        _print_superword_row(row)
    return rows


def _print_superword_row(r: dict) -> None:
    mib = 1 << 20
    sw, runs = r["superword"], r["runs"]
    chunks = r["chunk_filter"]["chunks_reduced"]
    print(f"\n{r['gb']:g} GB ({r['mb']:.0f} MB of text), word model {sw['word_model']} + supermerges "
          f"{sw['supermerges']}: {chunks:,} unique chunks, {sw['runs_reduced']:,} unique runs "
          f"({sw['runs_reduced'] / max(1, chunks):.2f}x), {sw['occurrences_reduced']:,} run occurrences")  # fmt: skip
    c = r["count"]
    print(f"  train --counts-only, 2 workers  wall {c['wall']:7.1f} s  cpu {c['cpu']:7.1f} s  peak RSS "
          f"{c['rss'] / mib:6.0f} MiB (load {c['load']:.1f})\n"
          f"    phase 1 count pass {r['count_seconds']:.1f} s, word model {sw['word_model_seconds']:.1f} s (driver), "
          f"phase 2 run pass {runs['seconds']:.1f} s")  # fmt: skip
    w, t = r["word"], r["train"]
    above = t["rss"] - w["rss"]
    print(f"  train --from-counts, word model only  wall {w['wall']:7.1f} s  peak RSS {w['rss'] / mib:6.0f} MiB "
          f"(load {w['load']:.1f})\n"
          f"  train --from-counts, superword        wall {t['wall']:7.1f} s  peak RSS {t['rss'] / mib:6.0f} MiB "
          f"(load {t['load']:.1f}): word model {sw['word_model_seconds']:.1f} s, runs read "
          f"{sw['read_runs_seconds']:.1f} s, supermerge loop and write {r['train_seconds']:.1f} s\n"
          f"  driver peak RSS above the word model's: {above / mib:.0f} MiB = "
          f"{above / max(1, sw['unique_runs']):.0f} bytes per unique run (chunk budget: 200 per chunk)")  # fmt: skip


# ----------------------------------------------------------------------------------------------- main


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--measure":
        return _measure_main(sys.argv[3:] if sys.argv[2] == "--" else sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0.1,0.3,1,2", help="GB of text per corpus, comma-separated")
    parser.add_argument(
        "--parts", default="train,encode", help="train, encode, estimate, several, superword (comma-separated)"
    )
    parser.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "beam-bpe-scale"),
                        help="folder for the corpora (kept between runs) and the outputs")  # fmt: skip
    parser.add_argument("--pretokenizer", default="cl100k")
    parser.add_argument("--vocab-size", type=int, default=16384)
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    corpora = {float(s): build_corpus(work, float(s)) for s in args.sizes.split(",")}
    print(f"corpora in {work}; 2 cores shared: the load average is printed beside every figure")
    parts = args.parts.split(",")
    if "train" in parts:
        bench_train(work, corpora, pretokenizer=args.pretokenizer, vocab_size=args.vocab_size)
    if "encode" in parts and "bench_encode" in globals():
        globals()["bench_encode"](work, corpora)
    if "estimate" in parts:
        bench_estimate(work, corpora, pretokenizer=args.pretokenizer, vocab_size=args.vocab_size)
    if "several" in parts:
        bench_several(work, corpora)
    if "superword" in parts:
        bench_superword(work, corpora, pretokenizer=args.pretokenizer, vocab_size=args.vocab_size)


if __name__ == "__main__":
    main()
