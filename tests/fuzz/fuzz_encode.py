"""Fuzz target (b): the encoder on arbitrary text and bytes, native == python, and decode(encode(x)) == x.

Four vocabularies of different kinds: cl100k (rank-only .tiktoken, with its special tokens), Llama 3 (GGUF
merge list with ignore_merges and control tokens), a Hugging Face tokenizer.json (NFKC normalizer, added
tokens), and a small merge list trained here whose native cache is bounded below its seed image (``cache_limit``
1), so that the piece table is reset every few inputs and most short pieces spill (more than 4 tokens): the piece
table's seeding, growth, resets and spill arena, and the merges of new pieces, under the sanitizers.

The input chooses the vocabulary, the call (encode_ordinary, encode with all specials allowed, encode with the
default disallowed specials, encode_batch over several threads, with the flat API on the same documents:
lists, Arrow arrays of their bytes, decode_flat) and how its payload becomes text (bytes, UTF-8 with invalid bytes,
UTF-16 with lone surrogates, or any code point).

Oracles: the same ids (or the same documented exception) on both backends; for cl100k, tiktoken's ids; the ids
decode back to the input (to its NFKC form for the normalized vocabulary; lone surrogates of str input become
U+FFFD, as in tiktoken); encode_batch equals one encode per text.

    python tests/fuzz/fuzz_encode.py -runs=10000 -max_len=2048
"""

from __future__ import annotations

import sys
import unicodedata
from functools import cache

import fuzzlib
from fuzzlib import Reader, check_same, outcome, text_of

VOCABS = ("cl100k", "llama3", "hf", "tiny")


@cache
def tokenizers(name: str):
    from bpe_core import Tokenizer

    if name == "cl100k":
        native = fuzzlib.openai_tokenizer("cl100k")
    elif name == "llama3":
        native = Tokenizer.from_file(str(fuzzlib.data_path("llamacpp", "ggml-vocab-llama-bpe.gguf")))
    elif name == "tiny":
        import bpe_core

        counts = bpe_core.count_chunks(fuzzlib.corpus_docs("fortunes_multi", 200, 2000), "cl100k")
        trained = bpe_core.train(counts, 400)
        native = Tokenizer(trained.vocab, merges=trained.merge_ids, pretokenizer="cl100k")
        if native.backend == "native":
            native._encoder().cache_limit = 1  # the seed image's size: reset at 3/4 of it
    else:
        native = Tokenizer.from_file(str(fuzzlib.data_path("hf", "anthropic-0.20.0.tokenizer.json")))
    return native, fuzzlib.python_twin(native)


@cache
def tiktoken_cl100k():
    import json

    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    table = json.loads(fuzzlib.data_path("tiktoken", "encodings.json").read_text())["cl100k_base"]
    ranks = load_tiktoken_bpe(str(fuzzlib.data_path("tiktoken", table["rank_file"])))
    return tiktoken.Encoding("cl100k_base", pat_str=table["pat_str"], mergeable_ranks=ranks,
                             special_tokens=table["special_tokens"])  # fmt: skip


def expected_text(tok, text: str | bytes) -> str:
    """What decode(encode(text)) must give: lone surrogates of str input become U+FFFD, bytes stay byte-exact
    (as surrogateescape), and a normalizer applies (NFKC of the whole equals NFKC of NFKC-ed segments)."""
    if isinstance(text, bytes):
        out = text.decode("utf-8", "surrogateescape")
    else:
        out = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return unicodedata.normalize(tok.pretokenizer.normalizer, out) if tok.pretokenizer.normalizer else out


def decoded_text(tok, ids: list[int]) -> str:
    text = tok.decode_bytes(ids).decode("utf-8", "surrogateescape")
    return unicodedata.normalize(tok.pretokenizer.normalizer, text) if tok.pretokenizer.normalizer else text


def test_one_input(data: bytes) -> None:
    reader = Reader(data)
    flags = reader.byte()
    name, call, mode = VOCABS[flags % 4], (flags >> 2) % 4, (flags >> 4) % 4
    native, python = tokenizers(name)
    payload = reader.rest()
    text = text_of(mode, payload)
    if call == 3:  # encode_batch on several threads: pieces of the text as documents, in order
        cuts = sorted({c % (len(text) + 1) for c in payload[:6]})
        docs = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        got = outcome(native.encode_batch, docs, num_threads=1 + flags % 4, disallowed_special=())
        check_same("encode_batch", got, outcome(lambda: [python.encode_ordinary(d) for d in docs]), docs)
        if got[0] == "ok":
            check_flat(native, docs, got[1], 1 + flags % 4, flags)
        return
    if call == 0:
        kwargs: dict = {}
        fn = "encode_ordinary"
    elif call == 1:
        kwargs, fn = {"allowed_special": "all"}, "encode"
    else:
        kwargs, fn = {}, "encode"
    got = outcome(getattr(native, fn), text, **kwargs)
    check_same(fn, got, outcome(getattr(python, fn), text, **kwargs), (name, text))
    if got[0] != "ok":
        return
    ids = got[1]
    if name == "cl100k" and call == 0 and isinstance(text, str):
        reference = tiktoken_cl100k().encode_ordinary(text)
        if ids != reference:
            raise AssertionError(f"cl100k ids {ids} != tiktoken {reference} for {text!r}")
    if decoded_text(native, ids) != expected_text(native, text):
        raise AssertionError(f"{name}: decode(encode(x)) != x for {text!r}: ids {ids}")


def is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def flat_lists(ids, offsets) -> list[list[int]]:
    bounds = offsets.tolist()
    return [ids[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def arrow_of(data: list[bytes], flags: int):
    """The documents' bytes as an Arrow string array built from its buffers (pyarrow checks no UTF-8 there): large
    offsets with flag 0x40; with 0x80 a slice that starts one element in (an array offset), in two chunks."""
    import numpy as np
    import pyarrow as pa

    kind, width = (pa.large_string(), np.int64) if flags & 0x40 else (pa.string(), np.int32)
    items = [b"skipped", *data] if flags & 0x80 else data
    offsets = np.zeros(len(items) + 1, dtype=width)
    np.cumsum([len(d) for d in items], out=offsets[1:])
    array = pa.Array.from_buffers(kind, len(items), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(items))])
    array = array[1:] if flags & 0x80 else array
    if flags & 0x80 and len(array) > 1:
        return pa.chunked_array([array[:1], array[1:]])
    return array


def check_flat(native, docs: list, expected: list[list[int]], threads: int, flags: int) -> None:
    """The flat API on the same documents: as a list (encode_ordinary_flat and encode_flat equal the lists), as an
    Arrow array of their bytes (the same ids; invalid UTF-8 raises InvalidTextError naming the first bad document),
    and decode_flat back (decode of each document's ids)."""
    from bpe_core import InvalidTextError

    got = outcome(lambda: flat_lists(*native.encode_ordinary_flat(docs, num_threads=threads)))
    check_same("encode_ordinary_flat", got, ("ok", expected), docs)
    got = outcome(lambda: flat_lists(*native.encode_flat(docs, disallowed_special=(), num_threads=threads)))
    check_same("encode_flat", got, ("ok", expected), docs)
    data = [d if isinstance(d, bytes) else d.encode("utf-8", "surrogatepass") for d in docs]
    bad = next((i for i, d in enumerate(data) if not is_utf8(d)), None)
    try:
        arrow = flat_lists(*native.encode_ordinary_flat(arrow_of(data, flags), num_threads=threads))
    except InvalidTextError as e:
        if e.index != bad:
            raise AssertionError(f"Arrow input: InvalidTextError at {e.index}, first bad text {bad}: {docs!r}") from e
    else:
        if bad is not None or arrow != expected:
            raise AssertionError(f"Arrow input: {arrow} for {docs!r} (first bad text {bad}), lists {expected}")
    ids, offsets = native.encode_ordinary_flat(docs, num_threads=threads)
    texts = native.decode_flat(ids, offsets)
    if texts != [native.decode(i) for i in expected]:
        raise AssertionError(f"decode_flat {texts!r} != decode of each document for {docs!r}")


def seeds():
    """Real text: adversarial cases (cut to 1 KiB), short slices of every corpus, under each vocabulary and call."""
    texts = [fuzzlib.as_bytes(t) for t in fuzzlib.adversarial_texts(1024)[::7]]
    for corpus in ("multi_udhr", "code_cpython", "fortunes_multi", "docs_python_rst"):
        texts += [d.encode() for d in fuzzlib.corpus_docs(corpus, 12, 600)]
    texts += [b"<|endoftext|> hi <|fim_prefix|>", b"<|begin_of_text|>x<|eot_id|>", b"<EOT><META> caf\xc3\xa9"]
    out = [bytes([(i % 4) | (i % 4) << 2 | 1 << 4]) + t for i, t in enumerate(texts)]
    # the flat API (call 3), over Arrow buffers of both offset widths, sliced and chunked (flags 0x40, 0x80)
    return out + [bytes([(i % 4) | 3 << 2 | (i % 4) << 4 | (i % 4) << 6]) + t for i, t in enumerate(texts[::3])]


if __name__ == "__main__":
    for vocab in VOCABS:
        tokenizers(vocab)
    tiktoken_cl100k()
    fuzzlib.main(test_one_input, seeds, "encode")
    sys.exit(0)
