"""The pre-flight on every input kind (pipeline/train/sample.py, pipeline/corpus/decompress.py StreamWindows): windows
inside compressed streams and row groups, many small files, and a range where the sample cannot decide. Expected
values come from the files themselves (decompressed with the standard library) and from bpe_core.count_chunks."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from conftest import data_path

import bpe_core
from pipeline.corpus.decompress import StreamWindows
from pipeline.corpus.plan import CorpusSpec, InputSpec, plan_corpus
from pipeline.train.estimate import estimate_corpus
from pipeline.train.sample import count_sample, sample_ranges, sample_window
from pipeline.train.settings import train_settings

SETTINGS = train_settings({}, {"vocab_size": 4096, "pretokenizer": "cl100k"})
COMPRESS = {
    "gzip": lambda b: gzip.compress(b, 6),
    "bz2": bz2.compress,
    "zstd": lambda b: zstandard.ZstdCompressor(level=3).compress(b),
}


def _lines(n: int, seed: int = 0) -> bytes:
    rng = random.Random(seed)
    words = [b"%x" % rng.getrandbits(20) for _ in range(5000)]
    return b"".join(b"%d %s\n" % (i, b" ".join(rng.choices(words, k=rng.randrange(0, 40)))) for i in range(n))


@pytest.mark.parametrize("compression", sorted(COMPRESS))
def test_stream_windows_are_whole_lines_spread_through_the_decompressed_bytes(compression):
    data = _lines(60000)
    packed = COMPRESS[compression](data)
    starts = [int(f * len(packed)) for f in (0.0, 0.3, 0.6, 0.9)]
    stream = StreamWindows(io.BytesIO(packed), compression)
    windows = list(stream.windows(starts, 8192))
    assert len(windows) == 4
    at = 0
    for w in windows:
        found = data.find(w, at)
        assert found >= 0 and (found == 0 or data[found - 1 : found] == b"\n") and w.endswith(b"\n")
        assert 8192 - 300 <= len(w) < 8192 + 300  # lines starting in the window; a line is at most ~250 bytes
        at = found + len(w)
    offsets = [data.find(w) / len(data) for w in windows]
    lag = 900_000 / len(data) if compression == "bz2" else 0.0  # bz2 gives a block's bytes after the whole block
    for share, offset in zip((0.0, 0.3, 0.6, 0.9), offsets, strict=True):
        assert share - 0.05 - lag < offset < share + 0.05, (offsets, compression)
    assert abs(stream.decompressed / stream.compressed - len(data) / len(packed)) < 0.25 * len(data) / len(packed)


def test_a_damaged_stream_ends_the_windows_without_raising():
    packed = gzip.compress(_lines(20000))
    windows = list(StreamWindows(io.BytesIO(packed[: len(packed) // 2]), "gzip").windows([0, len(packed) - 10], 4096))
    assert len(windows) == 1


def _jsonl(texts) -> bytes:
    return "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts).encode()


def _two_halves() -> tuple[list[str], list[str]]:
    rng = random.Random(5)
    latin = [" ".join(f"w{rng.randrange(50000)}" for _ in range(60)) for _ in range(4000)]
    cyrillic = [" ".join(f"ж{rng.randrange(50000)}" for _ in range(60)) for _ in range(4000)]
    return latin, cyrillic


@pytest.mark.parametrize("suffix", [".jsonl.gz", ".jsonl.zst", ".parquet"])
def test_a_file_whose_later_half_differs_is_sampled_from_both_halves(tmp_path, suffix):
    latin, cyrillic = _two_halves()
    path = tmp_path / f"corpus{suffix}"
    if suffix == ".parquet":
        pq.write_table(pa.table({"text": latin + cyrillic}), path, row_group_size=2000)
    else:
        path.write_bytes(COMPRESS["gzip" if suffix.endswith("gz") else "zstd"](_jsonl(latin + cyrillic)))
    spec = CorpusSpec("parquet" if suffix == ".parquet" else "jsonl")
    plan = plan_corpus([InputSpec(str(path))], spec)
    budget = 64 * 4096
    sample = sample_ranges(plan, budget, spec=spec)
    assert any(unit.windows for unit in sample)  # entered, not read whole
    tables, sizes, _, _ = count_sample(sample, spec, SETTINGS, piece=sample_window(budget))
    kinds = []
    for table in tables:
        chunks = [bytes(table.data[a:b]) for a, b in zip(table.offsets[:-1], table.offsets[1:], strict=True)]
        kinds.append(("w" in {c.strip()[:1].decode("utf-8", "replace") for c in chunks},
                      any("ж" in c.decode("utf-8", "replace") for c in chunks)))  # fmt: skip
    latin_only = sum(1 for a, b in kinds if a and not b)
    cyrillic_only = sum(1 for a, b in kinds if b and not a)
    assert latin_only >= 0.3 * len(kinds) and cyrillic_only >= 0.3 * len(kinds), (latin_only, cyrillic_only)
    assert sum(sizes) < 0.2 * sum(len(t.encode()) for t in latin + cyrillic)


def _shared_texts(names=("fortunes_multi", "multi_udhr", "docs_python_rst", "en_bible_kjv")) -> list[str]:
    texts = []
    for name in names:
        with gzip.open(data_path("corpora", f"{name}.jsonl.gz"), "rt", encoding="utf-8") as f:
            texts += [json.loads(line)["text"] for line in f]
    return texts


def _write(tmp_path, kind: str, texts: list[str]) -> tuple[str, CorpusSpec]:
    data = _jsonl(texts)
    if kind == "jsonl":
        (tmp_path / "c.jsonl").write_bytes(data)
        return str(tmp_path / "c.jsonl"), CorpusSpec("jsonl")
    if kind in ("gzip", "zstd"):
        path = tmp_path / f"c.jsonl.{'gz' if kind == 'gzip' else 'zst'}"
        path.write_bytes(COMPRESS[kind](data))
        return str(path), CorpusSpec("jsonl")
    if kind == "many":
        (tmp_path / "many").mkdir()
        step = len(texts) // 300 + 1
        for i in range(0, len(texts), step):
            (tmp_path / "many" / f"{i:07d}.jsonl.gz").write_bytes(gzip.compress(_jsonl(texts[i : i + step])))
        return str(tmp_path / "many" / "*.jsonl.gz"), CorpusSpec("jsonl")
    pq.write_table(pa.table({"text": texts}), tmp_path / "c.parquet", row_group_size=20000)
    return str(tmp_path / "c.parquet"), CorpusSpec("parquet")


def test_every_input_kind_predicts_what_the_jsonl_does(tmp_path):
    """The same corpus as .jsonl, .jsonl.gz, .jsonl.zst, Parquet and 300 small .jsonl.gz files, from the same text
    budget: each within 25% of the exact unique chunks (or a range holding them), and within 25% of the .jsonl's."""
    texts = _shared_texts()
    exact = len(bpe_core.count_chunks(texts, "cl100k"))
    budget = int(0.05 * len(_jsonl(texts)))
    got = {}
    for kind in ("jsonl", "gzip", "zstd", "parquet", "many"):
        path, spec = _write(tmp_path, kind, texts)
        est = estimate_corpus(plan_corpus([InputSpec(path)], spec), spec, SETTINGS, sample_bytes=budget)
        assert not est.exact
        got[kind] = est
        if est.decided:
            assert abs(est.chunks / exact - 1) < 0.25, (kind, est.chunks, exact)
        else:
            assert est.chunks_low <= exact <= est.chunks_high <= 2 * est.chunks_low, (kind, est, exact)
    for kind, est in got.items():
        assert abs(est.chunks / got["jsonl"].chunks - 1) < 0.25, (kind, est.chunks, got["jsonl"].chunks)


def _heavy_tailed(seed: int = 36) -> list[str]:
    """Prose with a heavy tail: 1% of the documents are random identifiers, their sizes Pareto (alpha 0.7: a few
    documents hold most of them), so which windows meet them decides the count."""
    rng = random.Random(seed)
    out = []
    for text in _shared_texts(("en_bible_kjv", "docs_python_rst")):
        out.append(text)
        if rng.random() < 0.01:
            n = min(150_000, int(200 * rng.paretovariate(0.7)))
            out.append(" ".join(f"{rng.getrandbits(40):x}" for _ in range(n)))
    return out


def test_a_heavy_tailed_corpus_gets_a_range_that_holds_the_exact_count(tmp_path):
    """Three draws of the heavy-tailed corpus: each figure within 25% of the exact count, or a range (high at most
    twice low) that holds it; at least one of them a range (the sample cannot decide there)."""
    ranges = 0
    for seed in (36, 37, 38):
        texts = _heavy_tailed(seed)
        exact = len(bpe_core.count_chunks(texts, "cl100k"))
        (tmp_path / str(seed)).mkdir()
        path, spec = _write(tmp_path / str(seed), "jsonl", texts)
        plan = plan_corpus([InputSpec(path)], spec)
        est = estimate_corpus(plan, spec, SETTINGS, sample_bytes=int(0.05 * plan.total_bytes))
        if est.decided:
            assert abs(est.chunks / exact - 1) < 0.25, (seed, est.chunks, exact)
            continue
        ranges += 1
        assert est.chunks_low <= exact <= est.chunks_high <= 2 * est.chunks_low, (seed, est, exact)
        assert est.loop_memory_low <= est.loop_memory <= est.loop_memory_high <= 2 * est.loop_memory_low
        assert "between" in est.line() and "cannot decide" in est.line()
    assert ranges >= 1


def test_a_range_whose_high_end_is_over_the_limit_is_warned_of(tmp_path):
    import dataclasses

    from pipeline.train.estimate import check_estimate

    path, spec = _write(tmp_path, "jsonl", ["hello world, hello again"] * 10)
    est = estimate_corpus(plan_corpus([InputSpec(path)], spec), spec, SETTINGS)
    assert est.decided and est.chunks_low == est.chunks == est.chunks_high  # exact: no range
    wide = dataclasses.replace(
        est, decided=False, loop_memory_low=est.loop_memory // 2, loop_memory_high=est.loop_memory * 2
    )
    limit = est.process_memory + est.loop_memory + est.loop_memory // 2  # the middle fits, the high end does not
    (warning,) = [w for w in check_estimate(wide, SETTINGS, limit) if "--vocab-size" not in w]
    assert "cannot decide" in warning and "--driver-memory" in warning
    assert [w for w in check_estimate(wide, SETTINGS, limit + est.loop_memory) if "--vocab-size" not in w] == []
    assert [w for w in check_estimate(est, SETTINGS, limit) if "--vocab-size" not in w] == []


def _seekable_zstd(data: bytes, frame: int) -> bytes:
    """zstd's seekable format (contrib/seekable_format), written here by its specification: independent frames of
    ``frame`` bytes, then a skippable frame holding the seek table (compressed, decompressed size per frame)."""
    import struct

    frames = [zstandard.ZstdCompressor(level=3).compress(data[i : i + frame]) for i in range(0, len(data), frame)]
    entries = b"".join(struct.pack("<II", len(f), len(data[i * frame : (i + 1) * frame])) for i, f in enumerate(frames))
    footer = struct.pack("<IBI", len(frames), 0, 0x8F92EAB1)
    return b"".join(frames) + struct.pack("<II", 0x184D2A5E, len(entries) + len(footer)) + entries + footer


def test_a_seekable_zstd_file_is_entered_at_the_windows_frames():
    data = _lines(60000)
    packed = _seekable_zstd(data, 1 << 16)
    starts = [int(f * len(packed)) for f in (0.0, 0.5, 0.9)]
    stream = StreamWindows(io.BytesIO(packed), "zstd", size=len(packed))
    windows = list(stream.windows(starts, 8192))
    offsets = [data.find(w) / len(data) for w in windows]
    assert all(w.endswith(b"\n") and data.find(w) >= 0 for w in windows)
    for share, offset in zip((0.0, 0.5, 0.9), offsets, strict=True):
        assert share - 0.05 < offset < share + 0.05, offsets
    assert stream.compressed < 0.1 * len(packed)  # three frames' worth, not the 90% of the file before the last
    through = StreamWindows(io.BytesIO(packed), "zstd")  # no size: read through, windows at about the same places
    read_through = [data.find(w) / len(data) for w in through.windows(starts, 8192)]
    assert all(abs(a - b) < 0.02 for a, b in zip(read_through, offsets, strict=True)), (read_through, offsets)
    assert through.compressed > 0.85 * len(packed)
