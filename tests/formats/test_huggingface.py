"""Hugging Face tokenizer.json: our loader and exporter against the `tokenizers` package on the same files."""

from __future__ import annotations

import json
import random
from functools import cache

import pytest
import tokenizers
from conftest import CORPORA, FULL, adversarial_cases, corpus, data_path

from bpe_core import Tokenizer, TokenizerFileError, count_chunks, train
from bpe_core.formats.hf_components import pretokenizer_from_hf
from bpe_core.model.added_tokens import AddedTokenFlags
from bpe_core.model.bytelevel import bytes_to_token_string, token_string_to_bytes
from bpe_core.pretokenize.pretokenizer import PreTokenizer

SAMPLE_CHARS = 400_000  # per corpus in the default run; BEAM_BPE_FULL=1 compares every document (<= 2000)


@cache
def anthropic():
    path = str(data_path("hf", "anthropic-0.20.0.tokenizer.json"))
    return Tokenizer.from_huggingface(path), tokenizers.Tokenizer.from_file(path)


def hf_ids(hf: tokenizers.Tokenizer, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]


def str_cases() -> list[tuple[str, str]]:
    """Adversarial str cases; lone surrogates (which `tokenizers` cannot take) replaced by U+FFFD as we do."""
    out = []
    for case_id, text in adversarial_cases():
        if isinstance(text, str):
            out.append((case_id, text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")))
    return out


def sample(name: str) -> list[str]:
    docs = corpus(name, 2000)
    if FULL:
        return docs
    out, size = [], 0
    for doc in docs:
        if size > SAMPLE_CHARS:
            break
        out.append(doc)
        size += len(doc)
    return out


def assert_same_ids(ours: Tokenizer, hf: tokenizers.Tokenizer, texts: list[str], labels: list[str]) -> int:
    expected = hf_ids(hf, texts)
    got = ours.encode_batch(texts, allowed_special="all")
    for label, text, a, b in zip(labels, texts, got, expected, strict=True):
        assert a == b, f"{label}: {text[:80]!r}"
    return len(texts)


# ------------------------------------------------------------------------------------------ the shared file
def test_shared_file_is_read_as_described():
    ours, _ = anthropic()
    info = ours.describe()
    assert info["normalizer"] == "NFKC"
    assert info["n_vocab"] == 65000 and info["merges"] == 64739
    assert info["bpe_tokens"] == 65000 - 5  # ids 0-4 belong to the special tokens
    assert info["special_tokens"] == {"<EOT>": 0, "<META>": 1, "<META_START>": 2, "<META_END>": 3, "<SOS>": 4}
    assert info["family"].startswith("huggingface")


def test_shared_file_adversarial_cases_match_tokenizers():
    ours, hf = anthropic()
    cases = str_cases()
    assert assert_same_ids(ours, hf, [t for _, t in cases], [c for c, _ in cases]) > 3000
    plain = [t for _, t in cases if not any(s in t for s in ours.special_tokens)]
    assert [ours.encode_ordinary(t) for t in plain[:500]] == hf_ids(hf, plain[:500])


def test_shared_file_special_tokens_follow_the_policy():
    ours, hf = anthropic()
    text = "a<EOT>b <META_START>x<META_END>"
    assert ours.encode(text, allowed_special="all") == hf_ids(hf, [text])[0]
    with pytest.raises(ValueError, match="disallowed special token"):
        ours.encode(text)
    assert 0 not in ours.encode_ordinary(text) and 2 not in ours.encode_ordinary(text)


@pytest.mark.parametrize("name", CORPORA)
def test_shared_file_corpus_documents_match_tokenizers(name):
    ours, hf = anthropic()
    docs = sample(name)
    assert assert_same_ids(ours, hf, docs, [f"{name} document {i}" for i in range(len(docs))]) >= min(50, len(docs))


@pytest.mark.slow
def test_shared_file_round_trips_through_to_huggingface(tmp_path):
    ours, hf = anthropic()
    out = tmp_path / "tokenizer.json"
    ours.to_huggingface(str(out))
    exported = tokenizers.Tokenizer.from_file(str(out))
    texts = [t for _, t in str_cases()] + sample("multi_udhr")[:100]
    assert hf_ids(exported, texts) == hf_ids(hf, texts)
    again = Tokenizer.from_huggingface(str(out))
    assert (again.vocab, again.merge_ids, again.special_tokens) == (ours.vocab, ours.merge_ids, ours.special_tokens)
    assert again.pretokenizer == ours.pretokenizer


# ------------------------------------------------------------------------------------------ trained here
TRAIN_PRESETS = ("cl100k", "o200k", "r50k", "llama3", "qwen2", "deepseek-coder")


@cache
def trained(preset: str) -> Tokenizer:
    texts = corpus("en_bible_kjv", 40) + corpus("multi_udhr", 60) + corpus("code_cpython", 10)
    return train(count_chunks(texts, preset), 1500, special_tokens=["<|endoftext|>", "<|pad|>"])


@pytest.mark.parametrize("preset", TRAIN_PRESETS)
def test_trained_tokenizer_exported_gives_the_same_ids_in_tokenizers(preset, tmp_path):
    ours = trained(preset)
    ours.to_huggingface(str(tmp_path / "tokenizer.json"))
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    cases = str_cases()
    docs = sample("docs_python_rst")[:20] + sample("multi_udhr")[:60] + ["a<|endoftext|>b<|pad|>"]
    texts = [t for _, t in cases] + docs
    assert assert_same_ids(ours, hf, texts, [c for c, _ in cases] + ["doc"] * len(docs)) > 3000


def test_trained_tokenizer_with_normalizer_and_added_tokens_round_trips(tmp_path):
    base = trained("llama3")
    ours = Tokenizer(
        base.vocab,
        merges=base.merge_ids,
        pretokenizer=PreTokenizer.from_spec("llama3", normalizer="NFC"),
        special_tokens=base.special_tokens,
        added_tokens={"<tool>": 1600, " spaced": 1601},
        token_flags={"<tool>": AddedTokenFlags(lstrip=True, rstrip=True)},
        ignore_merges=True,
    )
    ours.to_huggingface(str(tmp_path / "tokenizer.json"))
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    texts = ["x <tool> y", "Cafe\u0301 spaced <tool>\n\n<|pad|>", "  <tool>  <tool>", " spaced spaced"]
    assert assert_same_ids(ours, hf, texts, texts) == 4
    again = Tokenizer.from_huggingface(str(tmp_path / "tokenizer.json"))
    assert again.token_flags == ours.token_flags and again.added_tokens == ours.added_tokens


@pytest.mark.slow
@pytest.mark.parametrize("preset", ("cl100k", "r50k", "o200k") if FULL else ("cl100k",))
def test_rank_only_vocabulary_exported_matches_tiktoken(preset, tmp_path):
    """A .tiktoken vocabulary goes out with derived merges and ignore_merges (special ids with gaps kept)."""
    from conftest import ours_openai, tiktoken_openai

    ours_openai(preset).to_huggingface(str(tmp_path / "tokenizer.json"))
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    ref = tiktoken_openai(preset)
    texts = [t for _, t in str_cases()] + sample("multi_udhr")[:100] + ["a<|endoftext|>b<|endofprompt|>"]
    expected = [ref.encode(t, allowed_special="all") for t in texts]
    assert hf_ids(hf, texts) == expected and len(texts) > 3000


# ------------------------------------------------------------------------------------------ components
def byte_level_json(*, pre_tokenizer, normalizer=None, added=(), merges=(), model_extra=None) -> dict:
    """A tokenizer.json over the 256 byte tokens plus ``merges`` (pairs of byte strings)."""
    vocab = {bytes_to_token_string(bytes([b])): b for b in range(256)}
    merge_strings = []
    for left, right in merges:
        vocab.setdefault(bytes_to_token_string(left + right), len(vocab))
        merge_strings.append(f"{bytes_to_token_string(left)} {bytes_to_token_string(right)}")
    model = {
        "type": "BPE",
        "dropout": None,
        "unk_token": None,
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": False,
        "byte_fallback": False,
        "ignore_merges": False,
        "vocab": vocab,
        "merges": merge_strings,
        **(model_extra or {}),
    }
    added_tokens = [
        {
            "id": len(vocab) + i,
            "content": c,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": False,
            **flags,
        }
        for i, (c, flags) in enumerate(added)
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added_tokens,
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": model,
    }


def byte_level(use_regex=False) -> dict:
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": use_regex}


def split(pattern: str, behavior: str, invert: bool = False) -> dict:
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": behavior, "invert": invert}


def random_texts(n: int, seed: int = 7) -> list[str]:
    alphabet = "ab Z9 0\n\t.,!?-_'$+<=>^~|`é²½١\u0301\u00a0\u3000中文한국🦙\u2028x\r"
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(n)]


PRE_TOKENIZERS = {
    **{
        f"split-{b}-{inv}": split(r"\d+|[.,]", b, inv)
        for b in ("Isolated", "Contiguous", "MergedWithPrevious", "MergedWithNext")
        for inv in (False, True)
    },
    "digits-individual": {"type": "Digits", "individual_digits": True},
    "digits-contiguous": {"type": "Digits", "individual_digits": False},
    "punctuation-isolated": {"type": "Punctuation", "behavior": "Isolated"},
    "punctuation-contiguous": {"type": "Punctuation", "behavior": "Contiguous"},
    "string-split": {"type": "Split", "pattern": {"String": "a"}, "behavior": "MergedWithNext", "invert": False},
    "onig-bounded-plus": split(r"\p{N}{1,2}+", "Isolated"),
    "onig-dollar": split(r"\s+$", "Isolated"),
}


@pytest.mark.parametrize("name", sorted(PRE_TOKENIZERS))
def test_pre_tokenizer_pieces_match_tokenizers(name):
    spec = {"type": "Sequence", "pretokenizers": [PRE_TOKENIZERS[name], byte_level(use_regex=True)]}
    hf = tokenizers.Tokenizer.from_str(json.dumps(byte_level_json(pre_tokenizer=spec)))
    ours = PreTokenizer(pretokenizer_from_hf(spec))
    texts = random_texts(400) + [t for _, t in str_cases()[:600]] + ["a  \nb  \n", "1234567 89", "x\n \n"]
    for text in texts:
        expected = [token_string_to_bytes(p) for p, _ in hf.pre_tokenizer.pre_tokenize_str(text)]
        assert [p.encode() for p in ours.split(text)] == expected, (name, text)


def test_normalizer_sequences_compose(write):
    for normalizer, expected in (
        (None, None),
        ({"type": "NFC"}, "NFC"),
        ({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "NFKC"}]}, "NFKC"),
        ({"type": "Sequence", "normalizers": []}, None),
    ):
        spec = byte_level_json(pre_tokenizer=byte_level(True), normalizer=normalizer)
        ours = Tokenizer.from_file(write(spec))
        assert ours.pretokenizer.normalizer == expected
        hf = tokenizers.Tokenizer.from_str(json.dumps(spec))
        text = "ﬁ Ⅻ e\u0301 ①"
        assert ours.encode(text) == hf.encode(text, add_special_tokens=False).ids


FLAGGED = [
    ("<m>", {"lstrip": True}),
    ("<r>", {"rstrip": True}),
    ("<b>", {"lstrip": True, "rstrip": True}),
    ("ony", {"single_word": True}),
    ("ﬁx", {"normalized": True}),
    ("<s>", {"special": True}),
    ("<ss>", {"special": True, "normalized": True, "single_word": True}),
    ("ǆ", {"normalized": True}),
]


def test_added_token_flags_match_tokenizers(write):
    spec = byte_level_json(pre_tokenizer=byte_level(True), normalizer={"type": "NFKC"}, added=FLAGGED)
    ours = Tokenizer.from_file(write(spec))
    hf = tokenizers.Tokenizer.from_str(json.dumps(spec))
    assert ours.token_flags["<m>"] == AddedTokenFlags(lstrip=True)
    texts = [
        "Hi <m> there\t<m>\t<m>\u2000",
        "x  <r>  y<r>",
        " <b> <b>",
        "ony Anthony ony, _ony ony_",
        "fix ﬁx fix",
        "e\u0301 ǆ dž <s><ss> <ss>x",
        "<m><r><b>",
        "\u3000<b>\u3000",
    ] + random_texts(200, seed=3)
    rng = random.Random(5)
    texts += [
        "".join(
            rng.choice(["<m>", "<r>", "<b>", "ony", " ", "\t", "a", "ﬁx", "ǆ", "dž", "<ss>", "."]) for _ in range(12)
        )
        for _ in range(400)
    ]
    assert assert_same_ids(ours, hf, texts, texts) == len(texts)


def test_flagged_tokenizer_pickles(write):
    import pickle

    import cloudpickle

    spec = byte_level_json(pre_tokenizer=byte_level(True), normalizer={"type": "NFC"}, added=FLAGGED)
    tok = Tokenizer.from_file(write(spec))
    text = "Hi <m> there ony <b> ǆ <s>"
    for dumps, loads in ((pickle.dumps, pickle.loads), (cloudpickle.dumps, cloudpickle.loads)):
        copy = loads(dumps(tok))
        assert copy.token_flags == tok.token_flags and copy.family == tok.family
        assert copy.encode(text, allowed_special="all") == tok.encode(text, allowed_special="all")


def test_merges_in_both_spellings_and_ignore_merges(write):
    merges = [(b"a", b"b"), (b"ab", b"c"), (b" ", b"ab")]
    spec = byte_level_json(pre_tokenizer=byte_level(True), merges=merges, model_extra={"ignore_merges": True})
    as_pairs = json.loads(json.dumps(spec))
    as_pairs["model"]["merges"] = [m.split(" ") for m in spec["model"]["merges"]]
    first, second = Tokenizer.from_file(write(spec)), Tokenizer.from_file(write(as_pairs))
    assert first.merge_ids == second.merge_ids and first.ignore_merges
    hf = tokenizers.Tokenizer.from_str(json.dumps(as_pairs))
    texts = ["abc ab abcab cab", " abc"]
    assert assert_same_ids(second, hf, texts, texts) == 2


# ------------------------------------------------------------------------------------------ refused
@pytest.fixture
def write(tmp_path):
    """Write a spec (dict or raw text) as a new tokenizer.json under tmp_path; returns its path."""
    counter = iter(range(10**6))

    def write_spec(spec) -> str:
        path = tmp_path / f"tokenizer-{next(counter)}.json"
        path.write_text(spec if isinstance(spec, str) else json.dumps(spec), encoding="utf-8")
        return str(path)

    return write_spec


def refused(write, spec, *words: str) -> str:
    path = write(spec)
    with pytest.raises(TokenizerFileError) as err:
        Tokenizer.from_file(path)
    message = str(err.value)
    assert path in message
    for word in words:
        assert word in message, message
    return message


def test_unsupported_components_are_refused_by_name(write):
    ok = byte_level_json(pre_tokenizer=byte_level(True))
    refused(write, {**ok, "model": {**ok["model"], "type": "WordPiece"}}, "WordPiece")
    refused(write, {**ok, "model": {**ok["model"], "type": "Unigram"}}, "Unigram")
    refused(write, {**ok, "pre_tokenizer": {"type": "Metaspace", "replacement": "▁"}}, "Metaspace")
    refused(write, {**ok, "pre_tokenizer": {"type": "Whitespace"}}, "Whitespace")
    refused(write, {**ok, "normalizer": {"type": "Lowercase"}}, "Lowercase")
    refused(write, {**ok, "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "NFD"}]}}, "NFD")
    refused(write, {**ok, "decoder": {"type": "WordPiece"}}, "decoder", "WordPiece")
    refused(
        write,
        {**ok, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split("a", "Removed"), byte_level()]}},
        "Removed",
    )
    refused(write, {**ok, "pre_tokenizer": {**byte_level(True), "add_prefix_space": True}}, "add_prefix_space")
    refused(
        write,
        {**ok, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [byte_level(True), split("a", "Isolated")]}},
        "after ByteLevel",
    )
    refused(write, {**ok, "model": {**ok["model"], "dropout": 0.1}}, "dropout")
    refused(write, {**ok, "model": {**ok["model"], "continuing_subword_prefix": "##"}}, "continuing_subword_prefix")


def test_malformed_files_are_refused_with_the_problem(write):
    ok = byte_level_json(pre_tokenizer=byte_level(True), merges=[(b"a", b"b")])
    refused(write, {**ok, "model": {**ok["model"], "merges": ["a zz"]}}, "merge 0", "'zz'", "not in the vocab")
    refused(write, {**ok, "model": {**ok["model"], "merges": ["a b c"]}}, "exactly two")
    refused(write, {**ok, "model": {**ok["model"], "merges": ["a b", "a b"]}}, "listed twice")
    refused(write, {**ok, "model": {**ok["model"], "merges": ["b a"]}}, "not a token")
    refused(write, {**ok, "model": {**ok["model"], "vocab": {**ok["model"]["vocab"], "zz": 5}}}, "share the id 5")
    duplicate = json.dumps(ok).replace('"ab": 256', '"ab": 256, "ab": 257')
    refused(write, duplicate, "'ab' appears twice")
    spaced = Tokenizer.from_file(write({**ok, "model": {**ok["model"], "vocab": {**ok["model"]["vocab"], "a b": 257}}}))
    assert spaced.unreachable_tokens() == [257] and spaced.decode_bytes([257]) == b"a b"  # raw text: kept, unmade
    refused(write, {**ok, "added_tokens": [{"id": 1, "content": "x"}, {"id": 2, "content": "x"}]}, "listed twice")
    refused(write, '{"model": {"type": "BPE", ', "not valid JSON")
    gap = byte_level_json(pre_tokenizer=byte_level(True), added=[("<x>", {})])
    gap["added_tokens"][0]["id"] = 300
    assert tokenizers.Tokenizer.from_str(json.dumps(gap)).token_to_id("<x>") == 256  # the file's id is ignored
    refused(write, gap, "'<x>' is listed with id 300", "gives it id 256")


def test_tokenizer_with_flags_round_trips_through_the_artifact(tmp_path, write):
    spec = byte_level_json(pre_tokenizer=byte_level(True), added=[("<m>", {"lstrip": True})])
    tok = Tokenizer.from_file(write(spec))
    tok.save(str(tmp_path / "flags.bpe"))
    loaded = Tokenizer.load(str(tmp_path / "flags.bpe"))
    assert loaded.token_flags == tok.token_flags and loaded.token_flags["<m>"] == AddedTokenFlags(lstrip=True)
    assert loaded.encode("a  <m>b") == tok.encode("a  <m>b")
    assert tok.encode("a  <m>b") != Tokenizer.from_file(
        write(byte_level_json(pre_tokenizer=byte_level(True), added=[("<m>", {})]))
    ).encode("a  <m>b")  # the flag changes ids, so losing it would be a silent difference
    plain = Tokenizer.from_file(write(byte_level_json(pre_tokenizer=byte_level(True), added=[("<m>", {})])))
    plain.save(str(tmp_path / "tokenizer.bpe"))
    assert Tokenizer.load(str(tmp_path / "tokenizer.bpe")).encode("a<m>b") == plain.encode("a<m>b")
