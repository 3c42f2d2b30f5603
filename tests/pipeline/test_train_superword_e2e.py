"""End to end: ``beam-bpe train --superword-merges N`` against bpe_core.train_superword in-process, across
shardings and runners; runs/ reused by --from-counts only with the same word model; flags refused with reasons."""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import pytest
from conftest import corpus
from pipeline_testlib import manifest, run_cli, shard_docs, write_jsonl

import bpe_core
from bpe_core.train.trainer import train_superword

VOCAB, SUPER = 900, 150
SPECIAL = "<|endoftext|>"
MULTI_PROCESS = ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return corpus("en_bible_kjv", 300) + corpus("docs_python_rst", 60)


@pytest.fixture(scope="module")
def reference(docs) -> bytes:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = train_superword(bpe_core.count_chunks(docs, "cl100k"), VOCAB, SUPER, docs, special_tokens=[SPECIAL])
    from bpe_core.formats.artifact import dumps_artifact

    return dumps_artifact(tok)


def _inputs(root: Path, docs: list[str], n: int) -> list[str]:
    paths = [str(write_jsonl(root / f"part-{i:02d}.jsonl", part)) for i, part in enumerate(shard_docs(docs, n))]
    random.Random(n).shuffle(paths)
    return paths


def _train(tmp_path: Path, inputs: list[str], *extra, out: str = "out") -> Path:
    args = ["train", "--format", "jsonl", "--vocab-size", VOCAB, "--superword-merges", SUPER]
    args += ["--special-token", SPECIAL, "--out", tmp_path / out]
    for path in inputs:
        args += ["--input", path]
    assert run_cli(*args, *extra) == 0
    return tmp_path / out


@pytest.mark.parametrize(
    ("shards", "beam_args"),
    [(1, []), (3, ["--direct_running_mode", "in_memory"]), (7, []), (3, MULTI_PROCESS)],
    ids=["1-shard", "3-shards-in-memory", "7-shards", "3-shards-multi-processing-2-workers"],
)
def test_artifact_equals_in_process_for_any_sharding_and_runner(tmp_path, docs, reference, shards, beam_args):
    out = _train(tmp_path, _inputs(tmp_path / "in", docs, shards), "--count-shards", "3", *beam_args)
    assert (out / "tokenizer.bpe").read_bytes() == reference
    assert not (out / "tokenizer.tiktoken").exists() and not (out / "tokenizer.json").exists()
    m = manifest(out)
    assert m["n_vocab"] == VOCAB and m["superword"]["supermerges"] >= SUPER and m["superword"]["not_written"]
    assert sorted(p.name for p in (out / "runs").glob("*.parquet")) == [
        f"runs-{i:05d}-of-00003.parquet" for i in range(3)
    ]


def test_counts_only_then_from_counts_reuses_runs(tmp_path, docs, reference, capsys):
    inputs = _inputs(tmp_path / "in", docs, 2)
    counted = _train(tmp_path, inputs, "--counts-only", out="counted")
    assert (counted / "runs" / "_word_model.json").exists() and not (counted / "tokenizer.bpe").exists()
    args = ["train", "--from-counts", counted, "--vocab-size", VOCAB, "--superword-merges", SUPER]
    assert run_cli(*args, "--special-token", SPECIAL, "--out", tmp_path / "again") == 0
    assert (tmp_path / "again" / "tokenizer.bpe").read_bytes() == reference
    # another word model (another size): the runs do not fit, and the run says so
    assert run_cli(*args[:-1], SUPER + 10, "--special-token", SPECIAL, "--out", tmp_path / "other") == 2
    assert "no runs made with this word model" in capsys.readouterr().err


def test_from_counts_with_another_word_model_counts_the_runs_again(tmp_path, docs, capsys):
    """runs/ of another word model (or none): with --input, phase 2 runs over the corpus and the artifact is the
    in-process one of that size; without a superword flag --input beside --from-counts stays refused."""
    inputs = _inputs(tmp_path / "in", docs, 2)
    counted = _train(tmp_path, inputs, "--counts-only", out="counted")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = train_superword(bpe_core.count_chunks(docs, "cl100k"), VOCAB, SUPER + 10, docs, special_tokens=[SPECIAL])
    from bpe_core.formats.artifact import dumps_artifact

    args = ["train", "--from-counts", counted, "--vocab-size", VOCAB, "--special-token", SPECIAL, "--format", "jsonl"]
    args += sum((["--input", p] for p in inputs), [])
    assert run_cli(*args, "--superword-merges", SUPER + 10, "--out", tmp_path / "other") == 0
    assert (tmp_path / "other" / "tokenizer.bpe").read_bytes() == dumps_artifact(tok)
    assert manifest(tmp_path / "other")["superword"]["runs_counted"]["documents_counted"] == len(docs)
    assert (tmp_path / "other" / "runs" / "_word_model.json").exists()
    # the same again into the counts' own folder, after removing its runs: counted into it, then reused
    (counted / "runs" / "_word_model.json").unlink()
    assert run_cli(*args, "--superword-merges", SUPER + 10, "--out", counted, "--overwrite") == 0
    assert (counted / "tokenizer.bpe").read_bytes() == dumps_artifact(tok)
    assert "runs_counted" in manifest(counted)["superword"]
    assert run_cli(*args, "--superword-merges", SUPER + 10, "--out", counted, "--overwrite") == 0
    assert "runs_counted" not in manifest(counted)["superword"]  # the runs it counted were reused
    assert (counted / "tokenizer.bpe").read_bytes() == dumps_artifact(tok)
    capsys.readouterr()
    assert run_cli(*args, "--out", tmp_path / "plain") == 2
    assert "do not also pass --input" in capsys.readouterr().err


def test_min_run_count_prunes_runs_with_an_exact_report(tmp_path, docs):
    """--min-run-count 3: the artifact of the in-process training on the runs counted 3 times or more, and the
    manifest's report counts exactly what was dropped and kept."""
    from bpe_core.formats.artifact import dumps_artifact
    from bpe_core.superword.reference import count_runs

    counts = bpe_core.count_chunks(docs, "cl100k")
    word = bpe_core.train(counts, VOCAB - SUPER, special_tokens=[SPECIAL])
    runs = count_runs(docs, word)
    kept = {k: n for k, n in runs.items() if n >= 3}
    assert 0 < len(kept) < len(runs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = train_superword(counts, VOCAB, SUPER, run_counts=kept, special_tokens=[SPECIAL])
    out = _train(tmp_path, _inputs(tmp_path / "in", docs, 3), "--min-run-count", "3")
    assert (out / "tokenizer.bpe").read_bytes() == dumps_artifact(tok)
    report = manifest(out)["superword"]
    assert report["runs_reduced"] == len(runs) and report["occurrences_reduced"] == sum(runs.values())
    assert report["unique_runs"] == len(kept) and report["run_occurrences"] == sum(kept.values())
    low = {"runs": len(runs) - len(kept), "occurrences": sum(runs.values()) - sum(kept.values())}
    assert report["dropped_below_min_run_count"] == low and report["min_run_count"] == 3
    assert manifest(out)["settings"]["min_run_count"] == 3


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--vocab-size", "900", "--min-run-count", "2"], "prunes the runs of a superword"),
        (["--vocab-size", "900", "--superword-merges", "50", "--min-run-count", "-1"], "non-negative"),
        (["--superword-merges", "50", "--min-run-count", "2", "--counts-only"], "--min-run-count apply"),
        (["--vocab-size", "900,1000", "--superword-merges", "50"], "--superword-from"),
        (["--vocab-size", "900", "--superword-merges", "700"], "fewer supermerges"),
        (["--vocab-size", "900", "--superword-merges", "50", "--superword-from", "700"], "give one"),
        (["--vocab-size", "900", "--superword-from", "950"], "smallest vocab_size"),
    ],
)
def test_bad_superword_flags_are_refused(tmp_path, capsys, extra, message):
    path = write_jsonl(tmp_path / "in.jsonl", ["the cat sat on the mat"])
    assert run_cli("train", "--input", path, "--out", tmp_path / "out", *extra) == 2
    assert message in capsys.readouterr().err


def test_superword_from_gives_every_size_as_a_truncation(tmp_path, docs):
    out = tmp_path / "out"
    inputs = _inputs(tmp_path / "in", docs, 2)
    args = ["train", "--format", "jsonl", "--vocab-size", "850,900", "--superword-from", 750, "--out", out]
    assert run_cli(*args, *sum((["--input", p] for p in inputs), [])) == 0
    big = bpe_core.Tokenizer.load(str(out / "v900" / "tokenizer.bpe"))
    small = bpe_core.Tokenizer.load(str(out / "v850" / "tokenizer.bpe"))
    assert big.superword.word_size == small.superword.word_size == 750
    assert small.superword.merges == big.superword.merges[: len(small.superword.merges)]
    assert big.truncated(850).digest() == small.digest()


def test_dask_runner_gives_the_same_artifact(tmp_path, docs, reference):
    """Both passes on a dask.distributed LocalCluster (2 worker processes): the in-process artifact."""
    from conftest import DASK, require_module

    distributed = require_module("distributed", **DASK)
    inputs = _inputs(tmp_path / "in", docs, 3)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=":0") as cluster:  # fmt: skip
        out = _train(tmp_path, inputs, "--runner", "DaskRunner", "--dask_client_address", cluster.scheduler_address)
    assert (out / "tokenizer.bpe").read_bytes() == reference


def test_report_shows_the_plain_tokenizer_beside_it(tmp_path, docs):
    import json

    inputs = _inputs(tmp_path / "in", docs, 2)
    out = _train(tmp_path, inputs, "--report", "--eval-fraction", "0.1")
    rows = {t["label"]: t for t in json.loads((out / "report.json").read_text())["tokenizers"]}
    assert rows[f"v{VOCAB}"]["role"] == "trained" and rows[f"plain v{VOCAB}"]["role"] == "plain"
    assert rows[f"v{VOCAB}"]["n_vocab"] == rows[f"plain v{VOCAB}"]["n_vocab"] == VOCAB
    assert rows[f"v{VOCAB}"]["bytes_per_token"] > rows[f"plain v{VOCAB}"]["bytes_per_token"]
    plain = bpe_core.Tokenizer.load(str(out / "plain" / f"v{VOCAB}" / "tokenizer.bpe"))
    assert plain.superword is None
