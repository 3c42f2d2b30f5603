"""Whole-text native encoding (the hand-written pre-tokenizers) and native threads, against tiktoken and the
Python reference: threads == one thread == reference == tiktoken, for every batch shape, input type and error."""

from __future__ import annotations

import pickle
import threading
from functools import cache

import pytest
from conftest import CORPORA, FULL, adversarial_cases, corpus, data_path, ours_openai, tiktoken_openai
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe_core
from bpe_core import PreTokenizer, Tokenizer, native

THREADS = (1, 2, 4, 7)
# Enough text that every thread count above gets its threads (a thread per 64 K characters at least).
PER_CORPUS = 200 if FULL else 25


@cache
def loaded(name: str, backend: str | None = None) -> Tokenizer:
    """A llama.cpp GGUF vocabulary (loading one takes seconds: once per module)."""
    return Tokenizer.from_file(str(data_path("llamacpp", name)), backend=backend)


def python_twin(tok: Tokenizer) -> Tokenizer:
    return pickle.loads(pickle.dumps(tok)).use_backend("python")


def mixed_docs() -> list[str]:
    """Documents of every shared corpus, interleaved, with empty strings among them."""
    docs: list[str] = []
    for i, name in enumerate(CORPORA):
        docs += corpus(name, PER_CORPUS)
        docs.insert(3 * i, "")
    return docs + [""]


def test_presets_take_the_fast_path():
    # The tests of this file and test_native_encode / test_native_loaded_vocabularies must run through the native split.
    for preset, kind in (("r50k", "r50k"), ("p50k", "r50k"), ("cl100k", "cl100k"), ("o200k", "o200k")):
        tok = ours_openai(preset)
        tok.encode_ordinary("warm up")
        assert tok.pretokenizer.native_kind == kind and tok._native_kind == kind, preset
    for name, kind in (("ggml-vocab-llama-bpe.gguf", "llama3"), ("ggml-vocab-qwen2.gguf", "qwen2")):
        tok = loaded(name)
        tok.encode_ordinary("warm up")
        assert tok._native_kind == kind, name
    assert sum(len(d) for d in mixed_docs()) > 7 * (1 << 16)  # every thread count below spawns its threads


@pytest.mark.parametrize("preset", ["r50k", "cl100k", "o200k"])
def test_threads_equal_one_thread_and_tiktoken(preset):
    ours, theirs = ours_openai(preset), tiktoken_openai(preset)
    docs = mixed_docs()
    expected = theirs.encode_ordinary_batch(docs, num_threads=1)
    for n in THREADS:
        assert ours.encode_ordinary_batch(docs, num_threads=n) == expected, n
        assert ours.encode_batch(docs, disallowed_special=(), num_threads=n) == expected, n
    assert ours.encode_ordinary_batch(iter(docs)) == expected  # None: every usable core; any iterable
    assert [ours.encode_ordinary(d) for d in docs[::7]] == expected[::7]
    assert [ours.encode_ordinary(d.encode()) for d in docs[::11]] == expected[::11]
    ref = python_twin(ours)
    sample = [d[:3000] for d in docs[:: max(1, len(docs) // 12)]]
    assert [ref.encode_ordinary(d) for d in sample] == theirs.encode_ordinary_batch(sample, num_threads=1)


@pytest.mark.parametrize("n", THREADS)
def test_batch_shapes(n):
    ours = ours_openai("cl100k")
    assert ours.encode_ordinary_batch([], num_threads=n) == []
    assert ours.encode_batch([], num_threads=n) == []
    assert ours.encode_ordinary_batch([""], num_threads=n) == [[]]
    assert ours.encode_ordinary_batch(["", b""] * 50, num_threads=n) == [[]] * 100
    hello = tiktoken_openai("cl100k").encode_ordinary("hello world")
    assert ours.encode_ordinary_batch(["hello world"], num_threads=n) == [hello]
    assert ours.encode_ordinary_batch(("", "hello world", bytearray(b"hello world")), num_threads=n) == [
        [],
        hello,
        hello,
    ]


@pytest.mark.parametrize("name", ["ggml-vocab-llama-bpe.gguf", "ggml-vocab-qwen2.gguf"])
def test_loaded_llama3_and_qwen2_threads_equal_reference(name):
    ours, ref = loaded(name), loaded(name, "python")
    docs = mixed_docs()
    one = ours.encode_batch(docs, allowed_special="all", num_threads=1)
    for n in THREADS[1:]:
        assert ours.encode_batch(docs, allowed_special="all", num_threads=n) == one, n
    sample = [d[:2000] for d in docs[:: max(1, len(docs) // 15)]] + [t for _, t in adversarial_cases()[:150]]
    expected = [ref.encode(t, allowed_special="all") for t in sample]
    assert ours.encode_batch(sample * 8, allowed_special="all", num_threads=4) == expected * 8
    assert [ours.encode(t, allowed_special="all") for t in sample] == expected
    if ours.added_tokens:  # qwen2: added tokens are found in Python, the text between them split natively
        token, tid = sorted(ours.added_tokens.items())[0]
        texts = [f"a{token}b {token}{token} \xff{d[:300]}" for d in docs[:40]]
        expected = [ref.encode(t) for t in texts]
        assert all(tid in ids for ids in expected)
        assert ours.encode_batch(texts, num_threads=4) == expected


@pytest.mark.parametrize("n", [1, 4])
def test_special_tokens_and_added_tokens_on_the_fast_path(n):
    ours, theirs = ours_openai("cl100k"), tiktoken_openai("cl100k")
    docs = [d[:4000] + " <|endoftext|>x<|fim_prefix|>" + d[-500:] for d in corpus("docs_python_rst", 60)]
    expected = theirs.encode_batch(docs, allowed_special="all", num_threads=1)
    assert ours.encode_batch(docs, allowed_special="all", num_threads=n) == expected
    assert ours.encode_batch(docs, allowed_special={"<|endoftext|>"}, disallowed_special=(), num_threads=n) == [
        theirs.encode(d, allowed_special={"<|endoftext|>"}, disallowed_special=()) for d in docs
    ]
    with pytest.raises(ValueError, match="disallowed special token '<\\|endoftext\\|>'"):
        ours.encode_batch(["fine"] * 100 + docs, num_threads=n)
    with pytest.raises(ValueError, match="disallowed special token"):
        ours.encode(docs[0].encode())  # bytes are searched as bytes
    counts = bpe_core.count_chunks(corpus("en_bible_kjv", 100), "cl100k")
    trained = bpe_core.train(counts, 1200, special_tokens=["<|end|>"])
    added = Tokenizer(
        trained.vocab,
        merges=trained.merge_ids,
        pretokenizer="cl100k",
        special_tokens=trained.special_tokens,
        added_tokens={"<added>": 1201, " the LORD": 1202},
    )
    ref = python_twin(added)
    bible = [d[:5000] + " <added> the LORD<|end|>\xff" for d in corpus("en_bible_kjv", 80)]
    expected = [ref.encode(d, allowed_special="all") for d in bible]
    assert added.encode_batch(bible, allowed_special="all", num_threads=n) == expected
    assert added.encode_batch([d.encode() for d in bible], allowed_special="all", num_threads=n) == expected
    assert any(1201 in ids and 1202 in ids for ids in expected)


def test_normalizer_runs_before_the_native_split():
    base = ours_openai("cl100k")
    pre = PreTokenizer.from_spec("cl100k", normalizer="NFKC")
    ours = Tokenizer(base.vocab, merges=None, pretokenizer=pre, special_tokens=base.special_tokens)
    ref = python_twin(ours)
    texts = [d[:3000] for d in corpus("multi_udhr", 40)] + [
        "ﬁne ﬁsh ① \u00c5\u212b",
        b"caf\xc3\xa9 \xff\xfe \xef\xac\x81",
    ]
    assert ours._encoder() is not None and ours._native_kind == "cl100k"
    expected = [ref.encode(t, disallowed_special=()) for t in texts]
    assert ours.encode_batch(texts * 3, disallowed_special=(), num_threads=4) == expected * 3
    assert [ours.encode(t, disallowed_special=()) for t in texts] == expected
    assert expected[-2] != base.encode_ordinary("ﬁne ﬁsh ① \u00c5\u212b")  # the normalizer did change the ids


def test_bytes_with_invalid_utf8_equal_reference():
    ours = ours_openai("cl100k")
    ref = python_twin(ours)
    cases = [t for _, t in adversarial_cases() if isinstance(t, bytes)]
    cases += [b"\xff\xfe abc \xc3", b"\xed\xa0\x80 surrogate bytes \xf4\x90\x80\x80", bytes(range(256)) * 3]
    assert len(cases) > 20
    expected = [ref.encode(t, disallowed_special=()) for t in cases]
    assert [ours.encode(t, disallowed_special=()) for t in cases] == expected
    for n in (1, 4):
        assert ours.encode_batch(cases * 40, disallowed_special=(), num_threads=n) == expected * 40


@settings(max_examples=300 if FULL else 60, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_equal_reference(data):
    ours = ours_openai("o200k")
    assert ours.encode_ordinary(data) == _o200k_twin().encode_ordinary(data)


_TWINS: dict = {}


def _o200k_twin() -> Tokenizer:
    if "o200k" not in _TWINS:
        _TWINS["o200k"] = python_twin(ours_openai("o200k"))
    return _TWINS["o200k"]


def test_lone_surrogates_are_replaced_as_tiktoken_does_on_threads():
    ours, theirs = ours_openai("cl100k"), tiktoken_openai("cl100k")
    odd = ["a\ud800b", "x\udc80y \ud83d\ude00 z\udfff", "\udcff" * 5, "caf\u00e9 \ud800"]
    docs = [d for pair in zip(corpus("code_cpython", len(odd)), odd, strict=True) for d in pair] * 6
    assert sum(map(len, docs)) > 4 * (1 << 16)  # four threads, the surrogates met by workers
    expected = [theirs.encode_ordinary(d) for d in docs]
    for n in (1, 2, 4):
        assert ours.encode_ordinary_batch(docs, num_threads=n) == expected
    assert [ours.encode_ordinary(d) for d in odd] == expected[1:8:2]


def _ascii_vocab_tokenizer(pretokenizer) -> Tokenizer:
    vocab = {i: bytes([i]) for i in range(256) if i not in (0x80, 0xFF)}
    return Tokenizer(vocab, merges=[], pretokenizer=pretokenizer)


# cl100k's hand-written split, the compiled matcher's (rx:N) and, with an atomic group outside its subset, regex's.
@pytest.mark.parametrize("pretokenizer", ["cl100k", r"\S+|\s+", r"(?>\S+)|\s+"])
@pytest.mark.parametrize("n", [1, 4])
def test_worker_error_is_the_first_in_input_order(pretokenizer, n):
    ours = _ascii_vocab_tokenizer(pretokenizer)
    ref = python_twin(ours)
    assert (ours._encoder() is not None) and (ours._native_kind is not None) == ("(?>" not in pretokenizer)
    docs = [d.encode("ascii", "ignore")[:20_000] for d in corpus("code_cpython", 40)]
    docs[9] += b" ok \xff\x80 doc nine"
    docs[30] += b" \xff"
    with pytest.raises(ValueError) as theirs:
        ref.encode(docs[9])
    with pytest.raises(ValueError) as mine:
        ours.encode_batch(docs, num_threads=n)
    assert str(mine.value) == str(theirs.value) == "this vocabulary has no token for the byte(s) ['0x80', '0xff']"
    fine = docs[:9] + docs[10:30]
    assert ours.encode_batch(fine, num_threads=n) == [ref.encode(d) for d in fine]


@pytest.mark.parametrize("n", [1, 4])
def test_python_split_pre_tokenizer_on_threads(n):
    base = ours_openai("cl100k")
    # Atomic groups: outside the compiled matcher's subset (bpe_core/pretokenize/compiler.py), so regex splits.
    ours = Tokenizer(base.vocab, merges=None, pretokenizer=[r"(?>\s+)|\S+", r"(?>\d{1,2})|\D+"])
    ref = python_twin(ours)
    docs = [d[:4000] for c in CORPORA for d in corpus(c, 12)]
    assert ours._encoder() is not None and ours._native_kind is None
    assert ours.encode_batch(docs, num_threads=n) == [ref.encode(d) for d in docs]


def test_concurrent_callers_share_one_tokenizer():
    ours = ours_openai("o200k")
    docs = mixed_docs()
    expected = tiktoken_openai("o200k").encode_ordinary_batch(docs, num_threads=1)
    results: list = [None] * 3

    def run(i: int) -> None:
        results[i] = ours.encode_ordinary_batch(docs, num_threads=2)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert results == [expected] * 3


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_num_threads_is_validated(bad):
    with pytest.raises(ValueError, match="num_threads must be a positive int or None"):
        ours_openai("cl100k").encode_ordinary_batch(["x"], num_threads=bad)
    with pytest.raises(ValueError, match="num_threads must be a positive int or None"):
        bpe_core.count_chunks(["x"], "cl100k", num_threads=bad)


def test_type_errors_name_the_type():
    ours = ours_openai("cl100k")
    for call in (ours.encode_ordinary, ours.encode, lambda t: ours.encode_ordinary_batch([t])):
        with pytest.raises(TypeError, match="expected str or bytes, got int"):
            call(5)


# ----------------------------------------------------------------------------------------------- count_chunks


@pytest.mark.parametrize("preset", ["r50k", "cl100k", "o200k", "llama3", "qwen2"])
def test_count_chunks_equal_reference(preset):
    docs = [d[:20_000] for c in CORPORA for d in corpus(c, 60 if FULL else 8)]
    docs += [t for _, t in adversarial_cases()[: None if FULL else 400]]
    assert PreTokenizer.from_spec(preset).native_kind == preset
    expected = bpe_core.count_chunks(docs, preset, backend="python")
    for n in (1, 2, 7):
        got = bpe_core.count_chunks(docs, preset, num_threads=n)
        assert got == expected and type(got) is type(expected), n
        assert got.pretokenizer == expected.pretokenizer
    assert bpe_core.count_chunks(iter(docs), preset, num_threads=2) == expected
    assert native.available()


def test_count_chunks_normalizer_bytes_and_surrogates():
    pre = PreTokenizer.from_spec("o200k", normalizer="NFKC")
    docs = [d[:5000] for d in corpus("multi_udhr", 30)] + [b"\xff\xfe caf\xc3\xa9 \xef\xac\x81", "a\ud800 \udc80 ﬁ"]
    assert bpe_core.count_chunks(docs, pre, num_threads=2) == bpe_core.count_chunks(docs, pre, backend="python")
    plain = ["a\ud800 \udc80 ﬁ", b"\xff\xfe", bytearray(b"abc abc")] * 3
    assert bpe_core.count_chunks(plain, "o200k") == bpe_core.count_chunks(plain, "o200k", backend="python")
