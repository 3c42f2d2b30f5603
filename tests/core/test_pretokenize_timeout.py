"""Regexes read from tokenizer files run with a time limit per text: the library raises naming the pattern, the
encoding pipeline makes the document a dead letter. ``(a|aa)+$`` backtracks exponentially on a run of a's that does
not end the text (the ``regex`` module does not optimise it away), so the limit is reached, not measured."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import pytest
from conftest import data_path

import bpe_core.pretokenize.pretokenizer as pretokenize
from bpe_core import PreTokenizer, Tokenizer

SLOW = r"(a|aa)+$"
BAD_TEXT = "a" * 40 + "b"


def test_a_backtracking_regex_raises_a_clear_error_naming_the_pattern():
    pre = PreTokenizer([r"\s+|\S+", SLOW], timeout=0.2)
    assert pre.split("aaaa b") == ["aaaa", " ", "b"]
    with pytest.raises(pretokenize.PreTokenizeTimeout, match=r"regex '\(a\|aa\)\+\$' ran over 0.2 s on one text of 41"):
        pre.split(BAD_TEXT)
    assert isinstance(pretokenize.PreTokenizeTimeout("x"), TimeoutError)
    assert pickle.loads(pickle.dumps(pre)).timeout == 0.2 and pre.with_normalizer("NFC").timeout == 0.2


def test_the_default_limit_is_read_when_splitting(monkeypatch):
    pre = PreTokenizer([SLOW])
    monkeypatch.setattr(pretokenize, "REGEX_TIMEOUT", 0.2)
    with pytest.raises(pretokenize.PreTokenizeTimeout, match="ran over 0.2 s"):
        pre.split(BAD_TEXT)


def test_a_tokenizer_with_such_a_pattern_raises_on_encode(monkeypatch):
    monkeypatch.setattr(pretokenize, "REGEX_TIMEOUT", 0.2)
    tok = Tokenizer.from_tiktoken(str(data_path("tiktoken", "r50k_base.tiktoken")), pretokenizer=[SLOW])
    assert tok.decode(tok.encode_ordinary("aab aa")) == "aab aa"
    with pytest.raises(pretokenize.PreTokenizeTimeout, match="ran over"):
        tok.encode_ordinary(BAD_TEXT)


@pytest.mark.slow
def test_in_the_encoding_pipeline_the_document_is_a_dead_letter_naming_the_pattern(tmp_path, monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "pipeline"))
    from pipeline_testlib import manifest, read_dead_letters, run_cli, write_jsonl

    monkeypatch.setattr(pretokenize, "REGEX_TIMEOUT", 0.2)  # the runner runs in this process (FnApiRunner)
    tok = Tokenizer.from_tiktoken(str(data_path("tiktoken", "r50k_base.tiktoken")), pretokenizer=[r"\S+|\s+", SLOW])
    tok.save(str(tmp_path / "slow.bpe"))
    corpus = write_jsonl(tmp_path / "c.jsonl", ["fine text", BAD_TEXT, "more fine text"])
    assert run_cli("encode", "--tokenizer", tmp_path / "slow.bpe", "--input", corpus, "--out", tmp_path / "out") == 0
    m = manifest(tmp_path / "out")
    assert (m["documents_read"], m["documents_written"], m["dead_letters"]) == (3, 2, 1)
    [dead] = read_dead_letters(tmp_path / "out")
    assert dead["offset"] == corpus.read_bytes().index(json.dumps({"text": BAD_TEXT}).encode()[:-1])
    assert SLOW in dead["reason"] and "PreTokenizeTimeout" in dead["reason"]
