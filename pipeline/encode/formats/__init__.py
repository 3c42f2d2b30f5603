"""The shard formats of ``encode --shard-format``: one module each, one registry, :data:`FORMATS`.

    parquet.py     doc_id, tokens, num_tokens (the default)
    megatron.py    Megatron-LM .bin/.idx (+ .positions.npy), megatron_data_path.txt; the index format in
                   megatron_index.py, --merge in megatron_merge.py
    datatrove.py   datatrove / nanotron .ds, .ds.index, .ds.metadata; an EOS after each document
    dolma.py       dolma / OLMo .npy memmap and .csv.gz; an EOS after each document (``npy``)
    llmc.py        llm.c .bin; an EOT before each document

A new format is one module with a ``FORMAT = ShardFormat(...)`` (``base.py``) and one line below: the CLI's
choices and help, the settings' checks, the id dtype, the separators, the writer, the resume and clean-up, and
``decode --shards`` all read it. Nothing outside this folder compares a format's name.
"""

from __future__ import annotations

from pipeline.encode.formats import datatrove, dolma, llmc, megatron, parquet
from pipeline.encode.formats.base import ShardFormat
from pipeline.errors import UsageError

FORMATS: dict[str, ShardFormat] = {f.name: f for f in (parquet.FORMAT, megatron.FORMAT, datatrove.FORMAT,
                                                       dolma.FORMAT, llmc.FORMAT)}  # fmt: skip
DEFAULT = parquet.FORMAT.name


def get_format(name: str) -> ShardFormat:
    """The format named ``name``; another name raises UsageError."""
    try:
        return FORMATS[name]
    except KeyError:
        raise UsageError(f"--shard-format must be one of {', '.join(FORMATS)}, got {name!r}") from None


def owned_output_files(prefix: str) -> list[str]:
    """Every file a format may write in ``--out`` beside its shards (a rerun or ``--overwrite`` removes them)."""
    return [name for f in FORMATS.values() for name in f.output_files(prefix)]


def readable_formats() -> list[str]:
    """The formats ``decode --shards`` reads (those whose shards keep their document ids)."""
    return [f.name for f in FORMATS.values() if f.reader is not None]


def help_text() -> str:
    """``--shard-format``'s help: every format, then the separators they imply.

    >>> help_text().startswith("parquet (default); megatron (.bin/.idx);")
    True
    """
    implied: dict[str, list[str]] = {}
    for f in FORMATS.values():
        if f.separator_help:
            implied.setdefault(f.separator_help, []).append(f.name)
    notes = [f"{' and '.join(names)} {'' if i else 'add '}{note}" for i, (note, names) in enumerate(implied.items())]
    return "; ".join(f.label for f in FORMATS.values()) + (". " + ", ".join(notes) if notes else "")


def and_list(names: list[str]) -> str:
    """``a, b and c``.

    >>> and_list(["parquet", "megatron", "npy"])
    'parquet, megatron and npy'
    """
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
