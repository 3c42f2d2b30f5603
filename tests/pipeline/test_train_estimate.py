"""The training pre-flight (pipeline/train/estimate.py): the sample it reads, its exact figures on a corpus within
the sample, its prediction from a 5% sample against an independent count, and the refusal of a driver over
--driver-memory with settings that fit."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import data_path
from pipeline_testlib import run_cli

import bpe_core
from pipeline.corpus.plan import CorpusSpec, InputSpec, plan_corpus
from pipeline.errors import UsageError
from pipeline.train import estimate
from pipeline.train.estimate import check_estimate, estimate_corpus, sample_ranges
from pipeline.train.settings import train_settings

SPEC = CorpusSpec("jsonl")


def _concatenated(tmp_path, names) -> tuple[str, list[str]]:
    path, texts = tmp_path / "corpus.jsonl", []
    with open(path, "w", encoding="utf-8") as out:
        for name in names:
            with gzip.open(data_path("corpora", f"{name}.jsonl.gz"), "rt", encoding="utf-8") as f:
                for line in f:
                    texts.append(json.loads(line)["text"])
                    out.write(json.dumps({"text": texts[-1]}, ensure_ascii=False) + "\n")
    return str(path), texts


def _words(texts) -> tuple[int, int]:
    counts = bpe_core.count_chunks(texts, "cl100k")
    return len(counts), sum(1 for c in counts if len(c) >= 2)


def test_sample_is_spread_windows_inside_the_ranges(tmp_path):
    path, _ = _concatenated(tmp_path, ["en_bible_kjv", "fortunes_multi"])
    plan = plan_corpus([InputSpec(path)], SPEC, range_bytes=1 << 20)
    sample = sample_ranges(plan, 2 << 20)
    assert 20 <= len(sample) <= 64
    starts = [r.start for r, _, _ in sample]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    by_index = {r.index: r for r in plan.ranges}
    for rng, size, windows in sample:
        assert windows == ()  # plain JSONL: byte windows, nothing entered
        whole = by_index[rng.index]
        assert whole.start <= rng.start < rng.end <= whole.end and size == rng.end - rng.start
    assert starts[0] < plan.total_bytes / 10 and starts[-1] > plan.total_bytes * 0.9  # both ends of the corpus
    assert [(r, r.end - r.start, ()) for r in plan.ranges] == sample_ranges(plan, plan.total_bytes)


def test_a_corpus_within_the_sample_is_counted_exactly(tmp_path):
    path, texts = _concatenated(tmp_path, ["en_bible_kjv"])
    settings = train_settings({}, {"vocab_size": 4096, "pretokenizer": "cl100k"})
    est = estimate_corpus(plan_corpus([InputSpec(path)], SPEC), SPEC, settings)
    chunks, words = _words(texts)
    assert est.exact and (est.chunks, est.words) == (chunks, words)
    assert est.text_bytes == sum(len(t.encode("utf-8")) for t in texts)


def test_five_percent_sample_predicts_unique_chunks_within_a_quarter(tmp_path):
    """Five kinds of text in long runs (a prefix would be no sample): predicted from 5% of the bytes."""
    path, texts = _concatenated(tmp_path, ["fortunes_multi", "multi_udhr", "docs_python_rst", "en_bible_kjv"])
    plan = plan_corpus([InputSpec(path)], SPEC)
    settings = train_settings({}, {"vocab_size": 4096, "pretokenizer": "cl100k"})
    est = estimate_corpus(plan, SPEC, settings, sample_bytes=int(0.05 * plan.total_bytes))
    chunks, _ = _words(texts)
    assert not est.exact and est.sample_text_bytes < 0.08 * est.text_bytes
    assert abs(est.chunks / chunks - 1) < 0.25, (est.chunks, chunks)


def test_a_driver_over_the_limit_is_refused_with_settings_that_fit(tmp_path):
    path, _ = _concatenated(tmp_path, ["en_bible_kjv", "fortunes_multi"])
    plan = plan_corpus([InputSpec(path)], SPEC)
    settings = train_settings({}, {"vocab_size": 8192, "pretokenizer": "cl100k"})
    est = estimate_corpus(plan, SPEC, settings)
    limit = est.process_memory + (est.loop_memory * 2) // 3
    with pytest.raises(UsageError, match="--driver-memory") as info:
        check_estimate(est, settings, limit)
    message = str(info.value)
    max_chunks = int(message.split("--max-chunks ")[1].split()[0].replace(",", ""))
    min_count = int(message.split("--min-chunk-count ")[1].split(";")[0].split()[0].replace(",", ""))
    for flags in ({"max_chunks": max_chunks}, {"min_chunk_count": min_count}):
        fitted = estimate_corpus(plan, SPEC, train_settings({}, {"vocab_size": 8192, **flags}))
        assert fitted.loop_memory + est.process_memory <= limit, flags
    assert check_estimate(est, settings, 0) == []  # 0: no limit
    assert check_estimate(est, settings, est.driver_memory * 2) == []


def test_a_vocabulary_the_corpus_cannot_reach_is_named(tmp_path):
    path = tmp_path / "tiny.jsonl"
    path.write_text(json.dumps({"text": "hello world, hello again"}) + "\n")
    settings = train_settings({}, {"vocab_size": 5000, "pretokenizer": "cl100k"})
    est = estimate_corpus(plan_corpus([InputSpec(str(path))], SPEC), SPEC, settings)
    (warning,) = check_estimate(est, settings, 0)
    assert "--vocab-size 5,000" in warning and f"{est.reachable_vocab:,}" in warning
    assert est.reachable_vocab < 300


def _cli_corpus(tmp_path) -> str:
    path, _ = _concatenated(tmp_path, ["en_bible_kjv"])
    return path


def test_train_estimate_prints_the_report_and_writes_nothing(tmp_path, capsys):
    path = _cli_corpus(tmp_path)
    assert run_cli("train", "--estimate", "--input", path, "--vocab-size", "4096", "--driver-memory", "64GiB") == 0
    out = capsys.readouterr().out
    assert "unique chunks" in out and "driver memory" in out and "--driver-memory 64.0 GiB" in out
    assert "fits: the run would go ahead" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl"]


def test_a_run_over_driver_memory_stops_before_the_count(tmp_path, capsys, monkeypatch):
    """A limit 45 MB above the launcher (taken as 100 MB: pytest's own size varies): the merge loop of 220k words
    (about 70 MB) does not fit, fewer would."""
    monkeypatch.setattr(estimate, "process_memory", lambda: 100 << 20)
    (path, _), out = _concatenated(tmp_path, ["en_bible_kjv", "fortunes_multi"]), tmp_path / "out"
    limit = str((100 + 45) << 20)
    code = run_cli("train", "--input", path, "--vocab-size", "4096", "--out", out, "--driver-memory", limit)
    err = capsys.readouterr().err
    assert code == 2 and "--driver-memory" in err and "--max-chunks" in err and "--min-chunk-count" in err
    assert not (out / "counts").exists() and not (out / "COMPLETED").exists()


def test_every_counting_run_starts_with_the_estimate(tmp_path, capsys):
    path, out = _cli_corpus(tmp_path), tmp_path / "out"
    assert run_cli("train", "--input", path, "--vocab-size", "1024", "--out", out, "--no-progress") == 0
    stages = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith('{"')]
    names = [s["stage"] for s in stages]
    assert names.index("estimate") < names.index("count")
    estimate = next(s for s in stages if s["stage"] == "estimate")
    manifest = json.loads((out / "manifest.json").read_text())
    assert estimate["exact"] and manifest["estimate"]["chunks"] == estimate["unique_chunks"]
    # the whole corpus was the sample: the words predicted are the chunks of two bytes or more the count kept
    kept = manifest["chunk_filter"]["chunks_kept"]
    assert kept - 256 <= manifest["estimate"]["words"] <= kept


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--driver-memory", "lots"], "--driver-memory must be a size"),
        (["--driver-memory", "1GiB", "--from-counts", "somewhere"], "drop --driver-memory"),
        (["--estimate", "--counts-only"], "--counts-only would do nothing"),
    ],
)
def test_driver_memory_and_estimate_flags_refused_with_the_fix(tmp_path, capsys, flags, message):
    args = ["train", "--vocab-size", "1024", *flags]
    if "--from-counts" not in flags:
        args += ["--input", _cli_corpus(tmp_path)]
    if "--estimate" not in flags:
        args += ["--out", str(tmp_path / "out")]
    assert run_cli(*args) == 2
    assert message in capsys.readouterr().err
