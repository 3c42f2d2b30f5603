"""Runner of `make sanitize` and `make fuzz`: the sanitized core's environment, the test run, the fuzz targets.

    python tests/fuzz/run.py sanitize [--phases tests,checks] [pytest options]  # under ASan+UBSan
    python tests/fuzz/run.py fuzz [--targets pretok,encode] [--runs N] [--max-time S] [--jobs J] [--plain]

Both load the AddressSanitizer + UndefinedBehaviorSanitizer build of the core (build/sanitize, made by
`make sanitize-build`) instead of the venv's, through tests/fuzz/sanitized_site/sitecustomize.py (the loaders
target excepted, see SANITIZED); CPython itself is not sanitized, so gcc's libasan is preloaded (with libstdc++, else
ASan's __cxa_throw interceptor finds no real __cxa_throw and aborts on the first C++ exception), leaks are not
reported (CPython keeps its objects at exit) and PYTHONMALLOC=malloc lets ASan see Python objects' memory too. A run
fails on a non-zero exit and on any sanitizer report in its output, even from a subprocess whose exit status does not
reach us.

Each fuzz target runs for --runs inputs or --max-time seconds, whichever comes first, --jobs at a time; the summary
gives the inputs each one ran. A failing input is kept as build/fuzz/TARGET/crash-*: replay it with
`python tests/fuzz/fuzz_TARGET.py build/fuzz/TARGET/crash-...` and add it to tests/fuzz/regressions/TARGET/.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BUILD = ROOT / "build" / "sanitize"
TARGETS = ("pretok", "encode", "decode", "loaders")
# Per target: longest input (bytes). The encoder's and the decoder's Python references are the slow side.
MAX_LEN = {"pretok": 4096, "encode": 1024, "decode": 512, "loaders": 0}
# Which core each target fuzzes. With gcc's libasan preloaded, atheris' Python coverage is lost (libasan provides the
# __sanitizer_cov_* hooks that atheris' libFuzzer expects to own: "Coverage symbols are being provided by a library
# other than libFuzzer", and no "cov:" in the log). The native-heavy targets have no native coverage anyway and need
# ASan; the loaders are pure Python, where coverage guidance is what finds new paths: they run on the venv's core.
SANITIZED = {"pretok": True, "encode": True, "decode": True, "loaders": False}
REPORT = re.compile(r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer"
                    r"|AddressSanitizer: CHECK failed")  # fmt: skip


def sanitized_core() -> Path:
    """build/sanitize's module, or the one named by BEAM_BPE_SANITIZED_CORE (e.g. a scratch build with a planted
    bug)."""
    if os.environ.get("BEAM_BPE_SANITIZED_CORE"):
        return Path(os.environ["BEAM_BPE_SANITIZED_CORE"]).resolve()
    found = sorted(BUILD.glob("_core*.so"))
    if not found:
        sys.exit(f"run.py: no sanitized core in {BUILD}: run `make sanitize-build` first")
    return found[0]


def gcc_file(name: str) -> str:
    path = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True, check=True).stdout
    path = path.strip()
    if not os.path.isabs(path):
        sys.exit(f"run.py: gcc does not know {name} (install gcc's sanitizer runtime, e.g. Debian's libasan8)")
    return path


def sanitizer_env(core: Path) -> dict[str, str]:
    env = dict(os.environ)
    site = str(HERE / "sanitized_site")
    env.update(
        BEAM_BPE_NATIVE_CORE=str(core),
        BEAM_BPE_REQUIRE_NATIVE="1",
        PYTHONPATH=os.pathsep.join(p for p in (site, env.get("PYTHONPATH", "")) if p),
        LD_PRELOAD=" ".join([gcc_file("libasan.so"), gcc_file("libstdc++.so")]),
        PYTHONMALLOC="malloc",
        ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0:handle_abort=1",
        UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:abort_on_error=1",
    )
    return env


def run_logged(cmd: list[str], env: dict, log: Path, echo: bool) -> tuple[int, str]:
    """Run, keep the whole output in ``log`` (and on our stdout if ``echo``); (exit code, output)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8", errors="replace") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace")  # fmt: skip
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            if echo:
                sys.stdout.write(line)
        code = proc.wait()
    return code, log.read_text(encoding="utf-8", errors="replace")


# ---------------------------------------------------------------------------------------------- sanitize
def sanitize(pytest_args: list[str], phases: list[str]) -> int:
    """Two pytest runs under ASan+UBSan. "tests": tests/native/test_native_*.py with CPython's own allocator (pymalloc:
    the reference's Python-heavy work stays affordable; the C++ side's own heap is fully checked). "checks":
    tests/fuzz/sanitized_checks.py with PYTHONMALLOC=malloc, so that a read past the end of a Python bytes or str
    buffer handed to the core is caught too (within pymalloc's pools it is not: a planted 3-byte over-read in the
    UTF-8 decoder of pretok.cpp went unreported under pymalloc and was reported under malloc)."""
    core = sanitized_core()
    tests = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "native").glob("test_native_*.py"))
    # The peak-memory test measures RSS, which ASan's shadow memory and quarantine inflate: not a memory check here.
    tests += ["--deselect", "tests/native/test_native_train.py::test_estimate_bounds_the_measured_peak"]
    tests += ["-n", "2"]  # pytest-xdist: the reference's share of the work dominates; 2 cores in CI
    runs = {"tests": (tests, {"PYTHONMALLOC": "pymalloc"}), "checks": (["tests/fuzz/sanitized_checks.py"], {})}
    for phase in phases:
        files, extra_env = runs[phase]
        env = {**sanitizer_env(core), **extra_env}
        # --capture=sys: a sanitizer writes its report to fd 2 and aborts; fd capture would lose it with the process
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--capture=sys", *files, *pytest_args]
        print(f"sanitize ({phase}): {core} under ASan+UBSan, PYTHONMALLOC={env['PYTHONMALLOC']}", flush=True)
        start = time.monotonic()
        code, output = run_logged(cmd, env, ROOT / "build" / "sanitize" / f"pytest-{phase}.log", echo=True)
        reports = [line for line in output.splitlines() if REPORT.search(line)]
        print(f"sanitize ({phase}): exit {code}, {len(reports)} sanitizer report lines, "
              f"{time.monotonic() - start:.0f} s", flush=True)  # fmt: skip
        if reports:
            print("sanitize: FAILED, sanitizer reports:\n  " + "\n  ".join(reports[:20]))
            return 1
        if code != 0:
            return code
    return 0


# ---------------------------------------------------------------------------------------------- fuzz
def fuzz_command(target: str, runs: int, max_time: int) -> list[str]:
    work = ROOT / "build" / "fuzz" / target
    cmd = [
        sys.executable,
        str(HERE / f"fuzz_{target}.py"),
        f"-seed_corpus={work / 'corpus'}",
        f"-runs={runs}",
        f"-max_total_time={max_time}",
        "-timeout=30",
        "-rss_limit_mb=8192",
        "-print_final_stats=1",
        f"-artifact_prefix={work}/",
        "-print_pcs=0",
        "-reload=0",
        "-keep_seed=1",
        "-len_control=0",
        "-use_value_profile=1",
    ]
    if MAX_LEN[target]:
        cmd.append(f"-max_len={MAX_LEN[target]}")
    return cmd


def executed(output: str) -> int | None:
    found = re.findall(r"stat::number_of_executed_units:\s*(\d+)", output) or re.findall(r"Done (\d+) runs", output)
    return int(found[-1]) if found else None


def fuzz(targets: list[str], runs: int, max_time: int, jobs: int, plain: bool) -> int:
    plain_env = dict(os.environ, BEAM_BPE_REQUIRE_NATIVE="1")
    sanitized_env = None if plain or not any(SANITIZED[t] for t in targets) else sanitizer_env(sanitized_core())
    pending = list(targets)
    running: list[tuple[str, subprocess.Popen, float, object]] = []
    results: dict[str, tuple[int, float, str]] = {}
    while pending or running:
        while pending and len(running) < jobs:
            target = pending.pop(0)
            log = ROOT / "build" / "fuzz" / target / "log.txt"
            log.parent.mkdir(parents=True, exist_ok=True)
            out = open(log, "w", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed when the job ends
            env = sanitized_env if SANITIZED[target] and sanitized_env else plain_env
            proc = subprocess.Popen(fuzz_command(target, runs, max_time), env=env, cwd=ROOT, stdout=out,
                                    stderr=subprocess.STDOUT)  # fmt: skip
            core = "sanitized core" if env is sanitized_env else "venv's core, Python coverage"
            print(f"fuzz: {target} started on the {core} (log {log.relative_to(ROOT)})", flush=True)
            running.append((target, proc, time.monotonic(), out))
        time.sleep(0.5)
        for item in list(running):
            target, proc, start, out = item
            if proc.poll() is None:
                continue
            out.close()
            running.remove(item)
            text = (ROOT / "build" / "fuzz" / target / "log.txt").read_text(encoding="utf-8", errors="replace")
            results[target] = (proc.returncode, time.monotonic() - start, text)
            print(f"fuzz: {target} finished, exit {proc.returncode}", flush=True)
    return summarize(targets, results)


def summarize(targets: list[str], results: dict) -> int:
    failed = []
    print(f"\n{'target':<10}{'inputs':>10}{'seconds':>9}{'inputs/s':>10}  status")
    for target in targets:
        code, seconds, text = results[target]
        n = executed(text)
        reports = [line for line in text.splitlines() if REPORT.search(line)]
        status = "ok" if code == 0 and not reports and n is not None else "FAILED"
        if status != "ok":
            failed.append((target, text, reports))
        rate = f"{n / seconds:.0f}" if n else "-"
        print(f"{target:<10}{n if n is not None else '-':>10}{seconds:>9.0f}{rate:>10}  {status}")
    total = sum(executed(results[t][2]) or 0 for t in targets)
    print(f"fuzz: {total} inputs over {len(targets)} targets")
    for target, text, _reports in failed:
        crashes = sorted((ROOT / "build" / "fuzz" / target).glob("crash-*")) + sorted(
            (ROOT / "build" / "fuzz" / target).glob("timeout-*")
        )
        print(f"\n---- {target}: last lines of build/fuzz/{target}/log.txt")
        print("\n".join(text.splitlines()[-60:]))
        for crash in crashes:
            print(f"reproduce: python tests/fuzz/fuzz_{target}.py {crash.relative_to(ROOT)}")
    print(f"fuzz: {len(targets) - len(failed)} passed, {len(failed)} failed")  # one line per run, in pytest's words
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    san = sub.add_parser("sanitize", help="the native tests and the adversarial data under ASan+UBSan")
    san.add_argument("--phases", default="tests,checks", help="tests (test_native_*.py), checks (sanitized_checks)")
    fz = sub.add_parser("fuzz", help="the atheris targets")
    fz.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated, of {', '.join(TARGETS)}")
    fz.add_argument("--runs", type=int, default=100_000, help="inputs per target (default 100000)")
    fz.add_argument("--max-time", type=int, default=60, help="seconds per target, whichever comes first (default 60)")
    fz.add_argument("--jobs", type=int, default=2, help="targets at once (default 2)")
    fz.add_argument("--plain", action="store_true", help="every target on the venv's core (no sanitized build needed)")
    args, rest = parser.parse_known_args(argv)
    if args.command == "sanitize":  # unknown options go to pytest
        return sanitize(rest, [p for p in args.phases.split(",") if p])
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    targets = [t for t in args.targets.split(",") if t]
    unknown = set(targets) - set(TARGETS)
    if unknown:
        parser.error(f"unknown targets {sorted(unknown)}; use some of {', '.join(TARGETS)}")
    return fuzz(targets, args.runs, args.max_time, args.jobs, args.plain)


if __name__ == "__main__":
    sys.exit(main())
