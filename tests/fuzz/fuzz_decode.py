"""Fuzz target (c): decode_bytes, decode, decode_flat and StreamingDecoder on arbitrary id sequences, native == python.

The input chooses the errors handler, skip_special, the container of the ids, the ids themselves (mostly valid
cl100k ids, some special ids, ids in the vocabulary's gaps, negative, huge, bool, float, None, numpy ints) and how
the stream is cut into step() and feed() calls. Oracle: every call gives the same text (or the same documented
exception with the same message) on both backends, the held-back bytes agree after every call, and with
errors="replace" the streamed text equals decode(ids).

    python tests/fuzz/fuzz_decode.py -runs=10000
"""

from __future__ import annotations

import sys
from functools import cache

import fuzzlib
from fuzzlib import Reader, check_same, outcome

ERRORS = ("replace", "strict", "ignore", "backslashreplace", "surrogateescape")


@cache
def tokenizers():
    native = fuzzlib.openai_tokenizer("cl100k")
    return native, fuzzlib.python_twin(native)


def odd_ids(n_vocab: int, specials: list[int]) -> list[object]:
    import numpy as np

    return [*specials, 100_256, 100_261, 100_275, -1, n_vocab, n_vocab + 1, 2**31, 2**32, 2**63, -(2**63), 2**70,
            True, None, 1.0, "3", np.int64(42), np.uint32(100), np.int64(-5)]  # fmt: skip


def draw_ids(reader: Reader, n_vocab: int, odd: list[object]) -> list[object]:
    ids: list[object] = []
    for _ in range(reader.below(48)):
        value = int.from_bytes(reader.take(3), "little")
        ids.append(odd[(value >> 3) % len(odd)] if value & 7 == 0 else (value >> 3) % n_vocab)
    return ids


def container(kind: int, ids: list[object]):
    import numpy as np

    if kind == 1:
        return tuple(ids)
    if kind == 2 and all(type(i) is int and 0 <= i < 2**31 for i in ids):
        return np.array(ids, dtype=np.int64)
    return list(ids)


def check_decode_flat(native, python, ids: list[object], cuts: bytes, errors: str) -> None:
    """decode_flat of the integer ids as one uint32 array cut into documents where `cuts` say: both backends agree
    (a hole in the vocabulary or an id past it raises decode's ValueError), and each text is decode of its ids."""
    import numpy as np

    flat = [i for i in ids if type(i) is int and 0 <= i < 2**32]
    offsets = [0, *sorted(c % (len(flat) + 1) for c in cuts), len(flat)]
    array = np.array(flat, dtype=np.uint32)
    got = outcome(native.decode_flat, array, offsets, errors=errors)
    check_same("decode_flat", got, outcome(python.decode_flat, array, offsets, errors=errors), (flat, offsets))
    if got[0] == "ok":
        expected = [native.decode(flat[a:b], errors) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
        if got[1] != expected:
            raise AssertionError(f"decode_flat {got[1]!r} != decode of each document {expected!r}")


def test_one_input(data: bytes) -> None:
    from bpe_core import StreamingDecoder

    native, python = tokenizers()
    reader = Reader(data)
    flags = reader.byte()
    errors, skip_special, kind = ERRORS[flags % 5], bool(flags & 8), (flags >> 4) % 3
    ids = draw_ids(reader, native.n_vocab, odd_ids(native.n_vocab, sorted(native.special_tokens.values())))
    seq = container(kind, ids)
    check_same("decode_bytes", outcome(native.decode_bytes, seq), outcome(python.decode_bytes, seq), ids)
    check_same("decode", outcome(native.decode, seq, errors), outcome(python.decode, seq, errors), ids)
    check_decode_flat(native, python, ids, reader.take(3), errors)

    streams = [StreamingDecoder(t, skip_special=skip_special, errors=errors) for t in (native, python)]
    texts, pos, all_ok = ["", ""], 0, True
    while pos < len(ids):
        size = 1 + reader.below(8)
        part, pos = ids[pos : pos + size], pos + size
        if size == 1 and reader.byte() & 1:
            results = [outcome(s.step, part[0]) for s in streams]
        else:
            results = [outcome(s.feed, container(kind, part)) for s in streams]
        # messages: with numpy ids they differ (Tokenizer.decode_bytes names valid numpy ids as bad, isinstance(i, int);
        # the reference path drops special ids before that, the native one does not): reported, types still compared
        check_same("stream step/feed", results[0], results[1], (errors, skip_special, ids, part), messages=False)
        check_same("stream pending", ("ok", streams[0].pending), ("ok", streams[1].pending), (ids, part))
        for i, result in enumerate(results):
            texts[i] += result[1] if result[0] == "ok" else ""
        all_ok &= results[0][0] == "ok"
    results = [outcome(s.flush) for s in streams]
    check_same("stream flush", results[0], results[1], (errors, skip_special, ids))
    if results[0][0] == "ok" and all_ok and errors == "replace":
        kept = [i for i in ids if not (skip_special and native.is_special(i))]
        expected = native.decode(kept)
        if texts[0] + results[0][1] != expected:
            raise AssertionError(f"streamed text != decode(ids) for {ids!r} (skip_special={skip_special})")


def seeds():
    """Ids of real text (multilingual, so that UTF-8 sequences span tokens), cut into short runs."""
    native, _ = tokenizers()
    out = []
    for doc in fuzzlib.corpus_docs("multi_udhr", 40, 400) + [t for t in fuzzlib.adversarial_texts(200)[::60]]:
        ids = native.encode_ordinary(doc)[:40]
        for flags in (0, 9, 0x11):
            body = b"".join(((i << 3) | 1).to_bytes(3, "little") for i in ids)
            out.append(bytes([flags, len(ids)]) + body + bytes(range(1, 40)))
    return out


if __name__ == "__main__":
    tokenizers()
    fuzzlib.main(test_one_input, seeds, "decode")
    sys.exit(0)
