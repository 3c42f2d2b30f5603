"""Fixtures of the reliability suite: the row recorder, and small tokenizer files shared by the modules."""

from __future__ import annotations

import pytest

from .lib import Recorder


@pytest.fixture
def reliability(request) -> Recorder:
    """Records rows of RELIABILITY.md (what was tried, the promise, figures) into the test's report, from which
    the controlling process (also under pytest-xdist) builds the summary and the file: see report.py."""
    return Recorder(request.node)


@pytest.fixture(scope="session")
def r50k_artifact(tmp_path_factory) -> str:
    """r50k_base with <|endoftext|>, as our own artifact (uint16 ids, one special token)."""
    from conftest import ours_openai

    path = tmp_path_factory.mktemp("tok") / "r50k.bpe"
    ours_openai("r50k").save(str(path))
    return str(path)
