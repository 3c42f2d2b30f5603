"""``beam-bpe pack OUT --length L [--pack concat|ffd] [--pack-rows]``: packed sequences over a finished output.

Adds ``OUT/packs/<L>/`` (an index beside the token shards, which stay byte for byte as they are), so another
sequence length does not mean encoding again; ``encode --pack-length L`` makes the first one at the end of the run.
The algorithms are in ``pipeline/encode/pack_plan.py``, the files in ``pipeline/encode/packing.py``.

    $ beam-bpe pack out/ --length 4096 --pack ffd
    packed out/ into 1,234 sequences of at most 4,096 tokens (ffd, 5,000 documents, 12 cut) -> out/packs/4096
"""

from __future__ import annotations

import argparse

from pipeline.cli.common import add_verbose_argument
from pipeline.encode.pack_plan import PACK_METHODS

PACK_HELP = (
    "concat: the documents with their EOS as one stream, cut every L tokens; ffd: first-fit-decreasing within "
    "windows of 10,000 documents, a document longer than L cut into L-token pieces (default: concat)"
)


def add_pack_arguments(group, *, length_flag: str) -> None:
    """The packing flags, shared by ``pack`` (``--length``) and ``encode`` (``--pack-length``)."""
    group.add_argument(length_flag, type=int, default=None, metavar="L", help="tokens per packed sequence")
    group.add_argument("--pack", choices=PACK_METHODS, default=None, help=PACK_HELP)
    group.add_argument("--pack-rows", action="store_true",
                       help="also write rows-NNNNN.parquet: one row per sequence (input_ids, doc_starts)")  # fmt: skip


def add_pack_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "pack",
        help="packed sequences of L tokens over a finished encoding output (an index beside its shards)",
        allow_abbrev=False,
    )
    p.add_argument("out", help="a finished encoding output folder (local path or fsspec URL)")
    add_pack_arguments(p, length_flag="--length")
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUT/packs/<L>/")
    add_verbose_argument(p, default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_pack)
    return p


def pack_settings(length: int | None, method: str | None, rows: bool, *, length_flag: str):
    """The PackSettings of the flags, or None when no packing was asked for; ``--pack`` alone is refused."""
    from pipeline.encode.packing import PackSettings
    from pipeline.errors import UsageError

    if length is None:
        if method is not None or rows:
            given = "--pack" if method is not None else "--pack-rows"
            raise UsageError(f"{given} needs {length_flag} L (the tokens per packed sequence)")
        return None
    return PackSettings(length=length, method=method or "concat", rows=rows)


def run_pack(out: str, settings, *, overwrite: bool = False) -> str:
    """Build the pack under the output's lease; the summary line."""
    from pipeline.encode.packing import build_pack, pack_dir
    from pipeline.storage.lease import Lease

    with Lease(out, command="pack"):
        s = build_pack(out, settings, overwrite=overwrite)
    cut = f", {s['documents_cut']:,} cut" if settings.method == "ffd" else ""
    return (
        f"packed {out} into {s['sequences']:,} sequences of at most {s['length']:,} tokens ({s['method']}, "
        f"{s['documents']:,} documents{cut}) -> {pack_dir(out, settings.length)}"
    )


def cmd_pack(args: argparse.Namespace) -> int:
    from pipeline.storage.paths import canonical

    if args.length is None:
        from pipeline.errors import UsageError

        raise UsageError("pack needs --length L (the tokens per packed sequence)")
    settings = pack_settings(args.length, args.pack, args.pack_rows, length_flag="--length")
    print(run_pack(canonical(args.out), settings, overwrite=args.overwrite))
    return 0
