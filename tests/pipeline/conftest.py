"""Fixtures shared by the pipeline and deploy tests."""

from __future__ import annotations

import socket

import pytest


@pytest.fixture
def listening():
    """``host:port`` of a loopback socket that accepts connections while the test runs (a stand-in job server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield f"127.0.0.1:{s.getsockname()[1]}"
