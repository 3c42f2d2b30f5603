"""The C++ encoder against the pure-Python reference (and tiktoken): ids equal on every case, both kernels."""

from __future__ import annotations

import pickle

import cloudpickle
import pytest
from conftest import CORPORA, FULL, adversarial_cases, corpus, openai_encoding, ours_openai, tiktoken_openai
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe_core
from bpe_core import native

PRESETS = ("r50k", "p50k", "cl100k", "o200k")


def test_native_core_loads():
    # make test must fail on a broken build: the module imports, and it is what a Tokenizer uses by default.
    from bpe_core._native import _core

    assert native.available(), native.load_error()
    assert _core.Encoder is not None
    assert ours_openai("cl100k").backend == "native"
    assert bpe_core.train({b"ab": 3}, 257).backend == "native"


def python_twin(tok: bpe_core.Tokenizer) -> bpe_core.Tokenizer:
    """The same vocabulary on the reference backend (a fresh object: caches are not shared)."""
    return pickle.loads(pickle.dumps(tok)).use_backend("python")


@pytest.fixture(scope="module", params=PRESETS)
def openai_pair(request):
    enc = openai_encoding(request.param)
    ref = bpe_core.Tokenizer.from_tiktoken(
        enc["path"], pretokenizer=request.param, special_tokens=enc["special_tokens"], backend="python"
    )
    ours = ours_openai(request.param)
    assert ours.pretokenizer.native_kind == ("r50k" if request.param == "p50k" else request.param)  # the fast path
    return request.param, ours, ref


def test_adversarial_cases_equal_reference(openai_pair):
    preset, ours, ref = openai_pair
    assert ours.backend == "native" and ref.backend == "python"
    texts = [text for _, text in adversarial_cases()]
    expected = [ref.encode(t, disallowed_special=()) for t in texts]
    for (case_id, text), ids in zip(adversarial_cases(), expected, strict=True):
        assert ours.encode(text, disallowed_special=()) == ids, (preset, case_id)
    assert ours.encode_batch(texts, disallowed_special=()) == expected
    assert len(texts) > 3000


@pytest.mark.parametrize("name", CORPORA)
def test_corpora_equal_reference_and_tiktoken(openai_pair, name):
    preset, ours, ref = openai_pair
    docs = corpus(name, 2000 if FULL else 40)
    expected = tiktoken_openai(preset).encode_ordinary_batch(docs, num_threads=1)
    assert ours.encode_ordinary_batch(docs) == expected
    assert [ours.encode_ordinary(d) for d in docs] == expected
    if FULL or preset == "cl100k":  # the reference is slow: one vocabulary in the sample run
        assert [ref.encode_ordinary(d) for d in docs[:10]] == expected[:10]


def test_special_and_added_tokens_equal_reference(openai_pair):
    _, ours, ref = openai_pair
    text = "a<|endoftext|>b <|endoftext|><|endoftext|>x <|fim_prefix|>"
    for kwargs in ({"allowed_special": "all"}, {"disallowed_special": ()}):
        assert ours.encode(text, **kwargs) == ref.encode(text, **kwargs)
        assert ours.encode_batch([text, "", text[:5]], **kwargs) == [
            ref.encode(t, **kwargs) for t in [text, "", text[:5]]
        ]
    with pytest.raises(ValueError, match="disallowed special token"):
        ours.encode(text)
    with pytest.raises(ValueError, match="disallowed special token"):
        ours.encode_batch(["fine", text])


def test_added_tokens_and_merge_list_vocabulary():
    counts = bpe_core.count_chunks(corpus("en_bible_kjv", 200), "cl100k")
    trained = bpe_core.train(counts, 1500, special_tokens=["<|end|>"])
    ours = bpe_core.Tokenizer(
        trained.vocab,
        merges=trained.merge_ids,
        pretokenizer="cl100k",
        special_tokens=trained.special_tokens,
        added_tokens={"<added>": 1501, " the LORD": 1502},
    )
    ref = python_twin(ours)
    assert ours.kind == "merges" and not ours.ignore_merges
    docs = [d[:3000] + " <added> the LORD<|end|>" for d in corpus("en_bible_kjv", 60)]
    docs += [t for _, t in adversarial_cases()[:400]]
    expected = [ref.encode(d, allowed_special="all") for d in docs]
    assert ours.encode_batch(docs, allowed_special="all") == expected
    assert [ours.encode(d, allowed_special="all") for d in docs] == expected
    assert any(1501 in ids for ids in expected) and any(1502 in ids for ids in expected)


@settings(max_examples=1000 if FULL else 150, deadline=None)
@given(st.binary(min_size=1, max_size=200) | st.text(min_size=1, max_size=120))
def test_random_pieces_equal_reference_both_kernels(data):
    ours = ours_openai("cl100k")
    ref = python_twin_cl100k()
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    expected = ref.encode_piece_bytes(raw)
    assert ours.encode_piece_bytes(raw) == expected
    assert ours.encode_piece_bytes(raw, stats=[]) == expected  # forces the heap kernel on short pieces too
    if isinstance(data, str):
        assert ours.encode_ordinary(data) == ref.encode_ordinary(data)


_TWIN: list = []


def python_twin_cl100k() -> bpe_core.Tokenizer:
    if not _TWIN:
        _TWIN.append(python_twin(ours_openai("cl100k")))
    return _TWIN[0]


@pytest.mark.parametrize("text", ["ab" * 50_000, "x" * 100_000, "\u00e9" * 30_000])
def test_long_pieces_heap_is_n_log_n_and_equal(text):
    ours, ref = ours_openai("cl100k"), python_twin_cl100k()
    data = text.encode()
    stats: list[int] = []
    ids = ours.encode_piece_bytes(data, stats=stats)
    assert ids == ref.encode_piece_bytes(data)
    assert ours.decode_bytes(ids) == data
    pushes, pops = stats
    assert 0 < pushes <= 3 * len(data) and pops == pushes  # each merge pushes at most two entries


def test_missing_byte_error_matches_reference():
    vocab = {i: bytes([i]) for i in range(256) if i not in (0x80, 0xFF)}
    ours = bpe_core.Tokenizer(vocab, merges=[], pretokenizer="cl100k")
    ref = python_twin(ours)
    with pytest.raises(ValueError) as theirs:
        ref.encode(b"ok \xff\x80\xff")
    with pytest.raises(ValueError) as mine:
        ours.encode(b"ok \xff\x80\xff")
    assert str(mine.value) == str(theirs.value) == "this vocabulary has no token for the byte(s) ['0x80', '0xff']"


def test_pickles_keep_the_backend():
    for tok in (ours_openai("r50k"), python_twin(ours_openai("r50k"))):
        for dumps, loads in ((pickle.dumps, pickle.loads), (cloudpickle.dumps, cloudpickle.loads)):
            copy = loads(dumps(tok))
            assert copy.backend == tok.backend
            assert copy.encode("hello world") == [31373, 995]


def test_backend_argument_is_validated():
    with pytest.raises(ValueError, match="backend must be"):
        bpe_core.Tokenizer({0: b"a"}, merges=[], pretokenizer="cl100k", backend="rust")


def test_batches_cut_into_several_native_calls_keep_order(monkeypatch):
    from bpe_core.encode import engines as backend

    monkeypatch.setattr(backend, "NATIVE_BATCH_PIECES", 7)
    ours = ours_openai("cl100k")
    docs = [d[:500] for d in corpus("fortunes_multi", 60)] + ["", "a<|endoftext|>b"]
    expected = [python_twin_cl100k().encode(d, allowed_special="all") for d in docs]
    assert ours.encode_batch(docs, allowed_special="all") == expected
    assert ours.encode_ordinary_batch(docs[:-1]) == expected[:-2] + [[]]


# Added tokens the core finds itself (literals.h): tokens that share first bytes and prefixes, runs of spaces (mpt's
# user-defined tokens), a token of one character, multi-byte ones; every way of encoding against the reference.
LITERALS = {"<s>": 1501, "<s><s>": 1502, "  ": 1503, "    ": 1504, "   \n": 1505, "[PAD7]": 1506, "[PAD77]": 1507,
            "é": 1508, "\u4e00\u4e01": 1509, "x": 1510, " " * 20: 1511, "xxx": 1512}  # fmt: skip
literal_text = st.lists(
    st.sampled_from(
        [*LITERALS, "<", "s>", " ", "\n", "[PAD", "7", "]", "a", "Ab", "\u4e00", "'s", "1234", "\t", " " * 7]
    )
    | st.text(max_size=6),
    max_size=30,
).map("".join)


@pytest.fixture(scope="module")
def literal_pair():
    counts = bpe_core.count_chunks(corpus("en_bible_kjv", 200), "qwen2")
    trained = bpe_core.train(counts, 1500)
    ours = bpe_core.Tokenizer(trained.vocab, merges=trained.merge_ids, pretokenizer="qwen2", added_tokens=LITERALS)
    return ours, python_twin(ours)


def test_added_tokens_are_cut_by_the_core_as_the_reference_cuts_them(literal_pair):
    ours, ref = literal_pair
    assert ours.engine.encoder().has_literals and ours.engine.splits_whole_texts(frozenset())
    docs = [d[:2000] + " <s><s><s> [PAD77]x    \n  é[PAD7]\u4e00\u4e01a   \nb" for d in corpus("en_bible_kjv", 40)]
    docs += [t for _, t in adversarial_cases()[:400]] + ["", "x", "<s>", "    ", "     ", "[PAD7"]
    # many tokens in one text, batches of pieces across the cuts: tokens back to back, at a batch's end, every gap
    docs += ["ab  cd" * 700, "<s>" * 600 + "q", "".join(f"w{i % 7}{'  ' * (i % 3)}é " for i in range(900))]
    expected = [ref.encode_ordinary(d) for d in docs]
    assert ours.encode_ordinary_batch(docs) == expected
    assert ours.encode_ordinary_batch(docs, num_threads=2) == expected
    assert [ours.encode_ordinary(d) for d in docs] == expected
    ids, offsets = ours.encode_ordinary_flat(docs)
    assert [ids[offsets[i] : offsets[i + 1]].tolist() for i in range(len(docs))] == expected
    assert all(t in sum(expected, []) for t in LITERALS.values())
    # with special tokens allowed, Python cuts first and the core finds nothing more
    assert ours.encode_batch(docs[:50], allowed_special="all") == expected[:50]


def test_flagged_added_tokens_stay_with_the_python_finder(literal_pair):
    ours, ref = literal_pair
    from bpe_core.model.added_tokens import AddedTokenFlags

    flagged = bpe_core.Tokenizer(
        ours.vocab, merges=ours.merge_ids, pretokenizer="qwen2", added_tokens=LITERALS,
        token_flags={"<s>": AddedTokenFlags(lstrip=True)},
    )  # fmt: skip
    assert not flagged.engine.encoder().has_literals
    text = "a <s>b"
    assert flagged.encode_ordinary(text) == python_twin(flagged).encode_ordinary(text) != ref.encode_ordinary(text)


@settings(max_examples=1000 if FULL else 200, deadline=None)
@given(literal_text)
def test_hypothesis_added_tokens_cut_by_the_core(literal_pair, text):
    ours, ref = literal_pair
    expected = ref.encode_ordinary(text)
    assert ours.encode_ordinary(text) == expected
    raw = text.encode("utf-8", "surrogatepass")
    assert ours.encode_ordinary_batch([raw]) == [ref.encode_ordinary(raw)]
