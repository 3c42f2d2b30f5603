"""End-to-end: ``beam-bpe train`` on tmp_path, compared with bpe_core in-process, across shardings and runners."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from conftest import corpus
from pipeline_testlib import manifest, read_dead_letters, run_cli, shard_docs, tokenizer_files, write_bytes, write_jsonl

import bpe_core
from bpe_core.model.bytelevel import token_string_to_bytes
from bpe_core.pretokenize.presets import GPT2_HF_PATTERN
from pipeline.train.counts_files import load_counts

VOCAB = 500
SPECIAL = "<|endoftext|>"
MULTI_PROCESS = ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return corpus("fortunes_multi", 1500) + corpus("en_bible_kjv", 25)


@pytest.fixture(scope="module")
def reference(docs, tmp_path_factory) -> dict[str, bytes]:
    """The tokenizer files from training in-process with bpe_core directly."""
    out = tmp_path_factory.mktemp("reference")
    tok = bpe_core.train(bpe_core.count_chunks(docs, "cl100k"), VOCAB, special_tokens=[SPECIAL])
    tok.save(str(out / "tokenizer.bpe"))
    tok.to_tiktoken(str(out / "tokenizer.tiktoken"))
    if hasattr(tok, "to_huggingface"):
        tok.to_huggingface(str(out / "tokenizer.json"))
    return tokenizer_files(out)


def _write_shards(root: Path, docs: list[str], n: int) -> list[str]:
    """``n`` shards (alternating plain and gzip JSONL), returned in shuffled order."""
    paths = [
        str(write_jsonl(root / f"part-{i:02d}.jsonl{'.gz' if i % 2 else ''}", part))
        for i, part in enumerate(shard_docs(docs, n))
    ]
    random.Random(n).shuffle(paths)
    return paths


def _train(tmp_path: Path, inputs: list[str], *extra: str, out: str = "out") -> Path:
    args = ["train", "--format", "jsonl", "--vocab-size", VOCAB, "--special-token", SPECIAL, "--out", tmp_path / out]
    for path in inputs:
        args += ["--input", path]
    assert run_cli(*args, *extra) == 0
    return tmp_path / out


@pytest.fixture(scope="module")
def one_shard_run(docs, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("one_shard")
    return _train(root, _write_shards(root / "in", docs, 1), "--range-bytes", "65536")


def test_pipeline_counts_equal_count_chunks_and_tokenizer_equals_in_process(one_shard_run, docs, reference):
    counts, report = load_counts(str(one_shard_run / "counts"))
    assert dict(counts) == dict(bpe_core.count_chunks(docs, "cl100k"))
    assert report["chunks_kept"] == len(counts) and report["dropped_below_min_count"]["chunks"] == 0
    assert tokenizer_files(one_shard_run) == reference
    m = manifest(one_shard_run)
    assert m["documents_read"] == m["documents_counted"] == len(docs) and m["dead_letters"] == 0
    assert m["corpus"]["ranges"] > 3 and (one_shard_run / "COMPLETED").exists()
    assert m["artifacts"].keys() == reference.keys()


@pytest.mark.parametrize(
    ("shards", "beam_args"),
    [(3, ["--direct_running_mode", "in_memory"]), (7, []), (3, MULTI_PROCESS)],
    ids=["3-shards-in-memory", "7-shards-in-memory", "3-shards-multi-processing-2-workers"],
)
def test_tokenizer_files_are_byte_identical_for_any_sharding_and_runner(tmp_path, docs, reference, shards, beam_args):
    out = _train(tmp_path, _write_shards(tmp_path / "in", docs, shards), "--count-shards", "3", *beam_args)
    assert tokenizer_files(out) == reference
    assert sorted(p.name for p in (out / "counts").glob("*.parquet")) == [
        f"counts-{i:05d}-of-00003.parquet" for i in range(3)
    ]


def test_finished_output_is_not_overwritten_unless_asked(one_shard_run, tmp_path, capsys):
    before = (one_shard_run / "manifest.json").read_bytes()
    args = ["train", "--from-counts", one_shard_run, "--vocab-size", 300, "--out", one_shard_run]
    assert run_cli(*args) == 2
    assert "already holds a finished output" in capsys.readouterr().err
    assert (one_shard_run / "manifest.json").read_bytes() == before
    copy = tmp_path / "copy"
    assert run_cli("train", "--from-counts", one_shard_run, "--vocab-size", 300, "--out", copy) == 0
    assert run_cli("train", "--from-counts", one_shard_run, "--vocab-size", 300, "--out", copy, "--overwrite") == 0
    assert manifest(copy)["n_vocab"] == 300


def test_from_counts_filters_are_exact_and_reported(one_shard_run, docs, tmp_path):
    out = tmp_path / "filtered"
    assert run_cli("train", "--from-counts", one_shard_run, "--vocab-size", 400, "--min-chunk-count", 2,
                   "--max-chunks", 1000, "--out", out) == 0  # fmt: skip
    counts = bpe_core.count_chunks(docs, "cl100k")
    frequent = {c: n for c, n in counts.items() if n >= 2}
    top = dict(sorted(frequent.items(), key=lambda kv: (-kv[1], kv[0]))[:1000])
    report = manifest(out)["chunk_filter"]
    assert report["dropped_below_min_count"] == {
        "chunks": len(counts) - len(frequent),
        "occurrences": sum(counts.values()) - sum(frequent.values()),
    }
    assert report["dropped_over_max_chunks"]["chunks"] == len(frequent) - 1000
    assert report["dropped_over_max_chunks"]["occurrences"] == sum(frequent.values()) - sum(top.values())
    assert report["chunks_kept"] == 1000
    expected = bpe_core.train(bpe_core.ChunkCounts(top, pretokenizer=counts.pretokenizer), 400)
    assert (out / "tokenizer.bpe").read_bytes() == _saved(expected, tmp_path)


def _saved(tok, tmp_path: Path) -> bytes:
    tok.save(str(tmp_path / "expected.bpe"))
    return (tmp_path / "expected.bpe").read_bytes()


def test_dead_letters_are_written_and_counts_reconcile(tmp_path):
    good = [f"document number {i}" for i in range(30)]
    jsonl = write_jsonl(tmp_path / "in" / "a.jsonl", good, extra=[b"{not json", b'{"other": "x"}', b'{"text": "\xff"}'])
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"body": ["wrong", "schema"]}), tmp_path / "in" / "b.parquet")
    out = _train(tmp_path, [str(jsonl)], "--counts-only", out="jsonl")
    m = manifest(out)
    assert (m["documents_read"], m["documents_counted"], m["dead_letters"]) == (33, 30, 3)
    raw = jsonl.read_bytes()
    dead = read_dead_letters(out)
    assert [(d["source"], d["offset"]) for d in dead] == [
        (str(jsonl), raw.index(b"{not")),
        (str(jsonl), raw.index(b'{"other')),
        (str(jsonl), raw.index(b'{"text": "\xff')),
    ]
    assert [d["reason"].split(":")[0] for d in dead] == ["malformed JSON", "missing field 'text'", "undecodable bytes"]
    assert not (out / "tokenizer.bpe").exists() and (out / "COMPLETED").exists()
    assert (
        run_cli(
            "train",
            "--input",
            tmp_path / "in" / "b.parquet",
            "--format",
            "parquet",
            "--counts-only",
            "--out",
            tmp_path / "pq",
        )
        == 0
    )
    m = manifest(tmp_path / "pq")
    assert (m["documents_read"], m["documents_counted"], m["dead_letters"]) == (2, 0, 2)
    assert {d["row"] for d in read_dead_letters(tmp_path / "pq")} == {0, 1}


def test_bad_inputs_fail_with_a_message_naming_them(tmp_path, capsys):
    assert run_cli("train", "--input", tmp_path / "missing-*.jsonl", "--vocab-size", 300, "--out", tmp_path / "o") == 2
    err = capsys.readouterr().err
    assert "matches no file" in err and "missing-*.jsonl" in err
    assert not (tmp_path / "o" / "counts").exists()
    write_bytes(tmp_path / "empty.txt", b"")
    assert (
        run_cli(
            "train", "--input", tmp_path / "empty.txt", "--format", "text", "--vocab-size", 300, "--out", tmp_path / "o"
        )
        == 3  # no document to read: the exit code of a run that writes nothing
    )
    assert "corpus is empty" in capsys.readouterr().err


def test_source_weights_multiply_counts(tmp_path):
    a, b = ["alpha beta", "gamma"], ["beta delta"]
    pa_, pb = write_jsonl(tmp_path / "a.jsonl", a), write_jsonl(tmp_path / "b.jsonl", b)
    out = _train(tmp_path, [str(pa_), str(pb)], "--weight", f"{pa_}=3", "--counts-only")
    counts, _ = load_counts(str(out / "counts"))
    assert dict(counts) == dict(bpe_core.count_chunks(a * 3 + b, "cl100k"))
    assert manifest(out)["stats"]["weighted_documents"] == 7


def test_config_files_toml_and_yaml_with_flags_overriding(tmp_path, docs, capsys):
    inputs = [str(write_jsonl(tmp_path / "c.jsonl", docs[:300]))]
    (tmp_path / "c.toml").write_text(
        'pretokenizer = "o200k"\nvocab_size = 320\nspecial_tokens = ["<|end|>"]\ntie_break = "bytes"\n'
    )
    (tmp_path / "c.yaml").write_text(
        "pretokenizer: o200k\nvocab_size: 320\nspecial_tokens: ['<|end|>']\ntie_break: bytes\n"
    )
    outs = []
    for name in ("c.toml", "c.yaml"):
        outs.append(tmp_path / name.replace(".", "_"))
        assert (
            run_cli("train", "--input", inputs[0], "--config", tmp_path / name, "--vocab-size", 330, "--out", outs[-1])
            == 0
        )
    expected = bpe_core.train(
        bpe_core.count_chunks(docs[:300], "o200k"), 330, special_tokens=["<|end|>"], tie_break="bytes"
    )
    assert (
        (outs[0] / "tokenizer.bpe").read_bytes()
        == (outs[1] / "tokenizer.bpe").read_bytes()
        == _saved(expected, tmp_path)
    )
    (tmp_path / "bad.toml").write_text("vocab_size = 320\nvocab = 1\n")
    assert run_cli("train", "--input", inputs[0], "--config", tmp_path / "bad.toml", "--out", tmp_path / "bad") == 2
    assert "unknown setting(s) ['vocab']" in capsys.readouterr().err
    (tmp_path / "bad.yaml").write_text("vocab_size: many\n")
    assert run_cli("train", "--input", inputs[0], "--config", tmp_path / "bad.yaml", "--out", tmp_path / "bad") == 2
    assert "vocab_size must be an integer" in capsys.readouterr().err


def test_huggingface_tie_break_reproduces_bpetrainer(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    lines = [line for doc in corpus("docs_python_rst", 25) for line in doc.split("\n")]
    path = write_bytes(tmp_path / "lines.txt", ("\n".join(lines) + "\n").encode())
    out = tmp_path / "out"
    assert (
        run_cli(
            "train",
            "--input",
            path,
            "--format",
            "text",
            "--pretokenizer",
            GPT2_HF_PATTERN,
            "--tie-break",
            "huggingface",
            "--vocab-size",
            1000,
            "--range-bytes",
            100_000,
            "--out",
            out,
        )
        == 0
    )
    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=1000, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])  # fmt: skip
    hf.train_from_iterator(lines, trainer)
    raw = json.loads(hf.to_str())["model"]["merges"]
    pairs = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in raw]
    expected = [(token_string_to_bytes(a), token_string_to_bytes(b)) for a, b in pairs]
    ours = bpe_core.Tokenizer.load(str(out / "tokenizer.bpe")).merges
    assert len(expected) == 1000 - 256 and ours == expected


def test_demo_runs_the_pipeline_end_to_end(tmp_path, capsys):
    assert run_cli("demo", "--out", tmp_path / "demo", "--max-mb", "0.3", "--vocab-size", "300") == 0
    assert "decoded back identical: True" in capsys.readouterr().out
    m = manifest(tmp_path / "demo")
    assert m["documents_read"] == m["documents_counted"] > 0 and m["n_vocab"] == 300


def test_the_format_comes_from_the_input_names_and_a_run_of_only_dead_letters_fails(tmp_path, capsys):
    from pipeline.cli.common import infer_format

    assert infer_format(["a/*.txt.gz"]) == "text" and infer_format(["x.parquet", "y.pq"]) == "parquet"
    # names that do not all say one format: each file read by its own name (a name saying none is refused then)
    assert infer_format(["d/", "x.jsonl.zst"]) == "auto" and infer_format(["data/*"]) == "auto"
    assert infer_format(["a.txt", "b.jsonl"]) == "auto"
    lines = "\n".join(corpus("en_bible_kjv", 200)) + "\n"
    write_bytes(tmp_path / "c.txt", lines.encode())
    out = tmp_path / "out"
    assert run_cli("train", "--input", tmp_path / "c.txt", "--vocab-size", 300, "--out", out) == 0
    assert manifest(out)["corpus"]["format"] == "text" and manifest(out)["dead_letters"] == 0
    # plain text read as JSONL: every line a dead letter, and the run says so instead of writing a tokenizer
    capsys.readouterr()
    bad = tmp_path / "bad"
    assert run_cli("train", "--input", tmp_path / "c.txt", "--format", "jsonl", "--vocab-size", 300, "--out", bad) == 3
    nonempty = sum(1 for line in lines.split("\n") if line.strip())
    assert f"no document could be read: all {nonempty:,} were dead letters" in capsys.readouterr().err
    assert not (bad / "COMPLETED").exists() and not (bad / "tokenizer.bpe").exists()
