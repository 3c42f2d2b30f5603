"""The corpus formats of ``--format``: one module each, one registry, :data:`FORMATS`.

    text.py      one document per line (or per file, --text-unit file); .txt .text .md .rst
    jsonl.py     one JSON object per line, its text in --text-field; .jsonl .json .ndjson
    parquet.py   one row per document, its text in --text-field; .parquet .pq

A new format is one module here with its reader ``{name}_documents(range, spec, batcher)`` (it fills the
:class:`~pipeline.corpus.batcher.Batcher` with document columns and exact dead letters; a line format passes its
block parser to ``lines.line_documents``) and one line in :data:`FORMATS`: ``--format``'s choices, the format a
file's name says (``--format auto``), ``CorpusSpec``'s checks, the kind of its document positions and the read stage
(``pipeline/corpus/readers.py``, which imports the module by its name) all read it. This registry imports none of
the readers, so that ``plan.py``, below them, can read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.corpus.records import OFFSET, ROW


@dataclass(frozen=True)
class CorpusFormat:
    """One input format: its name (``--format``), the file suffixes that say it (each optionally compressed), and
    the kind of its document positions (``OFFSET``: a byte offset, ``ROW``: a row number)."""

    name: str
    suffixes: tuple[str, ...]
    position_kind: str


FORMATS: dict[str, CorpusFormat] = {f.name: f for f in (
    CorpusFormat("text", (".txt", ".text", ".md", ".rst"), OFFSET),
    CorpusFormat("jsonl", (".jsonl", ".json", ".ndjson"), OFFSET),
    CorpusFormat("parquet", (".parquet", ".pq"), ROW),
)}  # fmt: skip
