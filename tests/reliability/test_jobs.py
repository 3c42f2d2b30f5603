"""Outputs and jobs: one job per output, resume that checks what it adopts, exits that tell the truth, everything
checked before work starts, Beam's worker logs off (issue 24).

Every test runs the command line in fresh processes, as a user does. A job is held in the middle of its work by
tests/reliability/hooks (``PAUSE-ME-<token>`` in a document) while another job is started into the same output.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import corpus

from .lib import ROOT, files_of, with_hooks, write_bytes, write_jsonl

AREA = "outputs and jobs"
BEAM_NOISE = re.compile(r"apache_beam|sdk_worker|harness|semi_persistent|control channel", re.IGNORECASE)


# ------------------------------------------------------------------ running the command line
def cli(*args, env: dict | None = None, stdin: bytes | None = None, timeout: float = 600):
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *map(str, args)], capture_output=True, input=stdin,
                          env=dict(os.environ, **(env or {})), cwd=ROOT, timeout=timeout)  # fmt: skip


def start(*args, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pipeline.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ, **env), cwd=ROOT)  # fmt: skip


def err(proc) -> str:
    data = proc.stderr if isinstance(proc.stderr, bytes | str) else b""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the held job ended before it reached its pause: {proc.stderr.read().decode()}")
        assert time.time() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def final_files(out: Path) -> dict[str, bytes]:
    """The output a user reads: every file but the job's bookkeeping (``_shards/``) and temporary files."""
    return {k: v for k, v in files_of(out).items() if not k.startswith(("_shards", "_tmp")) and ".tmp-" not in k}


def paused_env(tmp: Path, token: str) -> dict:
    return with_hooks({"BEAM_BPE_TEST_PAUSE_DIR": str(tmp), "BEAM_BPE_TEST_PAUSE_TOKENS": token})


# ------------------------------------------------------------------ corpora
@pytest.fixture(scope="module")
def three_files(tmp_path_factory) -> Path:
    """Three JSONL files (one output shard each with --shard-size 1); a pause document in each."""
    root = tmp_path_factory.mktemp("in")
    docs = corpus("fortunes_multi", 300)
    for i in range(3):
        write_jsonl(root / f"part{i}.jsonl", docs[i * 100 : (i + 1) * 100] + [f"held here: PAUSE-ME-p{i}"])
    return root


def encode_args(tok: str, inputs: Path, out: Path, *extra) -> list:
    return ["encode", "--tokenizer", tok, "--input", str(inputs / "*.jsonl"), "--out", out, "--shard-format",
            "megatron", "--shard-size", "1", "--no-progress", *extra]  # fmt: skip


# ------------------------------------------------------------------ 1. one job per output
@pytest.mark.parametrize("held_at", ["p0", "p2"])
def test_a_concurrent_overwrite_never_leaves_completed_over_a_mix(reliability, r50k_artifact, three_files, tmp_path,
                                                                 held_at):  # fmt: skip
    out = tmp_path / "out"
    first, second = encode_args(r50k_artifact, three_files, out), encode_args(r50k_artifact, three_files, out, "--eos")
    references = {}
    for name, args in (("first", first), ("second", second)):
        done = cli(*args, "--overwrite")
        assert done.returncode == 0, err(done)
        references[name] = final_files(out)
    assert references["first"] != references["second"]
    for path in sorted(out.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    held = start(*first, env=paused_env(tmp_path, held_at))
    wait_for(tmp_path / f"{held_at}.paused", held)
    overwrite = cli(*second, "--overwrite")
    (tmp_path / f"{held_at}.go").write_text("")
    held.wait(600)
    codes = {"first": held.returncode, "second": overwrite.returncode}
    result = final_files(out)
    if "COMPLETED" in result:
        matching = [name for name, ref in references.items() if ref == result]
        assert matching, f"COMPLETED over a mix of the two jobs' shards (exit codes {codes})"
        assert codes[matching[0]] == 0
    for name, code in codes.items():
        if code == 0:
            assert result == references[name], f"the {name} job exited 0 but the output is not its own"
    assert codes["second"] != 0 or codes["first"] != 0, "both jobs reported success into one --out"
    if codes["second"] != 0:
        assert "being written by another job" in err(overwrite) and "stop that encode or wait" in err(overwrite)
    resumed = cli(*second)  # the second command again, after the race: never adopts the first job's shards
    if resumed.returncode == 0:
        assert final_files(out) == references["second"]
    again = cli(*second, "--overwrite")
    assert again.returncode == 0, err(again)
    assert final_files(out) == references["second"]
    reliability.row(
        AREA,
        f"encode --overwrite (with --eos) into the --out of a running encode, the first held at document {held_at}",
        "the second job is refused while the first holds the lease (the message names it and says to stop it or "
        "wait); the output is the first job's complete output, never COMPLETED over a mix; rerunning the second "
        "command never adopts the first job's shards; with --overwrite once the first ended, the second's output",
        exit_codes=f"{codes['first']}/{codes['second']}",
        reruns_compared=2,
    )


def test_two_trainings_into_one_out_are_not_both_reported_done(reliability, tmp_path):
    data = write_jsonl(tmp_path / "in" / "a.jsonl", corpus("fortunes_multi", 200) + ["PAUSE-ME-t0"])
    out = tmp_path / "tok"
    args = ["train", "--input", data, "--pretokenizer", "cl100k", "--out", out, "--no-progress"]
    held = start(*args, "--vocab-size", "400", env=paused_env(tmp_path, "t0"))
    wait_for(tmp_path / "t0.paused", held)
    second = cli(*args, "--vocab-size", "300", "--overwrite")
    (tmp_path / "t0.go").write_text("")
    held.wait(600)
    assert (held.returncode, second.returncode) != (0, 0), "two trainings into one --out both reported success"
    assert second.returncode == 2 and "being written by another job" in err(second)
    assert held.returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["n_vocab"] == 400
    reliability.row(AREA, "train --overwrite into the --out of a running train",
                    "refused while the first holds the lease; the first completes with its own tokenizer",
                    exit_codes=f"{held.returncode}/{second.returncode}")  # fmt: skip


# ------------------------------------------------------------------ 2. resume that checks
def test_a_deleted_or_truncated_shard_is_redone_on_rerun(reliability, r50k_artifact, three_files, tmp_path):
    out = tmp_path / "out"
    args = encode_args(r50k_artifact, three_files, out, "--eos")
    assert cli(*args).returncode == 0
    reference = final_files(out)
    (out / "tokens-00000-of-00003.bin").unlink()
    data = (out / "tokens-00001-of-00003.bin").read_bytes()
    (out / "tokens-00001-of-00003.bin").write_bytes(data[: len(data) // 2])
    rerun = cli(*args)
    assert rerun.returncode == 0, err(rerun)
    assert "already complete:" not in rerun.stdout.decode()
    assert final_files(out) == reference
    decoded = cli("decode", "--tokenizer", r50k_artifact, "--shards", out, "--doc", f"{three_files}/part1.jsonl@0")
    assert decoded.returncode == 0, err(decoded)
    # the same size, another byte: only --recheck (sha256) sees it
    data = bytearray((out / "tokens-00002-of-00003.bin").read_bytes())
    data[10] ^= 1
    (out / "tokens-00002-of-00003.bin").write_bytes(bytes(data))
    rechecked = cli(*args, "--recheck")
    assert rechecked.returncode == 0, err(rechecked)
    assert final_files(out) == reference
    reliability.row(AREA, "a complete encode output: one shard's .bin deleted, one truncated, one byte of a third "
                    "changed at the same size; the same command rerun (then with --recheck)",
                    "sizes checked against each shard's record on every resume (COMPLETED or not), sha256 with "
                    "--recheck: the damaged shards are redone and the output equals the undisturbed run's",
                    reruns_compared=2)  # fmt: skip


def test_an_input_edited_in_place_is_reread_or_refused_by_name(reliability, r50k_artifact, tmp_path):
    inputs = tmp_path / "in"
    docs = corpus("fortunes_multi", 300)
    for i in range(3):
        write_jsonl(inputs / f"part{i}.jsonl", docs[i * 100 : (i + 1) * 100])
    out = tmp_path / "out"
    args = encode_args(r50k_artifact, inputs, out)
    assert cli(*args).returncode == 0
    kept = {p.name: p.stat().st_mtime_ns for p in out.glob("tokens-*")}
    edited = inputs / "part1.jsonl"
    data = edited.read_bytes()
    swapped = data.replace(b"e", b"a", 20)
    assert len(swapped) == len(data) and swapped != data
    stat = edited.stat()
    edited.write_bytes(swapped)
    os.utime(edited, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    rerun = cli(*args)
    assert rerun.returncode == 0, err(rerun)
    assert "part1.jsonl" in rerun.stdout.decode() + err(rerun)
    result = final_files(out)
    fresh = tmp_path / "fresh"
    assert cli(*encode_args(r50k_artifact, inputs, fresh)).returncode == 0
    expected = final_files(fresh)
    assert {k for k in result if "megatron_data_path" not in k} == {k for k in expected if "megatron" not in k}
    for name in ("tokens-00000-of-00003.bin", "tokens-00001-of-00003.bin", "tokens-00002-of-00003.bin"):
        assert result[name] == expected[name]
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("tokens-0000[02]*")} == {
        k: v for k, v in kept.items() if "00001" not in k
    }, "shards of unchanged files were rewritten"
    edited.write_bytes(swapped + b'{"text": "one more"}\n')
    grown = cli(*args)
    assert grown.returncode == 2 and "part1.jsonl" in err(grown).strip().splitlines()[-1]
    reliability.row(AREA, "an input edited in place at the same size (mtime changed), then grown",
                    "same size: exactly the shards built from it are redone and the summary names it; another size: "
                    "refused as another job, naming the file", reruns_compared=1)  # fmt: skip


# ------------------------------------------------------------------ 3. honest endings
def test_input_dir_reads_each_file_by_its_suffix(reliability, r50k_artifact, tmp_path):
    folder = tmp_path / "parquet"
    folder.mkdir()
    for i in range(3):
        pq.write_table(pa.table({"text": [f"document {i} {j}" for j in range(2)]}), folder / f"p{i}.parquet")
    out = tmp_path / "out"
    run = cli("encode", "--tokenizer", r50k_artifact, "--input", folder, "--out", out, "--no-progress")
    assert run.returncode == 0, err(run)
    assert json.loads((out / "manifest.json").read_text())["documents_written"] == 6
    write_jsonl(folder / "more.jsonl", ["a json document"])
    write_bytes(folder / "notes.txt", b"a text line\nanother\n")
    mixed = cli("count-tokens", "--tokenizer", r50k_artifact, "--input", folder, "--json")
    assert mixed.returncode == 0, err(mixed)
    assert json.loads(mixed.stdout)["total"]["documents"] == 9
    write_bytes(folder / "table.csv", b"text\nx\n")
    refused = cli("count-tokens", "--tokenizer", r50k_artifact, "--input", folder)
    assert refused.returncode == 2 and "table.csv" in err(refused)
    reliability.row(AREA, "--input DIR of Parquet files; then with .jsonl and .txt files too; then a .csv",
                    "each file read by its own suffix (6, then 9 documents); a file of no known suffix refused by "
                    "name", inputs=3)  # fmt: skip


def test_a_run_with_nothing_written_exits_3(reliability, r50k_artifact, tmp_path):
    bad = write_bytes(tmp_path / "in" / "bad.txt", b"\xff\xfe one\n\xc3\x28 two\n")
    codes = {}
    for name, args in {
        "encode": ["encode", "--tokenizer", r50k_artifact, "--input", bad, "--out", tmp_path / "e", "--no-progress"],
        "count-tokens": ["count-tokens", "--tokenizer", r50k_artifact, "--input", bad],
        "train": ["train", "--input", bad, "--vocab-size", "300", "--out", tmp_path / "t", "--no-progress"],
    }.items():
        codes[name] = cli(*args).returncode
        assert codes[name] == 3, (name, err(cli(*args))[-500:])
        assert "exit code 3" in cli(args[0], "--help").stdout.decode().replace("\n", " ")
    empty = write_bytes(tmp_path / "empty" / "none.jsonl", b"")
    assert cli("count-tokens", "--tokenizer", r50k_artifact, "--input", empty).returncode == 3
    reliability.row(AREA, "every document a dead letter (encode, count-tokens, train); no document at all",
                    "exit code 3 (--help says so), never 0", inputs=4)  # fmt: skip


def test_encode_stdin_refuses_invalid_utf8(reliability, r50k_artifact):
    run = cli("encode", "--tokenizer", r50k_artifact, stdin=b"ab\xffcd\n")
    assert run.returncode == 2 and "UTF-8" in err(run) and not run.stdout.strip()
    good = cli("encode", "--tokenizer", r50k_artifact, stdin="héllo".encode())
    assert good.returncode == 0 and good.stdout.split()
    reliability.row(AREA, "encode with bytes that are not UTF-8 on stdin",
                    "refused (exit 2, naming UTF-8), as the pipelines dead-letter them; never U+FFFD")  # fmt: skip


# ------------------------------------------------------------------ 4. everything checked before work starts
def test_files_a_run_reads_later_are_checked_before_it_writes(reliability, tmp_path):
    data = write_jsonl(tmp_path / "in" / "a.jsonl", corpus("fortunes_multi", 100))
    train = ["train", "--input", data, "--vocab-size", "300", "--pretokenizer", "cl100k", "--no-progress"]
    cases = {
        "--compare of a missing file": ["--report", "--compare", tmp_path / "missing.bpe"],
        "--eval-fraction 1": ["--report", "--eval-fraction", "1"],
    }
    rank_file = tmp_path / "ranks.tiktoken"
    rank_file.write_text("\n".join(f"{__import__('base64').b64encode(bytes([b])).decode()} {b}" for b in range(256)))
    cases["--compare of a rank file that is not OpenAI's, without --compare-pretokenizer"] = ["--report", "--compare",
                                                                                              rank_file]  # fmt: skip
    for what, extra in cases.items():
        out = tmp_path / what.replace(" ", "_").replace("-", "")
        run = cli(*train, *extra, "--out", out)
        assert run.returncode == 2, (what, err(run)[-400:])
        assert '"stage": "count"' not in err(run), f"{what}: refused only after counting"
        assert not out.exists() or not any(out.iterdir()), f"{what}: files written before the refusal"
    assert "--compare-pretokenizer" in err(cli(*train, *cases[list(cases)[-1]], "--out", tmp_path / "x"))
    unreachable = cli(*train[:-1], "--vocab-size", "100000", "--out", tmp_path / "big", "--no-progress")
    assert unreachable.returncode == 0, err(unreachable)
    assert "UserWarning" not in err(unreachable)
    manifest = json.loads((tmp_path / "big" / "manifest.json").read_text())
    reached = manifest["n_vocab"]
    assert manifest["vocab_size_reached"] == {"asked": 100000, "reached": reached}
    assert f"{reached:,}" in unreachable.stdout.decode() + err(unreachable)
    reliability.row(AREA, "train --report --compare MISSING, a non-OpenAI .tiktoken compare file without "
                    "--compare-pretokenizer, --eval-fraction 1; a --vocab-size the corpus cannot reach",
                    "refused before counting, nothing written into --out; the unreachable size: one summary line "
                    "giving the size reached (no UserWarning), recorded in manifest.json", inputs=4)  # fmt: skip


# ------------------------------------------------------------------ 5. Beam's worker logs off
def test_the_readme_two_worker_runs_print_no_beam_line(reliability, tmp_path):
    data = tmp_path / "data"
    docs = corpus("fortunes_multi", 600)
    for i in range(3):
        write_jsonl(data / f"{i}.jsonl", docs[i * 200 : (i + 1) * 200])
    workers = ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]
    train = ["train", "--input", data / "*.jsonl", "--vocab-size", "400", "--pretokenizer", "cl100k",
             "--special-token", "<|endoftext|>", "--out", tmp_path / "tok", *workers]  # fmt: skip
    encode = ["encode", "--tokenizer", tmp_path / "tok" / "tokenizer.bpe", "--input", data / "*.jsonl", "--out",
              tmp_path / "ids", "--shard-format", "megatron", "--eos", *workers]  # fmt: skip
    lines = {}
    for name, args in (("train", train), ("encode", encode)):
        with open(tmp_path / f"{name}.err", "wb") as stderr:  # stderr a file
            rc = subprocess.run([sys.executable, "-m", "pipeline.cli", *map(str, args)], stdout=subprocess.PIPE,
                                stderr=stderr, cwd=ROOT, timeout=600).returncode  # fmt: skip
        text = (tmp_path / f"{name}.err").read_text(errors="replace")
        assert rc == 0, text[-1000:]
        lines[f"{name} (file)"] = [line for line in text.splitlines() if BEAM_NOISE.search(line)]
        terminal = _under_pty([*args, "--overwrite"])  # stderr and stdout a terminal: the progress bar is drawn
        lines[f"{name} (pty)"] = [line for line in terminal.splitlines() if BEAM_NOISE.search(line)]
    assert not any(lines.values()), {k: v[:3] for k, v in lines.items() if v}
    asked = cli(*encode, "--overwrite", "--log-level", "info")
    assert asked.returncode == 0 and BEAM_NOISE.search(err(asked)), "--log-level info shows Beam's lines"
    reliability.row(AREA, "the README's 2-worker train and encode (multi_processing), stderr a file and a pty",
                    "no line from Beam or its workers unless --log-level asks for them", inputs=4)  # fmt: skip


def _under_pty(args: list) -> str:
    import pty

    out = []

    def read(fd):
        data = os.read(fd, 65536)
        out.append(data)
        return data

    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(ROOT)
        os.execv(sys.executable, [sys.executable, "-m", "pipeline.cli", *map(str, args)])
    try:
        while True:
            try:
                if not read(fd):
                    break
            except OSError:
                break
    finally:
        _, status = os.waitpid(pid, 0)
    text = b"".join(out).decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text[-1000:]
    return text
