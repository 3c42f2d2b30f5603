"""GPT-2 vocab.json + merges.txt: the same ids as tokenizer.json and as `tokenizers`' own BPE.from_file."""

from __future__ import annotations

import json
from functools import cache

import pytest
import tokenizers
from conftest import adversarial_cases, corpus, data_path

from bpe_core import Tokenizer, TokenizerFileError


@cache
def anthropic() -> Tokenizer:
    return Tokenizer.from_huggingface(str(data_path("hf", "anthropic-0.20.0.tokenizer.json")))


def str_texts() -> list[str]:
    texts = [t for _, t in adversarial_cases() if isinstance(t, str)]
    texts = [t.encode("utf-16", "surrogatepass").decode("utf-16", "replace") for t in texts]
    return texts + corpus("en_bible_kjv", 30) + corpus("multi_udhr", 60)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpt2")
    vocab_path, merges_path = anthropic().to_gpt2_files(str(folder))
    return folder, vocab_path, merges_path


def test_vocab_and_merges_give_the_same_ids_as_tokenizer_json(exported):
    _, vocab_path, merges_path = exported
    original = anthropic()
    pair = Tokenizer.from_gpt2_files(vocab_path, merges_path, normalizer="NFKC", special_tokens=original.special_tokens)
    assert pair.merge_ids == original.merge_ids and pair.vocab == original.vocab
    texts = str_texts()
    assert pair.encode_batch(texts, allowed_special="all") == original.encode_batch(texts, allowed_special="all")
    assert len(texts) > 3000


@pytest.mark.slow
def test_tokenizers_reads_our_files_and_agrees(exported):
    _, vocab_path, merges_path = exported
    hf = tokenizers.Tokenizer(tokenizers.models.BPE.from_file(vocab_path, merges_path))
    hf.normalizer = tokenizers.normalizers.NFKC()
    hf.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    ours = Tokenizer.from_gpt2_files(vocab_path, normalizer="NFKC")
    texts = str_texts()
    expected = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    for text, got, ids in zip(texts, ours.encode_ordinary_batch(texts), expected, strict=True):
        assert got == ids, text[:80]


@pytest.mark.slow
def test_gpt2_defaults_reproduce_the_gpt2_reference_ids(tmp_path):
    """The GGUF GPT-2 vocabulary written as vocab.json + merges.txt, read back with GPT-2's defaults, gives the
    ids llama.cpp's test expects (computed by GPT-2's Hugging Face tokenizer)."""
    Tokenizer.from_gguf(str(data_path("llamacpp", "ggml-vocab-gpt-2.gguf"))).to_gpt2_files(str(tmp_path))
    assert json.loads((tmp_path / "vocab.json").read_text())["<|endoftext|>"] == 50256
    tok = Tokenizer.from_file(str(tmp_path / "vocab.json"))
    assert tok.special_tokens == {"<|endoftext|>": 50256} and tok.family.startswith("GPT-2")
    with open(data_path("llamacpp", "tests", "gpt-2.jsonl"), encoding="utf-8") as f:
        cases = [json.loads(line) for line in f]
    assert [tok.encode_ordinary(c["text"]) for c in cases] == [c["ids"] for c in cases]
    assert tok.encode("a<|endoftext|>", allowed_special="all") == [64, 50256]
    assert Tokenizer.from_file(str(tmp_path)).merge_ids == Tokenizer.from_file(str(tmp_path / "merges.txt")).merge_ids


def write_pair(folder, vocab: dict | str, merges: str) -> str:
    (folder / "vocab.json").write_text(vocab if isinstance(vocab, str) else json.dumps(vocab), encoding="utf-8")
    (folder / "merges.txt").write_text(merges, encoding="utf-8")
    return str(folder / "vocab.json")


def refused(path: str, *words: str) -> None:
    with pytest.raises(TokenizerFileError) as err:
        Tokenizer.from_file(path)
    for word in words:
        assert word in str(err.value), str(err.value)


def test_bad_pairs_are_refused(tmp_path):
    base = {"a": 0, "b": 1, "ab": 2}
    refused(write_pair(tmp_path, base, "#version: 0.2\na b c\n"), "merges.txt:2", "two tokens")
    refused(write_pair(tmp_path, base, "a zz\n"), "merges.txt:1", "'zz'")
    refused(write_pair(tmp_path, base, "b a\n"), "not a token")
    refused(write_pair(tmp_path, {**base, "c": 2}, "a b\n"), "vocab.json", "share the id 2")
    refused(write_pair(tmp_path, '{"a": 0, "b": 1, "a": 2}', "a b\n"), "'a' appears twice")
    spaced = Tokenizer.from_gpt2_files(write_pair(tmp_path, {**base, "a b": 3}, "a b\n"))  # raw text: kept, unmade
    assert spaced.unreachable_tokens() == [3] and spaced.decode([3]) == "a b"
    (tmp_path / "merges.txt").unlink()
    refused(str(tmp_path / "vocab.json"), "merges.txt does not exist")


def test_a_merges_file_cut_at_a_line_boundary_warns_naming_the_unmade_tokens(exported, tmp_path):
    """A cut merges.txt still parses; the tokens no merge makes any more are the evidence, and the load says so."""
    import warnings

    _, vocab_path, merges_path = exported
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the whole file: no warning
        Tokenizer.from_gpt2_files(vocab_path, merges_path)
    lines = open(merges_path, encoding="utf-8").read().split("\n")
    cut = tmp_path / "merges.txt"
    cut.write_text("\n".join(lines[: len(lines) // 2]) + "\n", encoding="utf-8")
    with pytest.warns(UserWarning, match=r"multi-byte token\(s\) of the vocabulary are made by no merge") as record:
        Tokenizer.from_gpt2_files(vocab_path, str(cut))
    count = int(str(record[0].message).split(": ", 1)[1].split(" ", 1)[0])
    assert count >= len(lines) // 2 - 2  # about every merge cut off leaves one token unmade
