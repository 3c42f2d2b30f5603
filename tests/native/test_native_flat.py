"""The flat batch API (bpe_core/encode/flat.py): encode_ordinary_flat / encode_flat / decode_flat against the list API,
the Python reference, tiktoken and the loaded vocabularies; Arrow input read in place, its validation and its errors."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest
from conftest import adversarial_cases, corpus, data_path, ours_openai, tiktoken_openai

import bpe_core
from bpe_core import InvalidTextError, Tokenizer, native

LOADED = {
    "gguf-llama-bpe": ("llamacpp", "ggml-vocab-llama-bpe.gguf"),
    "gguf-qwen2": ("llamacpp", "ggml-vocab-qwen2.gguf"),
    "gguf-deepseek-coder": ("llamacpp", "ggml-vocab-deepseek-coder.gguf"),
    "hf-anthropic": ("hf", "anthropic-0.20.0.tokenizer.json"),
}


def split(ids: np.ndarray, offsets: np.ndarray) -> list[list[int]]:
    bounds = offsets.tolist()
    return [ids[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def python_twin(tok: Tokenizer) -> Tokenizer:
    return pickle.loads(pickle.dumps(tok)).use_backend("python")


def sample_texts() -> list[str]:
    texts = [t for _, t in adversarial_cases() if isinstance(t, str)][:400]
    texts += [
        d[:30_000] for c in ("multi_udhr", "code_cpython", "fortunes_multi", "en_bible_kjv") for d in corpus(c, 25)
    ]
    return texts + ["", " ", "\n\n", "a", "<|endoftext|> and <|fim_prefix|>"]


@pytest.fixture(scope="module")
def cl100k():
    return ours_openai("cl100k")


@pytest.fixture(scope="module")
def texts():
    return sample_texts()


@pytest.mark.parametrize("threads", [1, 2, 3, 7])
def test_flat_equals_batch_for_every_thread_count(cl100k, texts, threads):
    ids, offsets = cl100k.encode_ordinary_flat(texts, num_threads=threads)
    assert ids.dtype == np.uint32 and offsets.dtype == np.int64 and len(offsets) == len(texts) + 1
    assert offsets[0] == 0 and offsets[-1] == len(ids)
    assert split(ids, offsets) == cl100k.encode_ordinary_batch(texts, num_threads=1)


@pytest.mark.parametrize("preset", ["cl100k", "o200k", "r50k"])
def test_flat_equals_tiktoken(preset, texts):
    ours, tt = ours_openai(preset), tiktoken_openai(preset)
    ids, offsets = ours.encode_ordinary_flat(texts)
    assert split(ids, offsets) == tt.encode_ordinary_batch(texts, num_threads=1)
    # r50k has 50,281 ids: uint16
    assert ids.dtype == (np.uint16 if ours.n_vocab <= 65536 else np.uint32)


def test_flat_equals_python_reference(cl100k, texts):
    ref = python_twin(cl100k)
    few = texts[:150] + texts[-5:]
    assert split(*cl100k.encode_ordinary_flat(few)) == [ref.encode_ordinary(t) for t in few]
    assert split(*ref.encode_ordinary_flat(few)) == [ref.encode_ordinary(t) for t in few]  # the python backend


@pytest.fixture(scope="module", params=sorted(LOADED))
def loaded(request):
    path = str(data_path(*LOADED[request.param]))
    return request.param, Tokenizer.from_file(path)


def test_loaded_vocabularies(loaded, texts):
    name, tok = loaded
    ref = python_twin(tok)
    few = texts[:120] + texts[-5:]
    for kwargs in ({"disallowed_special": ()}, {"allowed_special": "all"}):
        expected = [ref.encode(t, **kwargs) for t in few]
        assert split(*tok.encode_flat(few, **kwargs, num_threads=2)) == expected, name
        assert split(*tok.encode_flat(pa.array(few), **kwargs, num_threads=2)) == expected, name
    assert split(*tok.encode_ordinary_flat(few)) == [ref.encode_ordinary(t) for t in few], name


def test_arrow_string_large_string_chunked_and_sliced_equal_lists(cl100k, texts):
    expected = cl100k.encode_ordinary_batch(texts)
    for array in (pa.array(texts, pa.string()), pa.array(texts, pa.large_string())):
        assert split(*cl100k.encode_ordinary_flat(array)) == expected
        assert split(*cl100k.encode_ordinary_flat(array[7:40], num_threads=2)) == expected[7:40]
    chunked = pa.chunked_array([pa.array(texts[:10]), pa.array([], pa.string()), pa.array(texts[10:])])
    assert split(*cl100k.encode_ordinary_flat(chunked, num_threads=2)) == expected
    empty_ids, empty_offsets = cl100k.encode_ordinary_flat(pa.array([], pa.string()))
    assert len(empty_ids) == 0 and empty_offsets.tolist() == [0]
    assert split(*cl100k.encode_ordinary_flat(pa.array(["", ""]))) == [[], []]


def test_str_with_lone_surrogates_and_bytes_as_encode_batch(cl100k):
    texts = ["a\ud800b", "\udcff x", b"caf\xc3\xa9 \xff\xfe", "\ud83d\ude00 ok"]
    assert split(*cl100k.encode_ordinary_flat(texts, num_threads=2)) == cl100k.encode_ordinary_batch(texts)


def arrow_of(data: bytes, offsets: list[int], large: bool = False) -> pa.Array:
    kind, width = (pa.large_string(), np.int64) if large else (pa.string(), np.int32)
    return pa.Array.from_buffers(
        kind, len(offsets) - 1, [None, pa.py_buffer(np.array(offsets, width)), pa.py_buffer(data)]
    )


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize(
    ("data", "offsets", "index", "byte"),
    [
        (b"ok\xff", [0, 2, 3], 1, 0),  # a byte that starts nothing
        (b"okab\xc3", [0, 2, 4, 5], 2, 0),  # a cut sequence at the end of the buffer
        (b"ab\xed\xa0\x80", [0, 2, 5], 1, 0),  # a surrogate in UTF-8 (CPython refuses it)
        (b"x\xc0\xaf", [0, 3], 0, 1),  # an overlong '/'
        (b"\xf4\x90\x80\x80", [0, 4], 0, 0),  # above U+10FFFF
        (b"\xc3\xa9\xc3", [0, 1, 3], 0, 0),  # an element cut inside a character
    ],
)
def test_invalid_utf8_is_named_by_index(cl100k, data, offsets, index, byte, large):
    array = arrow_of(data, offsets, large)
    for call in (cl100k.encode_ordinary_flat, cl100k.encode_flat):
        with pytest.raises(InvalidTextError, match=f"text {index} is not valid UTF-8 \\(byte {byte}") as info:
            call(array)
        assert info.value.index == index and isinstance(info.value, ValueError)
    chunked = pa.chunked_array([pa.array(["fine", "also fine"], array.type), array])
    with pytest.raises(InvalidTextError) as info:
        cl100k.encode_ordinary_flat(chunked)
    assert info.value.index == 2 + index  # counted across the chunks


def test_nulls_and_malformed_offsets_are_named(cl100k):
    with pytest.raises(InvalidTextError, match="text 2 is null") as info:
        cl100k.encode_ordinary_flat(pa.array(["a", "b", None, None]))
    assert info.value.index == 2
    # pyarrow refuses to build such arrays; the core's check on raw buffers (as a foreign producer could hand over)
    data = np.frombuffer(b"abcd", np.uint8)
    for offsets, bad in (([0, 2, 9], 1), ([3, 1], 0), ([0, -1], 0), ([0, 1, 4], -1)):
        for width, kind in ((4, np.int32), (8, np.int64)):
            array = np.array(offsets, kind)
            got = native._core.validate_arrow_strings(array.ctypes.data, width, data.ctypes.data, 4, len(offsets) - 1)
            assert got[0] == bad and got[1] == ("" if bad < 0 else "offsets"), (offsets, width)
    with pytest.raises(TypeError, match="string or large_string"):
        cl100k.encode_ordinary_flat(pa.array([b"x"], pa.binary()))
    with pytest.raises(TypeError, match="not one text"):
        cl100k.encode_ordinary_flat("one text")
    with pytest.raises(TypeError, match="expected str or bytes"):
        cl100k.encode_ordinary_flat(["a", None])


def test_invalid_text_error_is_public():
    assert bpe_core.InvalidTextError is InvalidTextError and issubclass(InvalidTextError, ValueError)
    assert InvalidTextError(4, "is null").index == 4


def test_encode_flat_special_token_policy_as_encode_batch(cl100k):
    texts = ["plain", "x <|endoftext|> y", "<|fim_prefix|>"]
    for source in (texts, pa.array(texts)):
        with pytest.raises(ValueError, match="disallowed special token '<\\|endoftext\\|>'"):
            cl100k.encode_flat(source)
        for kwargs in ({"allowed_special": "all"}, {"disallowed_special": ()},
                       {"allowed_special": {"<|endoftext|>"}, "disallowed_special": ()}):  # fmt: skip
            assert split(*cl100k.encode_flat(source, **kwargs)) == cl100k.encode_batch(texts, **kwargs)
    # a token split across two texts of the Arrow buffer is in neither
    halves = pa.array(["x <|endof", "text|> y"])
    assert split(*cl100k.encode_flat(halves)) == cl100k.encode_batch(["x <|endof", "text|> y"])
    with pytest.raises(TypeError, match="allowed_special takes"):
        cl100k.encode_flat(texts, allowed_special="<|endoftext|>")


def test_byte_without_token_raises_as_encode_batch():
    vocab = {i: bytes([i]) for i in range(128)}  # no token for bytes >= 0x80
    tok = Tokenizer(vocab, merges=[], pretokenizer="cl100k")
    texts = ["fine", "caf\u00e9", "also \u00ff"]
    with pytest.raises(ValueError, match="no token for the byte\\(s\\) \\['0xa9', '0xc3'\\]"):
        tok.encode_ordinary_batch(texts, num_threads=2)
    for source in (texts, pa.array(texts)):
        with pytest.raises(ValueError, match="no token for the byte\\(s\\) \\['0xa9', '0xc3'\\]"):
            tok.encode_ordinary_flat(source, num_threads=2)


def test_decode_flat_round_trip_and_errors(cl100k, texts):
    ids, offsets = cl100k.encode_ordinary_flat(texts)
    expected = [cl100k.decode(i) for i in split(ids, offsets)]
    assert cl100k.decode_flat(ids, offsets) == expected
    assert cl100k.decode_flat(ids.astype(np.int64), offsets.tolist()) == expected
    assert python_twin(cl100k).decode_flat(ids, offsets) == expected
    r50k = ours_openai("r50k")
    small_ids, small_offsets = r50k.encode_ordinary_flat(texts[:50])
    assert small_ids.dtype == np.uint16
    assert r50k.decode_flat(small_ids, small_offsets) == [r50k.decode(i) for i in split(small_ids, small_offsets)]
    cut = np.array([15339, 226, 1917], np.uint32)  # 226: a lone continuation byte
    assert cl100k.decode_flat(cut, [0, 3], errors="replace") == [cl100k.decode(cut.tolist(), errors="replace")]
    with pytest.raises(UnicodeDecodeError):
        cl100k.decode_flat(cut, [0, 3], errors="strict")
    for backend in ("native", "python"):
        tok = cl100k if backend == "native" else python_twin(cl100k)
        with pytest.raises(ValueError, match="100256 has no token"):
            tok.decode_flat(np.array([1, 100256], np.uint32), [0, 1, 2])
        with pytest.raises(ValueError, match="offsets must rise"):
            tok.decode_flat(np.array([1, 2], np.uint32), [0, 3])
        with pytest.raises(ValueError, match="offsets must rise"):
            tok.decode_flat(np.array([1, 2], np.uint32), [0, 2, 1])
    with pytest.raises(TypeError, match="integers"):
        cl100k.decode_flat(np.array([1.0]), [0, 1])
    assert cl100k.decode_flat(np.zeros(0, np.uint32), [0]) == []


# ----------------------------------------------------------------------------------------------- the fuzz oracles
def fuzz_harness(name: str):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
    return __import__(f"fuzz_{name}")


FLAT_SEED = bytes([0 | 3 << 2 | 1 << 4]) + "naïve café, 日本語 and more words".encode()


def test_fuzz_encode_flat_oracles_pass_and_catch_planted_bugs(monkeypatch):
    module = fuzz_harness("encode")
    module.test_one_input(FLAT_SEED)
    module.test_one_input(bytes([0 | 3 << 2 | 0 << 4 | 0xC0]) + b"ok \xff bytes, then more")  # Arrow, invalid
    real_flat = Tokenizer.encode_ordinary_flat

    def drops_last(self, texts, **kwargs):
        ids, offsets = real_flat(self, texts, **kwargs)
        offsets = offsets.copy()
        offsets[-1] -= 1
        return ids[:-1], offsets

    monkeypatch.setattr(Tokenizer, "encode_ordinary_flat", drops_last)
    with pytest.raises(AssertionError, match="encode_ordinary_flat"):
        module.test_one_input(FLAT_SEED)
    monkeypatch.undo()

    def index_off(self, texts, **kwargs):
        try:
            return real_flat(self, texts, **kwargs)
        except InvalidTextError as e:
            raise InvalidTextError(e.index + 1, e.problem) from None

    monkeypatch.setattr(Tokenizer, "encode_ordinary_flat", index_off)
    with pytest.raises(AssertionError, match="Arrow input"):
        module.test_one_input(bytes([0 | 3 << 2 | 0 << 4]) + b"ok \xff bytes")


def test_fuzz_decode_flat_oracle_catches_a_planted_bug(monkeypatch):
    module = fuzz_harness("decode")
    seed = module.seeds()[0]
    module.test_one_input(seed)
    real = Tokenizer.decode_flat
    monkeypatch.setattr(Tokenizer, "decode_flat", lambda self, ids, offsets, **kw: real(self, ids, offsets, **kw)[::-1])
    with pytest.raises(AssertionError, match="decode_flat"):
        module.test_one_input(seed)


# ----------------------------------------------------------------------------------------------- Ctrl-C
FLAT_CHILD = r"""
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # pytest may have left SIGINT ignored for children
import pyarrow as pa
import bpe_core

tok = bpe_core.Tokenizer.from_file(sys.argv[1])
probe = "a" * 5000 + " hello world " + "b" * 300
expected = tok.encode_ordinary(probe)
tasks = lambda: len(os.listdir("/proc/self/task"))
calls = {
    "flat two threads": lambda: tok.encode_ordinary_flat(["a" * 1_000_000] * 100, num_threads=2),
    "flat one thread": lambda: tok.encode_ordinary_flat(["hello world " * 100_000] * 400, num_threads=1),
    "flat arrow": lambda: tok.encode_ordinary_flat(pa.array(["hello world " * 100_000] * 400), num_threads=2),
}
for name, call in calls.items():
    before = tasks()
    print("start", name, flush=True)
    try:
        call()
        print("finished", name, flush=True)
    except KeyboardInterrupt:
        print("interrupted", before, tasks(), tok.encode_ordinary(probe) == expected, flush=True)
print("done", flush=True)
"""


def test_sigint_stops_a_long_flat_encode():
    import os
    import signal
    import subprocess
    import sys
    import time

    path = data_path("tiktoken", "cl100k_base.tiktoken")
    child = subprocess.Popen([sys.executable, "-c", FLAT_CHILD, str(path)], stdout=subprocess.PIPE, text=True)
    results = []
    try:
        for line in child.stdout:
            words = line.split()
            if words[0] == "start":
                time.sleep(0.5)
                os.kill(child.pid, signal.SIGINT)
            elif words[0] in ("interrupted", "finished"):
                results.append(words)
            elif words[0] == "done":
                break
    finally:
        child.kill()
        child.wait()
    assert len(results) == 3, results
    for words in results:
        assert words[0] == "interrupted", f"{' '.join(words)} despite SIGINT"
        _, before, after, same = words
        assert after == before and same == "True", words  # the threads are gone, no partial result was cached
