"""What a file's name says about its format: ``.jsonl`` / ``.json`` / ``.ndjson``, ``.txt`` / ``.text`` / ``.md`` /
``.rst``, ``.parquet`` / ``.pq``, each optionally compressed (``.gz``, ``.bz2``, ``.zst``; Parquet compresses inside).

Without ``--format``, a run whose ``--input`` names do not all say one format (a directory, ``data/*``, a mix) reads
each file by its own name (the format ``auto``), and refuses a file whose name says none, by name: a folder of Parquet
files read as JSONL gave "encoded 0 of 6 documents" and exit 0.

>>> format_of_name("data/a.jsonl.gz"), format_of_name("b.PARQUET"), format_of_name("notes"), format_of_name("x.csv")
('jsonl', 'parquet', None, None)
"""

from __future__ import annotations

from pipeline.corpus.formats import FORMATS
from pipeline.errors import CorpusError

AUTO = "auto"  # CorpusSpec.format: each file's format from its name
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".zst")


def format_suffixes() -> dict[str, str]:
    """Suffix -> format, from the registry (``pipeline/corpus/formats/__init__.py``)."""
    return {suffix: f.name for f in FORMATS.values() for suffix in f.suffixes}


def format_of_name(path: str) -> str | None:
    """The format a file's (or a glob's) last component names, or None."""
    name = path.rstrip("/").rsplit("/", 1)[-1].lower()
    for ext in COMPRESSION_SUFFIXES:
        name = name.removesuffix(ext)
    return format_suffixes().get("." + name.rsplit(".", 1)[-1]) if "." in name else None


def format_of_file(path: str) -> str:
    """The format of one input file under ``--format auto``; a name that says none is refused, naming the file."""
    found = format_of_name(path)
    if found is None:
        known = ", ".join(format_suffixes())
        raise CorpusError(
            f"{path}: its name says no input format (known suffixes: {known}, each optionally .gz/.bz2/.zst), and "
            f"no --format was given: rename it, leave it out of --input, or give --format {'|'.join(FORMATS)} to read "
            "every input file as that format"
        )
    return found
