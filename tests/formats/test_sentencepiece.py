"""SentencePiece-style BPE vocabularies against their own ecosystems: ``sentencepiece``'s ids and text for Mistral's
``.model`` files and for models trained here (every normalizer option, ``precompiled_charsmap`` included),
llama.cpp's expected ids for the Llama 2, Phi-3 and Gemma 4 GGUFs, both backends, every encode door, streaming
decode over every split, and damaged files refused in one line naming the file and the problem."""

from __future__ import annotations

import io
import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from conftest import adversarial_cases, corpus, data_path, reference_path

from bpe_core import StreamingDecoder, Tokenizer, TokenizerFileError

spm = pytest.importorskip("sentencepiece")

LLAMACPP = "llama-cpp-python-0.3.36"
MISTRAL_WHEEL = (
    "tokenizer.model.v1",
    "mistral_instruct_tokenizer_240216.model.v2",
    "mistral_instruct_tokenizer_240323.model.v3",
    "mistral_instruct_tokenizer_241114.model.v7",
)


def mistral_model(name: str) -> Path:
    shared = {"tokenizer.model.v1", "mistral_instruct_tokenizer_240323.model.v3"}
    if name in shared:
        return data_path("spm", name)
    mistral_common = pytest.importorskip("mistral_common")
    path = Path(mistral_common.__file__).parent / "data" / name
    if not path.exists():
        pytest.fail(f"mistral-common's wheel has no {name}")
    return path


@cache
def ours(path: str, backend: str) -> Tokenizer:
    return Tokenizer.from_file(path, backend=backend)


@cache
def reference(path: str):
    return spm.SentencePieceProcessor(model_file=path)


def texts() -> list[str]:
    docs = corpus("fortunes_multi", 400) + corpus("multi_udhr", 60) + corpus("code_cpython", 20)
    hostile = [v for _, v in adversarial_cases() if isinstance(v, str) and _encodable(v)]
    return docs + hostile[::7] + ["Hello  world", "   ", "", " a  b   c ", "\t\n x\r\n", "<s></s>[INST]", "🤖" * 5]


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: not text for sentencepiece (a dead letter in the pipelines)
        return False
    return True


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["native", "python"])
@pytest.mark.parametrize("name", MISTRAL_WHEEL)
def test_mistral_models_give_sentencepiece_ids_and_text(name, backend):
    path = str(mistral_model(name))
    tok, sp = ours(path, backend), reference(path)
    sample = texts() if backend == "native" else texts()[::5]
    expected = sp.encode(sample)
    got = [tok.encode_ordinary(t) for t in sample]
    wrong = [t for t, a, b in zip(sample, got, expected, strict=True) if a != b]
    assert not wrong, (len(wrong), wrong[:3])
    assert [tok.decode(ids) for ids in expected] == [sp.decode(ids) for ids in expected]


def test_v1_fact_from_the_shared_readme():
    tok = ours(str(mistral_model("tokenizer.model.v1")), "native")
    assert tok.encode_ordinary("Hello  world") == [22557, 28705, 1526]
    assert tok.n_vocab == 32000 and tok.special_tokens["</s>"] == 2


@pytest.mark.slow
def test_every_door_gives_the_same_ids():
    import pyarrow as pa

    path = str(mistral_model("mistral_instruct_tokenizer_240323.model.v3"))
    tok, sp = ours(path, "native"), reference(path)
    docs = corpus("en_bible_kjv", 50) + corpus("multi_udhr", 50)
    expected = sp.encode(docs)
    for threads in (1, 2):
        ids, offsets = tok.encode_ordinary_flat(docs, num_threads=threads)
        assert ids.dtype == np.uint16 and offsets.tolist()[-1] == len(ids)
        assert [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:], strict=True)] == expected
    ids2, offsets2 = tok.encode_ordinary_flat(pa.array(docs), num_threads=1)
    assert ids2.tolist() == ids.tolist() and offsets2.tolist() == offsets.tolist()
    assert tok.encode_ordinary_batch(docs, num_threads=2) == expected
    assert tok.encode_batch(docs[:5]) == expected[:5]
    assert tok.decode_flat(ids, offsets) == [sp.decode(e) for e in expected]


def test_control_tokens_follow_the_special_token_policy():
    tok = ours(str(mistral_model("mistral_instruct_tokenizer_240323.model.v3")), "native")
    sp = reference(str(mistral_model("mistral_instruct_tokenizer_240323.model.v3")))
    with pytest.raises(ValueError, match="disallowed special token"):
        tok.encode("[INST] hi [/INST]")
    assert tok.encode_ordinary("[INST] hi") == sp.encode("[INST] hi")
    allowed = tok.encode("[INST] hi", allowed_special="all")
    assert (
        allowed[0] == sp.piece_to_id("[INST]") and allowed[1:] == sp.encode(" hi")[1:] or allowed[1:] == sp.encode("hi")
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama-spm", "phi-3", "gemma-4"])
@pytest.mark.parametrize("backend", ["native", "python"])
def test_llamacpp_ggufs_give_llamacpp_ids(name, backend):
    if name == "llama-spm":
        base = data_path("spm", f"ggml-vocab-{name}.gguf")
    else:
        base = reference_path(LLAMACPP, f"vendor/llama.cpp/models/ggml-vocab-{name}.gguf")
    tok = Tokenizer.from_file(str(base), backend=backend)
    inputs = Path(f"{base}.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    outputs = Path(f"{base}.out").read_text().strip("\n").split("\n")
    assert len(outputs) >= 40
    for text, line in zip(inputs, outputs, strict=False):
        assert tok.encode_ordinary(text) == [int(x) for x in line.split()], text


@cache
def trained(options: str) -> bytes:
    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus("fortunes_multi", 2000)),
        model_writer=writer,
        model_type="bpe",
        vocab_size=1500,
        minloglevel=2,
        **json.loads(options),
    )
    return writer.getvalue()


NORMALIZERS = [
    {},  # nmt_nfkc charsmap, remove_extra_whitespaces, no byte_fallback: <unk> runs
    {"byte_fallback": True, "user_defined_symbols": ["<tag>", "ab"], "add_dummy_prefix": False},
    {"remove_extra_whitespaces": False, "normalization_rule_name": "nfkc_cf", "byte_fallback": True},
    {"normalization_rule_name": "identity", "treat_whitespace_as_suffix": True},
]
HARD = ["ｆｕｌｌｗｉｄｔｈ  ①  ﬁne   spaces  ", "  lead", "Ⅻ ㍿ \u00a0nbsp ß", "<tag>ab<tag> x", "日本語 🤖", "\t\tx"]


@pytest.mark.slow
@pytest.mark.parametrize("options", [json.dumps(o) for o in NORMALIZERS])
@pytest.mark.parametrize("backend", ["native", "python"])
def test_trained_models_every_normalizer(tmp_path, options, backend):
    blob = trained(options)
    path = tmp_path / "m.model"
    path.write_bytes(blob)
    tok, sp = Tokenizer.from_file(str(path), backend=backend), spm.SentencePieceProcessor(model_proto=blob)
    sample = corpus("fortunes_multi", 2300)[2000:] + corpus("multi_udhr", 30) + HARD
    expected = sp.encode(sample)
    assert [tok.encode_ordinary(t) for t in sample] == expected
    assert [tok.decode(e) for e in expected] == [sp.decode(e) for e in expected]


def test_streaming_decode_holds_back_byte_runs():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    path = str(mistral_model("tokenizer.model.v1"))
    tok, sp = ours(path, "native"), reference(path)
    ids = sp.encode("naïve 🤖 café — 日本 \U0001f9d1\u200d\U0001f91d\u200d\U0001f9d1 end")
    assert any(sp.is_byte(i) for i in ids)
    whole = sp.decode(ids)

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.integers(0, len(ids)), max_size=6))
    def check(cuts):
        dec = StreamingDecoder(tok)
        bounds = [0, *sorted(cuts), len(ids)]
        out = "".join(dec.feed(ids[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)) + dec.flush()
        assert out == whole

    check()
    dec = StreamingDecoder(tok)
    emoji = sp.encode("🤖")[1:]  # four <0x..> pieces after the "▁"
    assert [dec.step(i) for i in emoji[:3]] == ["", "", ""] and dec.pending
    assert dec.step(emoji[3]) == "🤖"


def test_invalid_byte_runs_decode_as_sentencepiece_does():
    path = str(mistral_model("tokenizer.model.v1"))
    tok, sp = ours(path, "native"), reference(path)
    e2, x82, a = sp.piece_to_id("<0xE2>"), sp.piece_to_id("<0x82>"), sp.piece_to_id("▁a")
    for ids in ([e2, x82, a], [e2, a, x82], [a, e2, x82, e2]):
        assert tok.decode(ids) == sp.decode(ids)


# ----------------------------------------------------------------------------------------------- damaged files


def _proto(path: Path):
    from bpe_core.formats.sentencepiece import model_proto_class

    proto = model_proto_class()()
    proto.ParseFromString(path.read_bytes())
    return proto


def _plant(tmp_path: Path, change) -> Path:
    proto = _proto(mistral_model("tokenizer.model.v1"))
    change(proto)
    out = tmp_path / "damaged.model"
    out.write_bytes(proto.SerializeToString())
    return out


def _set_score(proto, i, value):
    proto.pieces[i].score = value


def _duplicate(proto):
    proto.pieces[500].piece = proto.pieces[501].piece


def _drop_byte(proto):
    del proto.pieces[3]


def _unigram(proto):
    proto.trainer_spec.model_type = 1


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda p: _set_score(p, 700, float("nan")), "score nan, not a finite number"),
        (_duplicate, "is listed twice"),
        (_drop_byte, "byte pieces are missing"),
        (_unigram, "Unigram model; only BPE"),
    ],
)
def test_damaged_models_are_refused_in_one_line(tmp_path, change, problem):
    path = _plant(tmp_path, change)
    with pytest.raises(TokenizerFileError) as info:
        Tokenizer.from_file(str(path))
    message = str(info.value)
    assert problem in message and str(path) in message and "\n" not in message


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_truncated_and_garbled_models_are_refused(tmp_path, cut):
    blob = mistral_model("tokenizer.model.v1").read_bytes()
    for name, data in (("truncated", blob[: int(len(blob) * cut)]), ("garbled", blob[:20] + b"\xff" * 64 + blob[84:])):
        path = tmp_path / f"{name}.model"
        path.write_bytes(data)
        with pytest.raises(TokenizerFileError) as info:
            Tokenizer.from_file(str(path))
        assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_gguf_with_fewer_scores_than_tokens_is_refused(tmp_path):
    gguf = pytest.importorskip("gguf")
    src = Tokenizer.from_file(str(data_path("spm", "ggml-vocab-llama-spm.gguf")), backend="python").sentencepiece
    path = tmp_path / "short.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(list(src.pieces))
    writer.add_token_scores(list(src.scores[:-3]))
    writer.add_token_types(list(src.types))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    with pytest.raises(TokenizerFileError, match="32000 tokens but 31997 scores") as info:
        Tokenizer.from_file(str(path))
    assert str(path) in str(info.value)


def test_pickles_and_digest():
    import pickle

    path = str(mistral_model("tokenizer.model.v1"))
    tok = ours(path, "native")
    again = pickle.loads(pickle.dumps(tok))
    assert again.encode_ordinary("pickled  text") == tok.encode_ordinary("pickled  text")
    assert (
        again.digest()
        == tok.digest()
        != ours(str(mistral_model("mistral_instruct_tokenizer_240323.model.v3")), "native").digest()
    )
