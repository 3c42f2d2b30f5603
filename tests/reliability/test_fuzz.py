"""Fuzzing the Python side with hypothesis, with a fixed example budget printed in the log (the "reliability"
section of the pytest summary, and RELIABILITY.md): the loaders on mutated files, the encode/decode round trip on
random text and random vocabularies, and the corpus reader on random files cut at random places.

CI runs derandomized (the same examples every run, so RELIABILITY.md is reproducible); BEAM_BPE_FULL=1 runs ten
times the budget with fresh random examples."""

from __future__ import annotations

import gzip
import json
import pickle

import pytest
from conftest import corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpe_core
from bpe_core import Tokenizer, TokenizerFileError
from bpe_core.formats.artifact import dumps_artifact
from bpe_core.formats.huggingface import dumps_huggingface
from bpe_core.formats.tiktoken_file import dumps_tiktoken

from .lib import FULL, is_utf8

AREA = "fuzzing"


def budget(n: int) -> int:
    return 10 * n if FULL else n


def fuzz_settings(n: int):
    return settings(max_examples=budget(n), deadline=None, derandomize=not FULL, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip


# ------------------------------------------------------------------ loaders
@pytest.fixture(scope="module")
def small(tmp_path_factory) -> dict[str, bytes]:
    tok = bpe_core.train(bpe_core.count_chunks(corpus("en_bible_kjv", 2), "cl100k"), 300, special_tokens=["<|end|>"])
    root = tmp_path_factory.mktemp("small")
    vocab, merges = tok.to_gpt2_files(str(root))
    return {
        "tokenizer.bpe": dumps_artifact(tok),
        "tokenizer.tiktoken": dumps_tiktoken(tok),
        "tokenizer.json": dumps_huggingface(tok),
        "vocab.json": open(vocab, "rb").read(),
        "merges.txt": open(merges, "rb").read(),
    }


def mutations(data: bytes):
    """Byte flips, insertions, deletions, truncations, and line duplications or swaps of a file."""
    lines = data.split(b"\n")
    at = st.integers(0, max(0, len(data) - 1))
    line = st.integers(0, max(0, len(lines) - 1))
    return st.one_of(
        st.tuples(at, st.integers(0, 255)).map(lambda t: data[: t[0]] + bytes([t[1]]) + data[t[0] + 1 :]),
        st.tuples(at, st.binary(min_size=1, max_size=8)).map(lambda t: data[: t[0]] + t[1] + data[t[0] :]),
        st.tuples(at, st.integers(1, 64)).map(lambda t: data[: t[0]] + data[t[0] + t[1] :]),
        at.map(lambda n: data[:n]),
        st.tuples(line, line).map(lambda t: b"\n".join(lines[: t[1]] + [lines[t[0]]] + lines[t[1] :])),
        st.tuples(line, line).map(lambda t: b"\n".join(_swap(lines, *t))),
    )


def _swap(lines: list[bytes], i: int, j: int) -> list[bytes]:
    out = list(lines)
    out[i], out[j] = out[j], out[i]
    return out


def _load(kind: str, path, partner) -> Tokenizer:
    if kind == "tokenizer.tiktoken":
        return Tokenizer.from_file(str(path), pretokenizer="cl100k")
    if kind in ("vocab.json", "merges.txt"):
        return Tokenizer.from_gpt2_files(str(path.parent / "vocab.json"), str(path.parent / "merges.txt"))
    return Tokenizer.from_file(str(path))


@pytest.mark.parametrize("kind", ["tokenizer.bpe", "tokenizer.tiktoken", "tokenizer.json", "vocab.json", "merges.txt"])
def test_loaders_on_mutated_files(kind, small, tmp_path, reliability):
    ran, outcomes = [], {"refused": 0, "loaded": 0}
    folder = tmp_path / "f"
    folder.mkdir()
    for name in ("vocab.json", "merges.txt"):
        (folder / name).write_bytes(small[name])

    @fuzz_settings(150)
    @given(data=mutations(small[kind]))
    def run(data):
        ran.append(1)
        (folder / kind).write_bytes(data)
        try:
            tok = _load(kind, folder / kind, small)
        except TokenizerFileError as exc:
            assert exc.path in str(exc)
            outcomes["refused"] += 1
            return
        finally:
            for name in ("vocab.json", "merges.txt"):
                (folder / name).write_bytes(small[name])
        outcomes["loaded"] += 1
        try:
            ids = tok.encode_ordinary("Fuzzed text: naïve ☕ 123")
        except ValueError as exc:  # a mutation that removed byte tokens: named, not a crash
            assert "no token for the byte" in str(exc)
            return
        assert tok.decode(ids) == "Fuzzed text: naïve ☕ 123"

    run()
    reliability.row(AREA, f"{kind}: byte flips, insertions, deletions, truncations, duplicated and swapped lines",
                    "TokenizerFileError naming the file, or a tokenizer that encodes and decodes; never another "
                    "exception", examples=len(ran), budget=budget(150), inputs=len(ran), **outcomes)  # fmt: skip


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=6,
)
COMPONENT_PATHS = [["model"], ["model", "type"], ["model", "vocab"], ["model", "merges"], ["model", "ignore_merges"],
                   ["model", "dropout"], ["normalizer"], ["pre_tokenizer"], ["pre_tokenizer", "type"], ["decoder"],
                   ["added_tokens"], ["post_processor"]]  # fmt: skip


def test_tokenizer_json_with_random_components(small, tmp_path, reliability):
    base = json.loads(small["tokenizer.json"])
    ran, outcomes = [], {"refused": 0, "loaded": 0}

    @fuzz_settings(300)
    @given(path=st.sampled_from(COMPONENT_PATHS), value=JSON_VALUES)
    def run(path, value):
        ran.append(1)
        spec = json.loads(json.dumps(base))
        target = spec
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        file = tmp_path / "tokenizer.json"
        file.write_text(json.dumps(spec))
        try:
            tok = Tokenizer.from_file(str(file))
        except TokenizerFileError:
            outcomes["refused"] += 1
            return
        outcomes["loaded"] += 1
        assert tok.decode(tok.encode_ordinary("abc def")) == "abc def"

    run()
    reliability.row(AREA, "tokenizer.json with a random JSON value (null, bool, number, NaN, string, list, object) "
                    f"in one of {len(COMPONENT_PATHS)} component places", "TokenizerFileError, or (post_processor, "
                    "an unused field) a tokenizer that encodes and decodes; never another exception",
                    examples=len(ran), budget=budget(300), inputs=len(ran), **outcomes)  # fmt: skip


# ------------------------------------------------------------------ the round trip
@pytest.fixture(scope="module")
def trained_pair():
    counts = bpe_core.count_chunks(corpus("multi_udhr", 12) + corpus("code_cpython", 1), "o200k")
    tok = bpe_core.train(counts, 700, special_tokens=["<|end|>"])
    return tok, pickle.loads(pickle.dumps(tok)).use_backend("python")


def test_encode_decode_round_trip_on_random_text(trained_pair, reliability):
    native_tok, python_tok = trained_pair
    ran = []

    @fuzz_settings(300)
    @given(text=st.text(max_size=200) | st.binary(max_size=200), spell=st.booleans())
    def run(text, spell):
        ran.append(1)
        if spell and isinstance(text, str):
            text = text[: len(text) // 2] + "<|end|>" + text[len(text) // 2 :]
        ids = native_tok.encode_ordinary(text)
        assert ids == python_tok.encode_ordinary(text)  # the native core equals the reference
        assert native_tok.encode_ordinary_batch([text, text]) == [ids, ids]
        assert native_tok.special_tokens["<|end|>"] not in ids
        if isinstance(text, bytes):
            assert native_tok.decode_bytes(ids) == text  # invalid UTF-8 round-trips byte for byte
        else:
            expected = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            assert native_tok.decode(ids) == expected

    run()
    reliability.row(AREA, "random text (any code point, lone surrogates included) and random bytes, some spelling a "
                    "special token, through a trained o200k-style vocabulary", "decode(encode_ordinary(x)) == x (bytes "
                    "exact; lone surrogates become U+FFFD); native == python ids; batch == single; no special id",
                    examples=len(ran), budget=budget(300), inputs=len(ran))  # fmt: skip


@st.composite
def random_vocabulary(draw):
    alphabet = draw(st.text(min_size=1, max_size=6))
    docs = draw(st.lists(st.text(alphabet=alphabet, max_size=30), min_size=1, max_size=20))
    pre = draw(st.sampled_from(["cl100k", "o200k", "r50k", r"\S+|\s+", [r"\d", r"\S+|\s+"]]))
    size = draw(st.integers(256, 300))
    tie = draw(st.sampled_from(bpe_core.TIE_BREAKS))
    return bpe_core.train(bpe_core.count_chunks(docs, pre), size, tie_break=tie, min_frequency=1), docs


def test_round_trip_through_random_vocabularies(reliability):
    ran = []

    @fuzz_settings(150)
    @given(pair=random_vocabulary(), extra=st.text(max_size=40))
    def run(pair, extra):
        ran.append(1)
        tok, docs = pair
        loaded = bpe_core.Tokenizer.from_data(bpe_core.formats.artifact.loads_artifact(dumps_artifact(tok)))
        for text in docs + [extra]:
            ids = tok.encode_ordinary(text)
            assert loaded.encode_ordinary(text) == ids
            assert tok.decode(ids) == text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")

    run()
    reliability.row(AREA, "random vocabularies (random alphabets, pre-tokenizers, sizes, tie-breaks) on their own "
                    "training text and random text", "round trip exact; the saved and reloaded artifact gives the "
                    "same ids", examples=len(ran), budget=budget(150), inputs=len(ran))  # fmt: skip


# ------------------------------------------------------------------ the corpus reader
@st.composite
def corpus_file(draw):
    lengths = draw(st.lists(st.sampled_from([0, 1, 3, 10, 70, 200, 600]), max_size=30))
    data = b"\n".join(bytes(draw(st.sampled_from([b"a", b" ", b"\xc3\xa9", b"\xff"]))[0:1] * n) for n in lengths)
    data += draw(st.sampled_from([b"\n", b""]))
    return data


def test_reader_on_random_files_cut_at_random_places(tmp_path, monkeypatch, reliability):
    """Random lines (some invalid UTF-8, some empty, some over the document limit), gzip or not, random range
    sizes, block sizes, batch sizes and limits: every line exactly once, as a document or a dead letter, in order."""
    import pipeline.corpus.lines as corpus_lines
    import pipeline.corpus.readers as readers
    from pipeline.corpus.plan import CorpusSpec, InputSpec, plan_corpus

    ran = []

    @fuzz_settings(300)
    @given(data=corpus_file(), gz=st.booleans(), limit=st.sampled_from([1, 5, 50, 300, 10**9]),
           range_bytes=st.sampled_from([1, 7, 50, 333, 10**6]), block=st.sampled_from([8, 64, 1 << 20]),
           lines_per_block=st.sampled_from([1, 2, 16384]), batch_bytes=st.sampled_from([1, 100, 1 << 22]))  # fmt: skip
    def run(data, gz, limit, range_bytes, block, lines_per_block, batch_bytes):
        if not data:
            return
        ran.append(1)
        monkeypatch.setattr(corpus_lines, "READ_BLOCK", block)
        monkeypatch.setattr(corpus_lines, "BLOCK_LINES", lines_per_block)
        path = tmp_path / ("f.txt.gz" if gz else "f.txt")
        path.write_bytes(gzip.compress(data) if gz else data)
        spec = CorpusSpec("text", max_document_bytes=limit, batch_bytes=batch_bytes)
        plan = plan_corpus([InputSpec(str(path))], spec, range_bytes=range_bytes)
        got = []
        for rng in plan.ranges:
            for batch in readers.read_range(rng, spec):
                assert batch.documents_read == len(batch.texts) + len(batch.dead_letters)
                got += list(zip(batch.positions, batch.texts, strict=True)) + [
                    (d.position, None) for d in batch.dead_letters
                ]
        expected, position = [], 0
        lines = data.split(b"\n")
        if data.endswith(b"\n"):
            lines.pop()
        for line in lines:
            ok = len(line) <= limit and is_utf8(line)
            expected.append((position, line.decode() if ok else None))
            position += len(line) + 1
        assert sorted(got, key=lambda t: t[0]) == expected

    run()
    reliability.row(AREA, "the corpus reader on random files (empty, invalid UTF-8 and over-limit lines; gzip or not) "
                    "with random range, block, batch and document-limit sizes", "every line exactly once, as its "
                    "text or as a dead letter at its offset; documents_read = documents + dead letters per batch",
                    examples=len(ran), budget=budget(300), inputs=len(ran))  # fmt: skip
