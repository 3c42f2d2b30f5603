"""How the native encoder reads a str (issue 37 item 3): the UTF-8 that CPython caches in a str is read where it
exists, and UCS-1/UCS-2/UCS-4 text is transcoded with runs of ASCII taken 16 code units at a time; either way the
ids are tiktoken's, at every alignment of the runs and the characters between them."""

from __future__ import annotations

import ctypes

import pytest
from conftest import ours_openai, tiktoken_openai

from bpe_core import native

pytestmark = pytest.mark.skipif(not native.available(), reason="the native core is not built")

_as_utf8 = ctypes.pythonapi.PyUnicode_AsUTF8AndSize
_as_utf8.restype = ctypes.c_void_p
_as_utf8.argtypes = [ctypes.py_object, ctypes.c_void_p]


def texts() -> list[str]:
    out = []
    for odd in ("é", "ÿ", "\u2019", "\u4e2d", "\U0001f600"):  # UCS-1, UCS-2 and UCS-4 strs
        for lead in range(0, 40, 3):  # the odd character at every place of a 16-unit block
            out.append("a" * lead + odd + " hello world" * 3 + odd * 2 + "x" * (lead % 17))
    return out + ["é" * 40, "ab" * 30 + "é", "\u2019" + "q" * 100]


def test_transcoded_str_equals_tiktoken():
    ours, tt = ours_openai("cl100k"), tiktoken_openai("cl100k")
    docs = texts()
    assert [ours.encode_ordinary(t) for t in docs] == [tt.encode_ordinary(t) for t in docs]
    ids, offsets = ours.encode_ordinary_flat(docs)
    assert [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:], strict=True)] == tt.encode_ordinary_batch(docs)


def test_cached_utf8_is_read_and_equals_tiktoken():
    ours, tt = ours_openai("o200k"), tiktoken_openai("o200k")
    docs = ["".join(chr(ord(c)) for c in t) for t in texts()]  # fresh strs
    for t in docs:
        assert _as_utf8(t, None)  # CPython now holds the str's UTF-8
    assert ours.encode_ordinary_batch(docs, num_threads=1) == tt.encode_ordinary_batch(docs)
    ids, offsets = ours.encode_ordinary_flat(docs, num_threads=2)
    assert offsets[-1] == len(ids) == sum(len(x) for x in tt.encode_ordinary_batch(docs))
