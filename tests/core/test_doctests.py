"""The examples in the docstrings of bpe_core and pipeline run and print what they show (issue 23: two had drifted
from the code unseen). One test per module with at least one example that is not ``# doctest: +SKIP`` (those need
a corpus, a cluster or the network); a module's skipped examples are not counted as run."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def modules_with_examples() -> list[str]:
    """The dotted names of the modules whose source holds an example that runs (read as text: nothing imported)."""
    names = []
    for package in ("bpe_core", "pipeline"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name != "__main__.py" and _runnable(path.read_text(encoding="utf-8")):
                parts = list(path.relative_to(ROOT).with_suffix("").parts)
                names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _runnable(source: str) -> bool:
    examples = doctest.DocTestParser().get_examples(source)
    return any(not example.options.get(doctest.SKIP) for example in examples)


MODULES = modules_with_examples()


def test_the_modules_with_examples_are_found():
    assert {"bpe_core.model.truncate", "pipeline.launch.checks", "pipeline.storage.paths"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False, report=True)
    assert result.attempted > 0, f"{name}: no example ran"
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed (printed above)"
