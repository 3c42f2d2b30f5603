"""Trust, part 2 (issue 33): a stop keeps finished shards, inputs read again before COMPLETED, leases that cannot be
fooled, outputs never inside inputs, one end of a run for one tokenizer and several.

In-process runs of the encode job (``run_encode`` / ``run_encode_several``, the in-process runner), so that a fault
can be injected at an exact point of the run.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import socket
import time
from pathlib import Path

import pytest
from conftest import corpus, data_path

import pipeline.encode.write
from pipeline.corpus.plan import CorpusSpec, InputSpec
from pipeline.encode.job import run_encode
from pipeline.encode.layout import assign_shards
from pipeline.encode.manifest import summary_line
from pipeline.encode.settings import EncodeJob, EncodeSettings, resolve_shard_size
from pipeline.encode.several import run_encode_several
from pipeline.encode.shards import ShardSink
from pipeline.errors import ShardFileError, UsageError
from pipeline.storage.lease import Lease, LeaseHeldError, process_start

from .lib import files_of, write_jsonl

AREA = "trust"


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return (corpus("fortunes_multi", 1000) + corpus("docs_python_rst", 200))[:1200]


def _inputs(tmp_path: Path, docs: list[str]) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir(exist_ok=True)
    write_jsonl(folder / "a.jsonl", docs[:600])
    write_jsonl(folder / "b.jsonl", docs[600:])
    return folder


def _job(tok: str, folder: Path, out: Path, **kw) -> EncodeJob:
    settings = kw.pop("settings", EncodeSettings())
    sizes = {"range_bytes": kw.pop("range_bytes", 20_000), "shard_size": kw.pop("shard_size", 60_000)}
    return EncodeJob(tok, (InputSpec(str(folder / "*.jsonl")),), str(out), CorpusSpec("jsonl"), settings, **sizes, **kw)


def _final(out: Path) -> dict[str, bytes]:
    return {k: v for k, v in files_of(out).items() if not k.startswith("_shards") and ".tmp-" not in k}


# ------------------------------------------------------------------ item 3: a stop keeps what is finished
def test_shards_complete_during_the_run_and_a_stop_keeps_them(tmp_path, docs, r50k_artifact, monkeypatch, reliability):
    folder = _inputs(tmp_path, docs)
    reference = tmp_path / "reference"
    run_encode(_job(r50k_artifact, folder, reference))
    out = tmp_path / "out"
    seen, real_close = [], ShardSink.close

    def close(self):  # how many shards were complete when each shard closed
        seen.append(len(list((out / "_shards").glob("tokens-*.json"))))
        if len(seen) == 4:
            raise KeyboardInterrupt  # Ctrl-C after three shards
        return real_close(self)

    monkeypatch.setattr(ShardSink, "close", close)
    with pytest.raises((KeyboardInterrupt, RuntimeError)) as stop:
        run_encode(_job(r50k_artifact, folder, out))
    monkeypatch.undo()
    kept = len(list((out / "_shards").glob("tokens-*.json")))
    notes = " ".join(getattr(stop.value, "__notes__", []))
    assert seen == [0, 1, 2, 3] and kept == 3 and f"3 of {len(_final(reference)) - 2} shards complete" in notes
    again = run_encode(_job(r50k_artifact, folder, out))
    assert again["run"]["shards_skipped"] == 3 and _final(out) == _final(reference)
    line = summary_line(again)
    assert "redid" in line and "(not finished)" in line
    reliability.row(AREA, "Ctrl-C in-process after three shards were written (of more)", "the shards finished during "
                    "the run are complete (stats file) before the run ends and are kept; the rerun writes only the "
                    "others, names them (not finished) and its output equals an uninterrupted run byte for byte",
                    shards=len(_final(reference)) - 2, kept=kept, skipped_on_rerun=3)  # fmt: skip


def test_the_default_shard_size_gives_300_mb_two_shards_per_worker(reliability):
    sizes = {n: resolve_shard_size(None, n) for n in (300 * 10**6, 10**9, 100 * 10**9)}
    shards = {n: -(-n // size) for n, size in sizes.items()}
    assert shards[300 * 10**6] >= 4 and shards[10**9] == 16 and sizes[100 * 10**9] == 1 << 30
    assert resolve_shard_size(5000, 300 * 10**6) == 5000  # --shard-size as given
    reliability.row(
        AREA,
        "the default --shard-size for 300 MB, 1 GB and 100 GB",
        "the input's size / 16 between 32 MiB and 1 GiB: at least two shards per worker for 300 MB on 2 workers",
        shards_300mb=shards[300 * 10**6],
        shards_1gb=shards[10**9],
        shards_100gb=shards[100 * 10**9],
    )


def test_a_rerun_names_the_shards_it_redid_and_why(tmp_path, docs, r50k_artifact, reliability):
    folder = _inputs(tmp_path, docs)
    out = tmp_path / "out"
    run_encode(_job(r50k_artifact, folder, out))
    shard = sorted(out.glob("tokens-*.parquet"))[1]
    shard.write_bytes(shard.read_bytes()[:-10])  # truncated
    again = run_encode(_job(r50k_artifact, folder, out))
    line = summary_line(again)
    assert f"redid 1 shard(s): {shard.stem} (damaged: {shard.name} holds" in line
    reliability.row(AREA, "a rerun after one shard was truncated", "the summary line names the shard it redid and "
                    "why (damaged: its size against its record)", redone=len(again["run"]["redone"]))  # fmt: skip


# ------------------------------------------------------------------ item 4: inputs read again before COMPLETED
def test_an_input_rewritten_at_the_same_size_during_the_run_never_ends_completed(
    tmp_path, docs, r50k_artifact, monkeypatch, reliability
):
    folder = _inputs(tmp_path, docs)
    out = tmp_path / "out"
    real = pipeline.encode.write.read_range
    target = folder / "b.jsonl"
    original = target.read_bytes()
    swapped = original.replace(b"a", b"e")  # the same size, other text
    assert len(swapped) == len(original) and swapped != original

    def read_range(rng, spec):
        if rng.source.endswith("b.jsonl") and target.read_bytes() == original:
            target.write_bytes(swapped)  # rewritten while the run reads it
            os.utime(target, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
        return real(rng, spec)

    monkeypatch.setattr(pipeline.encode.write, "read_range", read_range)
    with pytest.raises(ShardFileError, match="b.jsonl changed while the run read it") as error:
        run_encode(_job(r50k_artifact, folder, out))
    monkeypatch.undo()
    assert not (out / "COMPLETED").exists() and not (out / "manifest.json").exists()
    again = run_encode(_job(r50k_artifact, folder, out))
    fresh = tmp_path / "fresh"
    run_encode(_job(r50k_artifact, folder, fresh))
    assert _final(out) == _final(fresh) and (out / "COMPLETED").exists() and again["documents_read"] == 1200
    reliability.row(AREA, "an input rewritten at the same size while the run reads it", "the run fails in one line "
                    "naming the file, with no COMPLETED; the rerun's output equals a fresh run of the current "
                    "version byte for byte", message=str(error.value)[:60])  # fmt: skip


# ------------------------------------------------------------------ item 5: leases, outputs inside inputs, manifests
def test_a_run_into_a_folder_of_a_running_several_tokenizer_job_is_refused(tmp_path, docs, r50k_artifact, reliability):
    folder = _inputs(tmp_path, docs)
    out = tmp_path / "out"
    with Lease(str(out), command="encode") as top, Lease(str(out / "r50k"), command="encode", group=top.record.run_id):
        with pytest.raises(LeaseHeldError, match="being written by another job"):
            run_encode(_job(r50k_artifact, folder, out / "r50k", overwrite=True))
        with pytest.raises(LeaseHeldError, match="a folder above"):
            run_encode(_job(r50k_artifact, folder, out / "other", overwrite=True))  # OUT's lease covers its folders
    with Lease(str(out / "r50k"), command="encode"), pytest.raises(LeaseHeldError, match="a folder inside"):
        Lease(str(out), command="encode").acquire()
    reliability.row(
        AREA,
        "encode --out OUT/<stem> --overwrite while a several-tokenizer job writes OUT; a lease "
        "on OUT while OUT/<stem> is held",
        "refused, naming the running job: the several-tokenizer job "
        "leases OUT and every OUT/<stem>; a lease is refused while a folder above or inside holds one",
    )


def _write_lease(out: Path, **fields) -> None:
    now = time.time()
    record = dict(run_id="x" * 32, host=socket.gethostname(), pid=os.getpid(), command="encode", started=now,
                  renewed=now) | fields  # fmt: skip
    (out / "_shards").mkdir(parents=True, exist_ok=True)
    (out / "_shards" / "lease.json").write_text(json.dumps(record, allow_nan=True))


@pytest.mark.parametrize(
    "case,fields",
    [
        ("the rerun's own pid (a restarted container), no start time", {}),
        ("the rerun's own pid with another start time", {"pid_started": "boot:1"}),
        ("a renewal 1 hour in the future from another host", {"host": "elsewhere", "renewed": time.time() + 3600}),
        ("renewed at NaN", {"host": "elsewhere", "renewed": math.nan}),
        ("renewed at 1e400 (infinity)", {"host": "elsewhere", "renewed": math.inf}),
        ("a pid of the wrong type", {"host": "elsewhere", "pid": "12"}),
        ("a run id of the wrong type", {"host": "elsewhere", "run_id": 7}),
    ],
)
def test_a_lease_that_cannot_be_live_does_not_block(tmp_path, case, fields, reliability):
    _write_lease(tmp_path, **fields)
    with Lease(str(tmp_path), command="encode") as lease:
        lease.verify()
    reliability.row(AREA, f"a lease left in --out: {case}", "stale or unreadable: the run takes it over at once "
                    "(no TypeError, no 10-minute wait, no 'stop yourself')")  # fmt: skip


def test_a_live_lease_of_this_process_still_blocks(tmp_path):
    _write_lease(tmp_path, pid_started=process_start(os.getpid()))
    with pytest.raises(LeaseHeldError):
        Lease(str(tmp_path), command="encode").acquire()


@pytest.mark.parametrize("where", ["at", "under"])
def test_out_at_or_under_an_input_folder_is_refused_before_work(tmp_path, docs, r50k_artifact, where, reliability):
    folder = _inputs(tmp_path, docs)
    out = folder if where == "at" else folder / "encoded"
    job = dataclasses.replace(_job(r50k_artifact, folder, out), inputs=(InputSpec(str(folder)),))
    with pytest.raises(UsageError, match="input folder"):
        run_encode(job)
    assert not (folder / "encoded").exists() and not (folder / "_shards").exists()
    reliability.row(AREA, f"--out {where} an --input DIR", "refused before work: nothing is written, the output "
                    "can never be read back as input")  # fmt: skip


def test_a_manifest_copied_from_another_output_is_not_already_complete(tmp_path, docs, r50k_artifact, reliability):
    folder = _inputs(tmp_path, docs)
    a, b = tmp_path / "a", tmp_path / "b"
    run_encode(_job(r50k_artifact, folder, a))
    run_encode(_job(r50k_artifact, folder, b, settings=EncodeSettings(eos="auto")))
    shutil.copy(a / "manifest.json", b / "manifest.json")
    again = run_encode(_job(r50k_artifact, folder, b, settings=EncodeSettings(eos="auto")))
    assert not again["run"]["already_complete"]
    assert (
        json.loads((b / "manifest.json").read_text())["fingerprint"]
        == again["fingerprint"]
        != json.loads((a / "manifest.json").read_text())["fingerprint"]
    )
    reliability.row(
        AREA,
        "manifest.json copied from another output into a finished one",
        "not 'already complete': the manifest's fingerprint and shards are checked against this job; it is rewritten",
    )


# ------------------------------------------------------------------ item 1: one end of a run, several tokenizers
def test_a_finished_two_tokenizer_output_takes_merge_and_survives_a_move(tmp_path, docs, reliability):
    folder = _inputs(tmp_path, docs)
    r50k, cl100k = (str(data_path("tiktoken", f"{n}_base.tiktoken")) for n in ("r50k", "cl100k"))
    job = _job(r50k, folder, tmp_path / "out", settings=EncodeSettings(shard_format="megatron"))
    run_encode_several(job, [r50k, cl100k])
    moved = tmp_path / "moved"
    shutil.move(tmp_path / "out", moved)
    merged = dataclasses.replace(job, out=str(moved), settings=EncodeSettings(shard_format="megatron", merge=True))
    manifests = run_encode_several(merged, [r50k, cl100k])
    for stem in ("r50k_base", "cl100k_base"):
        assert "merged" in manifests[stem] and (moved / stem / "tokens.bin").exists()
        assert (moved / stem / "megatron_data_path.txt").read_text().split()[1] == str(moved / stem / "tokens")
    again = run_encode_several(merged, [r50k, cl100k])  # and moved once more: the paths follow
    assert all(m["run"]["already_complete"] for m in again.values())
    reliability.row(AREA, "a finished two-tokenizer megatron output, moved, then rerun with --merge", "each folder "
                    "is merged without encoding again and its megatron_data_path.txt names the new place: the same "
                    "end of run (finish_encode) as one tokenizer's")  # fmt: skip


def test_ctrl_c_in_a_several_tokenizer_run_names_what_each_folder_keeps(
    tmp_path, docs, r50k_artifact, monkeypatch, reliability
):
    folder = _inputs(tmp_path, docs)
    cl100k = str(data_path("tiktoken", "cl100k_base.tiktoken"))
    real_close, closed = ShardSink.close, []

    def close(self):
        closed.append(self.index)
        if len(closed) == 3:
            raise KeyboardInterrupt
        return real_close(self)

    monkeypatch.setattr(ShardSink, "close", close)
    with pytest.raises((KeyboardInterrupt, RuntimeError)) as stop:
        run_encode_several(_job(r50k_artifact, folder, tmp_path / "out"), [r50k_artifact, cl100k])
    notes = getattr(stop.value, "__notes__", [])
    assert any("shards complete in" in n and n.endswith("r50k") for n in notes)
    assert any("shards complete in" in n and n.endswith("cl100k_base") for n in notes)
    reliability.row(AREA, "Ctrl-C during a two-tokenizer run", "the stop line names what each folder keeps, as a "
                    "one-tokenizer run's does", notes=len(notes))  # fmt: skip


def test_shards_hold_the_same_ranges_for_every_tokenizer(tmp_path, docs):
    from pipeline.corpus.plan import plan_corpus

    folder = _inputs(tmp_path, docs)
    plan = plan_corpus([InputSpec(str(folder / "*.jsonl"))], CorpusSpec("jsonl"), range_bytes=20_000)
    assert len(set(assign_shards(plan.ranges, 60_000))) > 2


# ------------------------------------------------------------------ item 6: hostile vocabulary files bounded
@pytest.fixture(scope="module")
def superword_file(tmp_path_factory) -> Path:
    import bpe_core
    from bpe_core.train.trainer import train_superword

    docs = corpus("en_bible_kjv", 40) + corpus("fortunes_multi", 200)
    tok = train_superword(bpe_core.count_chunks(docs, "cl100k"), 700, 60, docs)
    path = tmp_path_factory.mktemp("sw") / "tokenizer.bpe"
    tok.save(str(path))
    return path


def _rehash(lines: list[str]) -> bytes:
    import hashlib

    body = "\n".join(lines[:-1]) + "\n"
    return (body + f"sha256 {hashlib.sha256(body.encode()).hexdigest()}\n").encode()


@pytest.mark.parametrize("damage", ["a duplicate supermerge", "a word-model size above n_vocab"])
def test_a_hostile_superword_artifact_is_refused_naming_its_line(tmp_path, superword_file, damage, reliability):
    from bpe_core import Tokenizer
    from bpe_core.errors import TokenizerFileError

    lines = superword_file.read_text().rstrip("\n").split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("supermerges "))
    if damage == "a duplicate supermerge":
        lines[at + 3] = lines[at + 1]  # the same pair twice (the count is unchanged, the hash recomputed)
        want, line = "duplicate supermerge", at + 4
    else:
        rule, _ = lines[at - 1].rsplit(" ", 1)
        lines[at - 1] = f"{rule} 10000000"
        want, line = "word-model size 10000000", at
    path = tmp_path / "tokenizer.bpe"
    path.write_bytes(_rehash(lines))
    with pytest.raises(TokenizerFileError, match=want) as error:
        Tokenizer.from_file(str(path))
    assert f"tokenizer.bpe:{line}: " in str(error.value)  # the file and the line of the bad entry
    reliability.row(AREA, f"a superword tokenizer.bpe with {damage} (hash recomputed)", "refused at load, naming "
                    "the line of the bad entry, as a duplicate merge is", line=line)  # fmt: skip


def test_a_vocabulary_above_the_limit_is_refused_naming_its_size_and_the_limit(monkeypatch, reliability):
    from bpe_core import Tokenizer
    from bpe_core.errors import TokenizerFileError

    path = str(data_path("tiktoken", "cl100k_base.tiktoken"))
    with pytest.raises(TokenizerFileError, match="100,277 ids, above max_vocab of 50,000"):
        Tokenizer.from_file(path, max_vocab=50_000)
    monkeypatch.setenv("BEAM_BPE_MAX_VOCAB", "60000")
    with pytest.raises(TokenizerFileError, match="above BEAM_BPE_MAX_VOCAB of 60,000"):
        Tokenizer.from_file(path)
    monkeypatch.delenv("BEAM_BPE_MAX_VOCAB")
    assert Tokenizer.from_file(path).n_vocab == 100_277  # the default, 2**21, is above every real vocabulary
    reliability.row(AREA, "a 100k vocabulary under max_vocab=50,000 and BEAM_BPE_MAX_VOCAB=60000", "refused at load "
                    "with its size and the limit's name; the default limit (2**21) loads it")  # fmt: skip


@pytest.mark.parametrize("chunk", [1, 3, 1 << 16])
@pytest.mark.parametrize("bad", ["99999999", "xx"])
def test_decode_stream_writes_every_valid_id_before_an_invalid_one(monkeypatch, capsys, chunk, bad, reliability):
    import io

    from pipeline.cli import decode as decode_cli
    from pipeline.cli import main

    monkeypatch.setattr(decode_cli, "CHUNK", chunk)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(f"15339 1917 0 {bad} 11".encode())))
    code = main(["decode", "--tokenizer", str(data_path("tiktoken", "cl100k_base.tiktoken")), "--stream"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "hello world!" and "the 3 id(s) before it were decoded and written" in err
    reliability.row(AREA, f"decode --stream with {bad!r} after three valid ids, stdin read {chunk} byte(s) at a time",
                    "every valid id before the invalid one is written, whatever the reads, and the error says "
                    "how many were decoded")  # fmt: skip


# ------------------------------------------------------------------ item 7: the smaller frictions
def test_convert_to_tiktoken_writes_the_ranks_and_names_the_specials_left_out(tmp_path, capsys, r50k_artifact,
                                                                              reliability):  # fmt: skip
    from bpe_core import Tokenizer
    from pipeline.cli import main

    out = tmp_path / "x.tiktoken"
    assert main(["convert", "--tokenizer", r50k_artifact, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "special tokens it leaves out: <|endoftext|>=50256" in err
    ranks = Tokenizer.from_tiktoken(str(out), pretokenizer="r50k")
    assert ranks.vocab == Tokenizer.from_file(r50k_artifact).vocab
    reliability.row(AREA, "convert --out x.tiktoken of a tokenizer with a special token", "written (the ranks, as "
                    "train's tokenizer.tiktoken), naming the special tokens it leaves out")  # fmt: skip


def test_count_tokens_takes_no_progress_and_sizes_take_units(tmp_path, capsys, docs, reliability):
    from pipeline.cli import main

    folder = _inputs(tmp_path, docs)
    tok = str(data_path("tiktoken", "r50k_base.tiktoken"))
    args = ["count-tokens", "--tokenizer", tok, "--input", str(folder / "*.jsonl"), "--json", "--no-progress"]
    assert main([*args, "--range-bytes", "16KiB", "--max-document-bytes", "1MB"]) == 0
    one = json.loads(capsys.readouterr().out)["total"]
    assert main([*args, "--range-bytes", "16384"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == one and one["documents"] == 1200
    with pytest.raises(SystemExit):
        main([*args, "--range-bytes", "1XB"])
    assert "--range-bytes: must be a size such as 1GiB" in capsys.readouterr().err
    reliability.row(AREA, "count-tokens --no-progress; --range-bytes 16KiB and --max-document-bytes 1MB", "accepted "
                    "as --shard-size's sizes are (the same totals as --range-bytes 16384); a bad unit is refused "
                    "naming the flag")  # fmt: skip


# ------------------------------------------------------------------ item 2: quiet workers, one line on Ctrl-C
def _under_a_pty(
    args: list[str], *, interrupt_after: bytes | None, delay: float = 3, timeout: float = 400
) -> tuple[int, str]:
    """Run ``args`` on a pseudo-terminal (its own session, as a shell runs a command); with ``interrupt_after`` (a
    regular expression), send SIGINT to its process group (what a terminal's Ctrl-C does) ``delay`` s after the
    output first matches it."""
    import pty
    import re
    import select
    import signal
    import sys

    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.chdir(ROOT)
        os.execv(sys.executable, [sys.executable, "-m", "pipeline.cli", *args])
    out, seen_at, deadline = b"", None, time.time() + timeout
    while time.time() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            out += data
        if interrupt_after and seen_at is None and re.search(interrupt_after, out):
            seen_at = time.time()
        if seen_at is not None and time.time() - seen_at >= delay:
            os.killpg(os.getpgid(pid), signal.SIGINT)
            seen_at, interrupt_after = None, None
    else:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


def _terminal_lines(text: str) -> list[str]:
    """The lines a terminal keeps: a carriage return redraws the line it is on (the progress bar)."""
    return [line.rsplit("\r", 1)[-1] if line.rsplit("\r", 1)[-1].strip() else line for line in
            text.replace("\r\n", "\n").split("\n") if line.strip()]  # fmt: skip


TWO_WORKERS = [["--workers", "2"], ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]]


def _workers_of_this_run(mark: str) -> list[int]:
    """The Beam workers still alive that this test's run started, and the fork server they come from (they
    inherit its marker variable: a forked worker's /proc environ is the server's, which is the launcher's): the
    processes of runs in other test processes do not count."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or ())
            ours = "sdk_worker_main" in cmdline or "multiprocessing.forkserver" in cmdline
            if ours and proc.environ().get(RUN_MARK) == mark:
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


RUN_MARK = "BEAM_BPE_TEST_RUN_MARK"


@pytest.mark.parametrize("workers", TWO_WORKERS, ids=["workers", "direct"])
def test_ctrl_c_with_two_workers_under_a_pty_is_one_line(tmp_path, docs, workers, reliability, monkeypatch):
    monkeypatch.setenv(RUN_MARK, str(tmp_path))  # inherited by the launcher under the pty and by its workers
    folder = _inputs(tmp_path, docs)
    out = tmp_path / "out"
    tok = str(data_path("tiktoken", "r50k_base.tiktoken"))
    args = ["encode", "--tokenizer", tok, "--input", str(folder / "*.jsonl"), "--out", str(out), "--shard-size",
            "20KB", "--range-bytes", "10KB", *workers]  # fmt: skip
    # Ctrl-C as soon as the bar shows a finished range: mid-run, whatever the machine's speed (its workers start
    # in a fraction of a second; 3 s after the resume line, the run was over)
    code, text = _under_a_pty(args, interrupt_after=rb"resume[\s\S]*?ranges [1-9]", delay=0)
    after = _terminal_lines(text.split("resume", 1)[1])[1:]  # what follows the resume stage's line
    assert code == 130, text[-2000:]
    assert len(after) <= 3 and "stopped (Ctrl-C)" in after[-1] and "shards complete in" in after[-1], after
    assert "Traceback" not in text and "KeyboardInterrupt" not in text and not BEAM_LINE.search(text)
    time.sleep(2)
    assert not _workers_of_this_run(str(tmp_path)), "a worker outlived the run"
    reliability.row(AREA, f"Ctrl-C under a pty, encode {' '.join(workers)}", "at most 3 lines after the stage "
                    "lines (the bar and the one stop line naming what is complete), no traceback, no Beam line, no "
                    "worker left running", lines=len(after))  # fmt: skip


def _processes() -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                found.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
    return found


BEAM_LINE = __import__("re").compile(r"apache_beam|sdk_worker|harness|semi_persistent|control channel", 2)
ROOT = Path(__file__).resolve().parents[2]
