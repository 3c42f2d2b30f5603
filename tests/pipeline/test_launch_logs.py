"""--log-level (pipeline/launch/logs.py): Beam's loggers in the launcher, the workers' harness level, Dask's env."""

from __future__ import annotations

import argparse
import logging
import os

import pytest

from pipeline.launch import logs


def test_the_harness_level_is_added_unless_given():
    assert logs.harness_args(["--direct_num_workers=2"], "warning") == [
        "--direct_num_workers=2",
        "--default_sdk_harness_log_level=WARNING",
    ]
    given = ["--default_sdk_harness_log_level=DEBUG"]
    assert logs.harness_args(given, "error") == given
    with pytest.raises(ValueError, match="--log-level must be one of error, warning, info, debug, got 'loud'"):
        logs.harness_args([], "loud")


def test_the_launcher_level_and_dask_environment(monkeypatch):
    monkeypatch.delenv(logs.DASK_ENV, raising=False)
    beam = logging.getLogger("apache_beam")
    old = beam.level
    try:
        logs.set_beam_log_level("error")
        assert not logging.getLogger("apache_beam.runners.portability.local_job_service").isEnabledFor(logging.WARNING)
        assert os.environ[logs.DASK_ENV] == "error"
        logs.set_beam_log_level("info")
        assert logging.getLogger("apache_beam.runners.worker").isEnabledFor(logging.INFO)
    finally:
        beam.setLevel(old)


def test_the_flag_defaults_to_error():
    parser = argparse.ArgumentParser()
    logs.add_log_level_flag(parser)
    assert parser.parse_args([]).log_level == "error"
    assert parser.parse_args(["--log-level", "debug"]).log_level == "debug"
    with pytest.raises(SystemExit):
        parser.parse_args(["--log-level", "loud"])
