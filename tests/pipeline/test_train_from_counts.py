"""End to end: ``train --from-counts`` trains from counts files without importing Apache Beam, and gives the
tokenizer that training on the same counts as a dict gives."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import corpus

import bpe_core
from bpe_core import PreTokenizer
from pipeline.storage.files import write_atomic
from pipeline.train.count import shard_of
from pipeline.train.counts_files import STATS_FILE, counts_parquet, shard_name

PROBE = """
import json, sys
from pipeline.cli.app import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "beam": sorted(m for m in sys.modules if m.split(".")[0] == "apache_beam")[:5]}))
"""


def _write_counts(directory, counts: dict, num_shards: int) -> None:
    pre = PreTokenizer.from_spec("cl100k")
    for shard in range(num_shards):
        part = {c: n for c, n in counts.items() if shard_of(c, num_shards) == shard}
        write_atomic(f"{directory}/counts/{shard_name(shard, num_shards)}", counts_parquet(part, pre))
    stats = {"documents_read": 5, "documents_counted": 5, "dead_letters": 0, "chunk_occurrences": sum(counts.values())}
    write_atomic(f"{directory}/counts/{STATS_FILE}", json.dumps(stats).encode())


def test_from_counts_never_imports_beam_and_trains_the_dict_tokenizer(tmp_path):
    counts = dict(bpe_core.count_chunks(corpus("en_bible_kjv", 400), "cl100k"))
    _write_counts(tmp_path / "counted", counts, 3)
    out = tmp_path / "out"
    args = ["train", "--from-counts", str(tmp_path / "counted"), "--out", str(out), "--vocab-size", "600"]
    run = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result == {"code": 0, "beam": []}, "train --from-counts imported Apache Beam"
    trained = bpe_core.Tokenizer.load(str(out / "tokenizer.bpe"))
    reference = bpe_core.train(counts, 600, pretokenizer="cl100k", backend="python")
    assert trained.merges == reference.merges
    assert (out / "COMPLETED").exists()


def test_the_probe_sees_beam_when_a_counting_run_imports_it(tmp_path):
    """The probe can fail: a counting run does import Beam."""
    text = tmp_path / "a.txt"
    text.write_text("hello world\n" * 50)
    args = ["train", "--input", str(text), "--out", str(tmp_path / "out"), "--counts-only"]
    run = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.strip().splitlines()[-1])["beam"]
