"""``--log-level``: Beam's own log lines off by default, in the launcher and in the workers.

Where Beam's lines come from, and what turns each off (Beam 2.77, measured on the README's 2-worker example):

- the launcher: ``apache_beam.*`` loggers (runner warnings, ``Discarding unparseable args`` ...), and with
  ``--direct_running_mode multi_processing`` every log record of every worker, which the workers send over the
  Fn API logging channel and ``local_job_service`` re-logs as ``Worker: severity: WARN ... message: "No
  semi_persistent_directory found ..."`` through its own logger: the level of the ``apache_beam`` logger hides both;
- the multi-process workers themselves (``sdk_worker_main``): their root logger takes
  ``--default_sdk_harness_log_level`` from the pipeline options before the first warning, so that option is added
  to the Beam args unless given;
- Dask's worker processes: ``distributed`` configures logging from the ``DASK_LOGGING__*`` environment when it is
  imported, and a LocalCluster's workers inherit the launcher's environment, so ``DASK_LOGGING__APACHE_BEAM`` is set
  before the runner starts the cluster (a cluster started elsewhere, ``--dask_client_address``, keeps its own
  logging configuration).

Our own stage lines and summary are printed, not logged, and stay at every level.

>>> harness_args(["--direct_num_workers=2"], "error")
['--direct_num_workers=2', '--default_sdk_harness_log_level=ERROR']
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence

LEVELS = ("error", "warning", "info", "debug")
DEFAULT_LEVEL = "error"
BEAM_LOGGERS = ("apache_beam",)
HARNESS_FLAG = "--default_sdk_harness_log_level"
DASK_ENV = "DASK_LOGGING__APACHE_BEAM"
HELP = (
    "what Beam and its workers log: error (the default: no Beam line unless something fails), warning, info or debug; "
    "the stage lines and the summary of beam-bpe are printed at every level"
)


def add_log_level_flag(parser: argparse.ArgumentParser) -> None:
    """``--log-level error|warning|info|debug`` on a command that runs Beam."""
    parser.add_argument("--log-level", choices=LEVELS, default=DEFAULT_LEVEL, help=HELP)


def python_level(level: str) -> int:
    """``"error"`` -> ``logging.ERROR``; anything but the four levels is refused."""
    if level not in LEVELS:
        raise ValueError(f"--log-level must be one of {', '.join(LEVELS)}, got {level!r}")
    return getattr(logging, level.upper())


def set_beam_log_level(level: str = DEFAULT_LEVEL) -> None:
    """Set Beam's loggers of this process (the launcher) and the environment Dask's local workers start with."""
    value = python_level(level)
    for name in BEAM_LOGGERS:
        logging.getLogger(name).setLevel(value)
    os.environ[DASK_ENV] = level


def harness_args(beam_args: Sequence[str], level: str = DEFAULT_LEVEL) -> list[str]:
    """``beam_args`` with the workers' harness log level added, unless the user gave one."""
    args = list(beam_args)
    python_level(level)
    if not any(a == HARNESS_FLAG or a.startswith(HARNESS_FLAG + "=") for a in args):
        args.append(f"{HARNESS_FLAG}={level.upper()}")
    return args
