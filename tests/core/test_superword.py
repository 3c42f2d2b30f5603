"""Superword tokenizers end to end in bpe_core: training, encoding through every entry point against the reference
(bpe_core.superword.reference.encode_reference), the artifact (format version 3), exports refused, truncation,
pickling."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from conftest import CORPORA, FULL, corpus

import bpe_core
from bpe_core import StreamingDecoder
from bpe_core.errors import TokenizerFileError
from bpe_core.formats import artifact
from bpe_core.superword import reference as sw
from bpe_core.train.trainer import train_superword

SPECIAL = "<|endoftext|>"


def _docs(limit=60):
    return [d for name in CORPORA for d in corpus(name, limit)]


@pytest.fixture(scope="module")
def docs():
    return _docs()


@pytest.fixture(scope="module")
def tok(docs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return train_superword(bpe_core.count_chunks(docs, "cl100k"), 1200, 200, docs, special_tokens=[SPECIAL])


def _word(tok):
    arguments = sw.word_model_arguments(tok)
    return bpe_core.Tokenizer(arguments.pop("vocab"), **arguments)


def test_lists_equal_the_reference_on_both_backends(tok, docs):
    word = _word(tok)
    check = _docs(120)[-200:]
    expected = [sw.encode_reference(word, tok.superword, d) for d in check]
    assert tok.encode_ordinary_batch(check, num_threads=2) == expected
    assert [tok.encode_ordinary(d) for d in check[:40]] == expected[:40]
    ref = pickle.loads(pickle.dumps(tok)).use_backend("python")
    assert [ref.encode_ordinary(d) for d in check[:40]] == expected[:40]
    plain = len(word.encode_ordinary_flat(check)[0])
    assert sum(map(len, expected)) < plain  # supermerges fire on text not trained on


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_flat_equals_lists(tok, threads):
    check = _docs(120)[-100:]
    ids, offsets = tok.encode_ordinary_flat(check, num_threads=threads)
    assert ids.dtype == np.uint16 and offsets[-1] == len(ids)
    lists = [sw.encode_reference(_word(tok), tok.superword, d) for d in check]
    assert [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:], strict=True)] == lists
    pa = pytest.importorskip("pyarrow")
    ids2, offsets2 = tok.encode_ordinary_flat(pa.array(check), num_threads=threads)
    assert np.array_equal(ids, ids2) and np.array_equal(offsets, offsets2)
    assert tok.decode_flat(ids, offsets) == check


def test_special_tokens_end_runs(tok):
    text = f"the cat sat on the mat{SPECIAL} of the children of the LORD"
    word = _word(tok)
    allowed = frozenset([SPECIAL])
    ids = tok.encode(text, allowed_special="all")
    assert ids == sw.encode_reference(word, tok.superword, text, allowed)
    assert tok.special_tokens[SPECIAL] in ids
    with pytest.raises(ValueError, match="special"):
        tok.encode(text)
    assert tok.encode_ordinary(text) == sw.encode_reference(word, tok.superword, text)
    ids, offsets = tok.encode_flat([text, text], allowed_special="all")
    assert ids[offsets[0] : offsets[1]].tolist() == tok.encode(text, allowed_special="all")


def test_decode_and_stream(tok, docs):
    text = docs[3]
    ids = tok.encode_ordinary(text)
    assert tok.decode(ids) == text
    dec = StreamingDecoder(tok)
    assert "".join(dec.step(i) for i in ids) + dec.flush() == text


def test_artifact_round_trip(tok, tmp_path, docs):
    path = tmp_path / "tokenizer.bpe"
    tok.save(str(path))
    assert path.read_text().splitlines()[1] == "format_version 3"
    back = bpe_core.Tokenizer.load(str(path))
    assert back.superword == tok.superword and back.digest() == tok.digest()
    assert back.encode_ordinary_batch(docs[:30]) == tok.encode_ordinary_batch(docs[:30])
    assert bpe_core.Tokenizer.from_file(str(path)).superword == tok.superword


def test_older_readers_refuse_version_3(tok, tmp_path, monkeypatch):
    path = tmp_path / "tokenizer.bpe"
    tok.save(str(path))
    monkeypatch.setattr(artifact, "FORMAT_VERSIONS", (1, 2))
    with pytest.raises(TokenizerFileError, match="format version 3 is not supported"):
        bpe_core.Tokenizer.load(str(path))


def test_unknown_rule_refused(tok, tmp_path):
    data = artifact.dumps_artifact(tok).replace(b'superword "letter-run"', b'superword "letter-x"')
    body = data[: data.rfind(b"sha256 ")]
    import hashlib

    data = body + f"sha256 {hashlib.sha256(body).hexdigest()}\n".encode()
    with pytest.raises(TokenizerFileError, match="letter-x"):
        artifact.loads_artifact(data, "x.bpe")


def test_exports_refuse_with_the_reason(tok, tmp_path):
    for export in (tok.to_tiktoken, tok.to_huggingface):
        with pytest.raises(ValueError, match="superword tokenizer"):
            export(str(tmp_path / "out"))
    with pytest.raises(ValueError, match="superword tokenizer"):
        tok.to_gpt2_files(str(tmp_path))


def test_truncated_is_fewer_supermerges(docs, tok):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        small = train_superword(bpe_core.count_chunks(docs, "cl100k"), 1100, 100, docs, special_tokens=[SPECIAL])
    cut = tok.truncated(1100)
    assert cut.superword == small.superword and cut.vocab == small.vocab
    assert cut.special_tokens == small.special_tokens
    assert cut.digest() == small.digest()
    assert tok.truncated(900).superword is None and tok.truncated(900).n_vocab == 900


def test_pickle(tok, docs):
    back = pickle.loads(pickle.dumps(tok))
    assert back.encode_ordinary(docs[5]) == tok.encode_ordinary(docs[5])
    cloudpickle = pytest.importorskip("cloudpickle")
    assert cloudpickle.loads(cloudpickle.dumps(tok)).superword == tok.superword


@pytest.mark.parametrize("name", CORPORA)
def test_documents_equal_the_reference(tok, name):
    """The first 30 documents of each corpus; every document under BEAM_BPE_FULL=1 (make test-full)."""
    check = corpus(name, 1_000_000 if FULL else 30)
    word = _word(tok)
    expected = [sw.encode_reference(word, tok.superword, d) for d in check]
    for threads in (1, 2, 4):
        ids, offsets = tok.encode_ordinary_flat(check, num_threads=threads)
        assert [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:], strict=True)] == expected


def test_lone_surrogates_and_bytes_take_the_references_reading(tok):
    """A lone surrogate reads as U+FFFD (as the plain tokenizer's); invalid UTF-8 bytes as surrogateescape."""
    word = _word(tok)
    texts = ["the cat\ud800 sat on the mat", "of the \udc80children of the LORD", "and the king said"]
    expected = [sw.encode_reference(word, tok.superword, t) for t in texts]
    assert [tok.encode_ordinary(t) for t in texts] == expected
    ids, offsets = tok.encode_ordinary_flat(texts, num_threads=1)
    assert [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:], strict=True)] == expected
    data = b"of the \xff children of the LORD"
    assert tok.encode_ordinary(data) == sw.encode_reference(word, tok.superword, data)
