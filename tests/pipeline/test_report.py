"""The report (``train --report``, ``beam-bpe report``): figures checked against tiktoken on the same held-out sample,
the sample left out of the counts, compression.png a real picture, and the refusals."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import corpus, openai_encoding, tiktoken_openai
from pipeline_testlib import manifest, run_cli

import bpe_core
from pipeline.corpus.records import document_id
from pipeline.report.sample import is_held_out
from pipeline.train.counts_files import load_counts

FRACTION = 0.2


def _write(path: Path, docs: list[str]) -> list[str]:
    """Docs as JSONL; returns the document ids the readers give them (file and byte offset of the line)."""
    ids, offset, lines = [], 0, []
    for d in docs:
        line = json.dumps({"text": d}, ensure_ascii=False).encode() + b"\n"
        ids.append(document_id(str(path), "offset", offset))
        offset += len(line)
        lines.append(line)
    path.write_bytes(b"".join(lines))
    return ids


def _expected(enc, docs: list[str], bpe_ids: int) -> dict:
    """The report's figures computed directly with a tiktoken Encoding."""
    batches = enc.encode_ordinary_batch(docs)
    tokens = [t for ids in batches for t in ids]
    total = sum(len(d.encode()) for d in docs)
    lengths = [len(enc.decode_single_token_bytes(t)) for t in tokens]
    return {
        "documents": len(docs),
        "bytes": total,
        "tokens": len(tokens),
        "bytes_per_token": round(total / len(tokens), 4),
        "tokens_per_word": round(len(tokens) / sum(len(d.split()) for d in docs), 4),
        "multibyte_share": round(sum(n for n in lengths if n > 1) / total, 4),
        "never_used": bpe_ids - len(set(tokens)),
    }


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return corpus("fortunes_multi", 1200) + corpus("multi_udhr", 4)


def test_report_of_cl100k_equals_tiktoken_on_the_sample(docs, tmp_path):
    path = tmp_path / "docs.jsonl"
    held = [d for d, i in zip(docs, _write(path, docs), strict=True) if is_held_out(i, FRACTION)]
    assert 0.1 * len(docs) < len(held) < 0.3 * len(docs)
    cl100k = openai_encoding("cl100k")["path"]
    args = ["report", "--tokenizer", cl100k, "--input", path, "--eval-fraction", FRACTION, "--out", tmp_path / "r"]
    assert run_cli(*args) == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    (row,) = report["tokenizers"]
    expected = _expected(tiktoken_openai("cl100k"), held, 100256)
    assert {k: row[k] for k in expected} == expected
    assert row["unreachable"] == 0 and row["n_vocab"] == 100277
    assert row["first_merges"][0] == "Ġ + Ġ -> ĠĠ" and row["longest_tokens"][0]["bytes"] == 128
    assert report["sample"]["documents"] == len(held)
    assert "| cl100k_base.tiktoken | 100,277 |" in (tmp_path / "r" / "report.md").read_text()


def _png_checks(path: Path) -> None:
    from PIL import Image  # matplotlib's own dependency

    with Image.open(path) as image:
        image.load()
        width, height = image.size
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert width >= 300 and height >= 200
    assert colours is not None and len(colours) > 8  # not blank: axes, a line, points, anti-aliased text


def test_train_report_sizes_and_reference_against_tiktoken(docs, tmp_path):
    path = tmp_path / "docs.jsonl"
    ids = _write(path, docs)
    held = [d for d, i in zip(docs, ids, strict=True) if is_held_out(i, FRACTION)]
    counted = [d for d, i in zip(docs, ids, strict=True) if not is_held_out(i, FRACTION)]
    r50k = openai_encoding("r50k")["path"]
    out = tmp_path / "out"
    args = ["train", "--input", path, "--vocab-size", "300,600", "--report", "--eval-fraction", FRACTION]
    assert run_cli(*args, "--compare", r50k, "--out", out) == 0
    counts, _ = load_counts(str(out / "counts"))
    assert dict(counts) == dict(bpe_core.count_chunks(counted, "cl100k"))  # the sample is never counted
    m = manifest(out)
    assert (m["documents_held_out"], m["documents_counted"], m["documents_read"]) == (
        len(held),
        len(counted),
        len(docs),
    )
    report = json.loads((out / "report.json").read_text())
    rows = {row["label"]: row for row in report["tokenizers"]}
    assert list(rows) == ["v300", "v600", "r50k_base.tiktoken"]
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    pat = openai_encoding("cl100k")["pat_str"]
    for size in (300, 600):
        ranks = load_tiktoken_bpe(str(out / f"v{size}" / "tokenizer.tiktoken"))
        enc = tiktoken.Encoding(f"v{size}", pat_str=pat, mergeable_ranks=ranks, special_tokens={})
        expected = _expected(enc, held, len(ranks))
        assert {k: rows[f"v{size}"][k] for k in expected} == expected
        assert rows[f"v{size}"]["role"] == "trained"
    expected = _expected(tiktoken_openai("r50k"), held, 50256)
    assert {k: rows["r50k_base.tiktoken"][k] for k in expected} == expected
    assert (
        rows["v300"]["bytes_per_token"]
        < rows["v600"]["bytes_per_token"]
        < rows["r50k_base.tiktoken"]["bytes_per_token"]
    )
    _png_checks(out / "compression.png")


def test_report_without_matplotlib_stops_before_any_work(docs, tmp_path, monkeypatch, capsys):
    path = tmp_path / "docs.jsonl"
    _write(path, docs[:50])
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert run_cli("train", "--input", path, "--vocab-size", "300", "--report", "--out", tmp_path / "out") == 2
    assert "pip install 'beam-bpe[report]'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    args = ["report", "--tokenizer", openai_encoding("r50k")["path"], "--input", path, "--out", tmp_path / "r"]
    assert run_cli(*args) == 2 and "pip install 'beam-bpe[report]'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--eval-fraction", "0.1"], "pass --report too"),
        (["--report", "--eval-fraction", "0"], "in \\(0, 1\\]"),
        (["--report", "--counts-only"], "needs a run that counts and trains"),
    ],
)
def test_report_flags_are_checked(docs, tmp_path, capsys, extra, message):
    path = tmp_path / "docs.jsonl"
    _write(path, docs[:20])
    assert run_cli("train", "--input", path, "--vocab-size", "300", *extra, "--out", tmp_path / "out") == 2
    import re

    assert re.search(message, capsys.readouterr().err)
