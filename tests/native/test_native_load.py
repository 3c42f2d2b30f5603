"""Load time (issue 37 item 1): the native reader of .tiktoken rank files gives parse_tiktoken's dict exactly, and
leaves every file that is not in the plain form to the Python reader (its errors and warnings); a loaded tokenizer
has its native encoder built before the first call."""

from __future__ import annotations

import base64

import pytest
from conftest import data_path

import bpe_core
from bpe_core import native
from bpe_core.formats import tiktoken_file

pytestmark = pytest.mark.skipif(not native.available(), reason="the native core is not built")


def python_parse(data: bytes) -> dict[int, bytes]:
    """parse_tiktoken's Python reading (the native one switched off)."""
    saved = native._core
    try:
        native._core = object()  # no parse_rank_file
        return tiktoken_file.parse_tiktoken(data, "x.tiktoken")
    finally:
        native._core = saved


@pytest.mark.parametrize("name", ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"])
def test_rank_files_read_natively_as_python_reads_them(name):
    data = data_path("tiktoken", f"{name}.tiktoken").read_bytes()
    fast = native._core.parse_rank_file(data)
    assert fast is not None
    assert list(fast.items()) == list(python_parse(data).items())


def line(token: bytes, rank: int) -> bytes:
    return base64.b64encode(token) + b" " + str(rank).encode()


PLAIN = [
    b"\n".join(line(bytes([i]), i) for i in range(256)),
    b"\r\n".join(line(bytes([i]), i) for i in range(256)) + b"\r\n",  # CRLF, and \r alone below
    b"\r".join([line(b"a", 0), line(b"bc", 1), line(b"def", 2)]),
    b"\n\n  \n".join([line(b"a", 5), b"= 7", line(b"xyz", 0)]) + b"\n\n",  # "=": the empty token
    b"\t" + line(b"a", 0) + b" \t\n" + base64.b64encode(b"b") + b"\t\t 001",  # blanks, tabs, a rank with zeros
]
NOT_PLAIN = [
    b"",  # no tokens
    b"YQ 0",  # base64 without padding (b64decode reads it)
    b"Y Q== 0",  # three fields
    b"YQ== -1",  # a negative rank
    b"YQ==YQ== 0",  # padding in the middle
    b"YQ== 0\nYQ== 1",  # a token listed twice
    b"YQ== 0\nYg== 0",  # a rank given twice
    b"YQ== 1_0",  # int() reads this
    b"Y*Q= 0",  # not base64
    b"YQ== 12345678901",  # a rank too large for the native reader
]


@pytest.mark.parametrize("data", PLAIN)
def test_plain_forms_equal_python(data):
    fast = native._core.parse_rank_file(data)
    assert fast is not None
    assert list(fast.items()) == list(python_parse(data).items())


@pytest.mark.parametrize("data", NOT_PLAIN)
def test_other_forms_are_left_to_python(data):
    assert native._core.parse_rank_file(data) is None


def test_loaded_tokenizer_has_its_encoder_built():
    tok = bpe_core.Tokenizer.from_tiktoken(str(data_path("tiktoken", "r50k_base.tiktoken")))
    assert tok._backend._encoder is not None
    assert tok.encode_ordinary("hello world") == [31373, 995]
