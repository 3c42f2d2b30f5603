"""The compiled matcher's bound (issue 31 item 4): a pattern from an untrusted tokenizer file cannot make a split run
without end. The matcher counts its steps on a text (``pretok_rx.h``: base + per_byte * n); past them the split
raises ``PreTokenizeTimeout`` (a TimeoutError) naming the patterns, the same error as the `regex` path's time limit:
``split_bytes`` and the encoders raise it, the encoding pipeline makes the document a dead letter; Ctrl-C stops a
long split. No timings here: the step counts are the bound, and the tests check what the user sees."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import CORPORA, corpus, data_path

from bpe_core import PreTokenizer, Tokenizer, native
from bpe_core.pretokenize.llamacpp import LLAMACPP_PRETOKENIZERS
from bpe_core.pretokenize.pretokenizer import PreTokenizeTimeout, native_name

pytestmark = pytest.mark.skipif(not native.available(), reason="the native core is not built")

CRAFTED = ("a+a+a+a+a+b", r"\p{L}+\p{L}+\p{L}+\p{L}+\p{N}")
# One greedy run before a required character: no overlap, so the compiler takes it, but a run of n a's with no b
# costs ~n^2 steps (each start gives the run back character by character): the budget's case.
QUADRATIC = "a+b"


@pytest.mark.parametrize("pattern", CRAFTED)
def test_the_crafted_patterns_are_refused_within_the_budget(pattern):
    """800 a's: ~10^12 attempts for a backtracking matcher (regex itself runs over its 10 s limit on the first)."""
    kind = native_name((pattern,))
    assert kind is not None and kind.startswith("rx:")
    base, per_byte = native._core.pretok_rx_budget()
    text = "a" * 800
    with pytest.raises(PreTokenizeTimeout, match="took more than"):
        PreTokenizer([pattern]).split_bytes(text.encode())
    assert native._core.pretok_rx_last_steps() <= base + per_byte * 800 + (1 << 16)  # checked every 2^16 steps
    tok = Tokenizer.from_tiktoken(str(data_path("tiktoken", "r50k_base.tiktoken")), pretokenizer=[pattern])
    with pytest.raises(PreTokenizeTimeout, match=r"on a text of 800 bytes"):
        tok.encode_ordinary(text)
    assert tok.decode(tok.encode_ordinary("aab")) == "aab"


def test_past_the_budget_the_split_raises_naming_the_patterns():
    kind = native_name((QUADRATIC,))
    assert kind is not None
    base, per_byte = native._core.pretok_rx_budget()
    data = b"a" * 8000  # ~n^2 = 64 M steps > base + per_byte * n
    assert 8000**2 > base + per_byte * len(data)
    with pytest.raises(
        PreTokenizeTimeout,
        match=r"compiled pre-tokenizer \['a\+b'\] took more than \d+ steps on a "
        r"text of 8000 bytes",
    ) as exc:
        native._core.pretok_split(kind, data)
    assert isinstance(exc.value, TimeoutError)
    with pytest.raises(PreTokenizeTimeout):
        PreTokenizer([QUADRATIC]).split_bytes(data)
    short = b"a" * 50 + b"b" + b"a" * 50
    assert native._core.pretok_split(kind, short) == [short[:51], short[51:]]


def test_the_encoders_refuse_such_a_text_with_the_same_error():
    tok = Tokenizer.from_tiktoken(str(data_path("tiktoken", "r50k_base.tiktoken")), pretokenizer=[QUADRATIC])
    text = "a" * 8000
    assert tok.decode(tok.encode_ordinary("aab aa")) == "aab aa"
    with pytest.raises(PreTokenizeTimeout, match="steps on a text of 8000 bytes"):
        tok.encode_ordinary(text)
    with pytest.raises(PreTokenizeTimeout):
        tok.encode_ordinary_flat(["fine", text])
    assert tok.encode_ordinary("aab aa") == tok.encode_ordinary("aab aa")  # the tokenizer still works


@pytest.mark.parametrize("name", CORPORA)
def test_real_patterns_stay_far_below_the_budget(name):
    """The llama.cpp patterns on every shared corpus: the most steps per byte of any document, against the budget's
    per-byte allowance (a margin of 8x or more, so no real text reaches it)."""
    _, per_byte = native._core.pretok_rx_budget()
    docs = [d.encode("utf-8", "surrogatepass") for d in corpus(name)[:200]]
    distinct = {patterns for patterns, _ in LLAMACPP_PRETOKENIZERS.values()}
    worst = 0.0
    for patterns in distinct:
        kind = native_name(patterns)
        if kind is None or not kind.startswith("rx:"):
            continue
        for doc in docs:
            if len(doc) < 256:
                continue
            native._core.pretok_split(kind, doc)
            worst = max(worst, native._core.pretok_rx_last_steps() / len(doc))
    assert 0 < worst < per_byte / 8


CHILD = r"""
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from bpe_core import native
from bpe_core.pretokenize.pretokenizer import native_name
kind = native_name(("a+b",))
print("start", flush=True)
try:
    native._core.pretok_split(kind, b"a" * 3_000_000)  # within its budget (3 G steps): tens of seconds
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_ctrl_c_stops_a_long_compiled_split():
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "start"
    time.sleep(0.5)
    os.kill(child.pid, signal.SIGINT)
    out, _ = child.communicate(timeout=120)
    assert out.strip() == "interrupted"


def test_in_the_encoding_pipeline_the_document_is_a_dead_letter(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "pipeline"))
    from pipeline_testlib import manifest, read_dead_letters, run_cli, write_jsonl

    tok = Tokenizer.from_tiktoken(str(data_path("tiktoken", "r50k_base.tiktoken")), pretokenizer=[QUADRATIC])
    tok.save(str(tmp_path / "slow.bpe"))
    bad = "a" * 8000
    docs = write_jsonl(tmp_path / "c.jsonl", ["fine text", bad, "more fine text"])
    assert run_cli("encode", "--tokenizer", tmp_path / "slow.bpe", "--input", docs, "--out", tmp_path / "out") == 0
    m = manifest(tmp_path / "out")
    assert (m["documents_read"], m["documents_written"], m["dead_letters"]) == (3, 2, 1)
    [dead] = read_dead_letters(tmp_path / "out")
    assert dead["offset"] == docs.read_bytes().index(json.dumps({"text": bad}).encode()[:-1])
    assert "PreTokenizeTimeout" in dead["reason"] and "a+b" in dead["reason"]
