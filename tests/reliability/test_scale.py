"""Scale: memory stays within the configured limits, measured; work grows at most n log n, counted.

- the count stage (``max_distinct`` chunks per accumulator): tracemalloc peaks that do not grow with the input,
  only with the limit;
- the driver: ``--max-chunks`` bounds what it holds while reading the counts (measured in a fresh process), and a
  merge loop whose estimate exceeds the memory available is refused with the estimate, not started;
- a very long line and gzip bombs: the peak of a fresh process does not grow with the line or the expansion;
- a run without whitespace: heap operations of the merge kernel per byte stay constant as the run grows."""

from __future__ import annotations

import gzip
import json
import random
import tracemalloc
from pathlib import Path

import pytest
from conftest import ours_openai

import bpe_core
from bpe_core.train import native_loop
from pipeline.cli import main
from pipeline.corpus.plan import CorpusSpec, InputSpec, plan_corpus
from pipeline.corpus.readers import read_range
from pipeline.corpus.records import DocumentBatch
from pipeline.train.count import CountChunksFn
from pipeline.train.counts_files import load_counts

from .lib import FULL, MIB, peak_kb, run_cli_measured, write_bytes

SCALE, HOSTILE = "scale", "hostile inputs"


def words(n: int, seed: int) -> list[str]:
    """``n`` random words: nearly every chunk is distinct, the worst case for a count accumulator."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(4, 10))) for _ in range(n)]


def traced_peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# ------------------------------------------------------------------ the count stage and the reader
def _count(texts: list[str], max_distinct: int) -> tuple[int, int]:
    fn = CountChunksFn(bpe_core.PreTokenizer.from_spec("cl100k"), 4, max_distinct=max_distinct)
    fn.setup()
    batch = DocumentBatch(0, 0, True, "src", 0, 1, "offset", list(range(len(texts))), texts, [], len(texts), 0)
    outputs = largest = 0

    def run():
        nonlocal outputs, largest
        for key, value in fn.process(batch):  # each partial count is handed on, as the runner does
            outputs += 1
            if key != "stats":
                largest = max(largest, value.nbytes)

    # The counts live in the native counter (invisible to tracemalloc) until a flush hands them on as Arrow
    # tables: the largest table handed on is what the limit bounds; the Python heap must stay small as well.
    python_peak = traced_peak(run)
    assert python_peak < 4 << 20, python_peak
    return largest, outputs


def test_count_stage_memory_is_bounded_by_max_distinct_not_by_the_input(monkeypatch, reliability):
    import pipeline.train.count

    monkeypatch.setattr(pipeline.train.count, "SLICE_BYTES", 64 * 1024)  # 1 MiB in production: the same bound, smaller
    small = [" ".join(words(2_000, seed)) for seed in range(12)]  # ~170 kB of text, ~24k distinct chunks
    large = small + [" ".join(words(2_000, seed)) for seed in range(12, 48)]  # 4x more
    limit = 4_096
    peak_small, _ = _count(small, limit)
    peak_large, flushes = _count(large, limit)
    peak_unbounded, _ = _count(large, 1 << 22)
    assert flushes >= 4 * 8, "the accumulator was not flushed at its limit"
    assert peak_large < 1.25 * peak_small, (peak_small, peak_large)  # does not grow with the input
    assert peak_unbounded > 2 * peak_large  # the limit is what bounds it
    reliability.row(
        SCALE,
        f"count stage on {sum(map(len, large)) // 1000} kB of text of ~{len(large) * 2000 // 1000}k distinct chunks, "
        f"max_distinct={limit}",
        "memory bounded by max_distinct and the 1 MiB slice, not by the input "
        "and one slice of texts (4x the input: < 1.25x the peak); without the bound it grows",
        peak_traced_mib=round(peak_large / MIB, 1),
        peak_traced_mib_4x_smaller_input=round(peak_small / MIB, 1),
        peak_traced_mib_unbounded=round(peak_unbounded / MIB, 1),
    )


# ------------------------------------------------------------------ the driver
def counted(root: Path) -> Path:
    """Counts of ~190k distinct chunks, from the counting pipeline."""
    text = "\n".join(" ".join(words(40, i)) for i in range(5_000)) + "\n"
    source = write_bytes(root / "words.txt", text.encode())
    assert main(["train", "--input", str(source), "--format", "text", "--counts-only", "--count-shards", "4",
                 "--range-bytes", str(MIB), "--out", str(root / "out")]) == 0  # fmt: skip
    return root / "out"


def test_driver_memory_is_bounded_by_max_chunks_and_a_loop_that_would_not_fit_is_refused(
    tmp_path, monkeypatch, capsys, reliability
):
    counts_out = counted(tmp_path)
    full, _ = load_counts(str(counts_out / "counts"))
    k = 10_000
    # 1. reading the counts holds at most 2k chunks plus a record batch, and keeps exactly the top k
    peaks, results = {}, {}
    for limit in (0, k):
        peaks[limit] = traced_peak(
            lambda limit=limit: results.__setitem__(limit, load_counts(str(counts_out / "counts"), max_chunks=limit))
        )
    kept, report = results[k]
    expected = dict(sorted(full.items(), key=lambda kv: (-kv[1], kv[0]))[:k])
    assert dict(kept) == expected  # pruning while reading gives exactly the top k
    dropped = report["dropped_over_max_chunks"]
    assert dropped["chunks"] == len(full) - k and dropped["occurrences"] == sum(full.values()) - sum(expected.values())
    assert dropped["threshold_count"] == min(expected.values())
    assert peaks[k] < peaks[0] / 2, peaks  # 2k chunks + one record batch (65,536 rows) against all of them
    reliability.row(
        SCALE,
        f"driver reading {len(full):,} distinct chunks with --max-chunks {k:,}",
        "holds at most 2 x max_chunks chunks plus one record batch of 65,536 (pruned as it reads), and keeps "
        "exactly the top chunks the unbounded read keeps, with the same report",
        peak_traced_mib=round(peaks[k] / MIB, 1),
        peak_traced_mib_unbounded=round(peaks[0] / MIB, 1),
    )
    # 2. the same driver in a fresh process: its peak falls with the limit
    fresh = {}
    for limit in (0, k):
        run = run_cli_measured(
            "train",
            "--from-counts",
            counts_out,
            "--vocab-size",
            600,
            "--max-chunks",
            limit,
            "--out",
            tmp_path / f"o{limit}",
        )
        assert run.returncode == 0, run.stderr[-3000:]
        fresh[limit] = peak_kb(run)
    assert fresh[k] < fresh[0], fresh
    reliability.row(SCALE, f"driver (read counts + merge loop) on {len(full):,} chunks with and without --max-chunks "
                    f"{k:,}, each in a fresh process", "the peak falls with the configured limit",
                    peak_mib=fresh[k] // 1024, peak_mib_unbounded=fresh[0] // 1024)  # fmt: skip
    # 3. a merge loop whose estimate exceeds the memory available is refused with the estimate, before it starts
    estimate = native_loop.train_memory_estimate(full)[2]
    small = native_loop.train_memory_estimate(expected)[2]
    limit = (estimate + small) // 2  # a machine on which the full loop does not fit and a filtered one does
    monkeypatch.setattr(native_loop, "available_memory", lambda: limit)
    out = tmp_path / "refused"
    args = ["train", "--from-counts", str(counts_out), "--vocab-size", "1000", "--out", str(out)]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    gib = f"{estimate / (1 << 30):.2f} GiB"
    assert f"needs about {gib}" in err and "--max-chunks" in err and "error:" in err, err
    assert not (out / "COMPLETED").exists() and not (out / "tokenizer.bpe").exists()
    assert main(args + ["--max-chunks", str(k)]) == 0  # the fix the message names
    assert json.loads((out / "manifest.json").read_text())["chunk_filter"]["chunks_kept"] == k
    reliability.row(SCALE, f"driver training on {len(full):,} chunks with {limit / MIB:.0f} MiB available "
                    "(available memory patched)", "refused before the loop starts: exit code 2, the estimate "
                    f"({gib}) and the fix (--min-chunk-count, --max-chunks) printed, no tokenizer files, no "
                    f"COMPLETED; the same command with --max-chunks {k} fits and finishes",
                    estimate_mib=round(estimate / MIB), limit_mib=round(limit / MIB))  # fmt: skip


# ------------------------------------------------------------------ long lines, gzip bombs (fresh processes)
def _line_file(path: Path, size: int, unit: bytes = b"a") -> Path:
    with open(path, "wb") as f:
        f.write(b"short first document\n")
        block = unit * (MIB // len(unit))
        for _ in range(size // MIB):
            f.write(block)
        f.write(b"\nshort last document\n")
    return path


def _measured(path: Path, out: Path, *command) -> int:
    command = command or ("train", "--counts-only")
    run = run_cli_measured(*command, "--input", path, "--format", "text", "--out", out)
    assert run.returncode == 0, run.stderr[-3000:]
    return peak_kb(run)


def _dead_reasons(out: Path) -> list[str]:
    return [
        json.loads(line)["reason"]
        for p in sorted((out / "dead_letters").glob("*.jsonl"))
        for line in p.read_text().splitlines()
    ]


def test_memory_peaks_do_not_grow_with_a_long_line_or_a_gzip_bomb(tmp_path, r50k_artifact, reliability):
    """Each input in a fresh process (in-process runner: the process holds the whole job), against a 2-line
    corpus: a 160 MiB line (1 GiB under BEAM_BPE_FULL=1), gzip bombs of zeros and of empty lines, and, for scale,
    a document under the limit."""
    encode = ("encode", "--tokenizer", r50k_artifact)
    base = _measured(_line_file(tmp_path / "base.txt", 0), tmp_path / "b")
    base_encode = _measured(tmp_path / "base.txt", tmp_path / "be", *encode)
    size = (1 << 30) if FULL else 160 * MIB
    line = _line_file(tmp_path / "line.txt", size)
    peak_line = _measured(line, tmp_path / "l")
    peak_line_encode = _measured(line, tmp_path / "le", *encode)
    line.unlink()
    reason = f"document of {size} bytes is longer than --max-document-bytes {32 * MIB}"
    assert _dead_reasons(tmp_path / "l") == _dead_reasons(tmp_path / "le") == [reason]
    assert peak_line - base < 48 * 1024 and peak_line_encode - base_encode < 48 * 1024, (
        base,
        peak_line,
        base_encode,
        peak_line_encode,
    )
    reliability.row(
        HOSTILE,
        f"a line of {size // MIB} MiB between two short documents, through both pipelines "
        "(4 MiB ranges, 40 of them inside the line)",
        "a dead letter naming its size; the peak of the "
        "process stays within 48 MiB of a 2-line corpus's: it does not grow with the line",
        peak_mib_train=peak_line // 1024,
        peak_mib_train_two_line_corpus=base // 1024,
        peak_mib_encode=peak_line_encode // 1024,
        peak_mib_encode_two_line_corpus=base_encode // 1024,
    )
    zeros = (1 << 30) if FULL else 256 * MIB
    bomb = tmp_path / "zeros.txt.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        for _ in range(zeros // MIB):
            f.write(bytes(MIB))
        f.write(b"\nafter the bomb\n")
    peak_zeros = _measured(bomb, tmp_path / "z")
    m = json.loads((tmp_path / "z" / "manifest.json").read_text())
    assert (m["documents_read"], m["dead_letters"]) == (2, 1) and peak_zeros - base < 48 * 1024, (base, peak_zeros)
    reliability.row(HOSTILE, f"gzip bomb: a {bomb.stat().st_size // 1024} KiB file expanding to {zeros // MIB} MiB of "
                    "zeros in one line", "one dead letter (longer than --max-document-bytes), the next line counted; "
                    "peak within 48 MiB of a 2-line corpus's", peak_mib=peak_zeros // 1024)  # fmt: skip
    counts = (250_000, 20_000_000 if FULL else 1_000_000)
    newlines = {n: _measured(write_bytes(tmp_path / f"nl{n}.txt.gz", b"\n" * n), tmp_path / f"n{n}") for n in counts}
    assert json.loads((tmp_path / f"n{counts[1]}" / "manifest.json").read_text())["documents_counted"] == counts[1]
    assert newlines[counts[1]] - newlines[counts[0]] < 16 * 1024, newlines
    reliability.row(HOSTILE, f"gzip bomb of empty lines: {' and '.join(f'{n:,}' for n in counts)} empty documents",
                    "every empty line a document (counted); batches cut by count as well as bytes, so the peak does "
                    "not grow with the number of lines (< 16 MiB apart)", peak_mib=newlines[counts[1]] // 1024,
                    peak_mib_fewer_lines=newlines[counts[0]] // 1024, inputs=len(counts))  # fmt: skip
    doc = 4 * MIB
    peak_doc = _measured(_line_file(tmp_path / "words.txt", doc, b"ab "), tmp_path / "w")
    per_byte = (peak_doc - base) * 1024 / doc
    assert per_byte < 40, per_byte
    reliability.row(
        HOSTILE,
        f"a {doc // MIB} MiB document of 2-letter words ({doc // 3 / 1e6:.1f} M pieces), under the document limit",
        "counted; memory about proportional to the document (< 40 bytes per byte), "
        "so the default --max-document-bytes (32 MiB) bounds what one document adds to a worker",
        bytes_per_byte=round(per_byte, 1),
        peak_mib=peak_doc // 1024,
    )


def test_a_long_line_is_read_a_bounded_number_of_times(tmp_path, monkeypatch, reliability):
    """Operation count: bytes the reader pulls from the file, for one line cut into 128 ranges (before the fix,
    each range read from its start to the end of the line: about 64 times the file)."""
    import fsspec

    path = _line_file(tmp_path / "line.txt", 8 * MIB)
    size = path.stat().st_size
    pulled = [0]
    real_open = fsspec.open

    class Counting:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            self.inner = self.f.__enter__()
            return self

        def __exit__(self, *exc):
            return self.f.__exit__(*exc)

        def read(self, n=-1):
            data = self.inner.read(n)
            pulled[0] += len(data)
            return data

        def seek(self, *args):
            return self.inner.seek(*args)

    monkeypatch.setattr(fsspec, "open", lambda *a, **k: Counting(real_open(*a, **k)))
    spec = CorpusSpec("text", max_document_bytes=MIB)
    plan = plan_corpus([InputSpec(str(path))], spec, range_bytes=64 * 1024)
    batches = [b for r in plan.ranges for b in read_range(r, spec)]
    assert sum(len(b.texts) for b in batches) == 2 and sum(len(b.dead_letters) for b in batches) == 1
    assert pulled[0] <= 3 * size, pulled[0] / size
    reliability.row(HOSTILE, f"one {size // MIB} MiB line cut into {len(plan.ranges)} ranges of 64 KiB",
                    "each byte read at most about twice (bytes pulled <= 3 x the file): work linear in the line",
                    bytes_pulled_per_file_byte=round(pulled[0] / size, 2))  # fmt: skip


@pytest.mark.parametrize("backend", ["native", "python"])
def test_a_run_without_whitespace_costs_n_log_n(backend, reliability):
    """Heap operations of the merge kernel per byte of one piece (a run of letters is one pre-token): constant as
    the run grows, so the work is O(n log n). The 1 MiB case of tests/core/test_encode.py bounds one size; this one
    shows the growth, up to 10 MiB under BEAM_BPE_FULL=1 (~20 s: about 1 us per heap operation)."""
    import pickle

    tok = pickle.loads(pickle.dumps(ours_openai("cl100k"))).use_backend(backend)
    base = 16 * 1024 if backend == "python" else 128 * 1024
    sizes = [base, 2 * base, 4 * base] + ([10 * MIB] if FULL and backend == "native" else [])
    per_byte = {}
    for n in sizes:
        for unit in (b"a", b"xy", "日".encode()):
            data = unit * (n // len(unit))
            stats = [0, 0]
            ids = tok.encode_piece_bytes(data, stats=stats)
            assert tok.decode_bytes(ids) == data and stats[1] <= stats[0] <= 3 * len(data)
            per_byte[n, unit] = stats[0] / len(data)
    for unit in (b"a", b"xy", "日".encode()):
        assert per_byte[sizes[-1], unit] <= 1.05 * per_byte[sizes[0], unit] + 0.01, per_byte
    reliability.row(
        HOSTILE,
        f"{backend}: runs of 'a', 'xy' and '日' without whitespace of "
        f"{', '.join(f'{s // 1024} KiB' for s in sizes)} (cl100k)",
        "one piece each; heap pushes <= 3 per byte and pops <= pushes at every size, constant per byte as "
        "the run grows: O(n log n) work",
        pushes_per_byte_largest=round(max(v for (n, _), v in per_byte.items() if n == sizes[-1]), 2),
        inputs=3 * len(sizes),
    )
