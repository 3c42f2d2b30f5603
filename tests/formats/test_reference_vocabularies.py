"""Real vocabularies whose tokens are not all in byte-level form, from pinned PyPI sdists (the reference-file cache,
filled by `python tests/tools/fetch_reference_files.py`): every llama.cpp GGUF test vocabulary of the byte-level BPE
kind against llama.cpp's expected ids (Command-R's 1,403 tokens spelled as raw text among them), and OpenAI Whisper's
rank files (an empty token at rank 50256) against tiktoken itself. Both backends; the oracles are the files' own
expected ids, tiktoken, Hugging Face `tokenizers` and the GPT-2 byte map, never this code."""

from __future__ import annotations

import json
import warnings
from functools import cache
from pathlib import Path

import pytest
import tiktoken
import tokenizers
from conftest import REFERENCE, corpus, openai_encoding, reference_path
from tiktoken.load import load_tiktoken_bpe

from bpe_core import Tokenizer
from bpe_core.formats.gguf_reader import read_gguf_metadata
from bpe_core.model.bytelevel import unicode_to_bytes

pytestmark = pytest.mark.slow  # real vocabularies against their peers: make test, not make test-core

LLAMA = "llama-cpp-python-0.3.36"
WHISPER = "openai-whisper-20250625"
MODELS = "vendor/llama.cpp/models"
SEP = "\n__ggml_vocab_test__\n"
BACKENDS = ("native", "python")
# The byte-level BPE vocabularies with expected ids in that sdist; any other found in the cache is tested too.
KNOWN = ("command-r", "deepseek-coder", "deepseek-llm", "falcon", "gpt-2", "llama-bpe", "mpt", "qwen2", "qwen35",
         "refact", "starcoder")  # fmt: skip


def gguf_names() -> list[str]:
    found = {p.name[len("ggml-vocab-") : -len(".gguf.out")] for p in (REFERENCE / LLAMA / MODELS).glob("*.gguf.out")}
    byte_level = {n for n in found if read_gguf_metadata(str(gguf(n))).get("tokenizer.ggml.model") == "gpt2"}
    return sorted(set(KNOWN) | byte_level) if found else list(KNOWN)


def gguf(name: str) -> Path:
    return REFERENCE / LLAMA / MODELS / f"ggml-vocab-{name}.gguf"


def llamacpp_cases(name: str) -> list[tuple[str, list[int]]]:
    """llama.cpp's test-tokenizer-0 files: inputs cut by the separator line, one line of expected ids each."""
    text = reference_path(LLAMA, f"{MODELS}/ggml-vocab-{name}.gguf.inp").read_text(encoding="utf-8")
    inputs = text.split(SEP)
    assert inputs[-1] == "", "the .inp file ends with a separator"
    lines = reference_path(LLAMA, f"{MODELS}/ggml-vocab-{name}.gguf.out").read_text(encoding="utf-8").split("\n")
    return [(t, [int(i) for i in line.split()]) for t, line in zip(inputs[:-1], lines, strict=False)]


@cache
def load_gguf(name: str, backend: str) -> Tokenizer:
    return Tokenizer.from_gguf(str(reference_path(LLAMA, f"{MODELS}/ggml-vocab-{name}.gguf")), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", gguf_names())
def test_llamacpp_vocabularies_give_the_expected_ids(name, backend):
    cases = llamacpp_cases(name)
    tok = load_gguf(name, backend)
    assert len(cases) >= 40
    assert [tok.encode_ordinary(t) for t, _ in cases] == [ids for _, ids in cases]
    assert tok.encode_ordinary_batch([t for t, _ in cases], num_threads=2) == [ids for _, ids in cases]


def raw_text_ids(name: str) -> list[int]:
    """Normal tokens with a character outside GPT-2's byte map, read from the file itself."""
    meta = read_gguf_metadata(str(reference_path(LLAMA, f"{MODELS}/ggml-vocab-{name}.gguf")))
    alphabet = set(unicode_to_bytes())
    types = meta.get("tokenizer.ggml.token_type") or [1] * len(meta["tokenizer.ggml.tokens"])
    return [
        i
        for i, (t, k) in enumerate(zip(meta["tokenizer.ggml.tokens"], types, strict=True))
        if k == 1 and set(t) - alphabet
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_command_r_keeps_its_raw_text_tokens_unreachable_and_decodable(backend):
    tok = load_gguf("command-r", backend)
    raw = raw_text_ids("command-r")
    assert len(raw) == 1403  # the count
    assert tok.unreachable_tokens() == raw
    assert tok.describe()["unreachable_tokens"] == 1403
    meta = read_gguf_metadata(str(gguf("command-r")))
    decoder = tokenizers.decoders.ByteLevel()  # Hugging Face's decoder: the raw UTF-8 of such a token
    for i in raw:
        assert tok.decode([i]) == decoder.decode([meta["tokenizer.ggml.tokens"][i]]) == meta["tokenizer.ggml.tokens"][i]
    text = "".join(tok.decode([i]) for i in raw[:200])
    assert not set(tok.encode_ordinary(text)) & set(raw)
    assert tok.decode(tok.encode_ordinary(text)) == text


@pytest.mark.parametrize("name", gguf_names())
def test_unreachable_tokens_are_not_produced_even_by_their_own_text(name):
    tok = load_gguf(name, "native")
    unreachable = tok.unreachable_tokens()
    assert set(raw_text_ids(name)) <= set(unreachable)
    for i in unreachable[:300]:
        data = tok.token_bytes(i)
        assert i not in tok.encode_ordinary(data), (i, data)


def test_command_r_through_every_writer_gives_the_same_ids(tmp_path):
    tok = load_gguf("command-r", "native")
    cases = llamacpp_cases("command-r")
    tok.save(str(tmp_path / "c.bpe"))
    tok.to_huggingface(str(tmp_path / "tokenizer.json"))
    own = Tokenizer.load(str(tmp_path / "c.bpe"))
    assert own.unreachable_tokens() == tok.unreachable_tokens() and own.digest() == tok.digest()
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))  # Hugging Face reads our export
    ours_hf = Tokenizer.from_huggingface(str(tmp_path / "tokenizer.json"))
    assert ours_hf.unreachable_tokens() == tok.unreachable_tokens()
    for text, ids in cases:
        assert own.encode_ordinary(text) == ids
        assert hf.encode(text, add_special_tokens=False).ids == ids, text
        assert ours_hf.encode_ordinary(text) == ids
    raw = tok.unreachable_tokens()[:50]
    assert hf.decode(raw) == tok.decode(raw)
    with pytest.raises(ValueError, match="spelled as text"):
        tok.to_tiktoken(str(tmp_path / "c.tiktoken"))


# ------------------------------------------------------------------------------ Whisper's rank files
def whisper(name: str) -> str:
    return str(reference_path(WHISPER, f"whisper/assets/{name}.tiktoken"))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["multilingual", "gpt2"])
def test_whisper_rank_files_load_with_tiktokens_ranks_and_encode_as_tiktoken(name, backend):
    ranks = load_tiktoken_bpe(whisper(name))
    special = {"<|endoftext|>": len(ranks)}  # Whisper numbers its special tokens after the ranks
    tok = Tokenizer.from_tiktoken(whisper(name), pretokenizer="r50k", special_tokens=special, backend=backend)
    reference = tiktoken.Encoding(name, pat_str=openai_encoding("r50k")["pat_str"], mergeable_ranks=ranks,
                                  special_tokens=special)  # fmt: skip
    assert {tok.token_bytes(i): i for i in tok.vocab} == ranks
    assert tok.n_vocab == reference.n_vocab
    docs = corpus("multi_udhr", 150) + corpus("fortunes_multi", 300)
    assert tok.encode_ordinary_batch(docs) == reference.encode_ordinary_batch(docs)
    assert [tok.encode(d) for d in docs[:50]] == [reference.encode(d) for d in docs[:50]]
    mixed = "hi <|endoftext|> there"
    assert tok.encode(mixed, allowed_special="all") == reference.encode(mixed, allowed_special="all")
    ids = reference.encode_ordinary(docs[0])
    assert tok.decode(ids) == reference.decode(ids)
    empty = [i for i, b in tok.vocab.items() if b == b""]
    assert tok.unreachable_tokens() == empty == ([50256] if name == "multilingual" else [])
    assert tok.decode_bytes(empty) == reference.decode_bytes(empty) == b""


def test_whisper_multilingual_round_trips_through_every_writer(tmp_path):
    tok = Tokenizer.from_tiktoken(whisper("multilingual"), pretokenizer="r50k")
    tok.to_tiktoken(str(tmp_path / "w.tiktoken"))
    assert load_tiktoken_bpe(str(tmp_path / "w.tiktoken")) == load_tiktoken_bpe(whisper("multilingual"))
    tok.save(str(tmp_path / "w.bpe"))
    loaded = Tokenizer.load(str(tmp_path / "w.bpe"))
    docs = corpus("multi_udhr", 50)
    assert loaded.encode_ordinary_batch(docs) == tok.encode_ordinary_batch(docs)
    assert loaded.unreachable_tokens() == [50256] and loaded.digest() == tok.digest()
    assert b"format_version 1\n" in (tmp_path / "w.bpe").read_bytes()  # nothing spelled as text: version 1


# ------------------------------------------------------------------------------ rank files as tiktoken reads them
RANK_FILES = {
    "crlf": b"YQ== 0\r\nYg== 1\r\n\r\nYWI= 2\r\n",
    "cr only": b"YQ== 0\rYg== 1\rYWI= 2",
    "empty token": b"YQ== 0\nYg== 1\n= 2\nYWI= 3\n",
    "junk base64 characters": b"YQ== 0\nYg== 1\nY!W*I= 2\n",
    "empty lines": b"\n\nYQ== 0\n\nYg== 1\n\n",
    "gaps": b"YQ== 0\nYg== 5\nYWI= 9\n",
    "token twice": b"YQ== 0\nYg== 1\nYWI= 2\nYQ== 3\n",
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(RANK_FILES))
def test_rank_files_load_as_tiktoken_loads_them(case, backend, tmp_path):
    path = tmp_path / "r.tiktoken"
    path.write_bytes(RANK_FILES[case])
    ranks = load_tiktoken_bpe(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "token twice" warns
        tok = Tokenizer.from_tiktoken(str(path), pretokenizer=r"\S+|\s+", backend=backend)
    assert {tok.token_bytes(i): i for i in tok.vocab} == ranks
    reference = tiktoken.Encoding("r", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={})
    for text in ("ab", "abab ba", "a", "bbbb aab"):
        if all(bytes([c]) in ranks for c in text.replace(" ", "").encode()):
            assert tok.encode_ordinary(text.replace(" ", "")) == reference.encode_ordinary(text.replace(" ", ""))


@pytest.mark.parametrize("data", [b"YQ 0\n", b"YQ== x\n", b"YQ== 0 1\n", b"YQ== 0\nYg== 0\n"])
def test_rank_files_tiktoken_cannot_use_are_refused(data, tmp_path):
    path = tmp_path / "r.tiktoken"
    path.write_bytes(data)
    if data != b"YQ== 0\nYg== 0\n":
        with pytest.raises(ValueError):
            load_tiktoken_bpe(str(path))
    else:  # two tokens at one rank: tiktoken loads the dict but cannot build an Encoding from it (a Rust panic)
        with pytest.raises(BaseException, match="duplicate token indices"):
            tiktoken.Encoding("r", pat_str=r"\S+", mergeable_ranks=load_tiktoken_bpe(str(path)), special_tokens={})
    with pytest.raises(ValueError, match=str(path)):
        Tokenizer.from_tiktoken(str(path), pretokenizer=r"\S+")


# ------------------------------------------------------------------------------ small vocabularies, both backends
def hf_json_with_raw_tokens() -> dict:
    vocab = {c: b for c, b in sorted(((c, b) for c, b in unicode_to_bytes().items()), key=lambda kv: kv[1])}
    vocab = {**vocab, "ab": 256, "\u200d": 257, "âĢį": 258, "™x": 259, "âĢ": 260}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                                            "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": ["a b", "â Ģ", "âĢ į"]},
    }  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_tokenizer_json_with_raw_text_tokens_equals_hugging_face(backend, tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(hf_json_with_raw_tokens()), encoding="utf-8")
    hf = tokenizers.Tokenizer.from_file(str(path))
    tok = Tokenizer.from_huggingface(str(path), backend=backend)
    assert tok.unreachable_tokens() == [257, 259]  # "\u200d" and "™x": not byte-level; b"\xe2\x80\x8d" is 258's
    for text in ("ab\u200d", "\u200d\u200d ab", "™x ab™x", "a\u200db"):
        assert tok.encode_ordinary(text) == hf.encode(text, add_special_tokens=False).ids, text
    for ids in ([257], [259, 256], [258, 257]):
        assert tok.decode(ids) == hf.decode(ids)
