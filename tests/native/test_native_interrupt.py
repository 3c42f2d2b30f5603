"""Ctrl-C during a long native call: the call ends with KeyboardInterrupt soon after SIGINT, its native threads
are gone, and the tokenizer still encodes as before (no partial merge was cached).

A child process runs each long call after printing its name; the test sends it SIGINT half a second later. Each
call would run for tens of seconds if the signal were ignored; the timeout below is only a backstop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import data_path

from bpe_core import native

pytestmark = pytest.mark.skipif(not native.available(), reason="the native core is not built")

CHILD = r"""
import gc, os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # pytest may have left SIGINT ignored for children
import bpe_core

tok = bpe_core.Tokenizer.from_file(sys.argv[1])
probe = "a" * 5000 + " hello world " + "b" * 300
expected = tok.encode_ordinary(probe)
tasks = lambda: len(os.listdir("/proc/self/task"))
calls = {
    "one huge piece": lambda: tok.encode_ordinary("a" * 20_000_000),
    "batch, two threads": lambda: tok.encode_ordinary_batch(["a" * 1_000_000] * 100, num_threads=2),
    "batch, one thread": lambda: tok.encode_ordinary_batch(["hello world " * 100_000] * 2000, num_threads=1),
    "count_chunks, two threads": lambda: bpe_core.count_chunks(["hello world " * 100_000] * 4000, "cl100k",
                                                                num_threads=2),
}
for name, call in calls.items():
    before = tasks()
    # No garbage left for the collector: a collection during the call (the batch's result lists can start one) runs
    # finalizers in Python (regex's SetBase.__del__, from the pattern compiles at load), and a SIGINT handled inside a
    # finalizer is printed as "Exception ignored" and lost, so the call finished (CPython's rule for __del__, not the
    # native poll's; seen once in 2,500 tests of a CI run)
    gc.collect()
    print("start", name, flush=True)
    try:
        call()
        print("finished", name, flush=True)
    except KeyboardInterrupt:
        print("interrupted", name, before, tasks(), tok.encode_ordinary(probe) == expected, flush=True)
print("done", flush=True)
"""


def test_sigint_stops_long_native_calls():
    path = data_path("tiktoken", "cl100k_base.tiktoken")
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True)
    results = []
    try:
        deadline = time.monotonic() + 120
        for line in child.stdout:
            words = line.split()
            if words[0] == "start":
                time.sleep(0.5)
                os.kill(child.pid, signal.SIGINT)
                sent = time.monotonic()
            elif words[0] in ("interrupted", "finished"):
                # generous: the poll is every 50 ms, but the machine may be loaded
                assert time.monotonic() - sent < 20, f"{line.strip()}: SIGINT took more than 20 s to stop it"
                results.append(line.split(None, 1)[1].strip() if words[0] == "finished" else words)
                assert words[0] == "interrupted", f"{line.strip()} despite SIGINT"
            elif words[0] == "done":
                break
            assert time.monotonic() < deadline
    finally:
        child.kill()
        child.wait()
    assert len(results) == 4, results
    for words in results:
        *name, before, after, same = words[1:]
        assert after == before, f"{' '.join(name)}: {before} threads before the call, {after} after"
        assert same == "True", f"{' '.join(name)}: the tokenizer encodes differently after the interrupt"
