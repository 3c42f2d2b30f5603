"""The C++ encoder against the Python reference on loaded vocabularies: llama.cpp GGUF files and a tokenizer.json."""

from __future__ import annotations

import pytest
from conftest import FULL, adversarial_cases, corpus, data_path

from bpe_core import Tokenizer

FILES = {
    "gguf-gpt-2": ("llamacpp", "ggml-vocab-gpt-2.gguf"),
    "gguf-llama-bpe": ("llamacpp", "ggml-vocab-llama-bpe.gguf"),
    "gguf-qwen2": ("llamacpp", "ggml-vocab-qwen2.gguf"),
    "gguf-deepseek-coder": ("llamacpp", "ggml-vocab-deepseek-coder.gguf"),
    "hf-anthropic": ("hf", "anthropic-0.20.0.tokenizer.json"),
}


@pytest.fixture(scope="module", params=sorted(FILES))
def loaded(request):
    path = str(data_path(*FILES[request.param]))
    return request.param, Tokenizer.from_file(path), Tokenizer.from_file(path, backend="python")


def test_corpora_and_adversarial_cases_equal_reference(loaded):
    name, ours, ref = loaded
    assert ours.backend == "native" and ref.backend == "python"
    # All but deepseek-coder run through the hand-written pre-tokenizers (qwen2 with its added tokens found by the core,
    # anthropic with its NFKC normalizer run in Python first); deepseek-coder's list of patterns through the compiled
    # matcher (bpe_core/pretokenize/compiler.py: kind "rx:N")
    fast = {"gguf-gpt-2": "r50k", "gguf-llama-bpe": "llama3", "gguf-qwen2": "qwen2", "hf-anthropic": "r50k"}
    kind = ours.pretokenizer.native_kind
    assert kind == fast[name] if name in fast else kind.startswith("rx:"), (name, kind)
    texts = [t for _, t in adversarial_cases()]
    if not FULL:  # the reference is slow: a sample of the cases, the long ones included
        texts = texts[:300] + [t for t in texts if len(t) > 5000]
    texts += [
        d[:20_000] for c in ("multi_udhr", "code_cpython", "fortunes_multi") for d in corpus(c, 200 if FULL else 8)
    ]
    for kwargs in ({"disallowed_special": ()}, {"allowed_special": "all"}):
        expected = [ref.encode(t, **kwargs) for t in texts]
        assert ours.encode_batch(texts, **kwargs) == expected, name
        assert [ours.encode(t, **kwargs) for t in texts[:50]] == expected[:50], name
    ids = ours.encode_ordinary_batch(texts[:100])
    assert [ours.decode_bytes(i) for i in ids] == [ref.decode_bytes(i) for i in ids]
