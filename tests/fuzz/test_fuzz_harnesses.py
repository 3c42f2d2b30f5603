"""The fuzz harnesses of tests/fuzz themselves (no atheris needed): each replays its regression corpus and some seeds,
and each oracle catches a bug planted in the native side, so that `make fuzz` running clean means something."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import REQUIRE_DATA

FUZZ = Path(__file__).resolve().parent
sys.path.insert(0, str(FUZZ))

import fuzzlib  # noqa: E402

TARGETS = ("pretok", "encode", "decode", "loaders")


def harness(target: str):
    module = __import__(f"fuzz_{target}")
    return module


def run_or_skip(fn, *args):
    try:
        return fn(*args)
    except fuzzlib.MissingData as exc:
        if REQUIRE_DATA:
            pytest.fail(f"{exc}; BEAM_BPE_REQUIRE_DATA=1 makes missing data an error")
        pytest.skip(str(exc))


@pytest.mark.parametrize("target", TARGETS)
def test_regressions_and_seeds_pass(target):
    module = harness(target)
    seeds = run_or_skip(module.seeds)
    assert len(seeds) >= 5
    replayed = sorted((fuzzlib.REGRESSIONS / target).glob("*")) if (fuzzlib.REGRESSIONS / target).is_dir() else []
    for path in replayed:
        module.test_one_input(path.read_bytes())
    for seed in seeds[:: max(1, len(seeds) // 40)]:
        module.test_one_input(seed)
    for data in (b"", b"\x00", b"\xff" * 7, bytes(range(256))):  # the reader runs dry, odd flags
        module.test_one_input(data)


def test_pretok_oracle_catches_a_wrong_split(monkeypatch):
    from bpe_core import native

    module = harness("pretok")
    run_or_skip(module.presets)
    real = native._core.pretok_split
    monkeypatch.setattr(native._core, "pretok_split", lambda name, data: real(name, data)[::-1])
    with pytest.raises(AssertionError, match="pretok_split"):
        module.test_one_input(b"\x01Hello world, 123 times!")


def test_encode_oracle_catches_wrong_ids(monkeypatch):
    module = harness("encode")
    native_tok, _ = run_or_skip(module.tokenizers, "cl100k")
    real = type(native_tok).encode_ordinary

    def wrong(self, text):
        ids = real(self, text)
        return ids[:-1] if self.backend == "native" else ids

    monkeypatch.setattr(type(native_tok), "encode_ordinary", wrong)
    with pytest.raises(AssertionError, match="encode_ordinary"):
        module.test_one_input(bytes([0x10]) + b"some text to encode")


def test_encode_oracle_catches_a_lossy_round_trip(monkeypatch):
    module = harness("encode")
    native_tok, python_tok = run_or_skip(module.tokenizers, "cl100k")
    monkeypatch.setattr(module, "decoded_text", lambda tok, ids: "")
    with pytest.raises(AssertionError, match="decode"):
        module.test_one_input(bytes([0x10]) + b"round trip")


def test_decode_oracle_catches_a_stream_that_differs(monkeypatch):
    from bpe_core import StreamingDecoder

    module = harness("decode")
    run_or_skip(module.tokenizers)
    real = StreamingDecoder.feed

    def wrong(self, ids):
        text = real(self, ids)
        return text + "!" if self._native is not None else text

    monkeypatch.setattr(StreamingDecoder, "feed", wrong)
    seed = run_or_skip(module.seeds)[0]
    with pytest.raises(AssertionError, match="stream"):
        module.test_one_input(seed)


def test_loaders_oracle_refuses_an_undocumented_error(monkeypatch):
    import bpe_core

    module = harness("loaders")
    seed = run_or_skip(module.seeds)[0]

    def broken(*args, **kwargs):
        raise IndexError("list index out of range")

    monkeypatch.setattr(bpe_core.Tokenizer, "from_file", broken)
    with pytest.raises(IndexError):
        module.test_one_input(seed)


def test_gguf_seed_is_a_smaller_loadable_copy(tmp_path):
    from bpe_core import Tokenizer

    module = harness("loaders")
    raw = run_or_skip(module.gguf_seed, "deepseek-coder")
    path = tmp_path / "small.gguf"
    path.write_bytes(raw)
    small = Tokenizer.from_file(str(path))
    full = Tokenizer.from_file(str(fuzzlib.data_path("llamacpp", "ggml-vocab-deepseek-coder.gguf")))
    assert len(raw) < 100_000 and small.n_vocab < 1000
    assert small.pretokenizer == full.pretokenizer
    assert set(small.special_tokens) == set(full.special_tokens)
    assert set(small.added_tokens) == set(full.added_tokens)
    assert small.decode(small.encode_ordinary("int main() { return 0; }")) == "int main() { return 0; }"


def test_pretok_oracle_catches_wrong_threaded_counts(monkeypatch):
    import bpe_core

    module = harness("pretok")
    run_or_skip(module.presets)
    real = bpe_core.count_chunks

    def wrong(texts, pretokenizer, **kwargs):
        counts = dict(real(texts, pretokenizer, **kwargs))
        if kwargs.get("backend") != "python":
            counts[b"planted"] = 1
        return counts

    monkeypatch.setattr(bpe_core, "count_chunks", wrong)
    with pytest.raises(AssertionError, match="count_chunks"):
        module.test_one_input(b"\x41Hello world, 123 times!")
