"""Our encoder against tiktoken on the OpenAI vocabularies, built offline from the shared rank files."""

from __future__ import annotations

import pytest
from conftest import CORPORA, adversarial_cases, corpus, ours_openai, tiktoken_openai

PRESETS = ("r50k", "cl100k", "o200k")


def test_known_ids():
    # Facts from the shared data's README (independent of any encoder here).
    assert ours_openai("cl100k").encode("hello world") == [15339, 1917]
    assert ours_openai("o200k").encode("hello world") == [24912, 2375]
    assert ours_openai("r50k").encode("hello world") == [31373, 995]


@pytest.mark.parametrize("preset", ("r50k", "p50k", "cl100k", "o200k"))
def test_adversarial_cases_match_tiktoken(preset):
    ours, ref = ours_openai(preset), tiktoken_openai(preset)
    compared = 0
    for case_id, text in adversarial_cases():
        if isinstance(text, bytes):
            continue  # tiktoken has no public bytes encoder; bytes round-trips are tested in test_encode
        assert ours.encode_ordinary(text) == ref.encode_ordinary(text), case_id
        assert ours.encode(text, disallowed_special=()) == ref.encode(text, disallowed_special=()), case_id
        compared += 1
    assert compared > 3000


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name", CORPORA)
def test_corpus_documents_match_tiktoken(preset, name):
    ours, ref = ours_openai(preset), tiktoken_openai(preset)
    docs = corpus(name, 2000)
    expected = ref.encode_ordinary_batch(docs, num_threads=1)
    for i, (doc, ids) in enumerate(zip(docs, expected, strict=True)):
        assert ours.encode_ordinary(doc) == ids, f"{name} document {i}"


@pytest.mark.parametrize("preset", PRESETS)
def test_special_tokens_match_tiktoken(preset):
    ours, ref = ours_openai(preset), tiktoken_openai(preset)
    text = "a<|endoftext|>b <|endoftext|><|endoftext|>"
    assert ours.encode(text, allowed_special="all") == ref.encode(text, allowed_special="all")
    assert ours.encode(text, allowed_special={"<|endoftext|>"}) == ref.encode(text, allowed_special={"<|endoftext|>"})
    with pytest.raises(ValueError, match="disallowed special token '<|endoftext|>'") as ours_error:
        ours.encode(text)
    with pytest.raises(ValueError):
        ref.encode(text)
    assert "allowed_special" in str(ours_error.value)


@pytest.mark.parametrize("preset", PRESETS)
def test_lone_surrogates_are_replaced_as_tiktoken_does(preset):
    ours, ref = ours_openai(preset), tiktoken_openai(preset)
    for text in ["\ud800", "a\udfffb", "\ud83d\ude00 pair written as two code units", "x\udc80"]:
        assert ours.encode(text) == ref.encode(text)
