"""A stop keeps finished work (issue 33): ``beam-bpe encode`` of ~300 MB with 2 workers and the default shard size,
stopped at half an uninterrupted run's wall time (SIGINT to its process group, as a terminal's Ctrl-C, and SIGKILL of
the group, as a preempted VM), then rerun: how many shards the stop kept complete, what the rerun redid, and whether
the rerun's output is byte-identical to the uninterrupted run's.

    python benchmarks/bench_stop.py [--input GLOB ...] [--mb 300] [--workers 2] [--work DIR] [--keep]

Without ``--input`` the corpus is built (once, then reused) from text files of this machine that are not the shared
corpora: Python sources and documentation of the installed packages, ``/usr/share/doc`` and ``/usr/share/dict``,
as JSONL files of ~40 MB, one document per source file, until ``--mb`` MB of text.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (sysconfig.get_paths()["purelib"], "/usr/lib/python3", "/usr/share/doc", "/usr/share/dict", "/usr/share/man")
SUFFIXES = {".py", ".rst", ".md", ".txt", ".html", ".c", ".h", ".pyi", ".json", ".cfg", ".toml", ""}
FILE_MB = 40


def build_corpus(work: Path, mb: float) -> list[str]:
    """``work/corpus-<mb>/part-NN.jsonl``: one document per readable UTF-8 text file under SOURCES, in path order."""
    folder = work / f"corpus-{mb:g}"
    if (folder / "DONE").exists():
        return [str(folder / "*.jsonl")]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    limit, written, part, out = mb * 1e6, 0, 0, None
    while written < limit:  # the files again (another pass) if they hold less than mb
        before = written
        for base in SOURCES:
            for path in sorted(Path(base).rglob("*")) if os.path.isdir(base) else ():
                if written >= limit:
                    break
                if path.suffix not in SUFFIXES or not path.is_file() or path.stat().st_size > 4_000_000:
                    continue
                try:
                    text = path.read_bytes().decode("utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                if not text.strip():
                    continue
                if out is None or out.tell() > FILE_MB * 1e6:
                    out = (folder / f"part-{part:02d}.jsonl").open("w", encoding="utf-8")
                    part += 1
                out.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
                written += len(text.encode())
        if written == before:
            raise SystemExit("no text files found to build a corpus from: pass --input")
    (folder / "DONE").write_text(f"{written}\n")
    return [str(folder / "*.jsonl")]


def encode_cmd(inputs: list[str], out: Path, tokenizer: str, workers: int, extra: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "pipeline.cli", "encode", "--tokenizer", tokenizer, "--out", str(out), "--no-progress"]
    for pattern in inputs:
        cmd += ["--input", pattern]
    return cmd + ["--workers", str(workers), *extra]


def final_files(out: Path) -> dict[str, str]:
    """Every file of the output but the run's own bookkeeping (``_shards/``) and a writer's temporary file."""
    found = {}
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out).as_posix()
        if path.is_file() and not rel.startswith("_shards") and ".tmp-" not in rel and rel != ".lease.json":
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def complete_shards(out: Path) -> int:
    return len(list((out / "_shards").glob("tokens-*.json")))


def run(cmd: list[str], *, stop_after: float | None = None, how: int = signal.SIGINT) -> tuple[float, int, str]:
    """Run ``cmd`` in its own process group; with ``stop_after``, send ``how`` to the whole group then."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    if stop_after is not None:
        try:
            proc.wait(stop_after)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, how)
    text = proc.communicate()[0].decode(errors="replace")
    if how == signal.SIGKILL and stop_after is not None:
        try:  # a SIGKILLed launcher leaves no one to stop its workers: the group's kill reached them too
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return time.perf_counter() - start, proc.returncode, text


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:160] if lines else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", action="append", help="input file or glob (repeatable); default: a built corpus")
    parser.add_argument("--mb", type=float, default=300, help="MB of text for the built corpus")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tokenizer", default=str(ROOT.parent / "shared/data/tiktoken/cl100k_base.tiktoken"))
    parser.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "beam-bpe-stop"))
    parser.add_argument("--keep", action="store_true", help="keep the outputs")
    parser.add_argument("--shard-size", help="passed to encode (default: encode's own default, the one measured)")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    inputs = args.input or build_corpus(work, args.mb)
    extra = ["--shard-size", args.shard_size] if args.shard_size else []

    full = work / "full"
    shutil.rmtree(full, ignore_errors=True)
    wall, code, text = run(encode_cmd(inputs, full, args.tokenizer, args.workers, extra))
    if code != 0:
        raise SystemExit(f"the uninterrupted run failed ({code}):\n{text[-3000:]}")
    reference, shards = final_files(full), complete_shards(full)
    print(f"load average {os.getloadavg()[0]:.2f}; uninterrupted run: {wall:.1f} s, {shards} shards")
    print(f"  {last_line(text)}")
    print(f"{'stop':<22} {'at s':>6} {'exit':>5} {'kept':>9} {'kept %':>7} {'rerun s':>8} {'identical':>10}")
    results = []
    for name, how in (("SIGINT (Ctrl-C)", signal.SIGINT), ("SIGKILL of the group", signal.SIGKILL)):
        out = work / f"stopped-{how}"
        shutil.rmtree(out, ignore_errors=True)
        cmd = encode_cmd(inputs, out, args.tokenizer, args.workers, extra)
        _, stop_code, _ = run(cmd, stop_after=wall / 2, how=how)
        kept = complete_shards(out)
        again_wall, again_code, again_text = run(cmd)
        same = again_code == 0 and final_files(out) == reference
        results.append({"stop": name, "kept": kept, "shards": shards, "identical": same})
        print(f"{name:<22} {wall / 2:>6.1f} {stop_code:>5} {kept:>4} of {shards:<2} {100 * kept / shards:>6.0f}% "
              f"{again_wall:>8.1f} {'yes' if same else 'NO':>10}")  # fmt: skip
        print(f"  rerun: {last_line(again_text)}")
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    if not args.keep:
        shutil.rmtree(full, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.2f}")
    short = [r["stop"] for r in results if r["kept"] * 3 < r["shards"] or not r["identical"]]
    if short:
        raise SystemExit(f"short of issue 33's goal (a third of the shards kept, the rerun identical): {short}")


if __name__ == "__main__":
    main()
