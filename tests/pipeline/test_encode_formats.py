"""The shard-format registry (pipeline/encode/formats/): one table that the CLI, the settings, the dtype, the
separators, the writer, the resume, the clean-up and ``decode --shards`` all read. A new format is one module and
one registry line: a toy format registered here runs end to end without any other change."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest
from pipeline_testlib import run_cli, write_jsonl
from test_encode_e2e import EOT, r50k_file  # noqa: F401 - a fixture

from bpe_core import Tokenizer
from pipeline.cli.app import build_parser
from pipeline.encode import formats
from pipeline.encode.formats import FORMATS, ShardFormat, get_format
from pipeline.encode.formats.base import FileShardWriter, eos_after_each, narrow_dtype
from pipeline.encode.readback import find_document, iter_documents
from pipeline.encode.settings import EncodeSettings
from pipeline.errors import ShardFileError, UsageError

PIPELINE = Path(__file__).resolve().parents[2] / "pipeline"


class ToyWriter(FileShardWriter):
    """``{prefix}.toy``: one line per document, ``doc_id<TAB>id id id``."""

    wants = ("doc_ids",)

    def __init__(self, prefix: str, layout) -> None:
        super().__init__()
        self._out = self._open(prefix + ".toy")

    def write(self, ids, offsets, *, doc_ids) -> None:
        for doc_id, a, b in zip(doc_ids.to_pylist(), offsets[:-1], offsets[1:], strict=True):
            self._out.write(f"{doc_id}\t{' '.join(map(str, ids[a:b].tolist()))}\n".encode())


def read_toy(prefix: str, shard: dict):
    for line in Path(prefix + ".toy").read_text().splitlines():
        doc_id, _, ids = line.partition("\t")
        yield doc_id, np.array([int(i) for i in ids.split()], dtype=np.uint32)


TOY = ShardFormat(
    name="toy",
    label="toy (.toy text)",
    suffixes=(".toy",),
    dtype=narrow_dtype,
    writer=ToyWriter,
    reader=read_toy,
    separators=eos_after_each,
    separator_help="an EOS after each document",
)


def test_the_cli_choices_and_help_are_the_registry():
    parser = build_parser()
    encode = next(
        a for a in parser._subparsers._group_actions[0].choices["encode"]._actions if a.dest == "shard_format"
    )
    assert tuple(encode.choices) == tuple(FORMATS) == ("parquet", "megatron", "datatrove", "npy", "llmc")
    assert encode.default == "parquet"
    assert encode.help == (
        "parquet (default); megatron (.bin/.idx); datatrove (.ds, nanotron); npy (dolma/OLMo memmap); "
        "llmc (llm.c .bin). datatrove and npy add an EOS after each document, llmc an EOT before each"
    )


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_format_is_complete(name):
    fmt = FORMATS[name]
    assert fmt.name == name and fmt.label.startswith(name) and fmt.suffixes
    for n_vocab in (256, 50257, 65536, 65537, 100277):
        dtype = np.dtype(fmt.dtype(n_vocab))
        assert dtype.kind in "ui" and np.iinfo(dtype).max >= n_vocab - 1, (name, n_vocab, dtype)
    assert set(fmt.writer.wants) <= {"doc_ids", "sources", "positions"}
    assert (fmt.reader is None) == (name in ("datatrove", "llmc"))  # their files keep no document ids
    assert (fmt.merge is None) == (name != "megatron")


def test_the_separators_each_format_implies():
    specials = {"<|endoftext|>": 50256}
    assert FORMATS["parquet"].separators(specials, None, None) == (None, None)
    assert FORMATS["megatron"].separators(specials, None, "x") == (None, "x")
    assert FORMATS["datatrove"].separators(specials, None, None) == (None, "auto")
    assert FORMATS["npy"].separators(specials, "<s>", "</s>") == ("<s>", "</s>")
    assert FORMATS["llmc"].separators(specials, None, None) == ("<|endoftext|>", None)
    assert (
        FORMATS["llmc"].separators({"<|begin_of_text|>": 1, "<|endoftext|>": 2}, None, None)[0] == "<|begin_of_text|>"
    )
    assert FORMATS["llmc"].separators({}, None, None) == ("auto", None)


def test_the_settings_checks_come_from_the_format():
    with pytest.raises(UsageError, match="--shard-format must be one of parquet, megatron, datatrove, npy, llmc"):
        get_format("csv")
    with pytest.raises(UsageError, match="--merge writes one Megatron .bin/.idx pair: .* got 'npy'"):
        EncodeSettings(shard_format="npy", merge=True)
    with pytest.raises(UsageError, match="--eos with --shard-format llmc"):
        EncodeSettings(shard_format="llmc", eos="auto")
    EncodeSettings(shard_format="megatron", merge=True, eos="auto")  # no error


def test_a_new_format_is_one_registry_line(r50k_file, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setitem(FORMATS, "toy", TOY)
    docs = ["hello world", "the second document", ""]
    source = write_jsonl(tmp_path / "in.jsonl", docs)
    out = tmp_path / "out"
    args = ["encode", "--tokenizer", r50k_file, "--input", source, "--out", out, "--shard-format", "toy"]
    assert run_cli(*args) == 0
    tok = Tokenizer.load(r50k_file)
    got = [(doc_id, ids.tolist()) for doc_id, ids in iter_documents(str(out))]
    eos = tok.special_tokens[EOT]
    assert [ids for _, ids in got] == [tok.encode_ordinary(d) + [eos] for d in docs]  # the EOS it implies
    assert find_document(str(out), got[1][0])[1].tolist() == got[1][1]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["shard_format"] == "toy" and manifest["tokenizer"]["eos_id"] == eos
    assert sorted(manifest["shards"][0]["files"]) == ["tokens-00000-of-00001.toy"]
    assert run_cli(*args) == 0  # the same job again: already complete
    (out / "COMPLETED").unlink()
    (out / "tokens-00000-of-00001.toy").write_text("damaged")  # not the recorded size: rewritten by the resume
    assert run_cli(*args) == 0
    assert [(d, i.tolist()) for d, i in iter_documents(str(out))] == got


def test_decode_refuses_a_format_without_reader_naming_those_with_one(monkeypatch):
    monkeypatch.setitem(FORMATS, "toy", TOY)
    assert formats.and_list(formats.readable_formats()) == "parquet, megatron, npy and toy"
    from pipeline.encode.readback import iter_shard

    with pytest.raises(ShardFileError, match="decode --shards reads parquet, megatron, npy and toy outputs"):
        next(iter_shard("out", {"name": "tokens-00000-of-00001"}, "llmc"))
    with pytest.raises(ShardFileError, match="names the shard format 'csv', which is none of"):
        next(iter_shard("out", {"name": "tokens-00000-of-00001"}, "csv"))


def _format_name_comparisons(path: Path, root: Path = PIPELINE.parent) -> list[str]:
    """``x == "megatron"``, ``x in ("npy", "llmc")``: comparisons with a shard format's name in one module."""
    names = set(FORMATS)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Compare):
            continue
        for operand in [node.left, *node.comparators]:
            values = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
            if any(isinstance(v, ast.Constant) and v.value in names for v in values):
                found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    return found


def test_no_module_outside_formats_compares_a_shard_formats_name():
    """corpus/ is left out: its input format ``parquet`` is another thing of the same name."""
    modules = [
        p
        for p in PIPELINE.rglob("*.py")
        if "formats" not in p.relative_to(PIPELINE).parts[1:2] and p.relative_to(PIPELINE).parts[0] != "corpus"
    ]
    assert len(modules) > 30
    assert [hit for p in modules for hit in _format_name_comparisons(p)] == []


def test_the_comparison_finder_finds_a_planted_one(tmp_path):
    copy = tmp_path / "pipeline" / "encode" / "job.py"
    copy.parent.mkdir(parents=True)
    text = (PIPELINE / "encode" / "job.py").read_text()
    copy.write_text(text + '\n\ndef planted(s):\n    return s.shard_format in ("npy", "llmc")\n')
    assert _format_name_comparisons(copy, tmp_path) == [f"pipeline/encode/job.py:{len(text.splitlines()) + 4}"]
