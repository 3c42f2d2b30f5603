"""Corruption sweep: real corpus lines in every input format, one planted fault per file, through both pipelines.

The lines come from the shared corpora (fortunes_multi and multi_udhr, JSONL .gz); the text, Parquet, plain,
.gz, .bz2 and .zst files are made from them in tmp_path. Each file holds one fault alone, so that no other fault
sends its block to the exact path first. Every run must complete; the manifest must reconcile; the dead letters must
be exactly the planted ones (source and offset or row); every good document's ids must equal tiktoken's
(cl100k_base, OpenAI's rank file). What each fault is expected to become is written beside it here, from the bytes
planted, not from the reader.
"""

from __future__ import annotations

import bz2
import functools
import gzip
import json
import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from conftest import data_path, tiktoken_openai

from pipeline.cli import main
from pipeline.encode.readback import iter_documents

LIMIT = 4096  # --max-document-bytes of every run
BOM = b"\xef\xbb\xbf"
DEAD = None  # the expected text of a line that must be a dead letter
SKIP = ...  # a blank JSONL line: no record, neither a document nor a dead letter


@dataclass
class Expected:
    """Per file: the good documents (position -> text) and the dead letters' positions."""

    docs: dict[tuple[str, int], str] = field(default_factory=dict)
    dead: set[tuple[str, int]] = field(default_factory=set)


@functools.cache
def _real_lines(n: int) -> tuple[bytes, ...]:
    """Real JSONL lines (with their other fields) of two shared corpora, each under LIMIT bytes."""
    lines = []
    for name, take in (("fortunes_multi", n), ("multi_udhr", 40)):
        with gzip.open(data_path("corpora", f"{name}.jsonl.gz")) as f:
            lines += [
                line.rstrip(b"\n") for line, _ in zip(f, range(take * 3), strict=False) if len(line) < LIMIT // 2
            ][:take]
    return tuple(lines)


def _compress(name: str, data: bytes) -> bytes:
    if name.endswith(".gz"):
        return gzip.compress(data, mtime=0)
    if name.endswith(".bz2"):
        return bz2.compress(data)
    if name.endswith(".zst"):
        return zstandard.ZstdCompressor().compress(data)
    return data


class Corpus:
    """Files of one format in one folder, with what reading each must give."""

    def __init__(self, root: Path) -> None:
        self.root, self.expected = root, Expected()
        root.mkdir(parents=True)

    def lines(self, name: str, lines: list[tuple[bytes, str | None]], *, eol: bytes = b"\n", head: bytes = b"") -> None:
        """A text or JSONL file of ``head`` + lines joined by ``eol``; each line's expected text, or DEAD."""
        path, pos = str(self.root / name), len(head)
        for raw, text in lines:
            self._expect(path, 0 if pos == len(head) else pos, text)
            pos += len(raw) + len(eol)
        (self.root / name).write_bytes(_compress(name, head + eol.join(raw for raw, _ in lines) + eol))

    def truncated(self, name: str, data: bytes, text_of, decompressed_prefix) -> None:
        """A compressed file cut at 60%: the whole lines that a reference decompressor gets out of the bytes left are
        documents, and one dead letter stands where the first lost line starts. ``data`` is several of zstd's 128 KiB
        blocks (a cut inside the only block leaves nothing to read)."""
        cut = _compress(name, data)[: len(_compress(name, data)) * 3 // 5]
        (self.root / name).write_bytes(cut)
        kept = decompressed_prefix(cut)
        end = kept.rfind(b"\n") + 1
        pos, path = 0, str(self.root / name)
        for raw in kept[:end].split(b"\n")[:-1]:
            self._expect(path, pos, text_of(raw))
            pos += len(raw) + 1
        assert 0 < end < len(data) and data.startswith(kept[:end]), (name, len(cut), len(kept), len(data))
        self.expected.dead.add((path, end))

    def parquet(self, name: str, cells: list[tuple[bytes | str | None, str | None]], kind: pa.DataType) -> None:
        raw = [c for c, _ in cells]
        array = pa.array([c.encode() if isinstance(c, str) else c for c in raw], pa.large_binary())
        # a view, not a cast: the string columns keep their invalid UTF-8, as a writer that does not check leaves it
        array = array.view(kind) if kind == pa.large_string() else array.cast(pa.binary()).view(kind)
        pq.write_table(pa.table({"text": array}), self.root / name, row_group_size=7)
        for row, (_, text) in enumerate(cells):
            self._expect(str(self.root / name), row, text)

    def _expect(self, path: str, pos: int, text: str | None) -> None:
        if text is SKIP:
            return
        if text is DEAD:
            self.expected.dead.add((path, pos))
        else:
            self.expected.docs[(path, pos)] = text


def _json(text: str) -> bytes:
    return json.dumps({"text": text, "id": "planted"}, ensure_ascii=False).encode()


def _gunzip_prefix(data: bytes) -> bytes:
    return zlib.decompressobj(wbits=31).decompress(data)


def _unzstd_prefix(data: bytes) -> bytes:
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


def _binary_lines(blob: bytes, good) -> list[tuple[bytes, str | None]]:
    """A binary file's lines, each with what it must give (``good(line)``: its text, or DEAD)."""
    return [(line, good(line)) for line in blob.split(b"\n")]


def _utf8_or_dead(line: bytes) -> str | None:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return DEAD


def jsonl_corpus(root: Path) -> Corpus:
    real = _real_lines(400)
    good = [(line, json.loads(line)["text"]) for line in real]
    c, rng = Corpus(root), random.Random(14)

    def with_fault(name: str, fault: tuple[bytes, str | None], at: int = 5) -> None:
        part = good[at * 7 % 300 :][:9]
        c.lines(name, [*part[:at], fault, *part[at:]])

    with_fault("a_bad_start.jsonl", (b"\xff" + _json("invalid byte before the record"), DEAD))
    with_fault("b_bad_middle.jsonl.gz", (b'{"text": "ab\xc3\x28cd"}', DEAD))
    with_fault("c_bad_end.jsonl.zst", (_json("a cut multi-byte character after the record") + b"\xe2\x82", DEAD))
    with_fault(
        "d_bad_other_field.jsonl.bz2", (b'{"text": "fine text", "id": "\xc0\xaf"}', DEAD)
    )  # a JSON text is UTF-8 whole
    with_fault("e_lone_high_surrogate.jsonl", (b'{"text": "half a pair \\ud800 here"}', DEAD))
    with_fault("f_lone_low_surrogate.jsonl.gz", (b'{"text": "\\udc00 at the start"}', DEAD), at=0)
    with_fault("g_surrogate_pair.jsonl", (b'{"text": "a whole pair \\ud83d\\ude00"}', "a whole pair \U0001f600"))
    with_fault("h_raw_nul.jsonl", (b'{"text": "raw \x00 byte"}', DEAD))  # control characters must be escaped in JSON
    with_fault("i_escaped_nul.jsonl.zst", (b'{"text": "escaped \\u0000 NUL"}', "escaped \x00 NUL"))
    with_fault("j_long_line.jsonl", (_json("y" * (LIMIT + 10)), DEAD), at=8)
    c.lines("k_bom.jsonl.gz", good[40:48], head=BOM)
    c.lines("l_crlf.jsonl.zst", good[50:58], eol=b"\r\n")
    stream = b"".join(line + b"\n" for line in _real_lines(3000))
    c.truncated("m_truncated.jsonl.gz", stream, lambda raw: json.loads(raw)["text"], _gunzip_prefix)
    c.truncated("n_truncated.jsonl.zst", stream, lambda raw: json.loads(raw)["text"], _unzstd_prefix)
    blob = rng.randbytes(3000)
    c.lines("o_binary.jsonl", _binary_lines(blob, lambda line: DEAD if line.strip() else SKIP))
    c.lines("p_empty.jsonl", [])
    (root / "p_empty.jsonl").write_bytes(b"")
    return c


def text_corpus(root: Path) -> Corpus:
    texts = [t for line in _real_lines(200) for t in json.loads(line)["text"].split("\n") if t][:300]
    good = [(t.encode(), t) for t in texts]
    c, rng = Corpus(root), random.Random(41)

    def with_fault(name: str, fault: tuple[bytes, str | None], at: int = 5) -> None:
        part = good[at * 11 % 200 :][:9]
        c.lines(name, [*part[:at], fault, *part[at:]])

    with_fault("a_bad_start.txt", (b"\x80 a continuation byte first", DEAD))
    with_fault("b_bad_middle.txt.gz", (b"caf\xc3 au lait", DEAD))
    with_fault("c_bad_end.txt.zst", (b"ends in half a character \xf0\x9f\x98", DEAD))
    with_fault("d_encoded_surrogate.txt.bz2", (b"CESU-8 \xed\xa0\x80 is not UTF-8", DEAD))
    with_fault("e_nul.txt", (b"a NUL \x00 inside", "a NUL \x00 inside"))
    with_fault("f_long_line.txt", (b"z" * (LIMIT + 1), DEAD), at=0)
    c.lines("g_bom.txt.gz", good[20:28], head=BOM)
    c.lines("h_crlf.txt", [(raw, text + "\r") for raw, text in good[30:38]], eol=b"\r\n")  # a line keeps its \r
    stream = b"".join(t.encode() + b"\n" for line in _real_lines(3000) for t in json.loads(line)["text"].split("\n"))
    c.truncated("i_truncated.txt.zst", stream, lambda raw: raw.decode(), _unzstd_prefix)
    c.truncated("j_truncated.txt.gz", stream, lambda raw: raw.decode(), _gunzip_prefix)
    blob = rng.randbytes(3000)
    c.lines("k_binary.txt", _binary_lines(blob, _utf8_or_dead))
    c.lines("l_empty.txt", [])
    (root / "l_empty.txt").write_bytes(b"")
    return c


def parquet_corpus(root: Path) -> Corpus:
    texts = [json.loads(line)["text"] for line in _real_lines(60)]
    c = Corpus(root)
    bad = [(b"\xff at the start", DEAD), (b"in the \xc3\x28 middle", DEAD), (b"at the end \xe2\x82", DEAD)]
    for i, kind in enumerate((pa.string(), pa.large_string(), pa.binary())):
        cells = [(t, t) for t in texts[i * 12 : i * 12 + 12]]
        cells.insert(3, bad[i])
        cells.insert(9, ("NUL \x00 inside", "NUL \x00 inside"))
        c.parquet(f"{'abc'[i]}_{kind}.parquet", cells, kind)
    cells = [(t, t) for t in texts[40:50]]
    cells.insert(6, ("x" * (LIMIT + 1), DEAD))
    cells.insert(2, ("\ud800".encode("utf-8", "surrogatepass"), DEAD))  # a lone surrogate written as bytes
    c.parquet("d_long_and_surrogate.parquet", cells, pa.string())
    return c


CORPORA = {"jsonl": jsonl_corpus, "text": text_corpus, "parquet": parquet_corpus}


def _dead_letters(out: Path) -> set[tuple[str, int]]:
    records = [
        json.loads(line)
        for path in sorted((out / "dead_letters").glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    return {(d["source"], d.get("offset", d.get("row"))) for d in records}


def _run(command: str, fmt: str, corpus: Corpus, out: Path, *extra) -> dict:
    glob = str(corpus.root / "*")
    args = [
        command,
        *extra,
        "--input",
        glob,
        "--format",
        fmt,
        "--out",
        out,
        "--max-document-bytes",
        LIMIT,
        "--range-bytes",
        1500,
    ]
    code = main([str(a) for a in args])
    assert code == 0, f"{command} on the {fmt} sweep failed"
    return json.loads((out / "manifest.json").read_text())


@pytest.mark.parametrize("fmt", CORPORA)
def test_training_counts_every_good_document_and_dead_letters_exactly_the_planted_faults(tmp_path, fmt):
    corpus = CORPORA[fmt](tmp_path / "in")
    m = _run("train", fmt, corpus, tmp_path / "out", "--counts-only")
    assert m["documents_read"] == m["documents_counted"] + m["dead_letters"]
    assert m["documents_counted"] == len(corpus.expected.docs)
    assert _dead_letters(tmp_path / "out") == corpus.expected.dead and m["dead_letters"] == len(corpus.expected.dead)


# --verify on JSONL only: lone surrogates are a JSON matter (the same dead letters with and without it), and each
# run costs seconds
@pytest.mark.parametrize(("fmt", "verify"), [("jsonl", False), ("jsonl", True), ("text", False), ("parquet", False)])
def test_encoding_gives_tiktokens_ids_for_every_good_document_and_dead_letters_exactly_the_faults(
    tmp_path, fmt, verify
):
    corpus = CORPORA[fmt](tmp_path / "in")
    tokenizer = data_path("tiktoken", "cl100k_base.tiktoken")
    extra = ["--tokenizer", tokenizer, "--shard-format", "parquet", *(["--verify"] if verify else [])]
    m = _run("encode", fmt, corpus, tmp_path / "out", *extra)
    assert m["documents_read"] == m["documents_written"] + m["dead_letters"]
    assert _dead_letters(tmp_path / "out") == corpus.expected.dead and m["dead_letters"] == len(corpus.expected.dead)
    enc = tiktoken_openai("cl100k")
    got = {}
    for doc_id, ids in iter_documents(str(tmp_path / "out")):
        source, sep, pos = doc_id.rpartition("@" if fmt != "parquet" else "#")
        got[(f"{m['root']}/{source}", int(pos))] = ids.tolist()  # ids are relative to the inputs' root
    assert got.keys() == corpus.expected.docs.keys()
    wrong = [key for key, text in corpus.expected.docs.items() if got[key] != enc.encode_ordinary(text)]
    assert not wrong, f"{len(wrong)} documents differ from tiktoken, first {wrong[0]}"
