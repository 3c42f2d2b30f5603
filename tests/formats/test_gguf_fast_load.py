"""The fast paths of loading a GGUF vocabulary (issue 31: Qwen 3.5's load) against the loops they stand in for: the
native core's string-array reader (gguf_reader), merge-list resolution (gguf_file) and merge values
(model/vocab.py), and the one-pass byte-level decode of the tokens. On every llama.cpp test vocabulary in the
reference-file cache (big ones included) and on small written files with the cases the fast paths hand back: the
result must be the loop's, and an error the loop's error."""

from __future__ import annotations

import gc

import pytest
from conftest import REFERENCE, reference_path
from test_gguf import BYTES, SMALL, write_gguf

from bpe_core import Tokenizer, TokenizerFileError, native
from bpe_core.formats import gguf_file, gguf_reader
from bpe_core.model import bytelevel, vocab
from bpe_core.model.vocab import VocabularyError, build_tables

LLAMA = "llama-cpp-python-0.3.36"
MODELS = "vendor/llama.cpp/models"
NAMES = sorted(p.name[len("ggml-vocab-") : -len(".gguf")] for p in (REFERENCE / LLAMA / MODELS).glob("*.gguf"))

needs_native = pytest.mark.skipif(not native.available(), reason="the fast paths are the native core's")


def python_only(monkeypatch) -> None:
    """Every load helper of the native core hidden: the loops run."""
    monkeypatch.setattr(gguf_reader, "_native_strings", lambda: None)
    for name in ("gguf_merge_pairs", "merge_values", "byte_level_bytes"):
        monkeypatch.delattr(native._core, name)


@needs_native
@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES or ["(none in the cache)"])
def test_the_fast_load_equals_the_loops_on_every_reference_vocabulary(name, monkeypatch):
    path = str(reference_path(LLAMA, f"{MODELS}/ggml-vocab-{name}.gguf"))
    fast_meta = gguf_reader.read_gguf_metadata(path)
    fast = Tokenizer.from_file(path) if fast_meta.get("tokenizer.ggml.model") == "gpt2" else None
    if fast is not None:  # the fast path taken, not handed back
        tokens, entries = fast_meta["tokenizer.ggml.tokens"], fast_meta["tokenizer.ggml.merges"]
        types = fast_meta.get("tokenizer.ggml.token_type") or [1] * len(tokens)
        bpe_vocab, _, _, textual = gguf_file._split_tokens(tokens, types, path)
        owners = build_tables(bpe_vocab, None, {}, {}, frozenset(textual)).bytes_to_id
        pairs = native._core.gguf_merge_pairs(tokens, list(bpe_vocab), entries)
        assert pairs is not None and native._core.merge_values(bpe_vocab, owners, pairs) is not None
    with monkeypatch.context() as m:
        python_only(m)
        m.setattr(gguf_reader, "_CHUNK", 4096)  # the loop across many refills, the fast reader across few
        assert gguf_reader.read_gguf_metadata(path) == fast_meta
        slow = Tokenizer.from_file(path) if fast is not None else None
        slow_unreachable = slow.unreachable_tokens() if slow is not None else None
    if fast is not None:
        assert fast.digest() == slow.digest()
        assert fast.unreachable_tokens() == slow_unreachable
        assert fast.encode_ordinary("Hello, world! 12345 naïve") == slow.encode_ordinary("Hello, world! 12345 naïve")


@needs_native
def test_the_fast_reader_resumes_across_refills_and_byte_orders(tmp_path, monkeypatch):
    tokens = BYTES + ["x" * n for n in range(2, 300)] + ["é" * 40, ""]
    for big_endian in (False, True):
        path = write_gguf(tmp_path / f"v{big_endian}.gguf", tokens=tokens, big_endian=big_endian)
        whole = gguf_reader.read_gguf_metadata(path)
        assert whole["tokenizer.ggml.tokens"] == tokens
        monkeypatch.setattr(gguf_reader, "_CHUNK", 97)  # every few strings cut by the end of the buffer
        assert gguf_reader.read_gguf_metadata(path) == whole
        monkeypatch.undo()


@needs_native
def test_the_fast_reader_leaves_bad_strings_to_the_loop_and_its_errors(tmp_path):
    data = bytearray(open(write_gguf(tmp_path / "v.gguf", **SMALL), "rb").read())
    at = data.index(b"ab!!")
    bad = tmp_path / "bad-utf8.gguf"
    bad.write_bytes(bytes(data[:at]) + b"\xffb!!" + bytes(data[at + 4 :]))
    with pytest.raises(TokenizerFileError, match=r"is not UTF-8: b'\\xffb!!'"):
        gguf_reader.read_gguf_metadata(str(bad))
    length_at = at - 8  # the uint64 length before the token's bytes
    huge = tmp_path / "huge.gguf"
    huge.write_bytes(bytes(data[:length_at]) + (1 << 40).to_bytes(8, "little") + bytes(data[at:]))
    with pytest.raises(TokenizerFileError, match="has length 1099511627776: the file is corrupt"):
        gguf_reader.read_gguf_metadata(str(huge))
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(bytes(data[: at + 2]))
    with pytest.raises(TokenizerFileError, match="truncated"):
        gguf_reader.read_gguf_metadata(str(cut))


@needs_native
def test_merge_pairs_keep_the_last_id_of_a_repeated_text_and_refuse_what_the_loop_names(tmp_path):
    tokens = [*BYTES, "ab", "c"]
    pairs = native._core.gguf_merge_pairs(tokens, list(range(len(tokens))), ["a b", "ab c", "c c"])
    assert pairs == [(ord("a"), ord("b")), (256, 257), (257, 257)]  # "c": byte 99 first, then id 257: the last
    assert native._core.gguf_merge_pairs(tokens, list(range(256)), ["a b", "ab c"]) is None  # "ab" not in vocab
    for entry in ("ab", "a  b", "a b c", "a\u00a0b"):
        assert native._core.gguf_merge_pairs(tokens, list(range(len(tokens))), ["a b", entry]) is None, entry
    refused = {**SMALL, "merges": ["a b", "a  b"]}
    with pytest.raises(TokenizerFileError, match="merge 1 'a  b' is not two tokens"):
        Tokenizer.from_file(write_gguf(tmp_path / "two-spaces.gguf", **refused))


@needs_native
def test_native_merge_values_equal_the_loop_and_leave_problems_to_it():
    tokens = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc", 258: b" ab"}
    owners = {data: tid for tid, data in tokens.items()}
    merges = [(97, 98), (256, 99), (32, 256)]
    want = vocab._merge_values_one_by_one(tokens, owners, merges)
    assert native._core.merge_values(tokens, owners, merges) == want == vocab._merge_values(tokens, owners, merges)
    assert list(want.items())[1] == (256 << 32 | 99, 1 << 32 | 257)
    problems = {
        "references id 300, which is not a token": [(97, 98), (300, 99)],
        "makes b'ba', which is not a token": [(98, 97)],
        "is listed twice": [(97, 98), (97, 98)],
    }
    for words, bad in problems.items():
        assert native._core.merge_values(tokens, owners, bad) is None
        with pytest.raises(VocabularyError, match=words):
            build_tables(tokens, bad, {}, {})
    assert native._core.merge_values(tokens, owners, [[97, 98]]) is None  # not a tuple: the loop takes it
    assert build_tables(tokens, [[97, 98]], {}, {}).merge_values == {97 << 32 | 98: 256}


@pytest.mark.parametrize("core", ("native", "python"))
def test_token_strings_to_bytes_is_the_one_by_one_decode(core, monkeypatch):
    if core == "python" and native.available():
        monkeypatch.delattr(native._core, "byte_level_bytes")
    elif core == "native" and not native.available():
        pytest.skip("the native core did not load")
    texts = ["Ġhi", "ĊĊ", "", "".join(BYTES), "abc"]
    assert bytelevel.token_strings_to_bytes(texts) == [bytelevel.token_string_to_bytes(t) for t in texts]
    assert bytelevel.token_strings_to_bytes(["Ġhi", "a\u200db"]) is None
    assert bytelevel.token_strings_to_bytes(["\x00"]) is None  # byte 0 is spelt Ā, not itself
    assert bytelevel.token_strings_to_bytes(["Ġ\U0001f600"]) is None
    for cp in range(0x500):  # every character the map could hold and beyond, against GPT-2's rule written out
        want = bytelevel.unicode_to_bytes().get(chr(cp))
        got = bytelevel.token_strings_to_bytes([chr(cp), "a"])
        assert got == (None if want is None else [bytes([want]), b"a"]), hex(cp)
    with pytest.raises(KeyError):
        bytelevel.token_string_to_bytes("a\u200db")


def test_split_tokens_in_one_pass_equals_the_loop(monkeypatch):
    def one_by_one(tokens, types):  # the per-token decode that a vocabulary with raw-text tokens takes
        with monkeypatch.context() as m:
            m.setattr(gguf_file, "token_strings_to_bytes", lambda strings: None)
            return gguf_file._split_tokens(tokens, types, "p")

    tokens = [*BYTES, "ab", "a\u200db", "<ctl>", "ab!", "unused-ŧ"]
    types = [1] * 256 + [1, 1, 3, 4, 5]
    vocab, specials, added, textual = gguf_file._split_tokens(tokens, types, "p")
    assert vocab == {**{i: bytes([i]) for i in range(256)}, 256: b"ab", 257: "a\u200db".encode()}
    assert (specials, added, textual) == ({"<ctl>": 258}, {"ab!": 259}, [257])  # "unused-ŧ": raw text, unused
    plain = [*BYTES, "ab", "<ctl>", "ab!"]
    types = [1] * 256 + [6, 3, 4]
    fast = gguf_file._split_tokens(plain, types, "p")
    assert fast == one_by_one(plain, types)
    assert fast[1:] == ({"<ctl>": 257}, {"ab!": 258}, [])
    for split in (gguf_file._split_tokens, lambda t, k, p: one_by_one(t, k)):
        with pytest.raises(TokenizerFileError, match="token 257 '<ctl>' has unknown token type 9"):
            split(plain, [1] * 257 + [9, 4], "p")


def test_the_collector_is_paused_while_a_gguf_loads_and_as_it_was_after(tmp_path, monkeypatch):
    path = write_gguf(tmp_path / "v.gguf", **SMALL)
    seen = []
    split = gguf_file._split_tokens
    monkeypatch.setattr(gguf_file, "_split_tokens", lambda *a: seen.append(gc.isenabled()) or split(*a))
    assert gc.isenabled()
    Tokenizer.from_file(path)
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        Tokenizer.from_file(path)
        assert not gc.isenabled()  # left off where the caller had it off
    finally:
        gc.enable()
    with pytest.raises(TokenizerFileError):
        Tokenizer.from_file(write_gguf(tmp_path / "bad.gguf", **{**SMALL, "merges": ["a zz"]}))
    assert gc.isenabled()  # on again after an error


@needs_native
def test_unmade_tokens_with_the_cores_merge_results_equal_the_loop():
    """Parts made by a later merge (the first pass leaves those merges to the worklist), a chain of them, tokens no
    merge makes, a merge of an unmade token."""
    tokens = {i: bytes([i]) for i in range(256)}
    extra = [b"ab", b"cd", b"abcd", b"abcdab", b"xy", b"xyz", b"zz", b"zzz"]
    tokens |= {256 + k: data for k, data in enumerate(extra)}
    owners = {data: tid for tid, data in tokens.items()}
    merges = [
        (owners[b"abcd"], owners[b"ab"]),  # rank 0: its left part is made at rank 3, from parts of ranks 1 and 2
        (owners[b"c"], owners[b"d"]),
        (owners[b"a"], owners[b"b"]),
        (owners[b"ab"], owners[b"cd"]),
        (owners[b"zz"], owners[b"z"]),  # "zz" is made by no merge: "zzz" is unmade
    ]
    want = vocab._unmade_one_by_one(tokens, merges, owners)
    assert want == {owners[b"xy"], owners[b"xyz"], owners[b"zz"], owners[b"zzz"]}
    assert vocab.unmade_tokens(tokens, merges, owners) == want
    assert native._core.merge_values(tokens, owners, merges) is not None  # the core's path, not the loop
    assert vocab.unmade_tokens(tokens, [*merges, merges[0]], owners) == want  # listed twice: the loop
