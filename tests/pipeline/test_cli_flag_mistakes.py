"""Flag mistakes a new user made, each warned about or refused naming the fix: --format against the input names,
--from-counts given the counts folder itself, llm.c's EOS, a second job in the same --out, a format that needs an
EOS the tokenizer lacks."""

from __future__ import annotations

import gzip
import json

from conftest import data_path

from pipeline.cli import main


def write_jsonl_gz(path, texts):
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
    return path


TEXTS = [f"the quick brown fox {i} jumps over the lazy dog number {i % 7}" for i in range(60)]


def test_format_that_contradicts_the_input_names_warns(tmp_path, capsys):
    corpus = write_jsonl_gz(tmp_path / "c.jsonl.gz", TEXTS)
    assert (
        main(["train", "--input", str(corpus), "--format", "text", "--counts-only", "--out", str(tmp_path / "o")]) == 0
    )
    err = capsys.readouterr().err
    assert "warning: --format text, but the --input names say jsonl" in err
    assert main(["train", "--input", str(corpus), "--counts-only", "--out", str(tmp_path / "p")]) == 0
    assert "warning" not in capsys.readouterr().err


def test_from_counts_takes_the_counts_folder_or_the_run_folder_alike(tmp_path, capsys):
    corpus = write_jsonl_gz(tmp_path / "c.jsonl.gz", TEXTS)
    run = tmp_path / "run"
    assert main(["train", "--input", str(corpus), "--counts-only", "--out", str(run)]) == 0
    outputs = {}
    for name, source in (("a", run), ("b", run / "counts")):
        out = tmp_path / name
        assert main(["train", "--from-counts", str(source), "--vocab-size", "300", "--out", str(out)]) == 0
        outputs[name] = (out / "tokenizer.bpe").read_bytes()
    assert outputs["a"] == outputs["b"]
    # into the same folder whose counts it reads: the counts stay
    assert (
        main(["train", "--from-counts", str(run / "counts"), "--vocab-size", "290", "--out", str(run), "--overwrite"])
        == 0
    )
    assert list((run / "counts").glob("counts-*.parquet"))
    capsys.readouterr()


def _encode_argv(corpus, out, shard_format: str) -> list[str]:
    tokenizer = str(data_path("tiktoken", "r50k_base.tiktoken"))  # skips where the shared data is absent
    files = ["--tokenizer", tokenizer, "--input", str(corpus), "--out", str(out)]
    return ["encode", *files, "--shard-format", shard_format]


def test_llmc_refuses_eos_which_would_double_its_separator(tmp_path, capsys):
    corpus = write_jsonl_gz(tmp_path / "c.jsonl.gz", TEXTS)
    argv = _encode_argv(corpus, tmp_path / "o", "llmc")
    assert main([*argv, "--eos"]) == 2
    assert "--eos with --shard-format llmc" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    assert main(argv) == 0


def test_a_different_job_in_the_same_out_names_the_flag_that_differs(tmp_path, capsys):
    corpus = write_jsonl_gz(tmp_path / "c.jsonl.gz", TEXTS)
    argv = _encode_argv(corpus, tmp_path / "o", "megatron")
    assert main(argv) == 0
    assert main([*argv, "--eos"]) == 2
    err = capsys.readouterr().err
    assert "(--eos differ)" in err, err


def test_a_format_that_needs_an_eos_names_itself_and_the_fix_when_the_tokenizer_has_none(tmp_path, capsys):
    corpus = write_jsonl_gz(tmp_path / "c.jsonl.gz", TEXTS)
    tok = tmp_path / "tok"
    assert main(["train", "--input", str(corpus), "--vocab-size", "300", "--out", str(tok)]) == 0  # no special token
    argv = _encode_argv(corpus, tmp_path / "o", "datatrove")
    argv[argv.index("--tokenizer") + 1] = str(tok / "tokenizer.bpe")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--shard-format datatrove puts an EOS after each document" in err and "train --special-token" in err, err
