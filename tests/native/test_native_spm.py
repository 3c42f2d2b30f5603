"""The native SentencePiece-style merge (bpe_core/_native/spm.cpp) against the Python reference
(bpe_core/model/sentencepiece.py): random texts (hypothesis), words cut or not, every thread count, Arrow input with
a bad element reported by index."""

from __future__ import annotations

from functools import cache

import pytest
from conftest import data_path
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_core import Tokenizer
from bpe_core.encode.flat import InvalidTextError


@cache
def pair(name: str) -> tuple[Tokenizer, Tokenizer]:
    path = str(data_path("spm", name))
    return Tokenizer.from_file(path, backend="native"), Tokenizer.from_file(path, backend="python")


ALPHABET = st.sampled_from(list("ab ▁\n\t.,xyzé日本🤖") + ["  ", "\u200d", "\x00"])


@pytest.mark.parametrize("name", ["tokenizer.model.v1", "ggml-vocab-llama-spm.gguf"])
@settings(max_examples=150, deadline=None)
@given(text=st.lists(ALPHABET, max_size=40).map("".join) | st.text(max_size=30))
def test_native_equals_the_reference(name, text):
    native, python = pair(name)
    assert native._backend.native_encoder() is not None
    assert native.encode_ordinary(text) == python.encode_ordinary(text)


def test_threads_and_arrow_give_the_same_ids():
    import pyarrow as pa

    native, python = pair("mistral_instruct_tokenizer_240323.model.v3")
    docs = [f"doc {i} " + "word " * (i % 50) + "日本語" * (i % 3) for i in range(400)]
    expected = [python.encode_ordinary(d) for d in docs]
    for threads in (1, 2, 3):
        ids, offsets = native.encode_ordinary_flat(docs, num_threads=threads)
        assert [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:], strict=True)] == expected
    big = pa.array(docs, type=pa.large_string())
    ids2, offsets2 = native.encode_ordinary_flat(big, num_threads=2)
    assert ids2.tolist() == ids.tolist() and offsets2.tolist() == offsets.tolist()


def test_invalid_arrow_text_is_reported_by_index():
    import pyarrow as pa

    native, _ = pair("tokenizer.model.v1")
    bad = pa.array([b"fine", b"also fine", b"bad \xff byte"], type=pa.binary()).cast(pa.string(), safe=False)
    with pytest.raises(InvalidTextError) as info:
        native.encode_ordinary_flat(bad)
    assert info.value.index == 2


@pytest.mark.parametrize("name", ["tokenizer.model.v1", "ggml-vocab-llama-spm.gguf"])
@settings(max_examples=60, deadline=None)
@given(word=st.lists(st.sampled_from(list("abcdeilnorst日本語中文éü")), min_size=25, max_size=90).map("".join))
def test_words_of_every_length_merge_as_the_reference(name, word):
    """Words of up to 32 symbols merge by a scan, longer ones through a priority queue: both as the reference, on
    the first sight of a word (a miss) and the next (a hit of the word cache)."""
    native, python = pair(name)
    texts = [word, word[:31], word[:32], word[:33], f"{word} {word[::-1]}"]
    expected = [python.encode_ordinary(t) for t in texts]
    for _ in range(2):
        ids, offsets = native.encode_ordinary_flat(texts, num_threads=1)
        assert [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:], strict=True)] == expected


def test_python_threads_sharing_one_tokenizer():
    """Each call borrows a word cache of its own: Python threads calling one tokenizer at once (the GIL released
    inside) get the ids one thread alone gets."""
    from concurrent.futures import ThreadPoolExecutor

    native, python = pair("tokenizer.model.v1")
    batches = [[f"batch {b} doc {i} " + f"w{b}x{i} " * (i % 40) + "日本語" * (b % 4) for i in range(300)]
               for b in range(8)]  # fmt: skip
    expected = [[python.encode_ordinary(d) for d in docs] for docs in batches]

    def run(docs):
        ids, offsets = native.encode_ordinary_flat(docs, num_threads=2)
        return [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:], strict=True)]

    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            assert list(pool.map(run, batches)) == expected


@pytest.mark.parametrize("name", ["tokenizer.model.v1", "ggml-vocab-llama-spm.gguf"])
def test_flat_calls_on_empty_and_space_only_texts(name):
    native, python = pair(name)
    texts = ["", " ", "  ", "\n", "a", "", "   a  "]
    ids, offsets = native.encode_ordinary_flat(texts, num_threads=1)
    assert [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:], strict=True)] == [
        python.encode_ordinary(t) for t in texts
    ]
