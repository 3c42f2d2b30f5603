"""Stage tests: EncodeDocuments (TestPipeline + assert_that), the special-token policy, BOS/EOS, round-trip
verification, encode failures as dead letters, the tokenizer reference and pickling."""

from __future__ import annotations

import pickle

import apache_beam as beam
import cloudpickle
import numpy as np
import pyarrow as pa
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from conftest import corpus, ours_openai, tiktoken_openai
from test_encode_e2e import EOT, r50k_file  # noqa: F401 - a fixture

import bpe_core
from bpe_core import PreTokenizer, Tokenizer
from pipeline.corpus.records import DeadLetter, DocumentBatch
from pipeline.encode.documents import NAMESPACE, EncodeDocuments, EncodeDocumentsFn, encode_batch, first_difference
from pipeline.encode.policy import EncodePolicy, resolve_policy
from pipeline.encode.tokenizer import TokenizerRef, open_tokenizer
from pipeline.errors import UsageError


def _batch(
    texts: list[str], *, range_index: int = 0, batch_index: int = 0, last: bool = True, dead=()
) -> DocumentBatch:
    positions = [10 * i for i in range(len(texts))]
    return DocumentBatch(
        range_index,
        batch_index,
        last,
        "src.jsonl",
        0,
        1,
        "offset",
        positions,
        list(texts),
        list(dead),
        len(texts) + len(dead),
        sum(len(t) for t in texts),
    )


def test_a_batch_becomes_flat_ids_equal_to_the_library_and_tiktoken():
    tok = ours_openai("cl100k")
    docs = corpus("multi_udhr", 6) + corpus("fortunes_multi", 40) + ["", f"x {EOT} y"]
    encoded = encode_batch(tok, _batch(docs), EncodePolicy(), np.dtype("uint32"))
    offsets = np.concatenate([[0], np.cumsum(encoded.lengths)])
    got = [encoded.tokens[a:b].tolist() for a, b in zip(offsets, offsets[1:], strict=False)]
    assert got == [tok.encode_ordinary(d) for d in docs] == tiktoken_openai("cl100k").encode_ordinary_batch(docs)
    assert encoded.tokens.dtype == np.uint32 and encoded.positions.tolist() == [10 * i for i in range(len(docs))]
    assert encoded.text_bytes == sum(len(d.encode()) for d in docs) and encoded.documents_read == len(docs)


def test_policy_special_tokens_ordinary_by_default_allowed_on_request_and_bos_eos():
    tok = ours_openai("cl100k")
    text = f"before{EOT}after"
    ordinary = resolve_policy(tok)
    allowed = resolve_policy(tok, special_tokens="allowed", bos=EOT, eos="auto")
    assert ordinary.encode(tok, [text]) == [tok.encode_ordinary(text)] and 100257 not in ordinary.encode(tok, [text])[0]
    assert allowed.encode(tok, [text]) == [tok.encode(text, allowed_special="all")]
    encoded = encode_batch(tok, _batch([text]), allowed, np.dtype("uint32"))
    assert encoded.tokens.tolist() == [100257, *tok.encode(text, allowed_special="all"), 100257]
    assert (allowed.bos_id, allowed.eos_id, allowed.extra_tokens) == (100257, 100257, 2)


def test_policy_errors_name_the_problem_and_the_fix():
    tok = ours_openai("cl100k")
    with pytest.raises(UsageError, match="--special-tokens must be one of ordinary, allowed"):
        resolve_policy(tok, special_tokens="all")
    with pytest.raises(UsageError, match=r"--bos: the tokenizer has none of the usual tokens .* name one"):
        resolve_policy(tok, bos="auto")
    with pytest.raises(UsageError, match="'<s>' is not a special or added token"):
        resolve_policy(tok, eos="<s>")


def test_verify_passes_round_trips_and_reports_the_first_differing_offset():
    tok = ours_openai("r50k")
    docs = ["naïve café ☕ 🤷🏽‍♀️", "plain", "bad \udc80 surrogate"]
    encoded = encode_batch(tok, _batch(docs), EncodePolicy(), np.dtype("uint16"), verify=True)
    assert encoded.verified == 2 and encoded.positions.tolist() == [0, 10]
    (dead,) = encoded.dead_letters
    assert dead.position == 20 and dead.reason.startswith("round trip differs at character 4 (byte 4)")
    assert (
        first_difference("abc", "abc") == 3 and first_difference("abc", "abd") == 2 and first_difference("", "x") == 0
    )


def test_verify_compares_with_the_normalized_text_for_a_normalizing_tokenizer():
    pre = PreTokenizer.from_spec("cl100k", normalizer="NFKC")
    tok = bpe_core.train(bpe_core.count_chunks(["ﬁne ﬁsh", "plain text"], pre), 280)
    encoded = encode_batch(tok, _batch(["ﬁne ﬁsh ①"]), EncodePolicy(), np.dtype("uint16"), verify=True)
    assert encoded.verified == 1 and not encoded.dead_letters


def test_a_document_the_tokenizer_rejects_is_a_dead_letter_and_the_rest_is_encoded():
    ascii_only = Tokenizer({i: bytes([i]) for i in range(128)}, merges=[], pretokenizer="cl100k")
    reader_dead = DeadLetter("src.jsonl", 15, "offset", "malformed JSON: x")
    encoded = encode_batch(
        ascii_only, _batch(["abc", "café", "de"], dead=[reader_dead]), EncodePolicy(), np.dtype("uint16")
    )
    assert encoded.tokens.tolist() == [97, 98, 99, 100, 101] and encoded.positions.tolist() == [0, 20]
    assert [(d.position, d.reason[:13]) for d in encoded.dead_letters] == [(10, "encode failed"), (15, "malformed JSO")]
    assert encoded.documents_read == len(encoded.lengths) + len(encoded.dead_letters)


def test_encode_documents_stage_in_a_pipeline(r50k_file):  # noqa: F811 - the fixture
    tok, ref = open_tokenizer(r50k_file)
    docs = corpus("en_bible_kjv", 4) + corpus("fortunes_multi", 30)
    batches = [
        _batch(docs[:20], batch_index=0, last=False),
        _batch(docs[20:], batch_index=1),
        _batch(["x"], range_index=1),
    ]
    expected = [
        (0, 0, [tok.encode_ordinary(d) + [50256] for d in docs[:20]]),
        (0, 1, [tok.encode_ordinary(d) + [50256] for d in docs[20:]]),
        (1, 0, [tok.encode_ordinary("x") + [50256]]),
    ]

    def as_lists(e):
        offsets = np.concatenate([[0], np.cumsum(e.lengths)])
        return (
            e.range_index,
            e.batch_index,
            [e.tokens[a:b].tolist() for a, b in zip(offsets, offsets[1:], strict=False)],
        )

    with TestPipeline(runner="FnApiRunner") as p:
        encoded = (
            p
            | beam.Create(batches)
            | "Encode" >> EncodeDocuments(ref, resolve_policy(tok, eos="auto"), "uint16", verify=True)
        )
        assert_that(encoded | beam.Map(as_lists), equal_to(expected))


def test_the_tokenizer_travels_by_reference_and_is_checked_on_the_worker(r50k_file, tmp_path):  # noqa: F811
    tok, ref = open_tokenizer(r50k_file)
    assert ref.load() is ref.load() and ref.load().n_vocab == tok.n_vocab == 50257  # once per process
    copy = tmp_path / "copy.bpe"
    copy.write_bytes(open(r50k_file, "rb").read())
    assert TokenizerRef(str(copy), ref.digest).load().n_vocab == 50257  # the digest is of the tokenizer, not the path
    tiktoken_file = tmp_path / "r50k.tiktoken"
    tok.to_tiktoken(str(tiktoken_file))  # OpenAI's r50k_base.tiktoken byte for byte: read with another pre-tokenizer
    changed = TokenizerRef(str(tiktoken_file), ref.digest, "cl100k")
    with pytest.raises(UsageError, match="changed since the job started"):
        changed.load()


def test_dofn_reference_and_policy_pickle(r50k_file):  # noqa: F811
    _, ref = open_tokenizer(r50k_file)
    fn = EncodeDocumentsFn(ref, EncodePolicy("allowed", 1, 2), "uint16", verify=True)
    for dumps, loads in ((pickle.dumps, pickle.loads), (cloudpickle.dumps, cloudpickle.loads)):
        back = loads(dumps(fn))
        assert (back.tokenizer, back.policy, back.dtype, back.verify) == (ref, fn.policy, "uint16", True)
        assert len(dumps(fn)) < 4096, "the DoFn must carry a reference, not the tokenizer"


def test_counters_count_documents_bytes_tokens_dead_letters_and_verified(r50k_file):  # noqa: F811
    tok, ref = open_tokenizer(r50k_file)
    docs = ["hello world", "naïve café", "bad \udc80"]
    p = TestPipeline(runner="FnApiRunner")
    _ = (
        p
        | beam.Create([_batch(docs, dead=[DeadLetter("src.jsonl", 99, "offset", "malformed JSON")])])
        | EncodeDocuments(ref, EncodePolicy(eos_id=50256), "uint16", verify=True)
    )
    result = p.run()
    result.wait_until_finish()
    counters = {
        c.key.metric.name: c.committed
        for c in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    }
    tokens = sum(len(tok.encode_ordinary(d)) + 1 for d in docs[:2])
    assert counters == {"documents": 2, "bytes": len("hello world") + len("naïve café".encode()), "tokens": tokens,
                        "dead_letters": 2, "verified": 2}  # fmt: skip


def test_an_arrow_batch_is_encoded_in_place_and_a_bad_element_alone_is_a_dead_letter():
    from pipeline.corpus.texts import TextColumn

    tok = ours_openai("cl100k")
    docs = corpus("fortunes_multi", 30) + ["", "naïve ☕"]
    raw = [d.encode() for d in docs]
    raw.insert(7, b"bad \xff byte")  # not UTF-8: the flat API names it (InvalidTextError), the others are encoded
    offsets = np.cumsum([0] + [len(r) for r in raw], dtype=np.int64)
    arrow = pa.LargeStringArray.from_buffers(len(raw), pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(raw)))
    batch = _batch(["x"] * len(raw))._replace(texts=TextColumn(arrow))
    policy = resolve_policy(tok, special_tokens="allowed", bos=EOT, eos=EOT)
    encoded = encode_batch(tok, batch, policy, np.dtype("uint32"))
    expected = [[100257, *ids, 100257] for ids in tiktoken_openai("cl100k").encode_ordinary_batch(docs)]
    got = [encoded.tokens[a:b].tolist() for a, b in zip(encoded.offsets[:-1], encoded.offsets[1:], strict=True)]
    assert got == expected and encoded.positions.tolist() == [10 * i for i in range(len(raw)) if i != 7]
    (dead,) = encoded.dead_letters
    assert dead.position == 70 and dead.reason.startswith("encode failed: text 7 is not valid UTF-8")
    assert encoded.text_bytes == sum(map(len, raw)) - len(raw[7]) and encoded.documents_read == len(raw)
