"""``beam-bpe inspect`` (colours on a terminal, plain text in a pipe) and ``beam-bpe count-tokens`` (figures from
tiktoken on the same documents)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, corpus, openai_encoding, tiktoken_openai
from pipeline_testlib import run_cli, write_bytes, write_jsonl

TEXT = "Hello world, naïve café\n\tdone <|endoftext|>"
ESC = "\x1b["


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", *map(str, args)]


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k != "NO_COLOR"}


def _inspect_args() -> list[str]:
    return ["inspect", "--tokenizer", openai_encoding("cl100k")["path"], "--text", TEXT, "--merges", "3"]


def test_inspect_in_a_pipe_is_plain_and_shows_tiktoken_pieces():
    run = subprocess.run(_cli(*_inspect_args()), capture_output=True, text=True, cwd=ROOT, env=_env(), check=True)
    out = run.stdout
    assert ESC not in out
    enc = tiktoken_openai("cl100k")
    ids = enc.encode_ordinary(TEXT)
    pieces = [enc.decode_single_token_bytes(i) for i in ids]
    lines = out.splitlines()
    assert lines[0] == "|" + "|".join(p.decode().replace("\n", "\\n").replace("\t", "\\t") for p in pieces) + "|"
    rows = [line.split() for line in lines[2 : 2 + len(ids)]]
    assert [int(r[0]) for r in rows] == ids
    assert "Ġworld" in out and "Ċ" in out and "ĠcafÃ©" in out  # GPT-2's byte-to-unicode form
    assert (
        lines[2 + len(ids)]
        == f"{len(ids)} tokens, {len(TEXT.encode())} bytes, {len(TEXT.encode()) / len(ids):.2f} bytes per token"
    )
    first = [enc.decode_single_token_bytes(r) for r in (256, 257, 258)]  # cl100k's first merges: ranks 256...
    assert lines[-3:] == [
        "     0  Ġ + Ġ -> ĠĠ (256)",
        "     1  ĠĠ + ĠĠ -> ĠĠĠĠ (257)",
        "     2  i + n -> in (258)",
    ] and first == [b"  ", b"    ", b"in"]


def test_inspect_on_a_terminal_alternates_colours():
    leader, follower = pty.openpty()
    proc = subprocess.Popen(_cli(*_inspect_args()), stdout=follower, stderr=subprocess.PIPE, cwd=ROOT, env=_env())
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait() == 0, proc.stderr.read()
    out = b"".join(chunks).decode()
    first = out.splitlines()[0]
    assert first.startswith("\x1b[30;46mHello\x1b[0m\x1b[30;43m world\x1b[0m\x1b[30;46m,\x1b[0m")
    assert first.count("\x1b[0m") == len(tiktoken_openai("cl100k").encode_ordinary(TEXT))


def test_inspect_allow_special_and_needs_a_text(capsys):
    assert (
        run_cli(
            "inspect", "--tokenizer", openai_encoding("cl100k")["path"], "--text", "a<|endoftext|>", "--allow-special"
        )
        == 0
    )
    assert "100257  '<|endoftext|>'" in capsys.readouterr().out
    assert run_cli("inspect", "--tokenizer", openai_encoding("cl100k")["path"]) == 2
    assert "--text S or --file F" in capsys.readouterr().err


@pytest.fixture(scope="module")
def two_files(tmp_path_factory) -> tuple[Path, list[list[str]]]:
    root = tmp_path_factory.mktemp("count")
    parts = [corpus("fortunes_multi", 300), corpus("multi_udhr", 5)]
    write_jsonl(root / "a.jsonl.gz", parts[0])
    write_jsonl(root / "b.jsonl", parts[1], extra=[b"{not json"])
    return root, parts


def test_count_tokens_equals_tiktoken_per_file(two_files, capsys):
    root, parts = two_files
    enc = tiktoken_openai("cl100k")
    assert (
        run_cli(
            "count-tokens", "--tokenizer", openai_encoding("cl100k")["path"], "--input", root / "*.jsonl*", "--json"
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    expected = [
        {"documents": len(docs), "bytes": sum(len(d.encode()) for d in docs), "dead_letters": dead,
         "tokens": sum(len(ids) for ids in enc.encode_ordinary_batch(docs))}
        for docs, dead in zip(parts, (0, 1), strict=True)
    ]  # fmt: skip
    assert [{k: v for k, v in row.items() if k != "file"} for row in result["files"]] == expected
    assert [Path(row["file"]).name for row in result["files"]] == ["a.jsonl.gz", "b.jsonl"]
    assert result["total"] == {k: sum(row[k] for row in expected) for k in expected[0]}


def test_count_tokens_table_has_a_total_row(two_files, capsys):
    root, parts = two_files
    assert (
        run_cli("count-tokens", "--tokenizer", openai_encoding("cl100k")["path"], "--input", root / "a.jsonl.gz") == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["file", "documents", "bytes", "tokens", "bytes/token"]
    tokens = sum(len(ids) for ids in tiktoken_openai("cl100k").encode_ordinary_batch(parts[0]))
    assert lines[-1].split()[:4] == [
        "total",
        f"{len(parts[0]):,}",
        f"{sum(len(d.encode()) for d in parts[0]):,}",
        f"{tokens:,}",
    ]


def test_count_tokens_reads_plain_text(tmp_path, capsys):
    write_bytes(tmp_path / "t.txt", b"one line\nsecond line here\n")
    assert (
        run_cli("count-tokens", "--tokenizer", openai_encoding("r50k")["path"], "--input", tmp_path / "t.txt", "--json")
        == 0
    )
    total = json.loads(capsys.readouterr().out)["total"]
    enc = tiktoken_openai("r50k")
    assert total["documents"] == 2 and total["tokens"] == len(enc.encode("one line")) + len(
        enc.encode("second line here")
    )
