"""Fuzz target (a): the hand-written C++ pre-tokenizers against the `regex` module, on arbitrary bytes.

For each hand-written kind of ``_core.pretok_names()`` (the presets, deepseek-v3, r50k-digits, the cl100k family) and
each distinct pattern list of
the llama.cpp table through the compiled matcher ("rx:N"): ``_core.pretok_split(name, data)``
must equal the reference's pieces, ``PreTokenizer.split(data.decode("utf-8", "surrogateescape"))`` re-encoded with
surrogateescape, piece for piece; and ``PreTokenizer.split_bytes`` (the public path) must give the same, and the
64-byte block splitter (``pretok_split_ends``, in the tier and batch size the input picks) the scalar one's ends. Half
of the inputs also go through ``count_chunks`` on 1-3 native threads, whose counts must equal the reference's. The input
chooses the preset and how its payload becomes bytes: as it is (invalid UTF-8 included), or as UTF-8 of code
points spread over all of Unicode (random bytes alone rarely reach other scripts' letters, marks and digits).

    python tests/fuzz/fuzz_pretok.py -runs=100000
"""

from __future__ import annotations

import sys
from functools import cache

import fuzzlib
from fuzzlib import Reader, check_same, code_points, outcome


@cache
def presets() -> tuple:
    """(name, reference PreTokenizer) per hand-written pre-tokenizer of the loaded core."""
    from bpe_core import PreTokenizer, native
    from bpe_core.pretokenize.presets import native_kind_patterns

    names = native._core.pretok_names()
    hand_written = tuple((name, PreTokenizer(native_kind_patterns(name), timeout=None)) for name in names)
    return hand_written + compiled()


def compiled() -> tuple:
    """(name, reference PreTokenizer) per distinct pattern list of the llama.cpp table, split by the compiled matcher
    (bpe_core/pretokenize/compiler.py, "rx:N")."""
    from bpe_core import PreTokenizer
    from bpe_core.pretokenize.llamacpp import LLAMACPP_PRETOKENIZERS
    from bpe_core.pretokenize.pretokenizer import native_name

    lists = sorted({patterns for patterns, _ in LLAMACPP_PRETOKENIZERS.values()})
    return tuple((native_name(patterns), PreTokenizer(patterns)) for patterns in lists)


def reference_pieces(pre, data: bytes) -> list[bytes]:
    return [p.encode("utf-8", "surrogateescape") for p in pre.split(data.decode("utf-8", "surrogateescape"))]


def test_one_input(data: bytes) -> None:
    from bpe_core import native

    reader = Reader(data)
    flags = reader.byte()
    table = presets()
    name, pre = table[flags % len(table)]
    payload = reader.rest()
    if flags & 0x80:
        payload = code_points(payload).encode("utf-8", "surrogatepass")  # surrogates: invalid UTF-8 bytes again
    got = outcome(native._core.pretok_split, name, payload)
    expected = ("ok", reference_pieces(pre, payload))
    check_same(f"pretok_split({name!r})", got, expected, payload)
    if pre.native_kind == name:
        check_same(f"PreTokenizer({name!r}).split_bytes", outcome(pre.split_bytes, payload), expected, payload)
    if hasattr(native._core, "pretok_split_ends") and not name.startswith("rx:"):  # the 64-byte block splitter
        split = native._core.pretok_split_ends  # == the scalar one, ends for ends
        scalar = outcome(lambda: split(name, payload, "scalar")[0])
        tier, batch = ("auto", "sse2")[flags >> 5 & 1], (64, 256)[flags >> 4 & 1]
        got = outcome(lambda: split(name, payload, tier, batch)[0])
        check_same(f"pretok_split_ends({name!r}, {tier}, {batch})", got, scalar, payload)
    if flags & 0x40:  # the native counter on threads: the payload cut into documents, counted as the reference does
        count_on_threads(pre, payload, 1 + (flags >> 4) % 3)


def count_on_threads(name, payload: bytes, threads: int) -> None:
    """``name``: the PreTokenizer (its native kind the hand-written one, or a compiled pattern list's)."""
    import bpe_core

    step = max(1, len(payload) // 5)
    docs = [payload[i : i + step] for i in range(0, len(payload), step)] + [payload]
    got = outcome(lambda: dict(bpe_core.count_chunks(docs, name, num_threads=threads)))
    check_same("count_chunks", got, outcome(lambda: dict(bpe_core.count_chunks(docs, name, backend="python"))), docs)


def seeds():
    """Every adversarial case (cut to 2 KiB) and slices of every corpus, each under every preset."""
    texts = [fuzzlib.as_bytes(t) for t in fuzzlib.adversarial_texts(2048)]
    for corpus in ("multi_udhr", "code_cpython", "fortunes_multi", "docs_python_rst", "en_bible_kjv"):
        texts += [d.encode() for d in fuzzlib.corpus_docs(corpus, 20, 2048)]
    n = len(presets())
    return [bytes([i % n]) + t for i, t in enumerate(texts)]


if __name__ == "__main__":
    presets()
    fuzzlib.main(test_one_input, seeds, "pretok")
    sys.exit(0)
