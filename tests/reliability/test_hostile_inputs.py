"""Hostile inputs through both pipelines and the library: ../shared/data/adversarial, invalid UTF-8, NUL bytes,
deeply nested and enormous JSON, Parquet of the wrong schema, truncated and bomb gzip files, a very long line, a run
without whitespace, file names with ``..``, spaces, non-ASCII and glob characters.

Promise: each document is counted or encoded exactly as the library does it, or becomes a dead letter with its file,
position and a reason; nothing is lost (documents read = written + dead letters); memory stays bounded (peaks of
fresh processes, measured) and work grows at most n log n (operation counts, never wall time)."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import adversarial_cases, data_path, ours_openai

import bpe_core
from pipeline.cli import main
from pipeline.encode.readback import find_document, iter_documents
from pipeline.train.counts_files import load_counts

from .lib import FULL, MIB, is_utf8, write_bytes

AREA = "hostile inputs"
CAP = (16 if FULL else 4) * MIB  # --max-document-bytes in these runs (FULL: room for a 10 MiB run)


# ------------------------------------------------------------------ a corpus of hostile files, with what to expect
class Corpus:
    """Files written line by line, each line's expected outcome recorded by (source, position)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.expected: dict[tuple[str, int], tuple[str, str]] = {}  # -> ("ok", text) or ("dead", reason words)

    def lines(self, relative: str, items: list[tuple[bytes, str, str]]) -> Path:
        """``items``: (raw line, "ok" or "dead" or "skip" (a blank line: no record), text or reason words)."""
        path = self.root / relative
        data, offset = b"", 0
        for raw, outcome, what in items:
            if outcome != "skip":
                self.expected[str(path), offset] = (outcome, what)
            data += raw + b"\n"
            offset += len(raw) + 1
        write_bytes(path, data)  # compressed by its name (.gz)
        return path

    def rows(self, relative: str, table: pa.Table, outcomes: list[tuple[str, str]]) -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path, row_group_size=3)
        for row, outcome in enumerate(outcomes):
            self.expected[str(path), row] = outcome
        return path


def js(value) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def jsonl_cases(c: Corpus) -> list[Path]:
    ok = lambda text: (js({"text": text}), "ok", text)  # noqa: E731
    many_keys = {f"k{i}": i for i in range(100_000)} | {"text": "found among 100,000 keys"}
    main_file = c.lines("jsonl/hostile.jsonl", [
        ok("plain"),
        ok("a NUL \x00 inside, escaped in JSON"),
        (b'{"text": "a raw NUL \x00 byte"}', "dead", "malformed JSON"),
        (b'{"text": ' + nested(100_000) + b"}", "dead", "nested too deeply"),
        (b'{"text": "deep sibling", "meta": ' + nested(100_000) + b"}", "ok", "deep sibling"),
        (b'{"text": "deep object", "meta": ' + b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"}", "ok", "deep object"),
        (js(many_keys), "ok", many_keys["text"]),
        (js({"text": "x" * (CAP + 10)}), "dead", "longer than --max-document-bytes"),
        (js({"text": 5}), "dead", "is int"),
        (js({"text": None}), "dead", "is NoneType"),
        (js({"text": {"nested": "object"}}), "dead", "is dict"),
        (js([1, 2, 3]), "dead", "expected a JSON object"),
        (js({"body": "no text field"}), "dead", "missing field"),
        (b'{"text": "bad \xc3\x28 utf-8"}', "dead", "undecodable"),
        (b'{"text": "huge number", "n": 1e400}', "ok", "huge number"),
        (b"", "skip", ""),
        (b"   ", "skip", ""),
        (b'{"text": "truncated JSON', "dead", "malformed JSON"),
        ok("after everything"),
    ])  # fmt: skip
    names = [
        c.lines("jsonl/dir with spaces/naïve 名前 ☕.jsonl", [ok("from a non-ASCII name")]),
        c.lines("jsonl/a[1].jsonl", [ok("from a name with glob characters")]),
        c.lines("jsonl/has@at#hash.jsonl", [ok("from a name with the id separators")]),
        c.lines("jsonl/..dots...jsonl", [ok("from a name with dots")]),
    ]
    docs = [f"document {i} of a gzip file cut in the middle" for i in range(3000)]
    whole = gzip.compress(b"".join(js({"text": d}) + b"\n" for d in docs), mtime=0)
    truncated = c.root / "jsonl" / "truncated.jsonl.gz"
    truncated.write_bytes(whole[: len(whole) // 2])
    c.truncated = (truncated, docs)
    return [main_file, truncated, *names]


def text_cases(c: Corpus) -> list[Path]:
    ok = lambda raw: (raw, "ok", raw.decode())  # noqa: E731
    bad = "undecodable bytes"
    run = "y" * (MIB if not FULL else 10 * MIB)
    main_file = c.lines("text/bytes.txt", [
        ok(b"plain"),
        ok(b"NUL \x00 bytes \x00\x00 inside"),
        ok(b"a windows line\r"),
        (b"lone continuation \xc3\x28", "dead", bad),
        (b"overlong \xc0\xaf slash", "dead", bad),
        (b"surrogate \xed\xa0\x80 half", "dead", bad),
        (b"beyond unicode \xf5\x80\x80\x80", "dead", bad),
        (b"truncated \xf0\x9f\x98", "dead", bad),
        (b"z" * (CAP + 1), "dead", "longer than --max-document-bytes"),
        ok(run.encode()),
        ok(b"after everything"),
    ])  # fmt: skip
    bomb = c.lines("text/bomb.txt.gz", [(b"\x00" * (64 * MIB), "dead", "longer than --max-document-bytes"),
                                        ok(b"after the bomb")])  # fmt: skip
    assert bomb.stat().st_size < 128 * 1024  # a tiny file, a huge expansion
    return [main_file, bomb]


def parquet_cases(c: Corpus) -> list[Path]:
    wrong = "wrong schema"
    return [
        c.rows(
            "parquet/good.parquet",
            pa.table({"text": ["row 0", None, "row \x00 2", "x" * (CAP + 1), "row 4"]}),
            [("ok", "row 0"), ("dead", "null value"), ("ok", "row \x00 2"), ("dead", "longer than"), ("ok", "row 4")],
        ),
        c.rows("parquet/no-column.parquet", pa.table({"body": ["a", "b"]}), [("dead", "no column 'text'")] * 2),
        c.rows("parquet/ints.parquet", pa.table({"text": [1, 2]}), [("dead", wrong)] * 2),
        c.rows("parquet/lists.parquet", pa.table({"text": [["a"], ["b", "c"]]}), [("dead", wrong)] * 2),
        c.rows("parquet/structs.parquet", pa.table({"text": [{"a": "x"}, {"a": "y"}]}), [("dead", wrong)] * 2),
        c.rows(
            "parquet/binary.parquet",
            pa.table({"text": pa.array([b"ok bytes", b"\xff\xfe bad"], pa.binary())}),
            [("ok", "ok bytes"), ("dead", "undecodable")],
        ),
        c.rows(
            "parquet/large.parquet",
            pa.table({"text": pa.array(["large string"], pa.large_string())}),
            [("ok", "large string")],
        ),
    ]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[Corpus, dict[str, list[Path]]]:
    c = Corpus(tmp_path_factory.mktemp("hostile"))
    return c, {"jsonl": jsonl_cases(c), "text": text_cases(c), "parquet": parquet_cases(c)}


def _input_flags(fmt: str, paths: list[Path], root: Path) -> list[str]:
    flags = ["--format", fmt, "--max-document-bytes", str(CAP), "--range-bytes", "65536"]
    for path in paths:
        flags += [
            "--input",
            str(path).replace(str(root), str(root / "jsonl" / "..")) if "..dots" in path.name else str(path),
        ]
    return flags


def _dead_letters(out: Path) -> dict[tuple[str, int], str]:
    found = {}
    for path in sorted((out / "dead_letters").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            d = json.loads(line)
            found[d["source"], d.get("offset", d.get("row"))] = d["reason"]
    return found


def _settle_truncated(c: Corpus, dead: dict) -> int:
    """The truncated gzip: the documents before the damage are kept, the rest is one dead letter at its offset."""
    path, docs = c.truncated
    (offset,) = [pos for (source, pos), reason in dead.items() if source == str(path)]
    assert dead[str(path), offset].startswith("damaged compressed file: EOFError")
    kept, position = 0, 0
    for doc in docs:
        if position >= offset:
            break
        c.expected[str(path), position] = ("ok", doc)
        position += len(js({"text": doc})) + 1
        kept += 1
    assert position == offset and 0 < kept < len(docs), "the damage is not at a line start, or nothing was kept"
    c.expected[str(path), offset] = ("dead", "damaged compressed file")
    return kept


def _check_dead(c: Corpus, dead: dict, sources: set[str]) -> dict:
    expected = {k: v for k, v in c.expected.items() if k[0] in sources}
    assert set(dead) == {k for k, v in expected.items() if v[0] == "dead"}, "dead letters differ from the bad records"
    for key, reason in dead.items():
        assert expected[key][1] in reason, (key, reason)
    return expected


@pytest.mark.parametrize("fmt", ["jsonl", "text", "parquet"])
def test_hostile_files_through_the_train_pipeline(fmt, hostile, tmp_path, reliability):
    c, files = hostile
    out = tmp_path / "out"
    assert main(["train", *_input_flags(fmt, files[fmt], c.root), "--counts-only", "--out", str(out)]) == 0
    dead = _dead_letters(out)
    if fmt == "jsonl":
        _settle_truncated(c, dead)
    expected = _check_dead(c, dead, {str(p) for p in files[fmt]})
    good = [text for outcome, text in expected.values() if outcome == "ok"]
    counts, _ = load_counts(str(out / "counts"))
    assert dict(counts) == dict(bpe_core.count_chunks(good, "cl100k"))
    m = json.loads((out / "manifest.json").read_text())
    assert (m["documents_read"], m["documents_counted"], m["dead_letters"]) == (len(expected), len(good), len(dead))
    reasons = Counter(v[1] for v in expected.values() if v[0] == "dead")
    reliability.row(
        AREA,
        f"train pipeline, {fmt}: {len(expected)} records in {len(files[fmt])} hostile files "
        f"({', '.join(sorted(reasons))})",
        "every good document counted as bpe_core.count_chunks counts it; "
        "every bad record a dead letter at its file and position with its reason; read = counted + dead",
        inputs=len(expected),
        dead_letters=len(dead),
    )


@pytest.mark.parametrize("fmt", ["jsonl", "text", "parquet"])
def test_hostile_files_through_the_encode_pipeline(fmt, hostile, r50k_artifact, tmp_path, reliability):
    c, files = hostile
    out = tmp_path / "out"
    args = [
        "encode",
        "--tokenizer",
        r50k_artifact,
        *_input_flags(fmt, files[fmt], c.root),
        "--out",
        str(out),
        "--verify",
    ]
    assert main(args) == 0
    dead = _dead_letters(out)
    if fmt == "jsonl":
        _settle_truncated(c, dead)
    expected = _check_dead(c, dead, {str(p) for p in files[fmt]})
    tok = ours_openai("r50k")
    root = json.loads((out / "manifest.json").read_text())["root"]  # ids are relative to the inputs' root
    written = {f"{root}/{doc_id}": ids for doc_id, ids in iter_documents(str(out))}
    ok = {k: text for k, (outcome, text) in expected.items() if outcome == "ok"}
    assert len(written) == len(ok)
    for (source, position), text in ok.items():
        doc_id = f"{source}{'#' if fmt == 'parquet' else '@'}{position}"
        assert written[doc_id].tolist() == tok.encode_ordinary(text), doc_id
    for path in files[fmt]:  # decode --shards finds documents of every odd file name
        if "[" in path.name or "@" in path.name or " " in str(path):
            assert find_document(str(out), f"{path}@0")[1].tolist() == tok.encode_ordinary(ok[str(path), 0])
    m = json.loads((out / "manifest.json").read_text())
    assert (m["documents_read"], m["documents_written"], m["dead_letters"]) == (len(expected), len(ok), len(dead))
    assert m["verified"] == len(ok)
    reliability.row(
        AREA,
        f"encode pipeline --verify, {fmt}: {len(expected)} records in {len(files[fmt])} hostile files",
        "every good document encoded to the library's ids and decoded back by the streaming decoder; "
        "every bad record a dead letter with its reason; read = written + dead; decode --shards finds "
        "documents of files named with spaces, non-ASCII, '[1]', '@' and '#'",
        inputs=len(expected),
        dead_letters=len(dead),
    )


def test_the_adversarial_cases_through_both_pipelines(r50k_artifact, tmp_path, reliability):
    """cases.jsonl: str cases as JSONL (lone surrogates escaped, as in the file), bytes cases as lines of text."""
    cases = adversarial_cases()
    texts = [v for _, v in cases if isinstance(v, str)]
    blobs = [v for _, v in cases if isinstance(v, bytes)]
    jsonl = write_bytes(
        tmp_path / "in" / "cases.jsonl", b"".join(json.dumps({"text": t}).encode() + b"\n" for t in texts)
    )
    raw = b"".join(b + b"\n" for b in blobs)
    lines = raw.split(b"\n")[:-1]
    text = write_bytes(tmp_path / "in" / "cases.txt", raw)
    jquery = data_path("adversarial", "jquery.min.js")
    jquery_lines = jquery.read_bytes().split(b"\n")
    if jquery_lines[-1] == b"":
        jquery_lines.pop()
    surrogates = [t for t in texts if _has_lone_surrogate(t)]  # dead letters in every path (docs/pipelines.md)
    expected_good = [t for t in texts if t not in surrogates] + [
        line.decode() for line in lines + jquery_lines if is_utf8(line)
    ]
    bad_lines = sum(1 for line in lines + jquery_lines if not is_utf8(line))
    tok = ours_openai("r50k")
    for name, fmt, inputs in (("j", "jsonl", [jsonl]), ("t", "text", [text, jquery])):
        flags = ["--format", fmt, "--range-bytes", "65536"] + [a for p in inputs for a in ("--input", str(p))]
        assert main(["train", *flags, "--counts-only", "--out", str(tmp_path / f"train-{name}")]) == 0
        assert (
            main(["encode", "--tokenizer", r50k_artifact, *flags, "--out", str(tmp_path / f"enc-{name}"), "--verify"])
            == 0
        )
    manifests = {
        n: json.loads((tmp_path / n / "manifest.json").read_text()) for n in ("train-j", "train-t", "enc-j", "enc-t")
    }
    assert manifests["train-j"]["documents_read"] == manifests["enc-j"]["documents_read"] == len(texts)
    assert (
        manifests["train-t"]["documents_read"] == manifests["enc-t"]["documents_read"] == len(lines) + len(jquery_lines)
    )
    assert surrogates and manifests["train-j"]["dead_letters"] == manifests["enc-j"]["dead_letters"] == len(surrogates)
    assert manifests["train-t"]["dead_letters"] == bad_lines
    counts = Counter(dict(load_counts(str(tmp_path / "train-j" / "counts"))[0]))
    counts.update(dict(load_counts(str(tmp_path / "train-t" / "counts"))[0]))
    assert dict(counts) == dict(bpe_core.count_chunks(expected_good, "cl100k"))
    written = {
        doc_id: ids.tolist() for name in ("enc-j", "enc-t") for doc_id, ids in iter_documents(str(tmp_path / name))
    }
    dead = {k: v for name in ("enc-j", "enc-t") for k, v in _dead_letters(tmp_path / name).items()}
    assert len(written) + len(dead) == len(texts) + len(lines) + len(jquery_lines)
    assert Counter(re.match(r"[a-z]+(?: [a-z]+)*", r).group() for r in dead.values()) == Counter(
        {"undecodable bytes": bad_lines, "lone surrogate": len(surrogates)}
    ), "only invalid UTF-8 and lone surrogates (which are not text) may be dead letters"
    assert sorted(tok.decode(ids) for ids in written.values()) == sorted(expected_good)
    for m in manifests.values():
        assert m["documents_read"] == m.get("documents_counted", m.get("documents_written")) + m["dead_letters"]
    reliability.row(
        AREA,
        f"../shared/data/adversarial: {len(texts)} text cases (JSONL), {len(blobs)} byte cases "
        "(text lines), jquery.min.js, through both pipelines",
        "nothing crashes, hangs or is lost: counts equal bpe_core.count_chunks; every encoded document "
        "decodes to its text; dead letters only for invalid UTF-8 and lone surrogate escapes "
        "(with and without --verify)",
        inputs=len(cases) + 1,
        dead_letters=len(dead),
    )


def _has_lone_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)
