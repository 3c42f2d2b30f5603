"""count-tokens as a Beam job (pipeline/encode/count_tokens.py): the same per-file rows and total on the in-process,
multi-process and Dask runners, equal to an independent count (the tokenizer's own encode, document by document)."""

from __future__ import annotations

import json

import pytest
from conftest import DASK, corpus, data_path, require_module
from pipeline_testlib import run_cli, write_jsonl

from pipeline.corpus.plan import CorpusSpec, InputSpec, plan_corpus
from pipeline.encode.count_tokens import COLUMNS, count_tokens_job
from pipeline.encode.tokenizer import open_tokenizer

MULTI = ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """Three files (one gzip, one with a line that is not JSON, one empty), their plan, the tokenizer, and the
    expected rows counted without the pipeline."""
    folder = tmp_path_factory.mktemp("count")
    docs = {
        "a.jsonl": corpus("fortunes_multi", 600),
        "b.jsonl.gz": corpus("en_bible_kjv", 12),
        "c.jsonl": [],
    }
    paths = {}
    for name, texts in docs.items():
        extra = [b'{"text": "never closed'] if name == "a.jsonl" else []
        paths[name] = str(write_jsonl(folder / name, texts, extra=extra))
    tok, ref = open_tokenizer(str(data_path("tiktoken", "cl100k_base.tiktoken")), "cl100k")
    spec = CorpusSpec("jsonl")
    plan = plan_corpus([InputSpec(str(folder / "*"))], spec, range_bytes=16384)
    expected = []
    for name in sorted(docs):
        texts = docs[name]
        expected.append({"file": paths[name], "documents": len(texts),
                         "bytes": sum(len(t.encode("utf-8")) for t in texts),
                         "tokens": sum(len(tok.encode_ordinary(t)) for t in texts),
                         "dead_letters": int(name == "a.jsonl")})  # fmt: skip
    return plan, spec, ref, expected


def _check(result: dict, expected: list[dict]) -> None:
    assert result["files"] == expected
    assert result["total"] == {key: sum(row[key] for row in expected) for key in COLUMNS}
    assert result["total"]["tokens"] > 20_000 and result["total"]["dead_letters"] == 1


@pytest.mark.parametrize("beam_args", [[], MULTI], ids=["in_process", "multi_processing"])
def test_count_tokens_job_equals_the_independent_count(job, beam_args):
    plan, spec, ref, expected = job
    assert len(plan.ranges) > 10  # several ranges per file: the per-file sums combine partial rows
    _check(count_tokens_job(plan, spec, ref, beam_args), expected)


def test_count_tokens_job_on_dask(job):
    distributed = require_module("distributed", **DASK)
    plan, spec, ref, expected = job
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=":0") as cluster:  # fmt: skip
        args = ["--runner", "DaskRunner", "--dask_client_address", cluster.scheduler_address]
        _check(count_tokens_job(plan, spec, ref, args), expected)


@pytest.mark.parametrize(
    "beam_args",
    [["--runner", "FnApiRunner"], ["--direct_running_mode", "in_memory"], MULTI, ["--workers", "2"]],
    ids=["fnapi", "in_memory", "multi_processing", "workers"],
)
def test_cli_with_beam_options_prints_the_local_paths_json(job, beam_args, capsys):
    """``count-tokens --json``: only JSON on stdout, the same document with and without Beam options."""
    plan, _, _, expected = job
    folder = str(plan.files[0].path).rsplit("/", 1)[0]
    tokenizer = str(data_path("tiktoken", "cl100k_base.tiktoken"))
    args = ["count-tokens", "--tokenizer", tokenizer, "--input", f"{folder}/*", "--range-bytes", "16384", "--json"]
    assert run_cli(*args) == 0
    local = json.loads(capsys.readouterr().out)
    assert run_cli(*args, *beam_args) == 0
    piped = json.loads(capsys.readouterr().out)
    assert piped == local and local["files"] == expected and local["tokenizer"] == tokenizer


def test_cli_table_is_the_same_with_beam_options(job, capsys):
    plan, _, _, _ = job
    folder = str(plan.files[0].path).rsplit("/", 1)[0]
    args = ["count-tokens", "--tokenizer", str(data_path("tiktoken", "cl100k_base.tiktoken")), "--input", f"{folder}/*"]
    assert run_cli(*args) == 0
    local = capsys.readouterr().out
    assert run_cli(*args, *MULTI) == 0
    assert capsys.readouterr().out == local and local.splitlines()[-2].startswith("total")


def test_cli_refuses_threads_with_beam_options(job, capsys):
    plan, _, _, _ = job
    folder = str(plan.files[0].path).rsplit("/", 1)[0]
    args = ["count-tokens", "--tokenizer", str(data_path("tiktoken", "cl100k_base.tiktoken")), "--input", f"{folder}/*"]
    assert run_cli(*args, "--threads", "2", *MULTI) == 2
    assert "--threads" in capsys.readouterr().err
