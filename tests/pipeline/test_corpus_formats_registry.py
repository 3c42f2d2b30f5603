"""The corpus-format registry (pipeline/corpus/formats/__init__.py): one table that --format's choices, the format
a file's name says, CorpusSpec's checks, the ranges and the read stage all read. A new format is one module and
one registry line: a toy format registered here is planned and read without any other change."""

from __future__ import annotations

import gzip
import sys
import types

from pipeline.cli import build_parser
from pipeline.corpus import formats, names, plan
from pipeline.corpus.formats import FORMATS, CorpusFormat
from pipeline.corpus.formats.text import text_documents
from pipeline.corpus.plan import CorpusSpec, InputSpec, plan_corpus
from pipeline.corpus.readers import read_range
from pipeline.corpus.records import OFFSET, ROW


def test_the_cli_the_names_and_the_spec_read_the_registry():
    train = build_parser()._subparsers._group_actions[0].choices["train"]
    fmt = next(a for a in train._actions if a.dest == "format")
    assert tuple(fmt.choices) == plan.FORMATS == tuple(FORMATS) == ("text", "jsonl", "parquet")
    for f in FORMATS.values():
        assert all(names.format_of_name(f"data/a{s}.gz") == f.name for s in f.suffixes), f.name
        assert "/".join(f.suffixes) in fmt.help
    assert {f.name: f.position_kind for f in FORMATS.values()} == {"text": OFFSET, "jsonl": OFFSET, "parquet": ROW}


def test_every_registered_format_has_its_reader_module():
    for name in FORMATS:
        module = sys.modules.get(f"pipeline.corpus.formats.{name}") or __import__(
            f"pipeline.corpus.formats.{name}", fromlist=["_"]
        )
        assert callable(getattr(module, f"{name}_documents")), name


def test_a_toy_format_is_one_module_and_one_registry_line(tmp_path, monkeypatch):
    toy = types.ModuleType("pipeline.corpus.formats.toy")
    seen = []

    def toy_documents(rng, spec, batcher):  # lines, as text reads them, counted
        seen.append(rng.source)
        yield from text_documents(rng, spec, batcher)

    toy.toy_documents = toy_documents
    monkeypatch.setitem(sys.modules, "pipeline.corpus.formats.toy", toy)
    monkeypatch.setattr(formats, "toy", toy, raising=False)
    monkeypatch.setitem(FORMATS, "toy", CorpusFormat("toy", (".toy",), OFFSET))  # the one line
    path = tmp_path / "a.toy.gz"
    path.write_bytes(gzip.compress(b"one\ntwo\n"))
    assert names.format_of_name(str(path)) == "toy"
    spec = CorpusSpec("auto")
    corpus = plan_corpus([InputSpec(str(path))], spec)
    texts = [t for rng in corpus.ranges for batch in read_range(rng, spec) for t in batch.texts]
    assert texts == ["one", "two"] and seen == [str(path)]
    CorpusSpec("toy")  # a known format now
