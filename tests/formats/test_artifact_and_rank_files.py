"""The own artifact and .tiktoken files: round trips, determinism, and malformed files refused with file:line."""

from __future__ import annotations

import base64
import hashlib
import os
import re

import pytest
from conftest import corpus, openai_encoding, ours_openai

import bpe_core
from bpe_core import Tokenizer, TokenizerFileError
from bpe_core.formats.artifact import dumps_artifact


@pytest.fixture(scope="module")
def trained() -> Tokenizer:
    pre = bpe_core.PreTokenizer.from_spec("cl100k", normalizer="NFC")
    counts = bpe_core.count_chunks(corpus("en_bible_kjv", 40), pre)
    return bpe_core.train(counts, 600, special_tokens=["<|endoftext|>", "<|pad|>"], name="kjv")


SAMPLE = "In the beginning God created the heaven and the earth. Ünïcödé ☕ <|endoftext|>"


def _same_tokenizer(a: Tokenizer, b: Tokenizer) -> None:
    assert a.vocab == b.vocab and a.merge_ids == b.merge_ids
    assert a.special_tokens == b.special_tokens and a.added_tokens == b.added_tokens
    assert a.pretokenizer == b.pretokenizer and a.ignore_merges == b.ignore_merges
    assert a.encode(SAMPLE, allowed_special="all") == b.encode(SAMPLE, allowed_special="all")


def test_artifact_round_trip_is_exact_and_byte_identical(trained, tmp_path):
    path = tmp_path / "tokenizer.bpe"
    trained.save(str(path))
    loaded = Tokenizer.load(str(path))
    _same_tokenizer(trained, loaded)
    assert loaded.pretokenizer.normalizer == "NFC"
    assert dumps_artifact(loaded) == path.read_bytes()
    assert Tokenizer.from_file(str(path)).encode(SAMPLE, disallowed_special=()) == trained.encode(
        SAMPLE, disallowed_special=()
    )


def test_artifact_records_versions_and_a_hash(trained):
    text = dumps_artifact(trained).decode()
    for key in ("format_version 1", "beam_bpe_version", "regex_version", "regex_unicode_version", "pretokenizer "):
        assert key in text
    body, _, digest = text.rpartition("sha256 ")
    assert hashlib.sha256(body.encode()).hexdigest() == digest.strip()


def test_rank_only_vocabulary_round_trips_through_the_artifact(tmp_path):
    tok = ours_openai("r50k")
    path = tmp_path / "r50k.bpe"
    tok.save(str(path))
    loaded = Tokenizer.load(str(path))
    assert loaded.kind == "ranks" and loaded.encode("hello world") == [31373, 995]
    assert loaded.special_tokens == {"<|endoftext|>": 50256}


@pytest.mark.parametrize("preset", ["r50k", "cl100k", "o200k"])
def test_to_tiktoken_writes_the_original_rank_file(preset, tmp_path):
    out = tmp_path / "out.tiktoken"
    ours_openai(preset).to_tiktoken(str(out))
    with open(openai_encoding(preset)["path"], "rb") as f:
        assert out.read_bytes() == f.read()


def _corrupt(tmp_path, data: bytes, edit) -> str:
    text = edit(data.decode())
    body = text[: text.rfind("sha256 ")]
    if "KEEP_HASH" not in text:
        text = body + f"sha256 {hashlib.sha256(body.encode()).hexdigest()}\n"
    path = tmp_path / "bad.bpe"
    path.write_text(text.replace("KEEP_HASH", ""))
    return str(path)


def _first_vocab_line(text: str, tid: int) -> str:
    return re.search(rf"^{tid} \S+$", text, flags=re.M).group()


@pytest.mark.parametrize(
    "edit, message, line",
    [
        (lambda t: t.replace("format_version 1", "format_version 9"), "format version 9 is not supported", 2),
        (lambda t: t.replace("kind merges", "kind magic"), "kind 'magic'", 4),
        (lambda t: t.replace(_first_vocab_line(t, 65), "65 QQ=*="), "bad vocab entry", None),
        (lambda t: t.replace(_first_vocab_line(t, 66), "66 QQ=="), "duplicate token", None),
        (lambda t: t.replace(_first_vocab_line(t, 66), "65 Qg=="), "duplicate token id", None),
        (lambda t: re.sub(r"^merges (\d+)\n(\d+) (\d+)$", r"merges \1\n\2 99999", t, flags=re.M), "not a token", None),
        (lambda t: re.sub(r"^vocab \d+$", "vocab 5999999", t, flags=re.M), "fewer lines", None),
    ],
)
def test_malformed_artifacts_are_refused_naming_file_and_line(trained, tmp_path, edit, message, line):
    path = _corrupt(tmp_path, dumps_artifact(trained), edit)
    with pytest.raises(TokenizerFileError, match=message) as err:
        Tokenizer.load(path)
    assert err.value.path == path and path in str(err.value)
    if line is not None:
        assert err.value.line == line and f"{path}:{line}" in str(err.value)


def test_wrong_hash_and_truncation_are_refused(trained, tmp_path):
    data = dumps_artifact(trained)
    changed = tmp_path / "changed.bpe"
    changed.write_bytes(data.replace(b"\n0 AA==\n", b"\n0 AQ==\n", 1))
    assert changed.read_bytes() != data
    with pytest.raises(TokenizerFileError, match="sha256 does not match"):
        Tokenizer.load(str(changed))
    for cut in (len(data) // 2, len(data) - 10, 30):
        truncated = tmp_path / f"cut{cut}.bpe"
        truncated.write_bytes(data[:cut])
        with pytest.raises(TokenizerFileError, match="truncated|sha256|version"):
            Tokenizer.load(str(truncated))


def test_malformed_tiktoken_files_name_the_line(tmp_path):
    good = base64.b64encode(b"a").decode()
    cases = {
        "bad entry": f"{good} 0\nYQ 1\n",  # base64 without its padding: tiktoken refuses it too
        "rank 0 appears twice": f"{good} 0\n{base64.b64encode(b'b').decode()} 0\n",
        "expected 'base64 rank'": f"{good} 0\n{good}\n",
    }
    for message, text in cases.items():
        path = tmp_path / "bad.tiktoken"
        path.write_text(text)
        with pytest.raises(TokenizerFileError, match=message) as err:
            Tokenizer.from_tiktoken(str(path), pretokenizer="cl100k")
        assert err.value.line == 2


def test_from_file_recognises_formats_by_content(trained, tmp_path):
    own = tmp_path / "no-extension"
    trained.save(str(own))
    assert Tokenizer.from_file(str(own)).vocab == trained.vocab
    rank_file = openai_encoding("cl100k")["path"]
    assert Tokenizer.from_file(rank_file).encode("hello world") == [15339, 1917]  # OpenAI's file: known pre-tokenizer
    assert Tokenizer.from_file(rank_file, pretokenizer="cl100k").encode("hello world") == [15339, 1917]
    ranks = tmp_path / "ranks.tiktoken"  # any other rank file: the pre-tokenizer must be given
    trained.to_tiktoken(str(ranks))
    with pytest.raises(ValueError, match="pretokenizer"):
        Tokenizer.from_file(str(ranks))
    junk = tmp_path / "junk.txt"
    junk.write_text("this is not a tokenizer\n")
    with pytest.raises(TokenizerFileError, match="not a tokenizer file"):
        Tokenizer.from_file(str(junk))


def test_same_corpus_gives_a_byte_identical_artifact():
    docs = corpus("fortunes_multi", 300)
    first = bpe_core.train(bpe_core.count_chunks(docs, "o200k"), 400)
    second = bpe_core.train(bpe_core.count_chunks(list(reversed(docs)), "o200k"), 400)
    assert dumps_artifact(first) == dumps_artifact(second)


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_saved_files_get_the_permissions_of_the_umask(tmp_path, umask):
    from bpe_core._io import write_bytes_atomic

    old = os.umask(umask)
    try:
        write_bytes_atomic(tmp_path / "tokenizer.bpe", b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "tokenizer.bpe").stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.slow
@pytest.mark.parametrize("name", ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"])
def test_openai_rank_files_are_recognised_with_tiktokens_pre_tokenizer_and_special_tokens(name):
    """The shared encodings.json (read off tiktoken_ext) says what tiktoken pairs each published file with."""
    import json

    from conftest import data_path

    entry = json.loads(data_path("tiktoken", "encodings.json").read_text())[name]
    tok = Tokenizer.from_tiktoken(str(data_path("tiktoken", entry["rank_file"])))
    assert tok.name == name and tok.pretokenizer.patterns == (entry["pat_str"],)
    assert tok.special_tokens == entry["special_tokens"]
    assert Tokenizer.from_file(str(data_path("tiktoken", entry["rank_file"]))).special_tokens == entry["special_tokens"]
    assert (
        Tokenizer.from_tiktoken(str(data_path("tiktoken", entry["rank_file"])), special_tokens={}).special_tokens == {}
    )


def test_a_cut_openai_file_warns_and_an_unknown_rank_file_needs_a_pre_tokenizer(tmp_path):
    from conftest import data_path

    data = data_path("tiktoken", "r50k_base.tiktoken").read_bytes()
    cut = tmp_path / "r50k_base.tiktoken"
    cut.write_bytes(data[: data.index(b"\n", len(data) // 2) + 1])
    with pytest.warns(UserWarning, match="named like OpenAI's r50k_base.tiktoken but is not that file"):
        assert len(Tokenizer.from_tiktoken(str(cut), pretokenizer="r50k").vocab) < 50256
    with pytest.raises(ValueError, match="carries no pre-tokenizer"), pytest.warns(UserWarning):
        Tokenizer.from_tiktoken(str(cut))
