"""benchmarks/bench_native.py runs end to end and refuses wrong ids (no timing is asserted: benchmarks are not tests).

The smoke run is ``--quick`` (0.2 MB of the shared corpora, one round, cl100k, vocab 300): every section prints,
every row's ids are checked against tiktoken's, and our fast split, where the core has it, gives the regex's
pieces. About 35 s on two busy cores, all in one test.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT, data_path, require_extra

from bpe_core import native

BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))

from bench_native import ids_verdict, ratio_text  # noqa: E402


@pytest.mark.bench  # make bench-check; make test does not install the bench extra
def test_quick_run_prints_every_section_with_checked_ids():
    require_extra("bench", flag="BEAM_BPE_REQUIRE_BENCH", install="make bench-check")
    data_path("corpora", "code_cpython.jsonl.gz")
    data_path("tiktoken", "cl100k_base.tiktoken")
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
        "target cl100k: one thread",
    ):
        assert header in out, f"{header!r} missing from:\n{out}"
    rows = [line.strip() for line in out.splitlines() if "ids = tiktoken" in line or "IDS DIFFER" in line]
    assert len(rows) == 26, out  # 15 one-thread rows, 11 all-thread rows, each with its ids checked
    assert all("ids = tiktoken" in row for row in rows if row.startswith("ours")), out
    assert all("IDS DIFFER" not in row for row in rows if not row.startswith("tokie")), out  # tokie's are reported
    assert "ids unchecked" not in out, out
    assert "failed:" not in out.replace("fast path failed", ""), out
    if getattr(native._core, "pretok_split", None) is not None:
        assert "pieces = regex" in out, out
    else:
        assert "the core has no pretok_split" in out, out


def test_other_ids_are_reported_where_they_first_differ():
    reference = [11, 22, 33]
    assert ids_verdict([{"crc": [11, 22, 33]}], reference) == "ids = tiktoken"
    assert "first at document 1" in ids_verdict([{"crc": [11, 22, 33]}, {"crc": [11, 5, 33]}], reference)
    assert "2 documents" in ids_verdict([{"crc": [11, 22]}], reference)


def test_ratio_pairs_runs_of_the_same_round():
    ours = [{"round": 0, "cpu": 1.0}, {"round": 1, "cpu": 2.0}]
    peer = [{"round": 0, "cpu": 3.0}, {"round": 1, "cpu": 2.0}]
    # best over best: 2.0 / 1.0; same round: 3.0 and 1.0, median 2.0
    assert ratio_text(ours, peer, "cpu") == "ours/peer  2.00x (same round 2.00x [1.00-3.00])"
