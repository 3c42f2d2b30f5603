"""The compiled cascades' split alone under callgrind: instructions per byte of ``rx_split_some`` per llama.cpp family.

    cmake -S . -B build/rx-profile -G Ninja -DPython_EXECUTABLE=$PWD/.venv/bin/python -DBPE_PROFILE=ON \
        -DCMAKE_BUILD_TYPE=Release && cmake --build build/rx-profile -j 2      # a core that keeps its symbols
    .venv/bin/python benchmarks/bench_rx_split.py [--mb 0.5] [--families deepseek-llm,falcon] [--per-corpus]
                                                  [--tiers auto,sse2] [--annotate 12] [--keep DIR] [--core PATH]

Issue 31's acceptance: "the split alone, callgrind: at most 15 instructions per byte for every family on the shared
corpora". Each family's regex list (bpe_core/pretokenize/llamacpp.py) is compiled here (the classes found by `regex`
over every code point, outside valgrind), then a child process under ``valgrind --tool=callgrind`` registers the
program and splits every document with ``_core.pretok_split_ends(kind, doc, "scalar", 256)`` (the encoder's batches
of 256 piece ends; "scalar" is the core's pretok_split_some, which hands a compiled kind to rx_split_some). Only
``bpe::rx_split_some`` and what it calls is counted (``--toggle-collect``), not the Python start, the loading or the
bytes objects. ``--tiers``: the cascades' window tiers measured, ``auto`` the best that the CPU valgrind emulates
has (AVX2: valgrind has no AVX-512), ``sse2`` forced; the pieces of the tiers are compared by their CRC. Counting
needs the core's symbols: the child loads ``--core``, by default the profile build above (BPE_PROFILE: -O3 as the
wheel, plus -g and frame pointers; the installed core is stripped). Text: ``--mb`` MB taken from every shared corpus
in turn (benchlib.load_records, as bench_native.py), and with ``--per-corpus`` each corpus's first ``--mb`` MB alone.
Instruction counts do not move with the machine's load; the goal is at most 15 Ir/byte on each.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

from benchlib import CORPORA, ROOT, load_records

# The llama.cpp lists that the compiled matcher runs as cascades (the others have a hand-written splitter).
FAMILIES = ("deepseek-llm", "deepseek-coder", "falcon", "bloom", "starcoder", "viking")
TARGET = 15.0
PROFILE_BUILD = ROOT / "build" / "rx-profile"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=0.5, help="MB of text per run (default 0.5)")
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated llama.cpp pre-tokenizers")
    parser.add_argument("--per-corpus", action="store_true", help="also each shared corpus alone")
    parser.add_argument("--annotate", type=int, default=0, help="print the top N functions (self cost) of the mix")
    parser.add_argument("--keep", help="write callgrind's output files to this folder (callgrind_annotate them)")
    parser.add_argument("--tiers", default="auto,sse2", help="window tiers measured (auto: AVX2 under valgrind)")
    parser.add_argument("--core", default=str(PROFILE_BUILD), help="the _core module with symbols to count")
    parser.add_argument("--child", nargs=3, metavar=("PROGRAM", "DOCS", "TIER"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:  # bpe_core is imported after the core is chosen
        return args
    from bpe_core.pretokenize.llamacpp import LLAMACPP_PRETOKENIZERS

    args.families = args.families.split(",")
    unknown = [f for f in args.families if f not in LLAMACPP_PRETOKENIZERS]
    if unknown:
        parser.error(f"unknown llama.cpp pre-tokenizer(s) {unknown}: one of {sorted(LLAMACPP_PRETOKENIZERS)}")
    return args


def program_of(family: str) -> dict:
    """The family's compiled program, as native_name registers it (its hand-written stages chosen)."""
    from bpe_core import native
    from bpe_core.pretokenize.compiler import class_ranges, compile_patterns
    from bpe_core.pretokenize.llamacpp import LLAMACPP_PRETOKENIZERS
    from bpe_core.pretokenize.pretokenizer import _hand_written_stages

    patterns = LLAMACPP_PRETOKENIZERS[family][0]
    compiled = compile_patterns(patterns, _hand_written_stages(patterns, list(native._core.pretok_names())))
    if compiled is None:
        raise SystemExit(f"{family}: its patterns are not compiled (outside the matcher's subset)")
    return {"program": list(compiled.program), "ranges": [list(class_ranges(c)) for c in compiled.classes],
            "label": family}  # fmt: skip


def load_core(path: str) -> None:
    """Make ``bpe_core._native._core`` the module at ``path``: a finder ahead of the others, before bpe_core.native
    imports it."""
    import importlib.util

    class Finder:
        @staticmethod
        def find_spec(name, _path=None, _target=None):
            return importlib.util.spec_from_file_location(name, path) if name == "bpe_core._native._core" else None

    sys.meta_path.insert(0, Finder)


def core_file(given: str) -> str:
    """The core module to load: ``given``, or the one module in the folder ``given``."""
    path = Path(given)
    if path.is_dir():
        found = sorted(path.glob("_core*.so"))
        if not found:
            raise SystemExit(f"no _core*.so in {path}: build the profile core first (see this script's docstring)")
        path = found[0]
    if not path.exists():
        raise SystemExit(f"{path} does not exist: build the profile core first (see this script's docstring)")
    return str(path.resolve())


def child(program_file: str, docs_file: str, tier: str, core: str) -> None:
    """Under valgrind: register the program and split every document (the counted part)."""
    load_core(core)
    from bpe_core import native

    spec = json.loads(Path(program_file).read_text())
    docs = [d.encode("utf-8", "surrogatepass") for d in json.loads(Path(docs_file).read_text())]
    core = native._core
    tier = core.pretok_rx_tier(tier)
    name = core.pretok_compile(spec["program"], spec["ranges"], spec["label"])
    crc = 0
    for d in docs:
        ends, _ = core.pretok_split_ends(name, d, "scalar", 256)
        crc = zlib.crc32(ends, crc)
    print(json.dumps({"bytes": sum(map(len, docs)), "pieces_crc": crc, "tier": tier}))


def callgrind(
    work: Path, tag: str, program_file: Path, docs_file: Path, tier: str, core: str
) -> tuple[int, dict, Path]:
    """(Ir counted, the child's report, callgrind's output file) of one child run."""
    out = work / f"callgrind.out.{tag}"
    cmd = ["valgrind", "--tool=callgrind", "--toggle-collect=bpe::rx_split_some*", f"--callgrind-out-file={out}",
           sys.executable, __file__, "--child", str(program_file), str(docs_file), tier, "--core", core]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("==")]
        raise SystemExit(f"{tag}: failed under valgrind (exit {done.returncode}): {(said or ['?'])[-1]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for line in out.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1]), report, out
    raise SystemExit(f"{tag}: no totals in {out}")


def top_functions(out: Path, count: int) -> list[str]:
    """callgrind_annotate's first ``count`` functions by self cost."""
    done = subprocess.run(["callgrind_annotate", str(out)], capture_output=True, text=True, check=False)
    rows = [line for line in done.stdout.splitlines() if "(" in line and ":" in line and line.strip()[:1].isdigit()]
    return rows[:count]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child(*args.child, args.core)
        return 0
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    core = core_file(args.core)
    sets = {"mix": [r["text"] for _, r in load_records(args.mb)]}
    if args.per_corpus:
        sets |= {c: [r["text"] for _, r in load_records(args.mb, (c,))] for c in CORPORA}
    print(f"the split alone (rx_split_some), callgrind Ir/byte; {args.mb} MB per text; target <= {TARGET}")
    print(f"core: {core}")
    columns = [(name, tier) for tier in args.tiers.split(",") for name in sets]
    print(f"  {'family':16s}" + "".join(f"{name[:11] + ' ' + tier:>17s}" for name, tier in columns))
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="bench-rx-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name, docs in sets.items():
            (work / f"docs-{name}.json").write_text(json.dumps(docs))
        for family in args.families:
            program_file = work / f"program-{family}.json"
            program_file.write_text(json.dumps(program_of(family)))
            cells, outs, crcs = [], [], {}
            for name, tier in columns:
                ir, report, out = callgrind(work, f"{family}-{name}-{tier}", program_file, work / f"docs-{name}.json",
                                            tier, core)  # fmt: skip
                outs.append(out)
                crcs.setdefault(name, set()).add(report["pieces_crc"])
                cells.append(f"{ir / report['bytes']:13.2f} {report['tier'][:3]:>3s}")
                worst = max(worst, ir / report["bytes"])
            differ = [name for name, seen in crcs.items() if len(seen) > 1]
            print(f"  {family:16s}" + "".join(cells) + (f"  PIECES DIFFER between tiers on {differ}" if differ else ""))
            if args.annotate:
                for row in top_functions(outs[0], args.annotate):
                    print(f"      {row.strip()[:150]}")
    print(f"worst {worst:.2f} Ir/byte: {'meets' if worst <= TARGET else 'misses'} the target of {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
