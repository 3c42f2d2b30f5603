"""The fixtures of tests/conftest.py are shared by every test of a process, in whatever order pytest-randomly runs
them, so no test may change them for the others.

The pair that once depended on its order: tests/core/test_decode.py called ``use_backend("python")`` on the cached
cl100k tokenizer, and tests/native/test_native_decode.py::test_streaming_equal_step_by_step, run after it, compared the
Python decoder with itself. Here the same two steps, in either order: the change is refused, and the shared
tokenizer still decodes with the native core.
"""

from __future__ import annotations

import copy
import pickle

import cloudpickle
import pytest
from conftest import SharedTokenizerError, _ours_openai, openai_encoding, ours_openai

from bpe_core import StreamingDecoder, Tokenizer, native

TEXT = "naïve café, 日本語 and emoji 🙂🙂 across token boundaries"


def test_switching_the_shared_tokenizer_to_python_is_refused():
    tok = ours_openai("cl100k")
    with pytest.raises(SharedTokenizerError, match=r"use_backend\('python'\).*copy it first"):
        tok.use_backend("python")
    with pytest.raises(SharedTokenizerError, match="'backend'"):
        tok.backend = "python"
    with pytest.raises(SharedTokenizerError, match="'pretokenizer'"):
        tok.pretokenizer = None
    assert tok.backend == native.resolve_backend(None)


def test_the_shared_tokenizer_decodes_with_the_backend_it_was_built_with():
    """The other half of the pair: whatever ran before, the shared tokenizer is the one conftest built."""
    tok = ours_openai("cl100k")
    assert tok is _ours_openai("cl100k")
    assert tok.backend == native.resolve_backend(None)
    if native.available():
        assert tok.backend == "native"
    ids = tok.encode_ordinary(TEXT)
    decoder = StreamingDecoder(tok)
    assert "".join(decoder.step(i) for i in ids) + decoder.flush() == TEXT


@pytest.mark.parametrize("how", ["pickle", "cloudpickle", "copy", "deepcopy"])
def test_a_copy_of_the_shared_tokenizer_is_an_ordinary_one(how):
    tok = ours_openai("cl100k")
    twin = {
        "pickle": lambda t: pickle.loads(pickle.dumps(t)),
        "cloudpickle": lambda t: cloudpickle.loads(cloudpickle.dumps(t)),
        "copy": copy.copy,
        "deepcopy": copy.deepcopy,
    }[how](tok)
    assert type(twin) is Tokenizer
    assert twin.use_backend("python").backend == "python"
    assert twin.encode_ordinary(TEXT) == tok.encode_ordinary(TEXT)
    assert tok.backend == native.resolve_backend(None), "the copy's change is its own"


def test_the_shared_encoding_table_is_a_fresh_copy_each_time():
    enc = openai_encoding("cl100k")
    enc["special_tokens"]["<|mine|>"] = 1
    enc["pat_str"] = "."
    again = openai_encoding("cl100k")
    assert "<|mine|>" not in again["special_tokens"] and again["pat_str"] != "."
