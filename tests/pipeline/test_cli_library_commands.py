"""The library commands of the beam-bpe CLI: info, encode, decode (plain and streaming), convert."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import openai_encoding, tiktoken_openai

from bpe_core import Tokenizer
from pipeline.cli import main


@pytest.fixture(scope="module")
def own_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "tokenizer.bpe"
    rank_file = openai_encoding("cl100k")["path"]
    assert main(["convert", "--tokenizer", rank_file, "--pretokenizer", "cl100k", "--out", str(path)]) == 0
    return str(path)


def test_convert_then_encode_and_decode(own_file, capsys):
    capsys.readouterr()
    assert main(["encode", "--tokenizer", own_file, "--text", "hello world"]) == 0
    assert capsys.readouterr().out.split() == ["15339", "1917"]
    assert main(["decode", "--tokenizer", own_file, "--ids", "15339 1917"]) == 0
    assert capsys.readouterr().out == "hello world\n"
    assert main(["decode", "--tokenizer", own_file, "--ids", "[15339, 1917]"]) == 0
    assert capsys.readouterr().out == "hello world\n"


def test_info_describes_the_file(own_file, capsys):
    assert main(["info", "--tokenizer", own_file]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["kind"] == "ranks" and info["n_vocab"] == 100277 and info["pretokenizer"] == "cl100k"
    assert info["special_tokens"] == openai_encoding("cl100k")["special_tokens"]  # OpenAI's file: tiktoken's specials


def test_stream_decoding_from_stdin(own_file, monkeypatch, capsys):
    tok = Tokenizer.load(own_file)
    ids = tok.encode("naïve café 日本語 ☕")
    lines = "\n".join(" ".join(map(str, ids[i : i + 2])) for i in range(0, len(ids), 2)) + "\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(lines))
    assert main(["decode", "--tokenizer", own_file, "--stream"]) == 0
    assert capsys.readouterr().out == "naïve café 日本語 ☕"


def test_errors_are_reported_not_raised(tmp_path, capsys):
    bad = tmp_path / "bad.bpe"
    bad.write_text("beam-bpe-tokenizer\nformat_version 7\n")
    assert main(["info", "--tokenizer", str(bad)]) == 2
    assert "format version 7 is not supported" in capsys.readouterr().err
    rank_file = tmp_path / "ranks.tiktoken"  # not one of OpenAI's published files: no known pre-tokenizer
    rank_file.write_bytes(b"".join(open(openai_encoding("cl100k")["path"], "rb").readlines()[:300]))
    assert main(["encode", "--tokenizer", str(rank_file), "--text", "x"]) == 2
    assert "--pretokenizer" in capsys.readouterr().err


def test_console_script_is_installed(own_file):
    script = Path(sys.executable).parent / "beam-bpe"
    out = subprocess.run(
        [str(script), "encode", "--tokenizer", own_file, "--text", "hi there"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert [int(i) for i in out.stdout.split()] == tiktoken_openai("cl100k").encode("hi there")


def test_convert_gives_a_rank_file_its_special_tokens(tmp_path, capsys):
    ranks = tmp_path / "ranks.tiktoken"  # not OpenAI's file: no special tokens by default
    ranks.write_bytes(b"".join(open(openai_encoding("r50k")["path"], "rb").readlines()[:1000]))
    out = tmp_path / "tokenizer.bpe"
    args = ["convert", "--tokenizer", str(ranks), "--pretokenizer", "r50k", "--out", str(out)]
    assert main([*args, "--special-token", "<|endoftext|>=1000", "--special-token", "<|pad|>=1001"]) == 0
    assert Tokenizer.load(str(out)).special_tokens == {"<|endoftext|>": 1000, "<|pad|>": 1001}
    assert main([*args, "--special-token", "<|endoftext|>"]) == 2
    assert "expected NAME=ID" in capsys.readouterr().err
    assert (
        main(["convert", "--tokenizer", str(out), "--out", str(tmp_path / "b.bpe"), "--special-token", "<|x|>=5"]) == 2
    )
    assert "carries its own" in capsys.readouterr().err
