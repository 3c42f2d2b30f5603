"""Mistral's Tekken files, as the `mistral-common` wheel (a test peer, in the test extra) ships them, against its own
`Tekkenizer`: the same ids on the shared corpora and the adversarial cases, both backends, and the same special
tokens. Its absence is a failure under BEAM_BPE_REQUIRE_FORMATS=1 (make test), a skip otherwise."""

from __future__ import annotations

import base64
import json
import os
from functools import cache
from pathlib import Path

import pytest
from conftest import CORPORA, adversarial_cases, corpus, require_module

from bpe_core import Tokenizer
from bpe_core.errors import TokenizerFileError
from bpe_core.formats.tekken import FAMILY

pytestmark = pytest.mark.slow  # real vocabularies against their peers: make test, not make test-core

FLAG = "BEAM_BPE_REQUIRE_FORMATS"
INSTALL = "pip install -e '.[test]' (mistral-common is in the test extra)"
FILES = ("tekken_240718.json", "tekken_240911.json")


def tekken_file(name: str) -> Path:
    mistral_common = require_module("mistral_common", flag=FLAG, install=INSTALL)
    path = Path(mistral_common.__file__).parent / "data" / name
    if not path.exists():
        message = f"{path} is not in the installed mistral-common {mistral_common.__version__}"
        if os.environ.get(FLAG) == "1":
            pytest.fail(f"{message}; {FLAG}=1 makes its absence an error", pytrace=False)
        pytest.skip(message)
    return path


@cache
def ours(name: str) -> Tokenizer:
    return Tokenizer.from_file(str(tekken_file(name)))


@cache
def reference(name: str):
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    return Tekkenizer.from_file(tekken_file(name))


def expected(name: str, texts: list[str]) -> list[list[int]]:
    ref = reference(name)
    return [ref.encode(t, bos=False, eos=False) for t in texts]


def copy_with(name: str, backend: str) -> Tokenizer:
    tok = Tokenizer.from_file(str(tekken_file(name)))
    tok.use_backend(backend)
    return tok


@pytest.mark.parametrize("name", FILES)
def test_recognised_and_shaped_as_tekkenizer_makes_it(name):
    tok, ref = ours(name), reference(name)
    assert tok.family == FAMILY
    assert tok.special_tokens == ref._special_tokens_reverse_vocab  # <unk> 0, <s> 1, ..., <SPECIAL_999> 999
    assert len(tok.special_tokens) == ref.num_special_tokens == 1000
    assert len(tok.vocab) + len(tok.special_tokens) == ref.n_words == 131072
    assert min(tok.vocab) == 1000 and max(tok.vocab) == 131071
    for i in (1000, 1001, 1255, 1256, 5000, 131071):
        assert tok.vocab[i] == ref._model.decode_single_token_bytes(i - 1000)
    # The file's own pattern, not llama.cpp's rewrite of it.
    assert tok.pretokenizer.split("aÑb") == ["a", "Ñb"]


@pytest.mark.parametrize("backend", ["native", "python"])
@pytest.mark.parametrize("name", FILES)
def test_ids_equal_tekkenizer_on_samples(name, backend):
    tok = copy_with(name, backend)
    texts = [d for c in CORPORA for d in corpus(c, 40)] + ["aÑb", "", "<s>[INST] hi [/INST]</s>", "12345 don't"]
    assert tok.encode_ordinary_batch(texts) == expected(name, texts)


@pytest.mark.parametrize("name", FILES)
def test_ids_equal_tekkenizer_on_adversarial_cases(name):
    cases = [(i, t) for i, t in adversarial_cases() if isinstance(t, str)]
    texts = [t.encode("utf-8", "replace").decode("utf-8") for _, t in cases]  # tiktoken refuses lone surrogates
    got = ours(name).encode_ordinary_batch(texts)
    for (case, _), text, ids, want in zip(cases, texts, got, expected(name, texts), strict=True):
        assert ids == want, (case, text[:80])


@pytest.mark.full
@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("corpus_name", CORPORA)
def test_ids_equal_tekkenizer_on_every_corpus_document(name, corpus_name):
    docs = corpus(corpus_name, 10**9)
    got = ours(name).encode_ordinary_batch(docs)
    want = expected(name, docs)
    bad = [i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b]
    assert not bad and len(got) == len(docs), f"{len(bad)} documents differ, first {bad[:5]}"


def write_tekken(tmp_path: Path, **changes) -> Path:
    """A small Tekken file: the 256 bytes, 'ab', 'abc'; 22 special ids (Tekkenizer's legacy 20, two fillers)."""
    tokens = [bytes([i]) for i in range(256)] + [b"ab", b"abc"]
    spec = {
        "config": {
            "pattern": r"\p{L}+|\s+|[^\s\p{L}]+",
            "num_vocab_tokens": len(tokens),
            "default_vocab_size": len(tokens) + 22,
            "default_num_special_tokens": 22,
            "version": "v3",
        },
        "vocab": [
            {"rank": i, "token_bytes": base64.b64encode(t).decode(), "token_str": None} for i, t in enumerate(tokens)
        ],
    }
    for key, value in changes.items():
        if key == "entry":  # (index, replacement) in the vocab list
            spec["vocab"][value[0]] = value[1]
        elif key in spec["config"]:
            spec["config"][key] = value
        else:
            spec[key] = value
    path = tmp_path / "tekken_small.json"
    path.write_text(json.dumps(spec))
    return path


def test_small_file_ids_specials_and_cut(tmp_path):
    tok = Tokenizer.from_file(str(write_tekken(tmp_path)))
    assert list(tok.special_tokens.items())[:3] == [("<unk>", 0), ("<s>", 1), ("</s>", 2)]
    assert tok.special_tokens["[TOOL_CONTENT]"] == 19 and tok.special_tokens["<SPECIAL_21>"] == 21
    assert tok.encode_ordinary("abc ab") == [22 + 257, 22 + 32, 22 + 256]
    # default_vocab_size cuts the vocabulary: without rank 257, 'abc' is 'ab' 'c'.
    cut = Tokenizer.from_file(str(write_tekken(tmp_path, default_vocab_size=22 + 257)))
    assert cut.encode_ordinary("abc") == [22 + 256, 22 + ord("c")]
    listed = [{"rank": 0, "token_str": "<x>", "is_control": True}]
    own = Tokenizer.from_file(str(write_tekken(tmp_path, special_tokens=listed, version="v13")))
    assert len(own.special_tokens) == 22 and own.special_tokens["<x>"] == 0 and own.special_tokens["<SPECIAL_1>"] == 1


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"version": "v13"}, "must list its special_tokens"),
        ({"version": "3"}, "not a Tekken version"),
        ({"default_vocab_size": 9999}, "the sizes are wrong"),
        ({"pattern": None}, "config.pattern is None"),
        ({"entry": (7, {"rank": 8, "token_bytes": "Bw==", "token_str": None})}, "vocab[7] is"),
        ({"entry": (7, {"rank": 7, "token_bytes": "B*", "token_str": None})}, "vocab[7].token_bytes is not base64"),
        ({"entry": (7, {"rank": 7, "token_bytes": "CA==", "token_str": None})}, "the first 256 ranks are the single"),
        ({"special_tokens": [{"rank": 25, "token_str": "<x>", "is_control": True}]}, "outside 0-21"),
        ({"default_num_special_tokens": 2, "default_vocab_size": 260}, "20 special tokens, more than"),
    ],
)
def test_malformed_file_refused_naming_the_entry(tmp_path, changes, message):
    with pytest.raises(TokenizerFileError, match=message.replace("[", r"\[")):
        Tokenizer.from_file(str(write_tekken(tmp_path, **changes)))


def test_pretokenizer_override_refused(tmp_path):
    with pytest.raises(ValueError, match="Tekken file, which carries its own pre-tokenizer"):
        Tokenizer.from_file(str(write_tekken(tmp_path)), pretokenizer="cl100k")
