"""The CLI's ways in and out (issue 25): ``--workers N``, decode's byte-exact and streaming output, ``decode --shards``
without ``--tokenizer``, ``convert`` by suffix, one flag per concept, a clean stop and portable outputs."""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import corpus, ours_openai
from pipeline_testlib import run_cli, write_jsonl

from pipeline.cli import build_parser
from pipeline.errors import UsageError
from pipeline.launch.options import with_workers


@pytest.fixture(scope="module")
def r50k_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("tok") / "r50k.bpe"
    ours_openai("r50k").save(str(path))
    return str(path)


def docs() -> list[str]:
    return corpus("fortunes_multi", 120) + corpus("en_bible_kjv", 4)


# ------------------------------------------------------------------ --workers N
def test_workers_is_beams_multi_process_runner():
    assert with_workers(3, ["--temp_location=/tmp/x"]) == [
        "--temp_location=/tmp/x",
        "--direct_running_mode=multi_processing",
        "--direct_num_workers=3",
    ]
    assert with_workers(2, ["--runner", "FnApiRunner"])[-1] == "--direct_num_workers=2"


@pytest.mark.parametrize(
    ("beam", "named"),
    [
        (["--runner", "DaskRunner"], "--runner DaskRunner"),
        (["--direct_num_workers=4"], "--direct_num_workers"),
        (["--direct_running_mode", "multi_threading"], "--direct_running_mode"),
    ],
)
def test_workers_is_refused_beside_another_runner_or_direct_option(beam, named):
    with pytest.raises(UsageError, match=named):
        with_workers(2, beam)


@pytest.mark.parametrize("command", ["train", "encode", "report"])
def test_help_lists_workers(command):
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    assert "--workers" in sub.choices[command].format_help()


@pytest.mark.parametrize("bad", ["0", "-2", "two"])
def test_workers_needs_a_whole_number(bad, capsys, tmp_path, r50k_file):
    with pytest.raises(SystemExit):
        run_cli("encode", "--tokenizer", r50k_file, "--input", tmp_path / "a.jsonl", "--out", tmp_path / "o",
                "--workers", bad)  # fmt: skip
    assert "number of workers" in capsys.readouterr().err


def test_workers_with_runner_is_refused_before_any_work(capsys, tmp_path, r50k_file):
    write_jsonl(tmp_path / "a.jsonl", ["one", "two"])
    with pytest.raises(SystemExit):
        run_cli("encode", "--tokenizer", r50k_file, "--input", tmp_path / "a.jsonl", "--out", tmp_path / "o",
                "--workers", "2", "--runner", "DaskRunner")  # fmt: skip
    assert "--runner DaskRunner" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_encode_with_workers_runs_two_processes_and_writes_the_same_files(tmp_path, r50k_file, monkeypatch):
    import pipeline.encode.run as job

    seen = []

    def spy(beam_args, **kw):
        seen.append(list(beam_args))
        return original(beam_args, **kw)

    original = job.pipeline_options
    monkeypatch.setattr(job, "pipeline_options", spy)
    texts = docs()
    write_jsonl(tmp_path / "a.jsonl", texts[:60])
    write_jsonl(tmp_path / "b.jsonl", texts[60:])
    common = ["encode", "--tokenizer", r50k_file, "--input", tmp_path / "*.jsonl", "--range-bytes", 4096,
              "--shard-size", "8KB", "--no-progress"]  # fmt: skip
    assert run_cli(*common, "--out", tmp_path / "one") == 0
    assert run_cli(*common, "--out", tmp_path / "two", "--workers", "2") == 0
    assert not any(a.startswith("--direct_") for a in seen[0])  # the in-process runner by default
    assert {"--direct_running_mode=multi_processing", "--direct_num_workers=2"} <= set(seen[1])
    one = {p.relative_to(tmp_path / "one") for p in (tmp_path / "one").glob("*.parquet")}
    assert len(one) > 1
    for name in one:
        assert (tmp_path / "two" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()


def test_encode_text_refuses_workers(capsys, r50k_file):
    assert run_cli("encode", "--tokenizer", r50k_file, "--text", "hi", "--workers", "2") == 2
    assert "--workers belongs to the encoding pipeline" in capsys.readouterr().err


# ------------------------------------------------------------------ decode
TEXT = "naïve café 日本語 ☕ no newline at the end"


def test_decode_raw_writes_the_bytes_exactly(r50k_file, capsysbinary):
    tok = ours_openai("r50k")
    ids = tok.encode(TEXT)
    assert run_cli("decode", "--tokenizer", r50k_file, "--ids", " ".join(map(str, ids)), "--raw") == 0
    assert capsysbinary.readouterr().out == TEXT.encode()
    cut = ids[: next(n for n in range(1, len(ids)) if not _is_utf8(tok.decode_bytes(ids[:n])))]
    assert run_cli("decode", "--tokenizer", r50k_file, "--ids", ",".join(map(str, cut)), "--raw") == 0
    assert capsysbinary.readouterr().out == tok.decode_bytes(cut)  # a cut character keeps its bytes
    assert run_cli("decode", "--tokenizer", r50k_file, "--ids", " ".join(map(str, ids))) == 0
    assert capsysbinary.readouterr().out == TEXT.encode() + b"\n"  # without --raw: a line, as before


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _decode_process(r50k_file: str, *flags: str, stdout=None):
    command = [sys.executable, "-m", "pipeline.cli", "decode", "--tokenizer", r50k_file, *flags]
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE)


def _read_some(proc, wanted: int, deadline: float = 60.0) -> bytes:
    """What the process has written once ``wanted`` bytes arrived (or the deadline passed: then fewer)."""
    got, end = b"", time.monotonic() + deadline
    while len(got) < wanted and time.monotonic() < end:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            data = os.read(proc.stdout.fileno(), 65536)
            if not data:
                break
            got += data
    return got


@pytest.mark.parametrize("separator", [" ", ",", "\n"])
def test_decode_stream_writes_text_as_the_ids_arrive(r50k_file, separator):
    tok = ours_openai("r50k")
    first, second = tok.encode("Hello world,"), tok.encode(" and goodbye.")
    proc = _decode_process(r50k_file, "--stream")
    try:
        proc.stdin.write(separator.join(map(str, first)).encode() + separator.encode())
        proc.stdin.flush()  # no newline (with " " and ","), stdin still open: the text must come now
        assert _read_some(proc, len("Hello world,")) == b"Hello world,"
        proc.stdin.write(separator.join(map(str, second)).encode())  # the last id ends at EOF
        proc.stdin.close()
        assert proc.stdout.read() == b" and goodbye."
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()


def test_decode_stream_memory_does_not_grow_with_a_long_line(r50k_file, tmp_path):
    """One line of 20 MB of ids: the decoder's peak memory stays that of a short input (a74ce39 held the line, its
    words and its ints: 675 MB for 22 MB)."""
    tok = ours_openai("r50k")
    ids = " ".join(map(str, tok.encode(" ".join(corpus("en_bible_kjv", 40)))))
    line = (ids + " ") * max(1, 20_000_000 // len(ids))
    peaks = {}
    for name, data in (("short", ids), ("long", line)):
        out = tmp_path / f"{name}.txt"
        # VmHWM, not ru_maxrss: the latter keeps the forked parent's size (this test's 20 MB string) across exec
        code = ("import sys; from pipeline.cli import main; rc = main(sys.argv[1:]); "
                "hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM')); "
                "print(hwm.split()[1], file=sys.stderr); sys.exit(rc)")  # fmt: skip
        with open(out, "wb") as sink:
            run = subprocess.run([sys.executable, "-c", code, "decode", "--tokenizer", r50k_file, "--stream", "--raw"],
                                 input=data.encode(), stdout=sink, stderr=subprocess.PIPE, check=True)  # fmt: skip
        peaks[name] = int(run.stderr.split()[-1])  # KiB
        assert out.read_bytes() == tok.decode_bytes([int(w) for w in data.split()])
    assert len(line) > 19_000_000
    assert peaks["long"] - peaks["short"] < 20_000, peaks


def test_decode_stream_names_a_word_that_is_no_id(r50k_file):
    proc = _decode_process(r50k_file, "--stream")
    _, err = proc.communicate(b"15339 19x17 ", timeout=60)
    assert proc.returncode == 2
    assert b"'19x17' is not a token id" in err


@pytest.fixture(scope="module")
def encoded(tmp_path_factory, r50k_file):
    """A finished parquet output of two small JSONL files, encoded from inside its root folder."""
    root = tmp_path_factory.mktemp("enc")
    write_jsonl(root / "data" / "a.jsonl", docs()[:50])
    write_jsonl(root / "data" / "b.jsonl", docs()[50:])
    assert run_cli("encode", "--tokenizer", r50k_file, "--input", root / "data" / "*.jsonl", "--out", root / "out",
                   "--shard-size", "8KB", "--no-progress") == 0  # fmt: skip
    return root


def test_decode_shards_takes_the_tokenizer_from_the_manifest(encoded, r50k_file, capsys):
    doc = f"{encoded / 'data' / 'b.jsonl'}@0"
    assert run_cli("decode", "--shards", encoded / "out", "--doc", doc) == 0
    assert capsys.readouterr().out == docs()[50] + "\n"
    assert run_cli("decode", "--shards", encoded / "out", "--doc", "3", "--tokenizer", r50k_file, "--raw") == 0
    assert capsys.readouterr().out == docs()[3]


def test_decode_shards_checks_the_digest_of_the_tokenizer_given_or_named(encoded, tmp_path, capsys, monkeypatch):
    other = tmp_path / "cl100k.bpe"
    ours_openai("cl100k").save(str(other))
    assert run_cli("decode", "--shards", encoded / "out", "--doc", "0", "--tokenizer", other) == 2
    assert "is not the tokenizer" in capsys.readouterr().err
    manifest = json.loads((encoded / "out" / "manifest.json").read_text())
    moved = dict(manifest, tokenizer=dict(manifest["tokenizer"], path=str(other)))
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in (encoded / "out").iterdir():
        if f.is_file():
            (copy / f.name).write_bytes(f.read_bytes())
    (copy / "manifest.json").write_text(json.dumps(moved))
    assert run_cli("decode", "--shards", copy, "--doc", "0") == 2
    assert f"{other} (named in the manifest) is no longer the tokenizer" in capsys.readouterr().err
    gone = dict(manifest, tokenizer=dict(manifest["tokenizer"], path=str(tmp_path / "gone.bpe")))
    (copy / "manifest.json").write_text(json.dumps(gone))
    assert run_cli("decode", "--shards", copy, "--doc", "0") == 2
    assert "cannot be loaded here" in capsys.readouterr().err


# ------------------------------------------------------------------ one flag per concept
@pytest.fixture
def fresh_warnings(monkeypatch):
    import pipeline.cli.common as common

    monkeypatch.setattr(common, "_WARNED", set())


def test_special_tokens_allowed_works_with_text(r50k_file, capsys, fresh_warnings):
    assert run_cli("encode", "--tokenizer", r50k_file, "--text", "a<|endoftext|>", "--special-tokens", "allowed") == 0
    assert capsys.readouterr().out.split() == ["64", "50256"]
    assert run_cli("encode", "--tokenizer", r50k_file, "--text", "a<|endoftext|>") == 0
    assert "50256" not in capsys.readouterr().out.split()
    assert run_cli("encode", "--tokenizer", r50k_file, "--text", "a<|endoftext|>", "--allow-special") == 0
    captured = capsys.readouterr()
    assert captured.out.split() == ["64", "50256"]
    assert captured.err.count("--allow-special is deprecated: use --special-tokens allowed") == 1
    assert (
        run_cli("encode", "--tokenizer", r50k_file, "--text", "x", "--allow-special", "--special-tokens", "ordinary")
        == 2
    )
    assert "contradict each other" in capsys.readouterr().err


def test_allow_special_is_the_policy_of_a_corpus_too(tmp_path, r50k_file, capsys, fresh_warnings):
    write_jsonl(tmp_path / "a.jsonl", ["spells <|endoftext|> here", "plain"])
    common = ["encode", "--tokenizer", r50k_file, "--input", tmp_path / "a.jsonl", "--no-progress"]
    assert run_cli(*common, "--out", tmp_path / "new", "--special-tokens", "allowed") == 0
    assert run_cli(*common, "--out", tmp_path / "old", "--allow-special") == 0
    assert capsys.readouterr().err.count("deprecated") == 1
    for name in ("tokens-00000-of-00001.parquet",):
        assert (tmp_path / "old" / name).read_bytes() == (tmp_path / "new" / name).read_bytes()
    manifest = json.loads((tmp_path / "old" / "manifest.json").read_text())
    assert manifest["settings"]["special_tokens"] == "allowed"


def test_text_field_names_the_parquet_column(tmp_path, r50k_file, capsys, fresh_warnings):
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = docs()[:20]
    pq.write_table(pa.table({"text": ["wrong"] * 20, "body": texts}), tmp_path / "a.parquet")
    common = ["encode", "--tokenizer", r50k_file, "--input", tmp_path / "a.parquet", "--no-progress"]
    assert run_cli(*common, "--out", tmp_path / "field", "--text-field", "body") == 0
    assert run_cli("decode", "--shards", tmp_path / "field", "--doc", "3", "--raw") == 0
    assert capsys.readouterr().out.endswith(texts[3])
    assert run_cli(*common, "--out", tmp_path / "column", "--text-column", "body") == 0
    assert capsys.readouterr().err.count("--text-column is deprecated: use --text-field") == 1
    name = "tokens-00000-of-00001.parquet"
    assert (tmp_path / "column" / name).read_bytes() == (tmp_path / "field" / name).read_bytes()
    assert run_cli(*common, "--out", tmp_path / "both", "--text-field", "text", "--text-column", "body") == 2
    assert "name different fields" in capsys.readouterr().err


def test_train_special_token_name_equals_id_is_an_id(tmp_path):
    from bpe_core import Tokenizer

    write_jsonl(tmp_path / "a.jsonl", docs())
    common = ["train", "--input", tmp_path / "a.jsonl", "--vocab-size", "300", "--no-progress"]
    assert run_cli(*common, "--out", tmp_path / "t", "--special-token", "<|a=b|>=299", "--special-token", "<|s|>") == 0
    tok = Tokenizer.from_file(str(tmp_path / "t" / "tokenizer.bpe"))
    assert tok.special_tokens == {"<|a=b|>": 299, "<|s|>": 298}
    assert run_cli(*common, "--out", tmp_path / "u", "--special-token", "<|s|>") == 0
    plain = Tokenizer.from_file(str(tmp_path / "u" / "tokenizer.bpe"))
    assert plain.special_tokens == {"<|s|>": 299} and tok.merges == plain.merges[: len(tok.merges)]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--special-token", "<|a=b|>"], "what follows the last '=' is no number"),
        (["--special-token", "<|s|>=5"], "fall among the merged tokens"),
        (["--special-token", "<|s|>=299", "--special-token", "<|t|>=299"], "share an id"),
        (["--special-token", "<|s|>=299", "--vocab-size", "290,300"], "need one vocab_size"),
    ],
)
def test_train_special_token_ids_are_checked_before_any_work(tmp_path, capsys, flags, message):
    write_jsonl(tmp_path / "a.jsonl", ["one", "two"])
    args = ["train", "--input", tmp_path / "a.jsonl", "--out", tmp_path / "t", "--no-progress"]
    if "--vocab-size" not in flags:
        args += ["--vocab-size", "300"]
    assert run_cli(*args, *flags) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "t" / "tokenizer.bpe").exists()


# ------------------------------------------------------------------ convert by suffix
def _same_ids(a, b) -> None:
    texts = docs()[:60]
    assert a.encode_ordinary_batch(texts) == b.encode_ordinary_batch(texts)
    assert a.special_tokens == b.special_tokens


def test_convert_writes_the_format_its_suffix_names(tmp_path, r50k_file, capsys):
    from bpe_core import Tokenizer
    from bpe_core._io import read_bytes
    from bpe_core.formats.detect import sniff

    source = Tokenizer.from_file(r50k_file)
    assert run_cli("convert", "--tokenizer", r50k_file, "--out", tmp_path / "t.json") == 0
    assert sniff(read_bytes(str(tmp_path / "t.json"))) == "json"
    _same_ids(Tokenizer.from_huggingface(str(tmp_path / "t.json")), source)
    assert run_cli("convert", "--tokenizer", r50k_file, "--out", tmp_path / "t.tiktoken") == 0
    assert sniff(read_bytes(str(tmp_path / "t.tiktoken"))) == "tiktoken"
    _same_ids(Tokenizer.from_tiktoken(str(tmp_path / "t.tiktoken")), source)  # OpenAI's own file, known by its hash
    assert run_cli("convert", "--tokenizer", r50k_file, "--out", f"{tmp_path / 'gpt2'}/") == 0
    assert sorted(p.name for p in (tmp_path / "gpt2").iterdir()) == ["merges.txt", "vocab.json"]
    _same_ids(Tokenizer.from_gpt2_files(str(tmp_path / "gpt2" / "vocab.json"), pretokenizer="r50k"), source)
    assert run_cli("convert", "--tokenizer", tmp_path / "t.json", "--out", tmp_path / "back.bpe") == 0
    _same_ids(Tokenizer.load(str(tmp_path / "back.bpe")), source)
    assert "holds no pre-tokenizer: load it with --pretokenizer r50k" in capsys.readouterr().out


def test_convert_refuses_what_a_format_cannot_hold(tmp_path, capsys):
    write_jsonl(tmp_path / "a.jsonl", docs())
    assert run_cli("train", "--input", tmp_path / "a.jsonl", "--vocab-size", "300", "--no-progress",
                   "--special-token", "<|end|>", "--pretokenizer", "r50k", "--out", tmp_path / "t") == 0  # fmt: skip
    trained = tmp_path / "t" / "tokenizer.bpe"
    capsys.readouterr()
    # a rank file holds the ranks as train writes them, and the message names the specials it leaves out
    assert run_cli("convert", "--tokenizer", trained, "--out", tmp_path / "x.tiktoken") == 0
    assert "<|end|>" in capsys.readouterr().err
    assert (tmp_path / "x.tiktoken").read_bytes() == (tmp_path / "t" / "tokenizer.tiktoken").read_bytes()
    assert run_cli("convert", "--tokenizer", trained, "--out", tmp_path / "x.txt") == 2
    assert "the suffix .txt names no tokenizer format" in capsys.readouterr().err
    assert run_cli("convert", "--tokenizer", trained, "--out", tmp_path / "x.json") == 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".convert")] == []


def test_merge_added_to_a_finished_megatron_output_merges_without_encoding(tmp_path, r50k_file, monkeypatch):
    import pipeline.encode.run as run

    write_jsonl(tmp_path / "a.jsonl", docs()[:60])
    write_jsonl(tmp_path / "b.jsonl", docs()[60:])
    common = ["encode", "--tokenizer", r50k_file, "--input", tmp_path / "*.jsonl", "--shard-format", "megatron",
              "--shard-size", "8KB", "--range-bytes", "4096", "--no-progress", "--eos"]  # fmt: skip
    assert run_cli(*common, "--out", tmp_path / "once", "--merge") == 0
    assert run_cli(*common, "--out", tmp_path / "later") == 0
    shards = {p.name: p.read_bytes() for p in (tmp_path / "later").glob("tokens-*")}
    assert len(shards) > 2

    def no_encoding(*a, **k):
        raise AssertionError("encoded again")

    monkeypatch.setattr(run, "run_to_end", no_encoding)  # the one call that runs the encode graph
    assert run_cli(*common, "--out", tmp_path / "later", "--merge") == 0
    assert {p.name: p.read_bytes() for p in (tmp_path / "later").glob("tokens-*")} == shards
    for name in ("tokens.bin", "tokens.idx"):
        assert (tmp_path / "later" / name).read_bytes() == (tmp_path / "once" / name).read_bytes()
    path_file = (tmp_path / "later" / "megatron_data_path.txt").read_text()
    assert path_file == (tmp_path / "once" / "megatron_data_path.txt").read_text().replace("/once/", "/later/")
    manifest = json.loads((tmp_path / "later" / "manifest.json").read_text())
    assert manifest["merged"]["tokens"] == json.loads((tmp_path / "once" / "manifest.json").read_text())["tokens"]
    assert (tmp_path / "later" / "COMPLETED").exists()
    assert run_cli(*common, "--out", tmp_path / "later", "--merge") == 0  # now simply complete


# ------------------------------------------------------------------ a clean stop
SLOW_SECOND_SHARD = """
import time
from pipeline.encode.shards import ShardSink
_original = ShardSink.close
def close(self):
    if self.index >= 1:
        time.sleep(120)  # the test stops the run here
    return _original(self)
ShardSink.close = close
"""


def _encode_process(tmp_path: Path, r50k_file: str, out: Path) -> subprocess.Popen:
    hooks = tmp_path / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "sitecustomize.py").write_text(SLOW_SECOND_SHARD)
    write_jsonl(tmp_path / "in" / "a.jsonl", docs())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(hooks), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, "-m", "pipeline.cli", "encode", "--tokenizer", r50k_file, "--input",
               tmp_path / "in" / "a.jsonl", "--out", out, "--shard-size", "8KB", "--range-bytes", "4096",
               "--no-progress"]  # fmt: skip
    return subprocess.Popen(list(map(str, command)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def test_ctrl_c_ends_in_one_line_saying_what_is_complete_and_that_a_rerun_resumes(tmp_path, r50k_file):
    out = tmp_path / "out"
    proc = _encode_process(tmp_path, r50k_file, out)
    try:
        end = time.monotonic() + 120
        while not list((out / "_shards").glob("tokens-*.json")) and time.monotonic() < end and proc.poll() is None:
            time.sleep(0.2)
        assert list((out / "_shards").glob("tokens-*.json")), proc.communicate(timeout=5)
        time.sleep(1)  # the second shard is in its (slowed) writer now
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    lines = [line for line in err.decode().splitlines() if not line.startswith("{")]  # not the stage lines
    assert proc.returncode == 130, err.decode()
    assert len(lines) == 1, err.decode()
    assert lines[0].startswith("beam-bpe encode: stopped (Ctrl-C). 1 of ")
    assert "rerun the same command to resume" in lines[0]
    assert "Traceback" not in err.decode() and "CRITICAL" not in err.decode()
    assert not (out / "_tmp").exists() and not list(out.glob(".tmp-*")), "the stopped shard left no temporary file"
    assert run_cli("encode", "--tokenizer", r50k_file, "--input", tmp_path / "in" / "a.jsonl", "--out", out,
                   "--shard-size", "8KB", "--range-bytes", "4096", "--no-progress") == 0  # fmt: skip
    assert (out / "COMPLETED").exists()


def test_a_failed_run_names_its_part_files_when_it_cannot_remove_them(tmp_path, monkeypatch):
    from pipeline.encode.layout import ShardLayout
    from pipeline.encode.resume import note_stopped_run

    layout = ShardLayout(str(tmp_path), "tokens", 4, "parquet", "uint16", "d", "f", (0, 1, 2, 3))
    (tmp_path / "_tmp" / "tokens-00001-of-00004").mkdir(parents=True)
    (tmp_path / "_tmp" / "tokens-00001-of-00004" / "part-0000001-00000.arrow").write_bytes(b"x" * 13_000_000)
    import pipeline.encode.resume as resume

    def full_disk(path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(resume, "remove", full_disk)
    exc = OSError(28, "No space left on device")
    note_stopped_run(layout, exc)
    assert exc.__notes__[0] == f"0 of 4 shards complete in {tmp_path}"
    assert exc.__notes__[1].startswith(f"1 part files (13.0 MB) are left in {tmp_path / '_tmp'}")
    monkeypatch.undo()
    exc = OSError(28, "No space left on device")
    note_stopped_run(layout, exc)
    assert exc.__notes__[1] == f"its 1 part files (13.0 MB) in {tmp_path / '_tmp'} were removed"
    assert not (tmp_path / "_tmp").exists()


# ------------------------------------------------------------------ portable outputs
def test_a_copied_output_decodes_by_relative_id_and_a_rerun_there_rewrites_the_data_path(tmp_path, r50k_file, capsys):
    import shutil

    import pyarrow.parquet as pq

    texts = docs()
    write_jsonl(tmp_path / "corpus" / "a.jsonl", texts[:60])
    write_jsonl(tmp_path / "corpus" / "sub" / "b.jsonl", texts[60:])
    for fmt in ("megatron", "parquet"):
        out = tmp_path / f"out-{fmt}"
        command = ["encode", "--tokenizer", r50k_file, "--input", tmp_path / "corpus" / "a.jsonl", "--input",
                   tmp_path / "corpus" / "sub" / "b.jsonl", "--shard-format", fmt, "--shard-size", "8KB",
                   "--no-progress"]  # fmt: skip
        assert run_cli(*command, "--out", out) == 0
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["root"] == str(tmp_path / "corpus")
        assert manifest["given"] == [str(tmp_path / "corpus" / "a.jsonl"), str(tmp_path / "corpus" / "sub" / "b.jsonl")]
        assert {s["path"] for s in manifest["sources"]} == {"a.jsonl", "sub/b.jsonl"}
        copy = tmp_path / "elsewhere" / f"copy-{fmt}"
        shutil.copytree(out, copy)
        shutil.rmtree(out)
        capsys.readouterr()
        offset = len(json.dumps({"text": texts[60], "id": 0}, ensure_ascii=False).encode()) + 1
        for doc in (f"sub/b.jsonl@{offset}", f"{tmp_path / 'corpus' / 'sub' / 'b.jsonl'}@{offset}"):
            assert run_cli("decode", "--shards", copy, "--doc", doc, "--raw") == 0
            captured = capsys.readouterr()
            assert captured.out == texts[61] and f"# sub/b.jsonl@{offset}:" in captured.err
        if fmt == "parquet":
            ids = pq.read_table(sorted(copy.glob("tokens-*.parquet"))[0]).column("doc_id").to_pylist()
            assert ids[0] == "a.jsonl@0"
            continue
        assert str(out) in (copy / "megatron_data_path.txt").read_text()  # as copied: the old place
        assert run_cli(*command, "--out", copy) == 0  # complete: nothing encoded, the data path rewritten
        line = (copy / "megatron_data_path.txt").read_text().split()
        assert line[1::2] == [str(copy / p.name[: -len(".bin")]) for p in sorted(copy.glob("tokens-*.bin"))]
        incomplete = tmp_path / "elsewhere" / "incomplete"
        shutil.copytree(copy, incomplete)
        (incomplete / "COMPLETED").unlink()
        next((incomplete / "_shards").glob("tokens-*.json")).unlink()
        assert run_cli(*command, "--out", incomplete) == 0
        assert str(copy) not in (incomplete / "megatron_data_path.txt").read_text()
        assert str(incomplete / "tokens-00000-of-") in (incomplete / "megatron_data_path.txt").read_text()


def test_decode_doc_takes_the_path_as_given_from_here_too(tmp_path, r50k_file, capsys, monkeypatch):
    write_jsonl(tmp_path / "data" / "a.jsonl", docs()[:5])
    monkeypatch.chdir(tmp_path)
    assert run_cli("encode", "--tokenizer", r50k_file, "--input", "data/a.jsonl", "--out", "out", "--no-progress") == 0
    capsys.readouterr()
    for doc in ("a.jsonl@0", "data/a.jsonl@0", f"{tmp_path}/data/a.jsonl@0"):  # root-relative, as given, absolute
        assert run_cli("decode", "--shards", "out", "--doc", doc, "--raw") == 0
        assert capsys.readouterr().out == docs()[0]


def test_report_md_names_files_relative_to_its_folder(tmp_path, r50k_file):
    import shutil

    write_jsonl(tmp_path / "a.jsonl", docs())
    shutil.copy(r50k_file, tmp_path / "r50k.bpe")
    (tmp_path / "out").mkdir()
    shutil.copy(r50k_file, tmp_path / "out" / "mine.bpe")
    args = ["report", "--tokenizer", tmp_path / "out" / "mine.bpe", "--tokenizer", tmp_path / "r50k.bpe",
            "--input", tmp_path / "a.jsonl", "--eval-fraction", "0.5", "--out", tmp_path / "out"]  # fmt: skip
    assert run_cli(*args) == 0
    text = (tmp_path / "out" / "report.md").read_text()
    assert "`mine.bpe`" in text and "`../r50k.bpe`" in text
    assert str(tmp_path) not in text
