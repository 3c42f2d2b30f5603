"""`make sanitize` only: the sanitized core is the one loaded, and the adversarial data goes through every entry point.

Not collected by `make test` (the name does not start with test_); tests/fuzz/run.py names it explicitly, after the
native tests, in a process whose core is the ASan+UBSan build. Every case of ../shared/data/adversarial (the
3,031 cases, blns.json, jquery.min.js) passes through each native entry point, checked against the Python reference
where the reference is fast enough: a sanitizer report aborts the run, a wrong answer fails the test.
"""

from __future__ import annotations

import json
import os
import pickle
import warnings

import pytest
from conftest import adversarial_cases, data_path, ours_openai

import bpe_core
from bpe_core import PreTokenizer, StreamingDecoder, native

# What exercises each public name of the core below; a name missing here is reported (a new entry point).
ENTRY_POINTS = {
    "Encoder": "test_encoder_entry_points", "ChunkCounter": "test_count_chunks_native_equals_reference",
    "Decoder": "test_decoder_and_stream_entry_points", "StreamState": "test_decoder_and_stream_entry_points",
    "train": "test_train_entry_points", "train_sizes": "test_train_entry_points",
    "estimate_train_memory": "test_train_entry_points", "pretok_split": "test_pretok_split_every_preset",
    "pretok_names": "test_pretok_split_every_preset", "unicode_tables_info": "test_the_sanitized_core_is_loaded",
    "validate_arrow_strings": "test_flat_entry_points", "pretok_compile": "test_pretok_compiled_every_llamacpp_list",
    "pretok_split_ends": "test_block_splitter_equals_the_scalar_one",
    "pretok_blocks_tier": "test_block_splitter_equals_the_scalar_one",
    "SuperwordPass": "test_superword_entry_points", "train_supermerges": "test_superword_entry_points",
}  # fmt: skip


def all_texts() -> list[str | bytes]:
    texts: list[str | bytes] = [value for _, value in adversarial_cases()]
    texts += [
        json.dumps(s) if not isinstance(s, str) else s
        for s in json.loads(data_path("adversarial", "blns.json").read_text())
    ]
    texts.append(data_path("adversarial", "jquery.min.js").read_text(encoding="utf-8"))
    return texts


# Cut UTF-8 sequences put at the very end of a case: a decoder that reads ahead of a lead byte without checking the
# length reads past the buffer only there (a planted over-read was missed by the cases alone, caught with these).
TAILS = (b"", b"\xc3", b"\xe2", b"\xe2\x82", b"\xf0", b"\xf0\x9f", b"\xf0\x9f\x98", b"\xf4\x8f\xbf", b"'", b" ")


def with_tails(texts: list[str | bytes]) -> list[bytes]:
    return [as_bytes(t) + tail for t in texts for tail in TAILS]


def as_bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")


def python_twin(tok):
    return pickle.loads(pickle.dumps(tok)).use_backend("python")


def test_the_sanitized_core_is_loaded():
    expected = os.environ.get("BEAM_BPE_NATIVE_CORE")
    assert expected, "run through `make sanitize` (tests/fuzz/run.py sanitize), which sets BEAM_BPE_NATIVE_CORE"
    core = native._core
    assert core is not None and os.path.samefile(core.__file__, expected), (core and core.__file__, expected)
    with open("/proc/self/maps", encoding="ascii", errors="replace") as f:
        maps = f.read()
    assert "libasan" in maps and "libubsan" in maps, "the AddressSanitizer/UBSan runtimes are not loaded"
    info = core.unicode_tables_info() if hasattr(core, "unicode_tables_info") else {}
    assert not info or "unicode_version" in info
    missing = sorted(n for n in dir(core) if not n.startswith("_") and n not in ENTRY_POINTS)
    if missing:
        warnings.warn(f"native entry points not covered by sanitized_checks.py: {missing}", stacklevel=1)


@pytest.mark.parametrize("preset", ["r50k", "cl100k", "o200k", "llama3", "qwen2"])
def test_pretok_split_every_preset(preset):
    if preset not in native._core.pretok_names():
        pytest.fail(f"{preset} has no hand-written pre-tokenizer in this core: {native._core.pretok_names()}")
    pre = PreTokenizer.from_spec(preset)
    for data in with_tails(all_texts()):
        expected = [p.encode("utf-8", "surrogateescape") for p in pre.split(data.decode("utf-8", "surrogateescape"))]
        assert native._core.pretok_split(preset, data) == expected, (preset, data[:80])
    with pytest.raises(ValueError, match="no hand-written pre-tokenizer"):
        native._core.pretok_split("no-such-preset", b"x")


def test_pretok_compiled_every_llamacpp_list():
    """The compiled matcher (pretok_rx.cpp) on every distinct pattern list of the llama.cpp table and malformed
    programs, which are refused with ValueError."""
    from bpe_core.pretokenize.llamacpp import LLAMACPP_PRETOKENIZERS
    from bpe_core.pretokenize.pretokenizer import native_name

    texts = with_tails(all_texts())
    for patterns in sorted({patterns for patterns, _ in LLAMACPP_PRETOKENIZERS.values()}):
        name, pre = native_name(patterns), PreTokenizer(patterns)
        for data in texts:
            text = data.decode("utf-8", "surrogateescape")
            expected = [p.encode("utf-8", "surrogateescape") for p in pre._split_normalized(text)]
            assert native._core.pretok_split(name, data) == expected, (patterns, data[:80])
    malformed = ([], [1], [1, 1, -1, 1, 0, 5, 1, 1, 0], [1, 1, -1, 1, 1, 0, 2, 0], [2, 1, -1, 0])
    no_such_hand_written_stage = ([1, -1, 1 << 20], [1, -1, len(native._core.pretok_names())], [2, -1, 0])
    for program in malformed + no_such_hand_written_stage:
        with pytest.raises(ValueError):
            native._core.pretok_compile(program, [[0, 10]])


@pytest.mark.parametrize("preset", ["r50k", "cl100k", "o200k", "llama3", "qwen2"])
def test_block_splitter_equals_the_scalar_one(preset):
    """The 64-byte block splitter (pretok_blocks.cpp) in each tier, and at batch sizes that make it return early,
    gives the scalar splitter's piece ends on every case (each cut tail included: the blocks read 64 bytes ahead)."""
    core = native._core
    if not hasattr(core, "pretok_split_ends"):
        pytest.fail("this core has no pretok_split_ends (the block splitter's entry point)")
    assert core.pretok_blocks_tier() in ("avx2", "sse2", "scalar")
    for data in with_tails(all_texts()):
        expected = core.pretok_split_ends(preset, data, "scalar")[0]
        for tier, batch in (("auto", 256), ("sse2", 256), ("auto", 65)):
            assert core.pretok_split_ends(preset, data, tier, batch)[0] == expected, (preset, tier, batch, data[:80])


def test_encoder_entry_points():
    ours = ours_openai("cl100k")
    ref = python_twin(ours)
    texts = all_texts()
    expected = [ref.encode(t, allowed_special="all") for t in texts]
    assert ours.encode_batch(texts, allowed_special="all", num_threads=2) == expected
    assert ours.encode_batch(texts, allowed_special="all", num_threads=1) == expected
    assert [ours.encode(t, allowed_special="all") for t in texts] == expected
    assert ours.encode_ordinary_batch(texts, num_threads=2) == [ref.encode_ordinary(t) for t in texts]
    for text in texts[::10]:
        data = as_bytes(text)[:5000]
        assert ours.encode_piece_bytes(data) == ref.encode_piece_bytes(data)
    encoder = ours._encoder()
    assert encoder.cache_size >= 0 and encoder.pair_count > 0
    encoder.clear_cache()
    assert encoder.cache_size == 0


def test_decoder_and_stream_entry_points():
    ours = ours_openai("cl100k")
    ref = python_twin(ours)
    for text in all_texts()[::3]:
        ids = ours.encode(text, allowed_special="all")[:3000]
        assert ours.decode_bytes(ids) == ref.decode_bytes(ids)
        for errors in ("replace", "strict", "ignore"):
            outs = []
            for tok in (ours, ref):
                stream, out = StreamingDecoder(tok, errors=errors, skip_special=True), []
                try:
                    out += [stream.step(ids[0])] if ids else []
                    out += [stream.feed(ids[1:7]), stream.feed(ids[7:]), stream.pending, stream.flush()]
                except UnicodeDecodeError as exc:
                    out.append(type(exc).__name__)
                outs.append(out)
            assert outs[0] == outs[1], (errors, ids[:20])
    for bad in ([-1], [100256], [ours.n_vocab], [2**40], [None]):
        with pytest.raises((ValueError, TypeError)):
            ours.decode_bytes(bad)
        with pytest.raises((ValueError, TypeError)):
            StreamingDecoder(ours).feed(bad)


def test_count_chunks_native_equals_reference():
    texts = all_texts()
    for preset in ("cl100k", "o200k", "llama3"):
        ours = bpe_core.count_chunks(texts, preset, num_threads=2)
        ref = bpe_core.count_chunks(texts, preset, backend="python")
        assert dict(ours) == dict(ref), preset


def test_train_entry_points():
    counts = bpe_core.count_chunks(all_texts(), "cl100k", backend="python")
    ours = bpe_core.train(counts, 600, special_tokens=["<|end|>"])
    ref = bpe_core.train(counts, 600, special_tokens=["<|end|>"], backend="python")
    assert ours.merges == ref.merges
    for text in all_texts()[::50]:
        assert ours.encode_ordinary(text) == python_twin(ours).encode_ordinary(text)
    n_words, n_tokens = native._core.train_sizes(dict(counts))
    assert native._core.estimate_train_memory(n_words, n_tokens) > 0
    with pytest.raises((TypeError, ValueError)):
        native._core.train_sizes({"not bytes": 1})


def test_superword_entry_points():
    """Phase 2 (runs counted natively, supermerges trained natively) on the adversarial texts, then the encoder
    with its second level attached on every text with every cut tail (runs merged in the output buffer as they
    close), against the reference."""
    from bpe_core.superword import reference as sw

    texts = all_texts()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = bpe_core.train_superword(bpe_core.count_chunks(texts, "cl100k"), 900, 300, texts)
    arguments = sw.word_model_arguments(tok)
    word = bpe_core.Tokenizer(arguments.pop("vocab"), **arguments)
    supermerges = tok.superword
    assert tok._encoder().has_superword
    docs = with_tails(texts[::7])
    ids, offsets = tok.encode_ordinary_flat(docs, num_threads=2)
    got = [ids[a:b].tolist() for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]
    assert got == [sw.encode_reference(word, supermerges, d) for d in docs]


def test_hostile_bytes_cases_round_trip():
    ours = ours_openai("o200k")
    for data in with_tails([value for _, value in adversarial_cases()]):
        assert ours.decode_bytes(ours.encode_ordinary(data)) == data, data[:80]


def arrow_strings(items: list[bytes], large: bool = False):
    """An Arrow string array over exactly these bytes (no UTF-8 check), its data buffer the joined bytes object
    itself: under PYTHONMALLOC=malloc a read past its end is an ASan report."""
    import numpy as np
    import pyarrow as pa

    kind, width = (pa.large_string(), np.int64) if large else (pa.string(), np.int32)
    offsets = np.zeros(len(items) + 1, dtype=width)
    np.cumsum([len(d) for d in items], out=offsets[1:])
    return pa.Array.from_buffers(kind, len(items), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(items))])


def is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_flat_entry_points():
    import numpy as np

    ours = ours_openai("cl100k")
    data = with_tails(all_texts())
    expected = ours.encode_ordinary_batch(data, num_threads=1)
    for threads in (1, 2):  # lists of bytes and of str, into one array of ids
        ids, offsets = ours.encode_ordinary_flat(data, num_threads=threads)
        assert [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:], strict=True)] == expected
    for i, item in enumerate(data):  # every case alone at the very end of its own Arrow buffer, valid or not
        try:
            ids, offsets = ours.encode_ordinary_flat(arrow_strings([item], large=i % 2 == 1), num_threads=1)
        except bpe_core.InvalidTextError as exc:
            assert exc.index == 0 and not is_utf8(item), item[:80]
        else:
            assert is_utf8(item) and ids.tolist() == expected[i], item[:80]
    valid = [d for d in data if is_utf8(d)]
    ids, offsets = ours.encode_flat(arrow_strings(valid), num_threads=2, allowed_special="all")
    assert len(offsets) == len(valid) + 1
    texts = ours.decode_flat(ids, offsets)
    assert texts == [ours.decode(ids[a:b].tolist()) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
    small = ours_openai("r50k")
    ids16, offsets16 = small.encode_ordinary_flat(valid[:200])
    assert ids16.dtype == np.uint16 and small.decode_flat(ids16, offsets16) == [v.decode() for v in valid[:200]]
    with pytest.raises(ValueError):
        ours.decode_flat(np.array([5, 100256], np.uint32), [0, 2])
    with pytest.raises(ValueError):
        ours.decode_flat(np.array([5], np.uint32), [0, 4])
    raw = np.frombuffer(b"abcd", np.uint8)
    for offsets in ([0, 9], [3, 1], [0, -1], [0, 4]):
        array = np.array(offsets, np.int64)
        index, _, _ = native._core.validate_arrow_strings(array.ctypes.data, 8, raw.ctypes.data, 4, 1)
        assert index == (-1 if offsets == [0, 4] else 0), offsets
