"""llama.cpp GGUF vocabularies: llama.cpp's own tokenizer tests, our metadata reader against the `gguf` package,
and files written with `gguf.GGUFWriter` for token types, pre-tokenizer names and bad input."""

from __future__ import annotations

import json
from functools import cache

import gguf
import pytest
from conftest import data_path

from bpe_core import Tokenizer, TokenizerFileError
from bpe_core.formats.gguf_reader import read_gguf_metadata
from bpe_core.model.bytelevel import bytes_to_token_string

VOCABS = ("gpt-2", "llama-bpe", "qwen2", "deepseek-coder")


@cache
def vocab(name: str) -> Tokenizer:
    return Tokenizer.from_gguf(str(data_path("llamacpp", f"ggml-vocab-{name}.gguf")))


def llamacpp_cases(name: str) -> list[dict]:
    with open(data_path("llamacpp", "tests", f"{name}.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.mark.parametrize("name", VOCABS)
def test_llamacpp_cases_give_the_expected_ids(name):
    tok = vocab(name)
    cases = llamacpp_cases(name)
    for case in cases:
        assert tok.encode_ordinary(case["text"]) == case["ids"], case["text"]
    assert len(cases) >= 40


@pytest.mark.parametrize("name", VOCABS)
def test_llamacpp_cases_with_the_python_reference(name):
    tok = Tokenizer.from_gguf(str(data_path("llamacpp", f"ggml-vocab-{name}.gguf")), backend="python")
    assert [tok.encode_ordinary(c["text"]) for c in llamacpp_cases(name)] == [c["ids"] for c in llamacpp_cases(name)]


@pytest.mark.slow
def test_reader_agrees_with_the_gguf_package():
    path = str(data_path("llamacpp", "ggml-vocab-deepseek-coder.gguf"))
    reference = gguf.GGUFReader(path)
    ours = read_gguf_metadata(path)
    expected = {k: f.contents() for k, f in reference.fields.items() if not k.startswith("GGUF.")}
    assert ours.keys() == expected.keys()
    for key, value in expected.items():
        assert ours[key] == pytest.approx(value) if isinstance(value, float) else ours[key] == value, key
    assert len(ours["tokenizer.ggml.tokens"]) == 32256


def test_token_types_become_special_and_added_tokens():
    llama = vocab("llama-bpe")
    assert llama.special_tokens["<|begin_of_text|>"] == 128000 and len(llama.special_tokens) == 256
    text = "<|begin_of_text|>Hi<|eot_id|>"
    assert llama.encode(text, allowed_special="all") == [128000, 13347, 128009]
    with pytest.raises(ValueError, match="disallowed special token"):
        llama.encode(text)
    assert 128000 not in llama.encode_ordinary(text)
    qwen = vocab("qwen2")
    assert qwen.added_tokens["[PAD151646]"] == 151646
    assert qwen.encode_ordinary("x[PAD151646]y") == qwen.encode_ordinary("x") + [151646] + qwen.encode_ordinary("y")
    deepseek = vocab("deepseek-coder")
    assert deepseek.encode_ordinary("<|User|>") == [deepseek.added_tokens["<|User|>"]]
    assert deepseek.special_tokens == {"<｜begin▁of▁sentence｜>": 32013, "<｜end▁of▁sentence｜>": 32014}


# ------------------------------------------------------------------------------------------ written here
def write_gguf(path, *, tokens, types=None, merges=(), model="gpt2", pre="gpt-2", big_endian=False) -> str:
    endian = gguf.GGUFEndian.BIG if big_endian else gguf.GGUFEndian.LITTLE
    writer = gguf.GGUFWriter(str(path), "gpt2", endianess=endian)
    writer.add_tokenizer_model(model)
    if pre is not None:
        writer.add_tokenizer_pre(pre)
    writer.add_token_list(list(tokens))
    writer.add_token_types(list(types or [1] * len(tokens)))
    writer.add_token_merges(list(merges))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return str(path)


BYTES = [bytes_to_token_string(bytes([b])) for b in range(256)]
SMALL = {
    "tokens": BYTES + ["ab", "abc", "Ġab", "<ctl>", "ab!", "ab!!"],
    "types": [1] * 259 + [3, 4, 4],
    "merges": ["a b", "ab c", "Ġ ab"],
}


@pytest.mark.parametrize("big_endian", (False, True))
def test_written_vocabulary_loads_with_token_types(tmp_path, big_endian):
    tok = Tokenizer.from_file(write_gguf(tmp_path / "v.gguf", big_endian=big_endian, **SMALL))
    assert tok.family.startswith("llama.cpp GGUF") and "pre=gpt-2" in tok.family
    assert tok.special_tokens == {"<ctl>": 259} and tok.added_tokens == {"ab!": 260, "ab!!": 261}
    # user-defined tokens: raw text first, longest first, also in encode_ordinary
    assert tok.encode_ordinary("abc ab!!ab!<ctl>") == [257, 32, 261, 260] + [ord(c) for c in "<ctl>"]
    assert tok.encode_ordinary("abc ab") == [257, 258]
    assert tok.encode("<ctl>", allowed_special="all") == [259]


def test_unknown_pre_name_is_refused_with_the_known_names_and_the_override(tmp_path):
    path = write_gguf(tmp_path / "v.gguf", pre="my-new-model", **{k: v for k, v in SMALL.items()})
    with pytest.raises(TokenizerFileError) as err:
        Tokenizer.from_gguf(path)
    message = str(err.value)
    for words in (path, "'my-new-model'", "llama-bpe", "qwen2", "pretokenizer="):
        assert words in message
    assert Tokenizer.from_gguf(path, pretokenizer="gpt-2").encode_ordinary("abc") == [257]
    assert Tokenizer.from_file(path, pretokenizer=[r"\S+|\s+"]).encode_ordinary(" abc") == [32, 257]
    missing = write_gguf(tmp_path / "m.gguf", pre=None, **SMALL)
    with pytest.raises(TokenizerFileError, match="tokenizer.ggml.pre is None"):
        Tokenizer.from_gguf(missing)


def refused(path: str, *words: str) -> None:
    with pytest.raises(TokenizerFileError) as err:
        Tokenizer.from_file(path)
    for word in (path, *words):
        assert word in str(err.value), str(err.value)


def test_bad_vocabularies_are_refused(tmp_path):
    refused(write_gguf(tmp_path / "a.gguf", model="llama", **SMALL), "'llama'", "SentencePiece")
    refused(write_gguf(tmp_path / "b.gguf", model="bert", **SMALL), "WordPiece")
    refused(write_gguf(tmp_path / "c.gguf", model="t5", **SMALL), "Unigram")
    bad_merge = {**SMALL, "merges": ["a b", "ab zz"]}
    refused(write_gguf(tmp_path / "d.gguf", **bad_merge), "merge 1", "'zz'")
    duplicate = {**SMALL, "tokens": BYTES + ["ab", "ab", "Ġab", "<ctl>", "ab!", "ab!!"]}
    refused(write_gguf(tmp_path / "e.gguf", **duplicate), "duplicate token")
    raw = {**SMALL, "tokens": BYTES + ["ab", "a\u200db", "Ġab", "<ctl>", "ab!", "ab!!"], "merges": ["a b", "Ġ ab"]}
    textual = Tokenizer.from_file(write_gguf(tmp_path / "f.gguf", **raw))  # raw text: kept, made by no merge
    assert textual.unreachable_tokens() == [257] and textual.decode([257]) == "a\u200db"
    unknown_type = {**SMALL, "types": [1] * 259 + [9, 4, 4]}
    refused(write_gguf(tmp_path / "g.gguf", **unknown_type), "unknown token type 9")


def test_corrupt_headers_are_refused(tmp_path):
    data = open(write_gguf(tmp_path / "good.gguf", **SMALL), "rb").read()
    cases = {
        "magic": (b"GGML" + data[4:], "not a GGUF file"),
        "truncated": (data[: len(data) // 2], "truncated"),
        "version": (data[:4] + (1).to_bytes(4, "little") + data[8:], "GGUF version 1"),
        "count": (data[:16] + (1 << 40).to_bytes(8, "little") + data[24:], "metadata keys"),
        "value-type": (_corrupt_first_value_type(data), "unknown value type 99"),
    }
    for name, (content, words) in cases.items():
        bad = tmp_path / f"{name}.gguf"
        bad.write_bytes(content)
        with pytest.raises(TokenizerFileError) as err:
            Tokenizer.from_gguf(str(bad))
        assert str(bad) in str(err.value) and words in str(err.value), (name, str(err.value))


def _corrupt_first_value_type(data: bytes) -> bytes:
    """Replace the value type of the first key (after magic, version, two counts and the key string) by 99."""
    key_len = int.from_bytes(data[24:32], "little")
    at = 32 + key_len
    return data[:at] + (99).to_bytes(4, "little") + data[at + 4 :]
