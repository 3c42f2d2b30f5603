"""Progress (pipeline/launch/progress.py): live tqdm bars on a terminal, none in a pipe or with ``--no-progress``.

The commands run in a child whose stderr is a pseudo-terminal (``pty``, 100 x 30) or a pipe. Under a pty the bar's
last state must show every document the run read (the manifest's ``documents_read``), all ranges and shards done:
with the multi_processing runner and on a Dask cluster those figures can only come from the workers, through the
side channel. No timing is asserted.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from conftest import DASK, ROOT, corpus, ours_openai, require_module
from pipeline_testlib import write_jsonl

from pipeline.launch import progress

BAR = re.compile(r"(encode|count|merges): +(\d+)%\|")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> tuple[str, list[str]]:
    root = tmp_path_factory.mktemp("progress")
    tok = root / "r50k.bpe"
    ours_openai("r50k").save(str(tok))
    docs = corpus("en_bible_kjv", 40) + corpus("fortunes_multi", 300)
    files = [write_jsonl(root / "a.jsonl", docs[:200]), write_jsonl(root / "b.jsonl.gz", docs[200:])]
    return str(tok), [str(f) for f in files]


def run(argv: list[str], *, tty: bool) -> tuple[int, str, str]:
    """``python -m pipeline.cli ARGV`` with stderr on a 100 x 30 pty (or a pipe); (exit code, stderr, stdout)."""
    command = [sys.executable, "-m", "pipeline.cli", *argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if not tty:
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
        return done.returncode, done.stderr, done.stdout
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=env, cwd=ROOT)
    os.close(slave)
    err = b""
    while True:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # EIO: the child closed its end
                data = b""
            if not data:
                break
            err += data
        elif child.poll() is not None:
            break
    os.close(master)
    out = child.stdout.read().decode()
    return child.wait(timeout=600), err.decode("utf-8", "replace"), out


def last_bar(stderr: str, label: str) -> str:
    """The last drawing of the bar ``label`` (tqdm redraws after a carriage return)."""
    frames = [f for f in re.split(r"[\r\n]", stderr) if f.startswith(f"{label}:")]
    assert frames, f"no {label} bar in {stderr!r}"
    return frames[-1]


def encode_args(tok: str, files: list[str], out: Path, *extra: str) -> list[str]:
    inputs = [a for f in files for a in ("--input", f)]
    return ["encode", "--tokenizer", tok, *inputs, "--out", str(out), "--range-bytes", "20000", *extra]


@pytest.mark.parametrize(
    "runner",
    [[], ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]],
    ids=["in_process", "multi_processing"],
)
def test_encode_draws_a_bar_on_a_terminal(inputs, tmp_path, runner):
    tok, files = inputs
    code, err, _ = run(encode_args(tok, files, tmp_path / "out", *runner), tty=True)
    assert code == 0, err
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    bar = last_bar(err, "encode")
    assert "100%|" in bar and "B/s" in bar, bar
    assert f"{manifest['documents_read']:,} docs" in bar, bar
    ranges = re.search(r"ranges (\d+)/(\d+)", bar)
    assert ranges and ranges[1] == ranges[2] and int(ranges[1]) >= 2, bar  # 20 kB ranges: several
    n = len(manifest["shards"])
    assert f"shards {n}/{n}" in bar, bar


def test_train_draws_count_and_merge_bars(inputs, tmp_path):
    tok, files = inputs
    args = [
        "train",
        *[a for f in files for a in ("--input", f)],
        "--vocab-size",
        "600",
        "--out",
        str(tmp_path / "t"),
        "--range-bytes",
        "20000",
    ]
    code, err, _ = run(args, tty=True)
    assert code == 0, err
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    assert f"{manifest['documents_read']:,} docs" in last_bar(err, "count")
    merges = last_bar(err, "merges")
    assert f"{manifest['merges']}/" in merges and "merge/s" in merges, merges


def test_no_bar_in_a_pipe_nor_with_no_progress(inputs, tmp_path):
    tok, files = inputs
    code, err, _ = run(encode_args(tok, files, tmp_path / "pipe"), tty=False)
    assert code == 0, err
    assert not BAR.search(err) and "\r" not in err, err
    assert [json.loads(line)["stage"] for line in err.splitlines()][-1] == "done"  # the JSON stage lines stay
    code, err, _ = run(encode_args(tok, files, tmp_path / "quiet", "--no-progress"), tty=True)
    assert code == 0, err
    assert not BAR.search(err), err
    assert "[beam-bpe] done:" in err  # on a terminal, the stage lines stay
    code, err, _ = run(
        ["train", "--input", files[0], "--vocab-size", "400", "--out", str(tmp_path / "t"), "--no-progress"], tty=True
    )
    assert code == 0 and not BAR.search(err), err


def test_encode_on_dask_reports_through_the_side_channel(inputs, tmp_path):
    distributed = require_module("distributed", **DASK)
    tok, files = inputs
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        args = encode_args(
            tok, files, tmp_path / "dask", "--runner", "DaskRunner", "--dask_client_address", cluster.scheduler_address
        )
        code, err, _ = run(args, tty=True)
    assert code == 0, err
    manifest = json.loads((tmp_path / "dask" / "manifest.json").read_text())
    assert f"{manifest['documents_read']:,} docs" in last_bar(err, "encode")


# ------------------------------------------------------------------ the side channel itself
def test_tally_sums_the_workers_lines(tmp_path):
    sizes = {0: 100, 1: 50, 2: 10}
    a, b = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    a.write_text(
        '{"r": 0, "d": 3, "b": 40, "e": false}\n{"r": 0, "d": 2, "b": 70, "e": true}\n'
        '{"r": 1, "d": 1, "b": 30, "e": false}\n'
    )
    b.write_text('{"r": 2, "d": 4, "b": 999, "e": false}\n{"r": 2, "d"')  # a line being written: not read yet
    tally = progress._Tally(sizes)
    tally.read(str(tmp_path))
    assert (tally.documents, tally.done, tally.bytes_done) == (10, {0}, 100 + 30 + 10)  # range 2 capped at its size
    with b.open("a") as f:
        f.write(': 1, "b": 1, "e": true}\n{"r": 0, "d": 0, "b": 5, "e": true}\n')  # range 0 again (a retry): once
    tally.read(str(tmp_path))
    assert (tally.documents, tally.done, tally.bytes_done) == (11, {0, 2}, 100 + 30 + 10)


def test_channel_writes_only_while_a_bar_is_drawn(tmp_path):
    assert progress.active_channel() == progress.ProgressChannel(None)
    channel = progress.ProgressChannel(str(tmp_path))
    channel.batch(7, documents=2, text_bytes=20, last=True)
    [line] = (tmp_path / f"{os.getpid()}.jsonl").read_text().splitlines()
    assert json.loads(line) == {"r": 7, "d": 2, "b": 20, "e": True}
    progress._Appender.close_all(str(tmp_path))


def test_local_runners(monkeypatch):
    assert progress.is_local_runner([])
    assert progress.is_local_runner(["--direct_running_mode", "multi_processing"])
    assert progress.is_local_runner(["--runner", "DaskRunner", "--dask_client_address", "127.0.0.1:8786"])
    assert not progress.is_local_runner(["--runner", "DaskRunner", "--dask_client_address", "tcp://10.1.2.3:8786"])
    assert not progress.is_local_runner(["--runner", "DataflowRunner"])
    assert not progress.is_local_runner(["--runner=FlinkRunner"])


def test_range_sizes_share_a_parquet_file_between_its_row_groups():
    from pipeline.corpus.records import CorpusRange

    ranges = [CorpusRange(0, "a.txt", 0, "bytes", 0, 40), CorpusRange(1, "a.txt", 0, "bytes", 40, 90),
              CorpusRange(2, "b.parquet", 1, "row_group", 0, 1), CorpusRange(3, "b.parquet", 1, "row_group", 1, 2),
              CorpusRange(4, "c.gz", 2, "file", 0, 33)]  # fmt: skip
    assert progress.range_sizes(ranges, {"a.txt": 90, "b.parquet": 300, "c.gz": 33}) == {
        0: 40,
        1: 50,
        2: 150,
        3: 150,
        4: 33,
    }


def test_no_progress_is_refused_where_no_pipeline_runs(inputs, capsys):
    from pipeline.cli import main

    assert main(["encode", "--tokenizer", inputs[0], "--text", "hello", "--no-progress"]) == 2
    assert "--no-progress belongs to the encoding pipeline" in capsys.readouterr().err
