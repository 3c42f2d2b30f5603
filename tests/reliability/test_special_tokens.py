"""Special-token injection: text that spells any special token of the loaded vocabulary never yields a special id
unless the caller allowed it, in the library, the CLI and both pipelines (GUIDE rule 7: the library refuses such
text by default, the bulk pipelines encode it as ordinary text, only an explicit allow list makes it a control
token)."""

from __future__ import annotations

import contextlib
import io
import json
import unicodedata
from functools import cache

import pytest
from conftest import corpus, data_path, ours_openai

import bpe_core
from bpe_core import Tokenizer
from pipeline.cli import main
from pipeline.encode.readback import iter_documents
from pipeline.train.counts_files import load_counts

from .lib import FULL, write_jsonl

AREA = "special-token injection"
VOCABS = (
    "r50k",
    "cl100k",
    "o200k",
    "gguf:gpt-2",
    "gguf:llama-bpe",
    "gguf:qwen2",
    "gguf:deepseek-coder",
    "hf:anthropic",
    "trained",
)


@cache
def vocabulary(name: str) -> Tokenizer:
    if name.startswith("gguf:"):
        return Tokenizer.from_file(str(data_path("llamacpp", f"ggml-vocab-{name[5:]}.gguf")))
    if name == "hf:anthropic":
        return Tokenizer.from_file(str(data_path("hf", "anthropic-0.20.0.tokenizer.json")))
    if name == "trained":
        counts = bpe_core.count_chunks(corpus("fortunes_multi", 300), "cl100k")
        return bpe_core.train(counts, 400, special_tokens=["<|endoftext|>", "<|fim_prefix|>", "[PAD]", "<s>"])
    return ours_openai(name)


def spellings(token: str) -> list[str]:
    """Texts that spell the token: alone, inside words, twice, after a space, before a newline, and fullwidth
    (NFKC folds fullwidth ASCII back: a normalizing vocabulary must not turn it into the control token)."""
    fullwidth = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in token)
    return [token, f"x{token}y", token * 2, f" {token}", f"{token}\n", f"<{token}>", fullwidth]


@pytest.mark.parametrize("name", VOCABS)
def test_library_never_yields_a_special_id_unless_allowed(name, reliability):
    tok = vocabulary(name)
    special_ids = set(tok.special_tokens.values())
    texts = tried = 0
    # an allow list of one token (and of all the others) compiles a matcher per token: every token in FULL, else a
    # sample of 24 (llama-bpe has 256 special tokens: 84 s for all of them on a loaded 2-core machine)
    checked = sorted(tok.special_tokens)
    checked = set(checked if FULL else checked[:: max(1, len(checked) // 24)])
    for token, token_id in sorted(tok.special_tokens.items()):
        for text in spellings(token):
            texts += 1
            tried += 1
            spelled = token in text
            for ids in (
                tok.encode_ordinary(text),
                tok.encode(text, disallowed_special=()),
                tok.encode_ordinary_batch([text])[0],
            ):
                assert not special_ids & set(ids), (name, token, text, ids)
            if spelled:  # the default refuses it, naming the token (tiktoken's message)
                with pytest.raises(ValueError, match="disallowed special token"):
                    tok.encode(text)
                with pytest.raises(ValueError, match="disallowed special token"):
                    tok.encode_batch(["fine", text])
                if token not in checked:
                    continue
                allowed = tok.encode(text, allowed_special={token})
                assert token_id in allowed, (name, token, text)  # the opt-in works
                others = set(tok.special_tokens) - {token}
                assert not (special_ids - {token_id}) & set(
                    tok.encode(text, allowed_special=others, disallowed_special=())
                )
            else:
                assert not special_ids & set(tok.encode(text))
    assert tried == texts > 0 and checked
    reliability.row(AREA, f"{name}: {len(special_ids)} special tokens x {len(spellings('x'))} spellings (inside words, "
                    "doubled, after a space, fullwidth NFKC look-alike)",
                    "library: encode refuses the text (ValueError naming the token); encode_ordinary, "
                    "encode(disallowed_special=()) and the batch calls give no special id; allowed_special={token} "
                    "gives its id and only its id", inputs=texts, allow_lists_checked=len(checked))  # fmt: skip


def test_python_reference_backend_follows_the_same_policy(reliability):
    tok = Tokenizer.from_tiktoken(str(data_path("tiktoken", "cl100k_base.tiktoken")), pretokenizer="cl100k",
                                  special_tokens=ours_openai("cl100k").special_tokens, backend="python")  # fmt: skip
    special_ids = set(tok.special_tokens.values())
    for token in tok.special_tokens:
        for text in spellings(token):
            assert not special_ids & set(tok.encode_ordinary(text) + tok.encode(text, disallowed_special=()))
    reliability.row(
        AREA,
        "cl100k with backend='python' (the reference), every special token spelled",
        "no special id from encode_ordinary or encode(disallowed_special=())",
    )


def _cli(*args) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([str(a) for a in args])
    return rc, out.getvalue()


def test_cli_encode_text_never_yields_a_special_id_unless_allowed(r50k_artifact, tmp_path, reliability):
    trained = tmp_path / "trained.bpe"
    vocabulary("trained").save(str(trained))
    tried = 0
    for path in (r50k_artifact, str(trained)):
        tok = Tokenizer.load(path)
        for token, token_id in tok.special_tokens.items():
            text = f"user text {token} more"
            rc, out = _cli("encode", "--tokenizer", path, "--text", text)
            assert rc == 0 and token_id not in map(int, out.split()), (token, out)
            rc, out = _cli("encode", "--tokenizer", path, "--text", text, "--allow-special")
            assert rc == 0 and token_id in map(int, out.split()), (token, out)
            tried += 1
    reliability.row(
        AREA,
        f"beam-bpe encode --text spelling each of {tried} special tokens (r50k, a trained vocabulary)",
        "CLI: ordinary ids by default; the control id only with --allow-special",
        inputs=tried,
    )


def _documents(tok: Tokenizer) -> list[str]:
    docs = []
    for token in sorted(tok.special_tokens):
        docs += [f"please ignore {token} and go on", token, f"{token}{token}x"]
    return docs


@pytest.mark.parametrize("name", ["gguf:qwen2", "trained"])
def test_encode_pipeline_gives_no_special_id_unless_special_tokens_allowed(name, tmp_path, reliability):
    tok = vocabulary(name)
    if name == "trained":
        path = tmp_path / "trained.bpe"
        tok.save(str(path))
    else:
        path = data_path("llamacpp", f"ggml-vocab-{name[5:]}.gguf")
    docs = _documents(tok)
    source = write_jsonl(tmp_path / "in" / "docs.jsonl", docs)
    special_ids = set(tok.special_tokens.values())
    got = {}
    for policy in ("ordinary", "allowed"):
        out = tmp_path / policy
        args = [
            "encode",
            "--tokenizer",
            path,
            "--input",
            source,
            "--out",
            out,
            "--range-bytes",
            4096,
            "--special-tokens",
            policy,
        ]
        assert main([str(a) for a in args]) == 0
        got[policy] = [ids.tolist() for _, ids in iter_documents(str(out))]
    assert got["ordinary"] == [tok.encode_ordinary(d) for d in docs]
    assert not special_ids & {i for ids in got["ordinary"] for i in ids}
    assert got["allowed"] == [tok.encode(d, allowed_special="all") for d in docs]
    assert special_ids == {i for ids in got["allowed"] for i in ids} & special_ids  # every control id appears
    reliability.row(AREA, f"encode pipeline, {name} ({len(special_ids)} special tokens), {len(docs)} documents "
                    "spelling them", "shards hold ordinary ids by default (no special id); --special-tokens allowed "
                    "gives exactly the library's encode(allowed_special='all')", inputs=len(docs))  # fmt: skip


def test_train_pipeline_counts_special_token_text_as_ordinary_text(tmp_path, reliability):
    specials = ["<|endoftext|>", "<|pad|>"]
    docs = [f"document {i} ends with <|endoftext|> and <|pad|><|pad|>" for i in range(200)] + corpus(
        "fortunes_multi", 200
    )
    source = write_jsonl(tmp_path / "in" / "docs.jsonl", docs)
    out = tmp_path / "out"
    args = ["train", "--input", source, "--vocab-size", 320, "--out", out] + [
        a for s in specials for a in ("--special-token", s)
    ]
    assert main([str(a) for a in args]) == 0
    counts, _ = load_counts(str(out / "counts"))
    assert dict(counts) == dict(bpe_core.count_chunks(docs, "cl100k"))  # the text counted as text, nothing removed
    tok = Tokenizer.load(str(out / "tokenizer.bpe"))
    special_ids = {tok.special_tokens[s] for s in specials}
    assert special_ids == {318, 319} and not any(special_ids & set(tok.encode_ordinary(d)) for d in docs)
    assert not {s.encode() for s in specials} & set(tok.vocab.values()), "a special token's text became a BPE token"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["documents_counted"] == len(docs)
    reliability.row(
        AREA,
        "train pipeline on 200 documents spelling its own special tokens",
        "counted as ordinary text (counts equal bpe_core.count_chunks); the trained vocabulary never "
        "produces a special id from that text, and no BPE token spells a special token",
        inputs=len(docs),
    )


def test_nfkc_look_alikes_do_not_become_control_tokens(reliability):
    tok = vocabulary("hf:anthropic")
    assert tok.pretokenizer.normalizer == "NFKC"
    special_ids = set(tok.special_tokens.values())
    for token in tok.special_tokens:
        fullwidth = spellings(token)[-1]
        assert unicodedata.normalize("NFKC", fullwidth) == token
        assert not special_ids & set(tok.encode(fullwidth)), token  # not refused either: it is not the token
    reliability.row(AREA, "hf:anthropic (NFKC): fullwidth spellings that normalize to each special token",
                    "encoded as ordinary text even by encode() with the default policy: special tokens match the raw "
                    "text, before normalization")  # fmt: skip
