"""Encoding: pre-tokenizers, special tokens, bytes input, the merge kernels and their worst case."""

from __future__ import annotations

import pickle

import cloudpickle
import pytest
from conftest import adversarial_cases, ours_openai
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe_core
from bpe_core.model import merges as bpe
from bpe_core.pretokenize.pretokenizer import PreTokenizer

# --------------------------------------------------------------------------- pre-tokenizers


def test_pretokenizer_specs():
    assert PreTokenizer.from_spec("cl100k").split("Hello world!!") == ["Hello", " world", "!!"]
    assert PreTokenizer.from_spec(r"\d+").split("ab12cd") == ["ab", "12", "cd"]  # text between matches kept
    assert PreTokenizer.from_spec([r"\s+", r"\d"]).split("a1 b22") == ["a", "1", " ", "b", "2", "2"]
    pre = PreTokenizer([r"\w+"], normalizer="NFKC")
    assert PreTokenizer.from_spec(pre) is pre
    assert pre.split("ﬁ x") == ["fi", " ", "x"]  # NFKC runs before the split
    assert PreTokenizer.from_spec("llama-bpe").patterns == PreTokenizer.from_spec("llama3").patterns


def test_pretokenizer_errors_say_what_to_pass():
    with pytest.raises(ValueError, match="invalid pre-tokenizer regex"):
        PreTokenizer.from_spec("(unclosed")
    with pytest.raises(TypeError, match="preset name"):
        PreTokenizer.from_spec(42)
    with pytest.raises(ValueError, match="normalizer"):
        PreTokenizer(["x"], normalizer="NFD-ish")


@settings(max_examples=300, deadline=None)
@given(text=st.text(), preset=st.sampled_from(["r50k", "cl100k", "o200k", "llama3", "qwen2", "deepseek-coder"]))
def test_pieces_cover_the_text(text, preset):
    assert "".join(PreTokenizer.from_spec(preset).split(text)) == text


# --------------------------------------------------------------------------- special and added tokens


def _tiny(**kwargs) -> bpe_core.Tokenizer:
    counts = bpe_core.count_chunks(["hello world, hello there"] * 3, "cl100k")
    return bpe_core.train(counts, 280, special_tokens=["<|endoftext|>", "<|endoftext|>x"], **kwargs)


def test_special_tokens_policy():
    tok = _tiny()
    eot, longer = tok.special_tokens["<|endoftext|>"], tok.special_tokens["<|endoftext|>x"]
    with pytest.raises(ValueError, match="disallowed special token"):
        tok.encode("hi <|endoftext|>")
    assert eot not in tok.encode("hi <|endoftext|>", disallowed_special=())
    assert tok.encode("<|endoftext|>", disallowed_special=()) == tok.encode_ordinary("<|endoftext|>")
    assert tok.encode("a<|endoftext|>xb", allowed_special="all")[1] == longer  # longest match first
    assert tok.encode("a<|endoftext|>b", allowed_special={"<|endoftext|>"})[1] == eot
    with pytest.raises(ValueError, match="not special tokens"):
        tok.encode("a", allowed_special={"<|nope|>"})
    assert tok.encode_batch(["hello", "<|endoftext|>"], allowed_special="all") == [tok.encode("hello"), [eot]]


def test_added_tokens_match_in_encode_ordinary():
    base = _tiny()
    tok = bpe_core.Tokenizer(
        base.vocab,
        merges=base.merge_ids,
        pretokenizer="cl100k",
        special_tokens=base.special_tokens,
        added_tokens={"hello world": 400},
    )
    assert tok.encode_ordinary("say hello world!") == tok.encode_ordinary("say ") + [400] + tok.encode_ordinary("!")
    assert tok.decode(tok.encode_ordinary("say hello world!")) == "say hello world!"


# --------------------------------------------------------------------------- bytes, surrogates, round trips


def test_invalid_utf8_bytes_round_trip_byte_exactly():
    tok = ours_openai("cl100k")
    for raw in [b"\xff\xfe", b"ok \xc3\x28 \xed\xa0\x80 \xf5\x80", b"\x00\x00", b"caf\xc3\xa9 \xe2\x82"]:
        assert tok.decode_bytes(tok.encode_ordinary(raw)) == raw
    assert tok.encode_ordinary("café".encode()) == tok.encode_ordinary("café")


def test_every_adversarial_case_encodes_and_round_trips():
    tok = ours_openai("o200k")
    for case_id, value in adversarial_cases():
        ids = tok.encode_ordinary(value)
        if isinstance(value, bytes):
            assert tok.decode_bytes(ids) == value, case_id
        else:
            expected = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            assert tok.decode(ids) == expected, case_id


@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_round_trip_hypothesis(text):
    for preset in ("cl100k", "o200k"):
        tok = ours_openai(preset)
        expected = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        assert tok.decode(tok.encode_ordinary(text)) == expected


# --------------------------------------------------------------------------- merge kernels


@settings(max_examples=300, deadline=None)
@given(data=st.binary(min_size=0, max_size=200))
def test_heap_kernel_equals_scan_kernel(data):
    tok = ours_openai("cl100k")
    lookup = tok._pairs.__getitem__
    ids = [tok._byte_ids[b] for b in data]
    assert bpe._merge_heap(list(ids), lookup, None) == (bpe._merge_scan(list(ids), lookup) if len(ids) > 1 else ids)


@pytest.mark.parametrize(
    "preset, unit", [("cl100k", b"a"), ("o200k", b"ab"), ("cl100k", b"\xe4\xb8\x80"), ("o200k", b"x1")]
)
def test_one_long_piece_costs_n_log_n_operations(preset, unit):
    """A 1 MiB piece without spaces: heap operations stay below 3n, whatever the vocabulary (no timing)."""
    tok = ours_openai(preset)
    data = unit * ((1 << 20) // len(unit))
    stats = [0, 0]
    ids = tok.encode_piece_bytes(data, stats=stats)
    pushes, pops = stats
    assert tok.decode_bytes(ids) == data
    assert pushes <= 3 * len(data) and pops <= pushes


def test_long_pieces_take_the_heap_kernel(monkeypatch):
    longest = []
    scan = bpe._merge_scan
    monkeypatch.setattr(bpe, "_merge_scan", lambda ids, lookup: longest.append(len(ids)) or scan(ids, lookup))
    # the reference kernels (the native ones are covered by test_native_encode); a fresh chunk cache
    tok = pickle.loads(pickle.dumps(ours_openai("cl100k"))).use_backend("python")
    text = "wordy " * 100 + "x" * 100_000
    assert tok.decode(tok.encode_ordinary(text)) == text
    assert longest and max(longest) <= bpe.SCAN_LIMIT


def test_pickle_and_cloudpickle_give_the_same_encoder():
    tok = _tiny()
    text = "hello there <|endoftext|> world"
    for dumps in (pickle.dumps, cloudpickle.dumps):
        clone = pickle.loads(dumps(tok))
        assert clone.encode(text, allowed_special="all") == tok.encode(text, allowed_special="all")
    rank_only = ours_openai("r50k")
    clone = pickle.loads(cloudpickle.dumps(rank_only))
    assert clone.encode("hello world") == [31373, 995]


@pytest.mark.parametrize("name, suggestion", [("cl100kk", "'cl100k'"), ("O200K", "'o200k'"), ("llama", None)])
def test_a_misspelled_preset_name_is_refused_not_used_as_a_literal_regex(name, suggestion):
    from bpe_core.pretokenize.pretokenizer import PreTokenizer

    with pytest.raises(ValueError, match=f"unknown pre-tokenizer preset '{name}'") as info:
        PreTokenizer.from_spec(name)
    if suggestion:
        assert f"Did you mean {suggestion}" in str(info.value)
    assert PreTokenizer.from_spec([name]).split(f"a {name} b") == ["a ", name, " b"]  # a list: the literal regex
    with pytest.raises(ValueError, match="unknown pre-tokenizer preset"):
        bpe_core.count_chunks(["Hello world"], name)


def test_one_special_token_given_as_a_string_is_refused_with_the_set_to_pass():
    tok = ours_openai("cl100k")
    for name in ("allowed_special", "disallowed_special"):
        with pytest.raises(TypeError, match=rf"{name}=\{{'<\|endoftext\|>'\}}"):
            tok.encode("x", **{name: "<|endoftext|>"})
    assert tok.encode("x<|endoftext|>", allowed_special={"<|endoftext|>"})[-1] == 100257
