"""The tokenizer-file registry (bpe_core/formats/detect.py, FILE_KINDS): one table that Tokenizer.from_file, every
--tokenizer flag, the error listing what loads, the refusal of a pretokenizer argument and convert's --out suffixes
read. A new kind is a module and one line: a toy kind registered here loads without any other change."""

from __future__ import annotations

import dataclasses

import pytest

import bpe_core
from bpe_core import Tokenizer, TokenizerFileError
from bpe_core.formats import detect
from bpe_core.formats.detect import FILE_KINDS, FileKind, sniff
from bpe_core.model.data import TokenizerData


def test_kinds_have_unique_names_and_suffixes():
    names = [k.name for k in FILE_KINDS]
    suffixes = [k.suffix for k in FILE_KINDS if k.suffix]
    assert len(set(names)) == len(names) and len(set(suffixes)) == len(suffixes)
    assert {"artifact", "gguf", "huggingface", "tekken", "gpt2-vocab", "gpt2-merges", "tiktoken"} <= set(names)


def test_convert_writes_the_suffixes_the_registry_names():
    from pipeline.cli.convert import SUFFIXES

    assert set(SUFFIXES) == {k.suffix for k in FILE_KINDS if k.suffix} == {".bpe", ".json", ".tiktoken"}


def test_a_file_of_no_kind_names_every_kind(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"\x00\x01binary")
    with pytest.raises(TokenizerFileError) as err:
        Tokenizer.from_file(str(path))
    assert all(k.label in str(err.value) for k in FILE_KINDS)
    path.write_text('{"neither": 1.5}')
    with pytest.raises(TokenizerFileError, match="a JSON file that is none of: GPT-2 vocab.json, Hugging Face"):
        Tokenizer.from_file(str(path))


def test_the_pretokenizer_refusal_names_the_kinds_that_take_one(tmp_path, r50k_tok_file):
    with pytest.raises(ValueError) as err:
        Tokenizer.from_file(r50k_tok_file, pretokenizer="cl100k")
    takes = [k.label for k in FILE_KINDS if not k.own_pretokenizer]
    assert "beam-bpe artifact, which carries its own pre-tokenizer" in str(err.value)
    assert all(label in str(err.value) for label in takes) and "Tekken" not in str(err.value).split("applies")[1]


@pytest.fixture
def r50k_tok_file(tmp_path):
    tok = bpe_core.train(bpe_core.count_chunks(["hello world"] * 3, "r50k"), 260)
    path = tmp_path / "r50k.bpe"
    tok.save(str(path))
    return str(path)


def test_a_toy_kind_is_one_module_and_one_line(tmp_path, monkeypatch):
    def load_toy(src, pretokenizer):
        letters = src.data.split(b"\n", 1)[1].split()
        vocab = {i: bytes([i]) for i in range(256)}
        return TokenizerData(vocab, merges=[], pretokenizer=pretokenizer or r"\S+|\s+", family=f"toy {len(letters)}")

    toy = FileKind("toy", "toy file", lambda head: head.startswith(b"TOY\n"), load_toy)
    monkeypatch.setattr(detect, "FILE_KINDS", (*FILE_KINDS, toy))  # the one line
    path = tmp_path / "t.toy"
    path.write_bytes(b"TOY\na b c\n")
    assert sniff(path.read_bytes()) == "toy"
    tok = Tokenizer.from_file(str(path))
    assert tok.family == "toy 3" and tok.decode(tok.encode("hi there")) == "hi there"
    assert dataclasses.replace(toy, own_pretokenizer=True).own_pretokenizer  # frozen, one row per kind


def test_a_local_file_loads_without_fsspec_and_a_url_loads_the_same(tmp_path, r50k_tok_file):
    import subprocess
    import sys
    import uuid

    import fsspec
    from conftest import data_path

    gguf = str(data_path("llamacpp", "ggml-vocab-gpt-2.gguf"))
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "tokenizer.bpe").write_bytes(open(r50k_tok_file, "rb").read())
    # fsspec's import is 0.08-0.09 s of a load: a local path never imports it
    code = "import sys; from bpe_core import Tokenizer; [Tokenizer.from_file(p) for p in sys.argv[1:]]; "
    code += "print('fsspec' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code, r50k_tok_file, gguf, str(folder)], capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0 and run.stdout.split() == ["False"], run.stderr[-2000:]
    base = f"memory://kinds-{uuid.uuid4().hex}"
    fs = fsspec.filesystem("memory")
    try:
        for name, local in (("r50k.bpe", r50k_tok_file), ("gpt2.gguf", gguf), ("folder/tokenizer.bpe", r50k_tok_file)):
            with fsspec.open(f"{base}/{name}", "wb") as f:
                f.write(open(local, "rb").read())
        text = "hello world, and GGUF's gpt-2 too"
        for url, local in ((f"{base}/r50k.bpe", r50k_tok_file), (f"{base}/gpt2.gguf", gguf),
                           (f"{base}/folder", str(folder))):  # fmt: skip
            assert Tokenizer.from_file(url).encode(text) == Tokenizer.from_file(local).encode(text)
    finally:
        fs.rm(base.removeprefix("memory://"), recursive=True)
