"""Hostile tokenizer files: truncated, wrong hash, huge declared counts or ids, duplicates, merges of missing tokens,
tokenizer.json components of unexpected types, corrupt GGUF. Each is refused with a TokenizerFileError naming the
file (never another exception, a hang or a huge allocation); a file that still loads is checked to be usable.

The malformed-file tests of tests/formats/ check single hand-made cases and their messages;
these sweep every cut, every line and every format with the same promise."""

from __future__ import annotations

import copy
import json
import struct
import tracemalloc
import warnings
from pathlib import Path

import gguf
import pytest
from conftest import corpus

import bpe_core
from bpe_core import Tokenizer, TokenizerFileError
from bpe_core.formats.artifact import dumps_artifact
from bpe_core.formats.huggingface import dumps_huggingface
from bpe_core.formats.tiktoken_file import dumps_tiktoken
from bpe_core.model.bytelevel import bytes_to_token_string

from .lib import FULL, MIB

AREA = "hostile tokenizer files"
SAMPLE = "Hello wörld ☕ 🤷🏽 <|end|> 12345\n\tcode()"
MEMORY_LIMIT = 64 * MIB  # what a refused file may allocate (tracemalloc peak while loading)


# ------------------------------------------------------------------ the files, from one small trained tokenizer
@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    counts = bpe_core.count_chunks(corpus("en_bible_kjv", 5) + corpus("multi_udhr", 3), "cl100k")
    return bpe_core.train(counts, 400, special_tokens=["<|end|>", "<|pad|>"], name="small")


def gguf_parts(tok: Tokenizer) -> tuple[list[str], list[int], list[str]]:
    """Token strings, token types and merges of the tokenizer as llama.cpp writes them (specials: control)."""
    vocab = tok.vocab
    tokens = [bytes_to_token_string(vocab[i]) for i in range(len(vocab))]
    tokens += sorted(tok.special_tokens, key=tok.special_tokens.get)
    types = [1] * len(vocab) + [3] * len(tok.special_tokens)
    return tokens, types, [f"{bytes_to_token_string(a)} {bytes_to_token_string(b)}" for a, b in tok.merges]


def gguf_bytes(tok: Tokenizer, path: Path, edit=None) -> bytes:
    """The tokenizer as a llama.cpp GGUF vocabulary, written by the gguf package (``edit`` changes the parts)."""
    tokens, types, merges = gguf_parts(tok)
    if edit is not None:
        edit(tokens, types, merges)
    writer = gguf.GGUFWriter(str(path), "gpt2")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path.read_bytes()


@pytest.fixture(scope="module")
def files(tok, tmp_path_factory) -> dict[str, bytes]:
    root = tmp_path_factory.mktemp("good")
    vocab_path, merges_path = tok.to_gpt2_files(str(root))
    return {
        "tokenizer.bpe": dumps_artifact(tok),
        "tokenizer.tiktoken": dumps_tiktoken(tok),
        "tokenizer.json": dumps_huggingface(tok),
        "vocab.json": Path(vocab_path).read_bytes(),
        "merges.txt": Path(merges_path).read_bytes(),
        "vocab.gguf": gguf_bytes(tok, root / "vocab.gguf"),
    }


def load(kind: str, path: Path) -> Tokenizer:
    if kind == "tokenizer.tiktoken":
        return Tokenizer.from_file(str(path), pretokenizer="cl100k")
    if kind in ("vocab.json", "merges.txt"):
        return Tokenizer.from_gpt2_files(str(path.parent / "vocab.json"), str(path.parent / "merges.txt"))
    return Tokenizer.from_file(str(path))


def attempt(kind: str, folder: Path, data: bytes, files: dict[str, bytes]) -> tuple[str, Tokenizer | None, str]:
    """Write ``data`` as the file ``kind`` (with its good partner for GPT-2 pairs) and load it: ("refused", None,
    message) or ("loaded", tokenizer, ""). Any other exception fails the test; a loaded tokenizer must encode and
    decode (the native encoder is built then)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("vocab.json", "merges.txt"):
        if kind in ("vocab.json", "merges.txt"):
            (folder / name).write_bytes(files[name])
    path = folder / kind
    path.write_bytes(data)
    try:
        loaded = load(kind, path)
    except TokenizerFileError as exc:
        assert exc.path and exc.path in str(exc), exc
        return "refused", None, str(exc)
    try:
        ids = loaded.encode_ordinary(SAMPLE)
    except ValueError as exc:  # a vocabulary cut before some byte tokens: it says which bytes it lacks
        assert "no token for the byte" in str(exc), exc
        return "loaded", loaded, ""
    assert loaded.decode(ids) == (loaded.pretokenizer.normalize(SAMPLE) if loaded.pretokenizer else SAMPLE)
    return "loaded", loaded, ""


def cuts(data: bytes) -> list[int]:
    """Every line boundary, and every byte offset (FULL) or every 23rd plus the first and last 64 (CI)."""
    lines = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    step = 1 if FULL else 23
    offsets = (
        set(range(0, len(data), step)) | set(range(min(64, len(data)))) | set(range(max(0, len(data) - 64), len(data)))
    )
    return sorted((set(lines) | offsets) - {len(data)})


def _same(a: Tokenizer, b: Tokenizer) -> bool:
    return a.vocab == b.vocab and a.merges == b.merges and a.special_tokens == b.special_tokens


# Formats without a count or hash of their lines: a cut at a line boundary is a well-formed, smaller file.
PREFIX_FORMATS = ("tokenizer.tiktoken", "merges.txt")


@pytest.mark.parametrize(
    "kind", ["tokenizer.bpe", "tokenizer.tiktoken", "tokenizer.json", "vocab.json", "merges.txt", "vocab.gguf"]
)
def test_truncated_files_are_refused_at_every_cut(kind, files, tmp_path, reliability):
    data = files[kind]
    whole = attempt(kind, tmp_path / "whole", data, files)[1]
    outcomes = {"refused": 0, "loaded": 0}
    changed_last_merge = 0
    unwarned = 0
    for cut in cuts(data):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outcome, loaded, _ = attempt(kind, tmp_path / "t", data[:cut], files)
        outcomes[outcome] += 1
        if outcome == "loaded" and not _same(loaded, whole):  # a cut of trailing whitespace changes nothing
            assert kind in PREFIX_FORMATS, f"{kind} cut at byte {cut} of {len(data)} loaded as a different tokenizer"
            # a cut merges.txt leaves tokens of vocab.json that no merge makes: the load warns
            unwarned += kind == "merges.txt" and not any("made by no merge" in str(w.message) for w in caught)
            # the only thing such a file can be: the first tokens or merges of the real one, except that a merges.txt
            # cut inside its last line can leave a shorter, still valid last merge ("Ġ and" -> "Ġ a")
            assert set(loaded.vocab.items()) <= set(whole.vocab.items())
            n = len(loaded.merges)
            assert loaded.merges[: max(n - 1, 0)] == whole.merges[: max(n - 1, 0)]
            changed_last_merge += loaded.merges[n - 1 :] != whole.merges[n - 1 : n]
    if kind != "merges.txt":
        assert changed_last_merge == 0
    assert unwarned == 0, f"{unwarned} cuts of merges.txt loaded as a smaller tokenizer without a warning"
    promise = (
        (
            "refused with TokenizerFileError naming the file; a cut at a line boundary loads the tokens/merges "
            "before it (the format has no count or hash), never other tokens"
            + ("; merges.txt: a UserWarning names the tokens no merge makes" if kind == "merges.txt" else "")
        )
        if kind in PREFIX_FORMATS
        else "refused with TokenizerFileError naming the file, at every cut"
    )
    if kind == "merges.txt":
        promise += "; KNOWN LIMIT: a cut inside the last line can leave a shorter valid merge (counted)"
    outcomes["loaded_with_changed_last_merge"] = changed_last_merge
    reliability.row(AREA, f"{kind} ({len(data):,} bytes) truncated at {sum(outcomes.values())} offsets", promise,
                    inputs=sum(outcomes.values()), **outcomes)  # fmt: skip


def test_a_changed_byte_in_any_line_of_the_artifact_fails_its_hash(files, tmp_path, reliability):
    data = files["tokenizer.bpe"]
    starts = [0] + [i + 1 for i, b in enumerate(data[:-1]) if b == 0x0A]
    tried = 0
    for start in starts[:-1]:  # every line but the sha256 line itself
        end = data.index(b"\n", start)
        at = start + (end - start) // 2
        if at >= end:
            continue
        changed = data[:at] + bytes([data[at] ^ 0x01 if data[at] not in b" \n" else 0x41]) + data[at + 1 :]
        outcome, _, message = attempt("tokenizer.bpe", tmp_path / "h", changed, files)
        assert outcome == "refused", f"a changed byte at {at} loaded"
        if start > data.index(b"\nname "):
            assert "sha256" in message, message
        tried += 1
    reliability.row(
        AREA,
        f"tokenizer.bpe with one byte changed in each of its {tried} lines",
        "refused: the sha256 line does not match (a changed header line: its own error first)",
        inputs=tried,
    )


def _with_hash(text: str) -> bytes:
    import hashlib

    body = text[: text.rindex("sha256 ")].encode()
    return body + f"sha256 {hashlib.sha256(body).hexdigest()}\n".encode()


def _gguf_header(*kvs: bytes, count: int | None = None) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs) if count is None else count) + b"".join(kvs)


def _gguf_key(key: str) -> bytes:
    return struct.pack("<Q", len(key)) + key.encode()


HUGE = 10**12


def huge_cases(files: dict[str, bytes]) -> list[tuple[str, str, bytes, str]]:
    art = files["tokenizer.bpe"].decode()
    hf = json.loads(files["tokenizer.json"])
    hf_id = copy.deepcopy(hf)
    hf_id["model"]["vocab"]["zz"] = HUGE
    hf_added = copy.deepcopy(hf)
    hf_added["added_tokens"].append({"id": HUGE, "content": "<x>", "special": True})
    vocab = json.loads(files["vocab.json"])
    return [
        (
            "tokenizer.bpe",
            "vocab section declaring 10**12 entries",
            _with_hash(art.replace("\nvocab 398\n", f"\nvocab {HUGE}\n")),
            "fewer lines",
        ),
        (
            "tokenizer.bpe",
            "merges section declaring 10**12 entries",
            _with_hash(art.replace("\nmerges 142\n", f"\nmerges {HUGE}\n")),
            "fewer lines",
        ),
        ("tokenizer.bpe", "a token with id 10**12", _with_hash(art.replace("\n397 ", f"\n{HUGE} ", 1)), "larger than"),
        (
            "tokenizer.bpe",
            "a special token with id 10**9",
            _with_hash(art.replace('\n398 "<|end|>"', f'\n{10**9} "<|end|>"')),
            "dense",
        ),
        (
            "tokenizer.tiktoken",
            "a rank of 10**12",
            files["tokenizer.tiktoken"] + f"eno= {HUGE}\n".encode(),
            "larger than",
        ),
        (
            "tokenizer.tiktoken",
            "a rank of 3*10**8",
            files["tokenizer.tiktoken"] + f"eno= {3 * 10**8}\n".encode(),
            "dense",
        ),
        ("tokenizer.json", "a vocab id of 10**12", json.dumps(hf_id).encode(), "larger than"),
        ("tokenizer.json", "an added token id of 10**12", json.dumps(hf_added).encode(), "tokenizers gives it id"),
        ("vocab.json", "an id of 10**12", json.dumps(dict(vocab, zz=HUGE)).encode(), "larger than"),
        ("vocab.gguf", "2**40 metadata keys", _gguf_header(count=1 << 40), "metadata keys"),
        ("vocab.gguf", "a key string of 2**40 bytes", _gguf_header(struct.pack("<Q", 1 << 40)), "length"),
        (
            "vocab.gguf",
            "a uint64 array of 2**31-1 elements in a 100-byte file",
            _gguf_header(
                _gguf_key("tokenizer.ggml.token_type") + struct.pack("<IIQ", 9, 10, (1 << 31) - 1) + bytes(100)
            ),
            "truncated",
        ),
        (
            "vocab.gguf",
            "a string array of 2**31-1 elements",
            _gguf_header(
                _gguf_key("tokenizer.ggml.tokens")
                + struct.pack("<IIQ", 9, 8, (1 << 31) - 1)
                + struct.pack("<Q", 1)
                + b"a"
            ),
            "truncated",
        ),
        (
            "vocab.gguf",
            "a string array of 2**62 elements",
            _gguf_header(_gguf_key("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 1 << 62)),
            "declares",
        ),
    ]


VOCAB_BOUND = "ids, above the default limit"


def test_huge_declared_counts_and_ids_are_refused_without_allocating_them(files, tmp_path, reliability):
    cases = huge_cases(files)
    peaks = []
    for i, (kind, what, data, words) in enumerate(cases):
        tracemalloc.start()
        try:
            outcome, _, message = attempt(kind, tmp_path / f"c{i}", data, files)
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        # the reader's own check, or the vocabulary bound (BEAM_BPE_MAX_VOCAB) that every loader applies after it:
        # either refuses before a table of that size is made (the peak below)
        assert outcome == "refused" and (words in message or VOCAB_BOUND in message), (kind, what, message)
        assert peak < MEMORY_LIMIT, f"{kind} with {what}: {peak / MIB:.0f} MiB allocated to refuse it"
        peaks.append(peak)
        reliability.row(
            AREA,
            f"{kind}: {what}",
            f"refused ('{words}'), with less than {MEMORY_LIMIT // MIB} MiB allocated",
            peak_traced_mib=round(peak / MIB, 1),
        )


def defect_cases(files: dict[str, bytes]) -> list[tuple[str, str, bytes, str]]:
    art = files["tokenizer.bpe"].decode()
    lines = art.split("\n")
    v = lines.index("vocab 398")
    m = next(i for i, line in enumerate(lines) if line.startswith("merges "))
    dup_token = lines.copy()
    dup_token[v + 300] = f"299 {lines[v + 1 + 298].split(' ')[1]}"  # the bytes of token 298 again, under id 299
    missing = lines.copy()
    missing[m + 1] = "97 99999"
    hf = json.loads(files["tokenizer.json"])
    hf_dup_id = copy.deepcopy(hf)
    hf_dup_id["model"]["vocab"]["zzz"] = 3
    hf_missing = copy.deepcopy(hf)
    hf_missing["model"]["merges"].append("Ġ zzz")
    hf_dup_added = copy.deepcopy(hf)
    hf_dup_added["added_tokens"].append(dict(hf["added_tokens"][0], id=hf["added_tokens"][0]["id"] + 2))
    tik = files["tokenizer.tiktoken"].split(b"\n")
    merges_txt = files["merges.txt"]
    vocab = json.loads(files["vocab.json"])
    return [
        ("tokenizer.bpe", "two ids with the same bytes", _with_hash("\n".join(dup_token)), "duplicate token"),
        ("tokenizer.bpe", "a merge of a missing id", _with_hash("\n".join(missing)), "not a token"),
        (
            "tokenizer.tiktoken",
            "two tokens at one rank",
            b"\n".join(tik[:-1] + [b"fHx8fHx8fHx8 " + tik[5].split(b" ")[1], b""]),
            "appears twice",
        ),
        (
            "tokenizer.json",
            "a duplicate JSON key in the vocab",
            files["tokenizer.json"].replace(b'"a": 97', b'"a": 97, "a": 98', 1),
            "duplicate",
        ),
        ("tokenizer.json", "two tokens with one id", json.dumps(hf_dup_id).encode(), "share the id"),
        ("tokenizer.json", "an added token listed twice", json.dumps(hf_dup_added).encode(), "listed twice"),
        ("tokenizer.json", "a merge of a missing token", json.dumps(hf_missing).encode(), "not in the vocab"),
        ("vocab.json", "two tokens with one id", json.dumps(dict(vocab, zzz=5)).encode(), "share the id"),
        ("merges.txt", "a merge of a missing token", merges_txt + b"\xc4\xa0 zzz\n", "not in vocab.json"),
        ("merges.txt", "a line of three tokens", merges_txt + b"a b c\n", "two tokens"),
    ]


def test_duplicate_tokens_and_merges_of_missing_tokens_are_refused_in_every_format(files, tok, tmp_path, reliability):
    def duplicate(tokens, types, merges):
        tokens[300] = tokens[299]

    def missing(tokens, types, merges):
        merges.append("Ġ zzz")

    gguf_cases = [
        (
            "vocab.gguf",
            "two ids with the same token",
            gguf_bytes(tok, tmp_path / "dup.gguf", duplicate),
            "duplicate token",
        ),
        ("vocab.gguf", "a merge of a missing token", gguf_bytes(tok, tmp_path / "miss.gguf", missing), "'zzz'"),
    ]
    for i, (kind, what, data, words) in enumerate(defect_cases(files) + gguf_cases):
        outcome, _, message = attempt(kind, tmp_path / f"d{i}", data, files)
        # the reader's own check, or the vocabulary bound (BEAM_BPE_MAX_VOCAB) that every loader applies after it:
        # either refuses before a table of that size is made (the peak below)
        assert outcome == "refused" and (words in message or VOCAB_BOUND in message), (kind, what, message)
        reliability.row(AREA, f"{kind}: {what}", f"refused with TokenizerFileError ('{words}')")


def test_a_rank_file_listing_a_token_twice_loads_as_tiktoken_loads_it(files, tmp_path, reliability):
    """tiktoken.load.load_tiktoken_bpe keeps a token's last rank (a dict); so do we, with a warning naming it."""
    from tiktoken.load import load_tiktoken_bpe

    tik = files["tokenizer.tiktoken"].split(b"\n")
    path = tmp_path / "twice.tiktoken"
    path.write_bytes(b"\n".join(tik[:-1] + [tik[5].split(b" ")[0] + b" 9000", b""]))
    with pytest.warns(UserWarning, match="listed twice keep their last rank"):
        tok = Tokenizer.from_tiktoken(str(path), pretokenizer="cl100k")
    assert {tok.token_bytes(i): i for i in tok.vocab} == load_tiktoken_bpe(str(path))
    with pytest.raises(ValueError, match="has no token"):
        tok.decode([5])
    reliability.row(
        AREA,
        "tokenizer.tiktoken: the same bytes at two ranks",
        "loaded as tiktoken loads it (the last rank; the earlier one has no token), with a warning",
    )


COMPONENTS = [
    ("model type WordPiece", ["model", "type"], "WordPiece", "not supported"),
    ("model type Unigram", ["model", "type"], "Unigram", "not supported"),
    ("model type WordLevel", ["model", "type"], "WordLevel", "not supported"),
    ("model type 'Foo'", ["model", "type"], "Foo", "not supported"),
    ("model type 5", ["model", "type"], 5, "not supported"),
    ("BPE dropout 0.1", ["model", "dropout"], 0.1, "dropout"),
    ("continuing_subword_prefix '##'", ["model", "continuing_subword_prefix"], "##", "continuing_subword_prefix"),
    ("end_of_word_suffix '</w>'", ["model", "end_of_word_suffix"], "</w>", "end_of_word_suffix"),
    ("ignore_merges 'no'", ["model", "ignore_merges"], "no", "ignore_merges"),
    ("vocab as a list", ["model", "vocab"], ["a"], "vocab"),
    ("merges as a string", ["model", "merges"], "a b", "merge"),
    ("a merge that is a number", ["model", "merges"], [5], "merge 0"),
    ("normalizer Lowercase", ["normalizer"], {"type": "Lowercase"}, "Lowercase"),
    ("normalizer NFD", ["normalizer"], {"type": "NFD"}, "NFD"),
    ("normalizer BertNormalizer", ["normalizer"], {"type": "BertNormalizer"}, "BertNormalizer"),
    ("normalizer Precompiled", ["normalizer"], {"type": "Precompiled"}, "Precompiled"),
    (
        "normalizer Sequence [NFC, Lowercase]",
        ["normalizer"],
        {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]},
        "Lowercase",
    ),
    ("normalizer as a string", ["normalizer"], "NFC", "not a JSON object"),
    ("pre_tokenizer Whitespace", ["pre_tokenizer"], {"type": "Whitespace"}, "ByteLevel"),
    ("pre_tokenizer Metaspace", ["pre_tokenizer"], {"type": "Metaspace"}, "Metaspace"),
    ("pre_tokenizer BertPreTokenizer", ["pre_tokenizer"], {"type": "BertPreTokenizer"}, "ByteLevel"),
    (
        "ByteLevel with add_prefix_space",
        ["pre_tokenizer"],
        {"type": "ByteLevel", "add_prefix_space": True},
        "add_prefix_space",
    ),
    (
        "ByteLevel not last",
        ["pre_tokenizer"],
        {"type": "Sequence", "pretokenizers": [{"type": "ByteLevel"}, {"type": "Digits"}]},
        "ByteLevel",
    ),
    (
        "Split with behavior Removed",
        ["pre_tokenizer"],
        {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Removed"},
                {"type": "ByteLevel"},
            ],
        },
        "Removed",
    ),
    (
        "Split with an unknown pre-tokenizer inside",
        ["pre_tokenizer"],
        {"type": "Sequence", "pretokenizers": [{"type": "UnicodeScripts"}, {"type": "ByteLevel"}]},
        "UnicodeScripts",
    ),
    (
        "Split pattern Regex 5",
        ["pre_tokenizer"],
        {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": 5}}, {"type": "ByteLevel"}]},
        "malformed",
    ),
    (
        "Split behavior 3",
        ["pre_tokenizer"],
        {
            "type": "Sequence",
            "pretokenizers": [{"type": "Split", "pattern": {"String": "a"}, "behavior": 3}, {"type": "ByteLevel"}],
        },
        "malformed",
    ),
    (
        "Split regex that does not compile",
        ["pre_tokenizer"],
        {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(("}}, {"type": "ByteLevel"}]},
        "tokenizer",
    ),
    ("Sequence of null", ["pre_tokenizer"], {"type": "Sequence", "pretokenizers": None}, "not a list"),
    ("decoder WordPiece", ["decoder"], {"type": "WordPiece"}, "WordPiece"),
    ("decoder Metaspace", ["decoder"], {"type": "Metaspace"}, "Metaspace"),
    ("decoder as a string", ["decoder"], "ByteLevel", "malformed"),
    ("added token flag lstrip 'no'", ["added_tokens", 0, "lstrip"], "no", "lstrip"),
    ("added token without content", ["added_tokens", 0, "content"], None, "content"),
]


def test_tokenizer_json_with_unexpected_component_types_is_refused_naming_them(files, tmp_path, reliability):
    base = json.loads(files["tokenizer.json"])
    for i, (what, path, value, words) in enumerate(COMPONENTS):
        spec = copy.deepcopy(base)
        target = spec
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        outcome, _, message = attempt("tokenizer.json", tmp_path / f"j{i}", json.dumps(spec).encode(), files)
        assert outcome == "refused" and words in message, (what, message)
    reliability.row(AREA, f"tokenizer.json with each of {len(COMPONENTS)} unexpected components (model types, "
                    "normalizers, pre-tokenizers, decoders, flags, wrong JSON types)",
                    "refused with a message naming the component; never loaded as a different tokenizer",
                    inputs=len(COMPONENTS))  # fmt: skip


def test_corrupt_gguf_bytes_never_crash(files, tmp_path, reliability):
    """Every byte of the header and metadata changed (every 13th in CI): refused, or loaded (GGUF has no checksum:
    a changed letter in a token string is another valid vocabulary), never another exception."""
    data = files["vocab.gguf"]
    step = 1 if FULL else 13
    outcomes = {"refused": 0, "loaded": 0}
    for at in range(0, len(data), step):
        for value in (0xFF, 0x00):
            if data[at] == value:
                continue
            outcome, _, _ = attempt("vocab.gguf", tmp_path / "g", data[:at] + bytes([value]) + data[at + 1 :], files)
            outcomes[outcome] += 1
    assert outcomes["refused"] > outcomes["loaded"] > 0
    reliability.row(
        AREA,
        f"GGUF ({len(data):,} bytes) with a byte set to 0x00 or 0xFF at {sum(outcomes.values())} offsets",
        "TokenizerFileError naming the file, or (a changed token string) a usable tokenizer: never a crash",
        inputs=sum(outcomes.values()),
        **outcomes,
    )
