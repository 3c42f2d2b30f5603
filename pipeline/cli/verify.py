"""``beam-bpe verify OUT [--sample N] [--seed S]``: check a finished encoding output against its manifest.

Exit 0 when everything holds; 4 with one line per problem (the file and what differs) on stderr otherwise. What
could not be checked (an output made before receipts, a format that keeps no document ids, an unreachable input)
is printed as notes and does not fail the check. The checks are in ``pipeline/encode/audit.py``.

    $ beam-bpe verify out/ --sample 100
    verified out/: 12 files (1,048,576,000 bytes), 500,000 documents once, 100 sampled documents re-encoded: all hold
"""

from __future__ import annotations

import argparse
import sys

from pipeline.errors import UsageError

EXIT_PROBLEMS = 4


def add_verify_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "verify",
        help="check a finished encoding output: files, receipts, every range and document once, ids re-encoded",
        epilog="Exit codes: 0 all holds; 4 a problem found (one line each, naming the file); 2 refused.",
        allow_abbrev=False,
    )
    p.add_argument("out", help="the output folder (a local path or an fsspec URL: gs://, s3://, ...)")
    sample_help = "also read N documents again from the inputs, encode them, compare the ids (default 0)"
    p.add_argument("--sample", type=int, default=0, metavar="N", help=sample_help)
    p.add_argument("--seed", type=int, default=0, metavar="S", help="the seed that draws the sample (default 0)")
    p.set_defaults(func=cmd_verify)
    return p


def cmd_verify(args: argparse.Namespace) -> int:
    from pipeline.encode.audit import audit_output
    from pipeline.storage.paths import canonical

    if args.sample < 0:
        raise UsageError(f"--sample must be 0 or more documents, got {args.sample}")
    out = canonical(args.out)
    audit = audit_output(out, sample=args.sample, seed=args.seed)
    for note in audit.notes:
        print(f"beam-bpe verify: note: {note}", file=sys.stderr)
    for problem in audit.problems:
        print(f"beam-bpe verify: {out}: {problem}", file=sys.stderr)
    c = audit.checked
    sampled = f", {c['sampled']} sampled documents re-encoded" if args.sample else ""
    verdict = "all hold" if audit.ok else f"{len(audit.problems)} problem(s)"
    print(f"verified {out}: {c['files']} files ({c['bytes']:,} bytes), {c['documents']:,} documents once{sampled}: "
          f"{verdict}")  # fmt: skip
    return 0 if audit.ok else EXIT_PROBLEMS
