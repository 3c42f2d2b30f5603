"""SentencePiece-style vocabularies through the CLI and the pipelines: ``encode --shard-format megatron`` writes
``sentencepiece``'s ids for every document exactly once with ``--eos`` taking the model's ``</s>`` unasked, and the
vocabulary's own BOS/EOS for ``--bos``/``--eos`` without a value for every kind (a byte-level GGUF that names its
EOS: deepseek-llm's id 100001)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import corpus, data_path, reference_path

from bpe_core import Tokenizer
from pipeline.cli.app import main
from pipeline.encode.policy import resolve_policy
from pipeline.encode.readback import iter_documents

spm = pytest.importorskip("sentencepiece")

pytestmark = pytest.mark.slow  # Beam runs and the CLI on real vocabularies: make test, not make test-core


def _inputs(root: Path, docs: list[str]) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(2):
        path = root / f"part-{i}.jsonl{'.gz' if i else ''}"
        lines = "".join(json.dumps({"text": d}) + "\n" for d in docs[i::2])
        (gzip.open if i else open)(path, "wt", encoding="utf-8").write(lines)
        paths.append(path)
    return paths


def test_megatron_shards_hold_sentencepiece_ids_and_the_model_eos(tmp_path):
    model = data_path("spm", "mistral_instruct_tokenizer_240323.model.v3")
    docs = corpus("en_bible_kjv", 6) + corpus("multi_udhr", 10) + corpus("fortunes_multi", 60) + ["[INST] x </s>"]
    inputs = _inputs(tmp_path / "in", docs)
    args = ["encode", "--tokenizer", str(model), "--out", str(tmp_path / "out"), "--shard-format", "megatron"]
    args += ["--eos", "--range-bytes", "20000", "--shard-size", "40000"]
    for path in inputs:
        args += ["--input", str(path)]
    assert main(args) == 0
    sp = spm.SentencePieceProcessor(model_file=str(model))
    ordered = docs[0::2] + docs[1::2]
    got = [ids.tolist() for _, ids in iter_documents(str(tmp_path / "out"))]
    assert got == [ids + [sp.eos_id()] for ids in sp.encode(ordered)]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["documents_written"] == len(docs) and (tmp_path / "out" / "COMPLETED").exists()


def test_cli_encode_and_decode_text(capsys):
    model = str(data_path("spm", "tokenizer.model.v1"))
    assert main(["encode", "--tokenizer", model, "--text", "Hello  world"]) == 0
    assert capsys.readouterr().out.split() == ["22557", "28705", "1526"]
    assert main(["decode", "--tokenizer", model, "--ids", "22557 28705 1526"]) == 0
    assert capsys.readouterr().out.rstrip("\n") == "Hello  world"


@pytest.mark.parametrize(
    ("where", "bos", "eos"),
    [
        (("spm", "tokenizer.model.v1"), 1, 2),
        (("spm", "ggml-vocab-llama-spm.gguf"), 1, 2),
        ("ggml-vocab-deepseek-llm.gguf", 100000, 100001),
        ("ggml-vocab-phi-3.gguf", 1, 32000),
        ("ggml-vocab-gemma-4.gguf", 2, 1),
    ],
)
def test_bos_and_eos_without_a_value_take_the_declared_tokens(where, bos, eos):
    if isinstance(where, tuple):
        path = data_path(*where)
    else:
        path = reference_path("llama-cpp-python-0.3.36", f"vendor/llama.cpp/models/{where}")
    policy = resolve_policy(Tokenizer.from_file(str(path)), bos="auto", eos="auto")
    assert (policy.bos_id, policy.eos_id) == (bos, eos)


@pytest.mark.parametrize(
    "where",
    [
        ("spm", "tokenizer.model.v1"),
        ("spm", "mistral_instruct_tokenizer_240323.model.v3"),
        ("spm", "ggml-vocab-llama-spm.gguf"),
        "ggml-vocab-phi-3.gguf",
        "ggml-vocab-gemma-4.gguf",
    ],
)
def test_convert_to_tokenizer_json_gives_the_same_ids_under_hf_tokenizers(tmp_path, where):
    tokenizers = pytest.importorskip("tokenizers")
    if isinstance(where, tuple):
        path = data_path(*where)
    else:
        path = reference_path("llama-cpp-python-0.3.36", f"vendor/llama.cpp/models/{where}")
    out = tmp_path / "tokenizer.json"
    assert main(["convert", "--tokenizer", str(path), "--out", str(out)]) == 0
    tok = Tokenizer.from_file(str(path))
    hf = tokenizers.Tokenizer.from_file(str(out))
    # Not here: text spelling a USER_DEFINED piece ("[REFERENCE_DOC_1] x"): tokenizers drops the "▁" before it
    docs = corpus("fortunes_multi", 200) + corpus("multi_udhr", 20) + ["  two spaces", "", "🤖\n\n\nx", "x [REF"]
    expected = [tok.encode_ordinary(d) for d in docs]
    assert [e.ids for e in hf.encode_batch(docs, add_special_tokens=False)] == expected
    assert [hf.decode(e, skip_special_tokens=False) for e in expected[:50]] == [tok.decode(e) for e in expected[:50]]
    back = Tokenizer.from_file(str(out))
    assert [back.encode_ordinary(d) for d in docs] == expected


@pytest.mark.parametrize("suffix", [".bpe", ".tiktoken"])
def test_convert_refuses_what_a_target_cannot_hold(tmp_path, suffix, capsys):
    model = str(data_path("spm", "tokenizer.model.v1"))
    assert main(["convert", "--tokenizer", model, "--out", str(tmp_path / f"t{suffix}")]) == 2
    err = capsys.readouterr().err
    assert "SentencePiece-style vocabulary" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / f"t{suffix}").exists()


def test_v3_runs_in_the_native_core_with_its_user_defined_pieces():
    model = str(data_path("spm", "mistral_instruct_tokenizer_240323.model.v3"))
    tok = Tokenizer.from_file(model, backend="native")
    assert tok._backend.native_encoder() is not None
    sp = spm.SentencePieceProcessor(model_file=model)
    text = "see [REFERENCE_DOC_1] and[REFERENCE_DOC_12]x [REFERENCE_DOC_1"
    assert tok.encode_ordinary(text) == sp.encode(text)
