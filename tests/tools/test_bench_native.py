"""benchmarks/bench_native.py runs end to end and refuses wrong ids (no timing is asserted: benchmarks are not tests).

The smoke run is ``--quick`` (0.2 MB of the shared corpora, one round, cl100k, qwen35 and deepseek-v3, vocab 300,
two llama.cpp vocabularies): every section prints, every row's ids are checked against tiktoken's (GigaToken's for
qwen35 and deepseek-v3, llama.cpp's expected ids for the vocabularies), and our fast split, where the core has it,
gives the regex's pieces. About 60-100 s on two busy cores, all in one test.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT, data_path, reference_path, require_extra

from bpe_core import native

BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))

import bench_native  # noqa: E402
from bench_native import callgrind_totals, ids_verdict, ratio_text  # noqa: E402


@pytest.mark.bench  # make bench-check; make test does not install the bench extra
def test_quick_run_prints_every_section_with_checked_ids():
    require_extra("bench", flag="BEAM_BPE_REQUIRE_BENCH", install="make bench-check")
    data_path("corpora", "code_cpython.jsonl.gz")
    data_path("tiktoken", "cl100k_base.tiktoken")
    reference_path("llama-cpp-python-0.3.36", "vendor/llama.cpp/models/ggml-vocab-qwen35.gguf")
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench_native.py"), "--quick"], capture_output=True, text=True, timeout=600
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr[-3000:]
    for header in (
        "training to 300 tokens",
        "split cl100k alone",
        "encoding cl100k, one thread",
        "encoding cl100k, all threads",
        "decode_bytes per document",
        "target cl100k: one thread, first call",
        "target cl100k: one thread, warm median",
        "encoding qwen35, one thread",
        "target qwen35: all threads",
        "encoding deepseek-v3, all threads",
        "target deepseek-v3: one thread, warm median",
        "vocabularies, one thread",
        "per script (multi_udhr by language",
        "target qwen35 and deepseek-v3 cells",
    ):
        assert header in out, f"{header!r} missing from:\n{out}"
    lines = out.splitlines()
    rows = [line.strip() for line in lines if "ids = tiktoken" in line or "IDS DIFFER" in line]
    assert len(rows) == 28, out  # cl100k: 16 one-thread rows, 12 all-thread rows, each with its ids checked
    assert all("ids = tiktoken" in row for row in rows if row.startswith("ours")), out
    giga = [line.strip() for line in lines if "ids = gigatoken" in line]
    assert len(giga) == 12, out  # qwen35 and deepseek-v3: ours and gigatoken, 4 one-thread and 2 all-thread rows
    warm = [line for line in lines if line.strip().startswith("warm ") and " n=1" in line]
    assert len(warm) == 28 + 12, out  # every row: the first call, then its warm median
    vocabs = [line.strip() for line in lines if "ids = llama.cpp's on its" in line]
    assert [v.split()[0] for v in vocabs] == ["gpt-2", "qwen35"], out
    assert all("IDS DIFFER" not in row for row in rows if not row.startswith("tokie")), out  # tokie's are reported
    assert "ids unchecked" not in out, out
    assert "failed:" not in out.replace("fast path failed", ""), out
    if getattr(native._core, "pretok_split", None) is not None:
        assert "pieces = regex" in out, out
    else:
        assert "the core has no pretok_split" in out, out


def test_callgrind_totals_sum_the_files_of_forked_workers(tmp_path):
    (tmp_path / "cg.11").write_text("version: 1\nevents: Ir Bc Bcm\nfn=x\n1 2\nsummary: 100 20 3\n")
    (tmp_path / "cg.12").write_text("events: Ir Bc Bcm\ntotals: 10 2 1\n")
    (tmp_path / "other.13").write_text("events: Ir\nsummary: 999\n")
    assert callgrind_totals(tmp_path / "cg") == {"Ir": 110, "Bc": 22, "Bcm": 4}


def test_callgrind_without_valgrind_says_so(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr("shutil.which", lambda name: None)
    bench = bench_native.Bench(bench_native.parse_args(["--callgrind", "--quick"]), str(tmp_path))
    bench_native.run_callgrind(bench)
    assert "callgrind: skipped, valgrind is not installed" in capsys.readouterr().out


def test_other_ids_are_reported_where_they_first_differ():
    reference = [11, 22, 33]
    assert ids_verdict([{"crc": [11, 22, 33]}], reference) == "ids = tiktoken"
    assert "first at document 1" in ids_verdict([{"crc": [11, 22, 33]}, {"crc": [11, 5, 33]}], reference)
    assert "2 documents" in ids_verdict([{"crc": [11, 22]}], reference)
    assert ids_verdict([{"crc": [11, 22, 33]}], reference, "gigatoken") == "ids = gigatoken"
    assert "between the first and a warm call" in ids_verdict([{"crc": [11, 22, 33], "warm_differs": True}], reference)


def test_ratio_pairs_runs_of_the_same_round():
    ours = [{"round": 0, "cpu": 1.0}, {"round": 1, "cpu": 2.0}]
    peer = [{"round": 0, "cpu": 3.0}, {"round": 1, "cpu": 2.0}]
    # best over best: 2.0 / 1.0; same round: 3.0 and 1.0, median 2.0
    assert ratio_text(ours, peer, "cpu") == "ours/peer  2.00x (same round 2.00x [1.00-3.00])"
