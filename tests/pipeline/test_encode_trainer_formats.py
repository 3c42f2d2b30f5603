"""The trainer formats (pipeline/encode/{datatrove,dolma,llmc}.py) against their own ecosystems, on shared corpora:

- datatrove: its ``DocumentTokenizer`` (``shuffle_documents=False``, ``eos_token``) on the same documents with our
  tokenizer exported as ``tokenizer.json`` writes the same ``.ds``, ``.ds.index`` and ``.ds.metadata`` bytes, and
  its ``DatatroveFileDataset`` reads ours back (positions from our index);
- dolma: ``dolma tokens`` (its own venv, ``make test`` builds it: dolma pins numpy < 2) on the same JSONL writes the
  same ``.npy`` bytes and the same ``.csv.gz`` text; without that venv, a transcription of its ``MemmapWriter``;
- llm.c (not on PyPI): a transcription of ``dev/data/data_common.py`` ``write_datafile`` and of ``fineweb.py``'s
  loop writes the same ``.bin`` bytes, and a reader written from ``dataloader.h``'s checks reads them.

In every case the ids are tiktoken's, for a uint16 vocabulary (r50k) and a uint32 one (cl100k).
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, corpus, openai_encoding, require_module, tiktoken_openai

from bpe_core import Tokenizer
from pipeline.encode.formats import datatrove, dolma, llmc
from pipeline.errors import ShardFileError

EOT = "<|endoftext|>"
DOLMA_VENV = Path(os.environ.get("BEAM_BPE_DOLMA_VENV", ROOT / ".cache" / "dolma-venv"))
FORMATS_FLAG = "BEAM_BPE_REQUIRE_FORMATS"


def documents() -> list[str]:
    """English, many scripts, code, short texts and an empty one; no text spells a special token."""
    udhr = [d for d in corpus("multi_udhr", 40) if len(d) < 6000][:8]
    return corpus("en_bible_kjv", 4) + udhr + corpus("fortunes_multi", 60) + corpus("code_cpython", 1) + [""]


def tokenizer(preset: str) -> Tokenizer:
    enc = openai_encoding(preset)
    return Tokenizer.from_tiktoken(enc["path"], pretokenizer=preset, special_tokens=enc["special_tokens"])


def expected_ids(preset: str, docs: list[str]) -> list[list[int]]:
    return tiktoken_openai(preset).encode_ordinary_batch(docs)


def write_in_batches(writer, ids, offsets, cuts, **columns) -> dict:
    """Write the documents in batches cut at the document indices ``cuts``: the files must not depend on them."""
    bounds = [0, *cuts, len(offsets) - 1]
    with writer:
        for a, b in zip(bounds, bounds[1:], strict=False):
            extra = {k: v[a:b] for k, v in columns.items()}
            writer.write(ids, offsets[a : b + 1], **extra)
    return writer.files


# ------------------------------------------------------------------ datatrove
@pytest.mark.parametrize("preset", ["r50k", "cl100k"])
def test_datatrove_files_equal_datatrove_document_tokenizer(preset, tmp_path):
    from datatrove.data import Document
    from datatrove.pipeline.tokens.tokenizer import DocumentTokenizer

    docs, tok = documents(), tokenizer(preset)
    hf = str(tmp_path / "tokenizer.json")
    tok.to_huggingface(hf)
    step = DocumentTokenizer(
        str(tmp_path / "theirs"), tokenizer_name_or_path=hf, eos_token=EOT, shuffle_documents=False
    )
    step.run(iter([Document(text=t, id=str(i)) for i, t in enumerate(docs)]), rank=0, world_size=1)

    ids, offsets = tok.encode_ordinary_flat(docs)
    eos = tok.encode(EOT, allowed_special="all")[0]
    files = write_in_batches(
        datatrove.DatatroveWriter(str(tmp_path / "ours" / "t"), n_vocab=tok.n_vocab, eos_id=eos, tokenizer_name=hf),
        ids,
        offsets,
        [3, 40],
    )
    for suffix in datatrove.SUFFIXES:
        ours = (tmp_path / "ours" / f"t{suffix}").read_bytes()
        assert ours == (tmp_path / "theirs" / f"00000_unshuffled{suffix}").read_bytes(), suffix
        assert files[f"t{suffix}"]["bytes"] == len(ours)
    reader = datatrove.DatatroveReader(str(tmp_path / "ours" / "t"))
    assert reader.token_size == (2 if preset == "r50k" else 4)
    assert [reader[i].tolist() for i in range(len(reader))] == [e + [eos] for e in expected_ids(preset, docs)]


def test_datatrove_file_dataset_reads_our_files(tmp_path):
    require_module(
        "torch", flag="BEAM_BPE_REQUIRE_MEGATRON", install="pip install torch==2.13.0 (make test installs it)"
    )
    from datatrove.utils.dataset import DatatroveFileDataset

    docs, tok = documents(), tokenizer("cl100k")
    ids, offsets = tok.encode_ordinary_flat(docs)
    write_in_batches(
        datatrove.DatatroveWriter(str(tmp_path / "t"), n_vocab=tok.n_vocab, eos_id=100257), ids, offsets, []
    )
    stream = [i for e in expected_ids("cl100k", docs) for i in [*e, 100257]]
    seq = 63
    dataset = DatatroveFileDataset(str(tmp_path / "t.ds"), seq, token_size=4, return_positions=True)
    assert len(dataset) == len(stream) // (seq + 1)
    for k in range(len(dataset)):
        item = dataset[k]
        window = stream[k * (seq + 1) : (k + 1) * (seq + 1)]
        assert item["input_ids"].tolist() == window
        # positions come from our .ds.index: they restart at 0 after each document's EOS, and only there
        restart = [j == 0 or window[j - 1] == 100257 for j in range(len(window))]
        assert [p == 0 for p in item["positions"].tolist()] == restart


# ------------------------------------------------------------------ dolma
def dolma_transcription(out: Path, rows: list[tuple[str, str, int, list[int]]], dtype) -> None:
    """dolma 1.2's MemmapWriter (write + close's resize) for (id, src, loc, tokens with EOS) rows, in a file."""
    tokens = [t for *_, toks in rows for t in toks]
    np.memmap(out.with_suffix(".npy"), dtype=dtype, mode="w+", shape=(len(tokens),))[:] = tokens
    with gzip.open(out.with_suffix(".csv.gz"), "wt") as f:
        writer, written = csv.writer(f), 0
        for doc_id, src, loc, toks in rows:
            writer.writerow((written, written + len(toks), doc_id, src, loc))
            written += len(toks)


def dolma_cli() -> Path | None:
    path = DOLMA_VENV / "bin" / "dolma"
    if path.exists():
        return path
    if os.environ.get(FORMATS_FLAG) == "1":
        pytest.fail(f"{path} is missing: make test-setup builds it ({FORMATS_FLAG}=1 makes its absence an error)")
    return None


@pytest.mark.parametrize("preset", ["r50k", "cl100k"])
def test_dolma_files_equal_dolma_tokens(preset, tmp_path):
    # dolma strips each text and skips empty ones: the shared documents that it leaves as they are
    docs = [d for d in documents() if d and d == d.strip()]
    tok = tokenizer(preset)
    eos = tok.encode(EOT, allowed_special="all")[0]
    src = tmp_path / "docs" / "part.jsonl"
    src.parent.mkdir()
    src.write_text(
        "".join(json.dumps({"id": f"d{i}", "text": d}, ensure_ascii=False) + "\n" for i, d in enumerate(docs)),
        encoding="utf-8",
    )
    ids, offsets = tok.encode_ordinary_flat(docs)
    positions = list(range(1, len(docs) + 1))  # dolma's loc: the line number
    columns = dict(doc_ids=[f"d{i}" for i in range(len(docs))], sources=[str(src)] * len(docs), positions=positions)
    write_in_batches(
        dolma.DolmaWriter(str(tmp_path / "ours" / "t"), n_vocab=tok.n_vocab, eos_id=eos),
        ids,
        offsets,
        [2, 9],
        **columns,
    )

    theirs = tmp_path / "theirs"
    cli = dolma_cli()
    if cli is not None:
        hf = tmp_path / "tokenizer.json"
        tok.to_huggingface(str(hf))
        dtype = "uint16" if preset == "r50k" else "uint32"
        command = [
            str(cli),
            "tokens",
            "--documents",
            str(src),
            "--destination",
            str(theirs),
            "--tokenizer.name_or_path",
            str(hf),
            "--tokenizer.eos_token_id",
            str(eos),
            "--tokenizer.pad_token_id",
            str(eos),
            "--processes",
            "1",
            "--batch_size",
            "1",
            "--ring_size",
            "1",
            "--dtype",
            dtype,
        ]
        subprocess.run(command, check=True, capture_output=True, timeout=600, env={**os.environ, "PYTHONPATH": ""})
        [npy] = sorted(theirs.glob("*.npy"))
    else:
        rows = [(f"d{i}", str(src), i + 1, e + [eos]) for i, e in enumerate(expected_ids(preset, docs))]
        theirs.mkdir()
        npy = theirs / "part-0-00000.npy"
        dolma_transcription(npy, rows, dolma.memmap_dtype(tok.n_vocab))
    assert (tmp_path / "ours" / "t.npy").read_bytes() == npy.read_bytes()
    ours_meta = gzip.decompress((tmp_path / "ours" / "t.csv.gz").read_bytes())
    assert ours_meta == gzip.decompress(_metadata_of(npy))
    got = dolma.read_ids(str(tmp_path / "ours" / "t.npy"), tok.n_vocab)
    meta = dolma.read_metadata(str(tmp_path / "ours" / "t.csv.gz"))
    assert [got[s:e].tolist() for s, e, *_ in meta] == [e + [eos] for e in expected_ids(preset, docs)]
    assert [m[2:] for m in meta] == [(f"d{i}", str(src), str(i + 1)) for i in range(len(docs))]


def _metadata_of(npy: Path) -> bytes:
    return npy.parent.joinpath(npy.name[: -len(".npy")] + ".csv.gz").read_bytes()


def test_dolma_adds_no_second_eos_and_writes_empty_documents(tmp_path):
    """add_special_tokens appends the EOS only where the ids do not end with it; an empty document is a lone EOS."""
    ids = np.array([5, 7, 9, 1, 9], dtype=np.uint16)
    with dolma.DolmaWriter(str(tmp_path / "t"), n_vocab=10, eos_id=9) as w:
        w.write(ids, [0, 3, 3, 5], doc_ids=["a", "b,c", 'q"d'], sources=["s"] * 3, positions=[0, 1, 2])
    assert dolma.read_ids(str(tmp_path / "t.npy"), 10).tolist() == [5, 7, 9, 9, 1, 9]
    text = gzip.decompress((tmp_path / "t.csv.gz").read_bytes()).decode()
    assert text == '0,3,a,s,0\r\n3,4,"b,c",s,1\r\n4,6,"q""d",s,2\r\n'
    assert (tmp_path / "t.csv.gz").read_bytes() == _rewrite(tmp_path, ids)  # no time in the gzip header: reruns equal


def _rewrite(tmp_path: Path, ids) -> bytes:
    with dolma.DolmaWriter(str(tmp_path / "again"), n_vocab=10, eos_id=9) as w:
        w.write(ids, [0, 3, 3, 5], doc_ids=["a", "b,c", 'q"d'], sources=["s"] * 3, positions=[0, 1, 2])
    return (tmp_path / "again.csv.gz").read_bytes()


# ------------------------------------------------------------------ llm.c
def llmc_write_datafile(filename: Path, toks: list[int], model_desc: str) -> None:
    """The file layout of llm.c's dev/data/data_common.py write_datafile: a 256-int32 header (magic, version, count),
    then the ids (llm.c is not on PyPI, so its writer cannot run here)."""
    info = {"gpt-2": (20240520, 1, np.uint16), "llama-3": (20240801, 7, np.uint32)}[model_desc]
    head = np.zeros(256, dtype=np.int32)
    head[0], head[1], head[2] = info[0], info[1], len(toks)
    with open(filename, "wb") as f:
        f.write(head.tobytes())
        f.write(np.array(toks, dtype=info[2]).tobytes())


def llmc_dataloader_read(filename: Path) -> np.ndarray:
    """What llm.c's dataloader.h accepts: magic and version of one of the two layouts, then header[2] ids."""
    data = filename.read_bytes()
    head = np.frombuffer(data, np.int32, 256)
    dtype = {(20240520, 1): np.uint16, (20240801, 7): np.uint32}[(int(head[0]), int(head[1]))]
    assert len(data) == 1024 + int(head[2]) * np.dtype(dtype).itemsize
    return np.frombuffer(data, dtype, offset=1024)


@pytest.mark.parametrize("preset", ["r50k", "cl100k"])
def test_llmc_files_equal_llmc_write_datafile(preset, tmp_path):
    docs, tok = documents(), tokenizer(preset)
    eot = tok.encode(EOT, allowed_special="all")[0]
    stream = [t for e in expected_ids(preset, docs) for t in [eot, *e]]  # fineweb.py: EOT, then the document
    llmc_write_datafile(tmp_path / "theirs.bin", stream, "gpt-2" if preset == "r50k" else "llama-3")
    ids, offsets = tok.encode_ordinary_flat(docs)
    files = write_in_batches(
        llmc.LlmcWriter(str(tmp_path / "t"), n_vocab=tok.n_vocab, eot_id=eot), ids, offsets, [1, 2, 50]
    )
    assert (tmp_path / "t.bin").read_bytes() == (tmp_path / "theirs.bin").read_bytes()
    assert files["t.bin"]["bytes"] == 1024 + len(stream) * (2 if preset == "r50k" else 4)
    assert (
        llmc_dataloader_read(tmp_path / "t.bin").tolist() == stream == llmc.read_llmc(str(tmp_path / "t.bin")).tolist()
    )


# ------------------------------------------------------------------ shared behaviour
WRITERS = {
    "datatrove": lambda p, n: datatrove.DatatroveWriter(p, n_vocab=n, eos_id=0),
    "dolma": lambda p, n: dolma.DolmaWriter(p, n_vocab=n, eos_id=0),
    "llmc": lambda p, n: llmc.LlmcWriter(p, n_vocab=n, eot_id=0),
}
SUFFIXES = {"datatrove": datatrove.SUFFIXES, "dolma": dolma.SUFFIXES, "llmc": llmc.SUFFIXES}


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_a_failed_shard_leaves_no_file(fmt, tmp_path):
    with pytest.raises(ShardFileError, match="0..99"):
        with WRITERS[fmt](str(tmp_path / "t"), 100) as w:
            cols = dict(doc_ids=["a"], sources=["s"], positions=[0]) if fmt == "dolma" else {}
            w.write(np.array([1, 2], np.uint16), [0, 2], **cols)
            w.write(np.array([1, 200], np.uint16), [0, 2], **cols)  # id 200 is out of range
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_files_and_hashes_are_reported(fmt, tmp_path):
    import hashlib

    with WRITERS[fmt](str(tmp_path / "t"), 70000) as w:
        cols = dict(doc_ids=["a", "b"], sources=["s", "s"], positions=[0, 9]) if fmt == "dolma" else {}
        w.write(np.array([1, 69999, 3], np.uint32), [0, 2, 3], **cols)
    assert sorted(w.files) == sorted(f"t{s}" for s in SUFFIXES[fmt])
    for name, stat in w.files.items():
        data = (tmp_path / name).read_bytes()
        assert stat == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]


def test_llmc_refuses_more_than_llmc_holds(tmp_path, monkeypatch):
    monkeypatch.setattr(llmc, "MAX_TOKENS", 5)
    with pytest.raises(ShardFileError, match="fewer than 2\\*\\*31"):
        with llmc.LlmcWriter(str(tmp_path / "t"), n_vocab=10, eot_id=0) as w:
            w.write(np.array([1, 2, 3], np.uint16), [0, 3])
            w.write(np.array([1, 2, 3], np.uint16), [0, 3])
    assert not (tmp_path / "t.bin").exists()


@pytest.mark.parametrize("n_vocab", [256, 257, 65535, 65536, 65537, 100277])
def test_id_widths_follow_each_ecosystem(n_vocab, tmp_path):
    datatrove_size = 4 if n_vocab > np.iinfo(np.uint16).max + 1 else 2  # PipelineStepWithTokenizer.token_size
    with datatrove.DatatroveWriter(str(tmp_path / "t"), n_vocab=n_vocab, eos_id=None) as w:
        assert w.dtype.itemsize == datatrove_size
    assert dolma.memmap_dtype(n_vocab) == np.min_scalar_type(n_vocab - 1)  # dolma's Tokenizer.dtype
    assert llmc.LlmcWriter("t", n_vocab=n_vocab, eot_id=None).dtype.itemsize == (2 if n_vocab <= 65536 else 4)


# ------------------------------------------------------------------ the shard writers of the encode job
def layout(dtype: str):
    from types import SimpleNamespace

    return SimpleNamespace(dtype=dtype, tokenizer_digest="ab" * 32)


def test_datatrove_merger_reads_our_shards(tmp_path):
    """datatrove's DocumentTokenizerMerger takes the token size and tokenizer from our .ds.metadata and the
    documents from our .ds.index: merged in order, it gives back every document of both shards."""
    from datatrove.pipeline.tokens.merger import DocumentTokenizerMerger

    docs, tok = documents(), tokenizer("cl100k")
    expected = [e + [100257] for e in expected_ids("cl100k", docs)]
    halves = (docs[:30], docs[30:])
    for i, part in enumerate(halves):
        ids, offsets = tok.encode_ordinary_flat(part)
        ids, offsets = _with_eos(ids, offsets, 100257)  # what the encode stage's policy does with --eos
        with datatrove.DatatroveShardWriter(
            str(tmp_path / "shards" / f"tokens-{i:05d}-of-00002"), layout("uint32")
        ) as w:
            w.write(ids, offsets)
    merger = DocumentTokenizerMerger(
        str(tmp_path / "shards"), str(tmp_path / "merged"), "m", shuffle=False, progress=False
    )
    merger.run()
    merged = datatrove.DatatroveReader(str(tmp_path / "merged" / "000_m"))
    assert merged.token_size == 4
    assert [merged[i].tolist() for i in range(len(merged))] == expected
    meta = (tmp_path / "merged" / "000_m.ds.metadata").read_text().splitlines()
    assert meta[0] == f"beam-bpe:{'ab' * 8}|4"


def _with_eos(ids, offsets, eos):
    import numpy as np

    out = np.insert(ids, offsets[1:], eos)
    return out, offsets + np.arange(len(offsets))


@pytest.mark.parametrize("fmt", ["datatrove", "npy", "llmc"])
def test_shard_writers_write_the_ids_as_the_encode_stage_gives_them(fmt, tmp_path):
    ids, offsets = np.array([7, 1, 2, 7, 3, 7], np.uint16), np.array([0, 3, 6])
    cls = {"datatrove": datatrove.DatatroveShardWriter, "npy": dolma.DolmaShardWriter, "llmc": llmc.LlmcShardWriter}[
        fmt
    ]
    cols = {"doc_ids": ["a@0", "a@9"], "sources": ["a", "a"], "positions": np.array([0, 9])}
    with cls(str(tmp_path / "t"), layout("uint16")) as w:
        w.write(ids, offsets, **{name: cols[name] for name in cls.wants})
    if fmt == "datatrove":
        reader = datatrove.DatatroveReader(str(tmp_path / "t"))
        assert [reader[0].tolist(), reader[1].tolist()] == [[7, 1, 2], [7, 3, 7]]
    elif fmt == "npy":
        assert dolma.read_ids(str(tmp_path / "t.npy"), 65536).tolist() == ids.tolist()
        assert dolma.read_metadata(str(tmp_path / "t.csv.gz")) == [(0, 3, "a@0", "a", "0"), (3, 6, "a@9", "a", "9")]
    else:
        assert llmc.read_llmc(str(tmp_path / "t.bin")).tolist() == ids.tolist()


# ------------------------------------------------------------------ beam-bpe encode --shard-format datatrove|npy|llmc
@pytest.mark.parametrize("fmt", ["datatrove", "npy", "llmc"])
@pytest.mark.parametrize("preset", ["r50k", "cl100k"])
def test_encode_job_writes_each_format(fmt, preset, tmp_path):
    from pipeline_testlib import run_cli, write_jsonl

    from pipeline.encode.readback import find_document

    docs = documents()
    enc = openai_encoding(preset)
    tok_path = tmp_path / "tok.bpe"
    tokenizer(preset).save(str(tok_path))
    inputs = [write_jsonl(tmp_path / "in" / f"part-{i}.jsonl", docs[i::2]) for i in range(2)]
    args = ["encode", "--tokenizer", tok_path, "--out", tmp_path / "out", "--range-bytes", 20000, "--shard-size", 40000,
            "--shard-format", fmt, "--no-progress", *[a for p in inputs for a in ("--input", p)]]  # fmt: skip
    assert run_cli(*args) == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    eot = enc["special_tokens"][EOT]
    in_order = docs[0::2] + docs[1::2]  # the inputs sorted by path, documents in file order
    expected = [[eot, *e] if fmt == "llmc" else [*e, eot] for e in expected_ids(preset, in_order)]
    assert len(manifest["shards"]) >= 2
    got, tokens = [], 0
    for shard in manifest["shards"]:
        prefix = str(tmp_path / "out" / shard["name"])
        assert sorted(shard["files"]) == sorted(shard["name"] + s for s in SUFFIXES[fmt if fmt != "npy" else "dolma"])
        if fmt == "datatrove":
            reader = datatrove.DatatroveReader(prefix)
            docs_of_shard = [reader[i].tolist() for i in range(len(reader))]
        elif fmt == "npy":
            ids = dolma.read_ids(prefix + ".npy", tokenizer(preset).n_vocab)
            docs_of_shard = [ids[s:e].tolist() for s, e, *_ in dolma.read_metadata(prefix + ".csv.gz")]
        else:
            stream = llmc_dataloader_read(Path(prefix + ".bin")).tolist()
            starts = [i for i, t in enumerate(stream) if t == eot] + [len(stream)]  # no document spells the EOT
            docs_of_shard = [stream[a:b] for a, b in zip(starts, starts[1:], strict=False)]
        assert len(docs_of_shard) == shard["documents"]
        got += docs_of_shard
        tokens += sum(map(len, docs_of_shard))
    assert got == expected
    assert tokens == manifest["tokens"]
    if fmt == "npy":  # decode --shards finds a document by its id in the .csv.gz
        doc_id, ids = find_document(str(tmp_path / "out"), f"{inputs[1]}@0")
        assert ids.tolist() == expected[len(docs[0::2])]
