"""RELIABILITY.md is the generated report of this suite: committed, and naming exactly the tests that record rows.

A test added, renamed or removed without ``make reliability`` fails here, so every row of the file names a test
that exists (and fails if its promise is broken), and no test's promises are missing from it."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re

import pytest

from .lib import ROOT, ROW_KEY, Recorder
from .report import OUTPUT_ENV, markdown

# Every test module of this suite (a new one is scanned without being listed here).
MODULES = tuple(sorted(p.stem for p in (ROOT / "tests" / "reliability").glob("test_*.py") if p.stem != "test_report"))


def recording_tests() -> set[str]:
    """``module.py::function`` of every test function of the suite that records rows."""
    found = set()
    for name in MODULES:
        module = importlib.import_module(f"reliability.{name}")
        for attr, fn in vars(module).items():
            if attr.startswith("test_") and callable(fn) and "reliability.row(" in inspect.getsource(fn):
                found.add(f"{name}.py::{attr}")
    return found


def test_reliability_md_names_exactly_the_recording_tests():
    if os.environ.get(OUTPUT_ENV):
        pytest.skip(f"{OUTPUT_ENV} is set: this run writes RELIABILITY.md")
    text = (ROOT / "RELIABILITY.md").read_text(encoding="utf-8")
    assert text.startswith("# Reliability\n") and "do not edit by hand" in text
    named = {re.sub(r"\[.*$", "", m) for m in re.findall(r"\| `([^`]+)` \|", text)}
    assert named == recording_tests(), (
        "RELIABILITY.md is out of date (run `make reliability`): "
        f"rows for missing tests {sorted(named - recording_tests())}, "
        f"tests without rows {sorted(recording_tests() - named)}"
    )


def test_rows_render_as_a_table(request):
    recorder = Recorder(request.node)
    recorder.row("faults", "a | pipe in the input", "a promise", reruns_compared=2, peak_mib=10)
    rows = [json.loads(v) for k, v in request.node.user_properties if k == ROW_KEY]
    request.node.user_properties.clear()  # an example, not a row of the report
    text = markdown(rows)
    assert "| a \\| pipe in the input | a promise | `test_report.py::test_rows_render_as_a_table` |" in text
    assert "- reruns compared byte for byte: 2" in text and "- largest memory peak (MiB): 10" in text
