"""``train --vocab-size a,b,c``: one count pass and one merge loop, ``DIR/v{N}/`` per size, each byte-identical to
a separate run at that size; ``Tokenizer.truncated`` gives the same tokenizers."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import corpus
from pipeline_testlib import manifest, run_cli, tokenizer_files, write_jsonl

import bpe_core
from pipeline.errors import UsageError
from pipeline.train.settings import train_settings

SIZES = (300, 420, 610)
SPECIAL = "<|endoftext|>"


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return corpus("fortunes_multi", 600)


@pytest.fixture(scope="module")
def multi_run(docs, tmp_path_factory) -> Path:
    """The pipeline, counting once, with three sizes given out of order."""
    root = tmp_path_factory.mktemp("sizes")
    path = write_jsonl(root / "in" / "docs.jsonl", docs)
    out = root / "out"
    args = ["train", "--input", path, "--vocab-size", "610,300,420", "--special-token", SPECIAL, "--out", out]
    assert run_cli(*args) == 0
    return out


def _separate(counts_from: Path, out: Path, size: int, tie_break: str) -> dict[str, bytes]:
    args = ["--from-counts", counts_from, "--vocab-size", size, "--tie-break", tie_break, "--special-token", SPECIAL]
    assert run_cli("train", *args, "--out", out) == 0
    assert not list(out.glob("v*"))
    return tokenizer_files(out)


def test_one_run_gives_each_size_byte_identical_to_a_separate_run(multi_run, tmp_path):
    assert sorted(p.name for p in multi_run.glob("v*")) == [f"v{n}" for n in SIZES]
    assert not (multi_run / "tokenizer.bpe").exists()
    for size in SIZES:
        files = tokenizer_files(multi_run / f"v{size}")
        assert set(files) == {"tokenizer.bpe", "tokenizer.tiktoken", "tokenizer.json"}
        assert files == _separate(multi_run, tmp_path / str(size), size, "ids")
    m = manifest(multi_run)
    assert m["settings"]["vocab_size"] == list(SIZES)
    assert [m["vocabularies"][f"v{n}"]["n_vocab"] for n in SIZES] == list(SIZES)
    assert set(m["artifacts"]) == {
        f"v{n}/{f}" for n in SIZES for f in ("tokenizer.bpe", "tokenizer.tiktoken", "tokenizer.json")
    }


@pytest.mark.parametrize("tie_break", ["ids", "huggingface", "bytes"])
def test_every_tie_break_and_truncated_equal_separate_runs(multi_run, tmp_path, tie_break):
    out = tmp_path / "multi"
    args = ["--from-counts", multi_run, "--vocab-size", "300,420,610", "--tie-break", tie_break]
    assert run_cli("train", *args, "--special-token", SPECIAL, "--out", out) == 0
    largest = bpe_core.Tokenizer.load(str(out / "v610" / "tokenizer.bpe"))
    for size in SIZES:
        separate = _separate(multi_run, tmp_path / f"sep{size}", size, tie_break)
        assert tokenizer_files(out / f"v{size}") == separate
        cut = largest.truncated(size)
        cut.save(str(tmp_path / f"cut{size}.bpe"))
        assert (tmp_path / f"cut{size}.bpe").read_bytes() == separate["tokenizer.bpe"]
        assert cut.special_tokens == {SPECIAL: size - 1}


def test_single_size_layout_and_manifest_settings_are_unchanged(docs, tmp_path):
    path = write_jsonl(tmp_path / "docs.jsonl", docs[:200])
    assert run_cli("train", "--input", path, "--vocab-size", "300", "--out", tmp_path / "out") == 0
    m = manifest(tmp_path / "out")
    assert m["settings"]["vocab_size"] == 300 and "vocabularies" not in m
    assert set(m["artifacts"]) == {"tokenizer.bpe", "tokenizer.tiktoken", "tokenizer.json"}
    assert not list((tmp_path / "out").glob("v*"))


def test_config_file_lists_sizes(tmp_path):
    (tmp_path / "c.toml").write_text("vocab_size = [4000, 1000, 2000]\n")
    from pipeline.train.settings import load_config

    settings = train_settings(load_config(str(tmp_path / "c.toml")), {}, source=str(tmp_path / "c.toml"))
    assert (settings.vocab_sizes, settings.vocab_size) == ((1000, 2000, 4000), 4000)
    assert train_settings({}, {"vocab_size": 500}).vocab_sizes == (500,)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([1000, 1000], "lists a size twice"),
        ([1000, 100], "at least 256"),
        ([], "empty list"),
        ([1000, True], "integer"),
    ],
)
def test_each_size_is_checked(value, message):
    with pytest.raises(UsageError, match=message):
        train_settings({}, {"vocab_size": value})


def test_flag_refuses_a_malformed_list(capsys):
    with pytest.raises(SystemExit):
        run_cli("train", "--input", "x", "--out", "y", "--vocab-size", "300,abc")
    assert "32000,64000" in capsys.readouterr().err


def test_truncated_refuses_what_it_cannot_cut():
    tok = bpe_core.train(bpe_core.count_chunks(["low lower lowest"] * 5, "cl100k"), 262, special_tokens=["<s>"])
    with pytest.raises(ValueError, match="at most 262"):
        tok.truncated(300)
    with pytest.raises(ValueError, match="at least 257"):
        tok.truncated(200)
    assert tok.truncated(tok.n_vocab) is tok
    shuffled = bpe_core.Tokenizer(
        {**{i: bytes([i]) for i in range(256)}, 256: b"ow", 257: b"lo"},
        merges=[(ord("l"), ord("o")), (ord("o"), ord("w"))],
        pretokenizer="cl100k",
    )
    with pytest.raises(ValueError, match="follow its merge order"):
        shuffled.truncated(257)
