"""Tokenizer.from_file and `beam-bpe info` recognise every supported format by its content, not its name."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import data_path

from bpe_core import Tokenizer, TokenizerFileError
from bpe_core.formats.detect import sniff
from pipeline.cli import main


def test_sniff_reads_the_first_bytes():
    assert sniff(b"beam-bpe-tokenizer\nformat_version 1\n") == "artifact"
    assert sniff(b"GGUF\x03\x00\x00\x00") == "gguf"
    assert sniff(b'  {"version": "1.0"') == "json"
    assert sniff(b"#version: 0.2\n\xc4\xa0 t\n") == "gpt2-merges"
    assert sniff("Ġ t\nh e\n".encode()) == "gpt2-merges"
    assert sniff(b"IQ== 0\nIg== 1\n") == "tiktoken"
    assert sniff(b"\x00\x01binary") == "unknown"


def copy_without_extension(src, tmp_path, name="tokenizer-file"):
    """The same file under a name that says nothing about its format."""
    dst = tmp_path / name
    shutil.copyfile(src, dst)
    return str(dst)


def info(capsys, path: str, *extra: str) -> dict:
    assert main(["info", "--tokenizer", path, *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_info_on_a_tokenizer_json(capsys, tmp_path):
    path = copy_without_extension(data_path("hf", "anthropic-0.20.0.tokenizer.json"), tmp_path)
    shown = info(capsys, path)
    assert shown["family"].startswith("huggingface") and shown["normalizer"] == "NFKC"
    assert shown["n_vocab"] == 65000 and shown["merges"] == 64739
    assert shown["special_tokens"]["<EOT>"] == 0 and shown["added_tokens"] == {}
    assert "\\p{L}" in shown["pretokenizer"]


@pytest.mark.slow
def test_info_on_a_gguf_file(capsys, tmp_path):
    path = copy_without_extension(data_path("llamacpp", "ggml-vocab-qwen2.gguf"), tmp_path)
    shown = info(capsys, path)
    assert "GGUF" in shown["family"] and "pre=qwen2" in shown["family"] and shown["pretokenizer"] == "qwen2"
    assert shown["n_vocab"] == 151936 and shown["merges"] == 151387
    assert shown["special_tokens"] == {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}
    assert len(shown["added_tokens"]) == 290 and shown["normalizer"] is None


@pytest.mark.slow
def test_info_on_gpt2_files_and_a_folder(capsys, tmp_path):
    Tokenizer.from_gguf(str(data_path("llamacpp", "ggml-vocab-gpt-2.gguf"))).to_gpt2_files(str(tmp_path))
    for path in (str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"), str(tmp_path)):
        shown = info(capsys, path)
        assert shown["family"].startswith("GPT-2") and shown["n_vocab"] == 50257
        assert shown["special_tokens"] == {"<|endoftext|>": 50256}


@pytest.mark.slow
def test_encode_and_convert_from_a_gguf_file(capsys, tmp_path):
    path = str(data_path("llamacpp", "ggml-vocab-deepseek-coder.gguf"))  # ids from llama.cpp's test file
    assert main(["encode", "--tokenizer", path, "--text", "Hello world"]) == 0
    assert capsys.readouterr().out.split() == ["17535", "1835"]
    out = str(tmp_path / "tokenizer.bpe")
    assert main(["convert", "--tokenizer", path, "--out", out]) == 0
    capsys.readouterr()
    converted = Tokenizer.load(out)
    assert converted.encode_ordinary(" this is 🦙.cpp") == [437, 317, 12394, 99, 234, 13, 14789]
    assert converted.encode_ordinary("<|User|>") == [32019] and converted.pretokenizer.name == "deepseek-coder"


def test_override_rules(tmp_path):
    with pytest.raises(ValueError, match="carries its own pre-tokenizer"):
        Tokenizer.from_file(str(data_path("hf", "anthropic-0.20.0.tokenizer.json")), pretokenizer="cl100k")
    unknown = tmp_path / "notes.txt"
    unknown.write_bytes(b"\x00\x01 nothing")
    with pytest.raises(TokenizerFileError, match="not a tokenizer file"):
        Tokenizer.from_file(str(unknown))
    (tmp_path / "empty").mkdir()
    with pytest.raises(TokenizerFileError, match="folder without"):
        Tokenizer.from_file(str(tmp_path / "empty"))
