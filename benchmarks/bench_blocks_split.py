"""The 64-byte block splitter alone under callgrind: warm instructions per byte of each block family.

    cmake -S . -B build/rx-profile -G Ninja -DPython_EXECUTABLE=$PWD/.venv/bin/python -DBPE_PROFILE=ON \
        -DCMAKE_BUILD_TYPE=Release && cmake --build build/rx-profile -j 2      # a core that keeps its symbols
    .venv/bin/python benchmarks/bench_blocks_split.py [--mb 0.5] [--presets o200k,cl100k] [--texts multi_udhr,mix]
                                                      [--tier auto] [--annotate 12] [--keep DIR] [--core PATH]

Issue 31's acceptance: "the split alone, callgrind: at most 15 instructions per byte for every family on the shared
corpora". A child process under ``valgrind --tool=callgrind`` splits every document with
``_core.pretok_split_ends(preset, doc, tier, 256)`` (the encoder's batches of 256 piece ends), counting only
``bpe::pretok_blocks_split_some_tier`` and what it calls (``--toggle-collect``). Each text is split once in one run
and three times in another; (three - once) / 2 per byte is the warm figure, without the first use's table builds
(the BMP flags, the lead sets). The child checks every document's ends against the scalar splitter's (outside the
counted function). Texts: ``mix`` is ``--mb`` MB taken from every shared corpus in turn (benchlib.load_records), and
a corpus name that corpus's first ``--mb`` MB alone (for multi_udhr and fortunes_multi at 0.5 MB: their texts as
bench_rx_split.py --per-corpus takes them). Counting needs the core's symbols: the child loads ``--core``, by default
the profile build above. Instruction counts do not move with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_rx_split import PROFILE_BUILD, TARGET, core_file, load_core, top_functions
from benchlib import CORPORA, ROOT, load_records

# One preset per block family (pretok_blocks.cpp's walkers).
PRESETS = ("cl100k", "llama3", "qwen2", "r50k", "deepseek-v3", "o200k")
TEXTS = ("multi_udhr", "fortunes_multi", "mix")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=0.5, help="MB of text per run (default 0.5)")
    parser.add_argument("--presets", default=",".join(PRESETS), help="comma-separated pretok_names() presets")
    parser.add_argument("--texts", default=",".join(TEXTS), help=f"comma-separated: mix and/or of {CORPORA}")
    parser.add_argument("--tier", default="auto", choices=("auto", "sse2"), help="auto: AVX2 under valgrind")
    parser.add_argument("--annotate", type=int, default=0, help="print the top N functions (self cost), 3 rounds")
    parser.add_argument("--keep", help="write callgrind's output files to this folder (callgrind_annotate them)")
    parser.add_argument("--core", default=str(PROFILE_BUILD), help="the _core module with symbols to count")
    parser.add_argument("--child", nargs=4, metavar=("PRESET", "DOCS", "TIER", "ROUNDS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return args
    args.presets, args.texts = args.presets.split(","), args.texts.split(",")
    unknown = [t for t in args.texts if t != "mix" and t not in CORPORA]
    if unknown:
        parser.error(f"unknown text(s) {unknown}: mix or one of {CORPORA}")
    return args


def child(preset: str, docs_file: str, tier: str, rounds: str, core: str) -> None:
    """Under valgrind: split every document `rounds` times (the counted part), and check the ends once."""
    load_core(core)
    from bpe_core import native

    split = native._core.pretok_split_ends
    docs = [d.encode("utf-8", "surrogatepass") for d in json.loads(Path(docs_file).read_text())]
    wrong = sum(split(preset, d, tier, 256)[0] != split(preset, d, "scalar", 256)[0] for d in docs)
    for _ in range(int(rounds) - 1):
        for d in docs:
            split(preset, d, tier, 256)
    tier = native._core.pretok_blocks_tier() if tier == "auto" else tier  # the tier that ran
    print(json.dumps({"bytes": sum(map(len, docs)), "wrong": wrong, "tier": tier}))


def callgrind(work: Path, tag: str, preset: str, docs_file: Path, tier: str, rounds: int, core: str):
    """(Ir counted, the child's report, callgrind's output file) of one child run."""
    out = work / f"callgrind.out.{tag}-{rounds}"
    cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no",
           "--toggle-collect=bpe::pretok_blocks_split_some_tier*", f"--callgrind-out-file={out}",
           sys.executable, __file__, "--child", preset, str(docs_file), tier, str(rounds), "--core", core]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("==")]
        raise SystemExit(f"{tag}: failed under valgrind (exit {done.returncode}): {(said or ['?'])[-1]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for line in out.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1]), report, out
    raise SystemExit(f"{tag}: no totals in {out}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child(*args.child, args.core)
        return 0
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    core = core_file(args.core)
    print(f"the block split alone (pretok_blocks_split_some_tier), callgrind, warm Ir/byte ((3 rounds - 1) / 2); "
          f"{args.mb} MB per text; tier {args.tier}; target <= {TARGET}")  # fmt: skip
    print(f"core: {core}")
    print(f"  {'preset':12s}" + "".join(f"{name[:14]:>15s}" for name in args.texts))
    worst, wrong = 0.0, []
    with tempfile.TemporaryDirectory(prefix="bench-blocks-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name in args.texts:
            corpora = CORPORA if name == "mix" else (name,)
            (work / f"docs-{name}.json").write_text(json.dumps([r["text"] for _, r in load_records(args.mb, corpora)]))
        for preset in args.presets:
            cells = []
            for name in args.texts:
                docs, tag = work / f"docs-{name}.json", f"{preset}-{name}-{args.tier}"
                once, report, _ = callgrind(work, tag, preset, docs, args.tier, 1, core)
                thrice, _, out = callgrind(work, tag, preset, docs, args.tier, 3, core)
                per_byte = (thrice - once) / 2 / report["bytes"]
                worst = max(worst, per_byte)
                if report["wrong"]:
                    wrong.append(f"{preset} on {name}: {report['wrong']} documents")
                cells.append(f"{per_byte:11.2f} {report['tier'][:3]:>3s}")
                if args.annotate:
                    print(f"  {preset} {name}:")
                    for row in top_functions(out, args.annotate):
                        print(f"      {row.strip()[:150]}")
            print(f"  {preset:12s}" + "".join(cells))
    print(f"worst {worst:.2f} Ir/byte: {'meets' if worst <= TARGET else 'misses'} the target of {TARGET}")
    if wrong:
        print(f"PIECES DIFFER from the scalar splitter's: {'; '.join(wrong)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
