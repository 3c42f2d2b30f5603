"""Beam pipeline options for the entry points: pass-through flags, with defaults that work on this project's machines.

- Default runner: the in-process ``FnApiRunner``. Beam's ``DirectRunner`` first tries to download a Prism binary,
  which fails without network.
- ``--runner DaskRunner`` is accepted by its short name (Beam 2.77 resolves only its full module path).
- On Dask, ``beam.Create`` puts up to 128 elements in one partition, so every range would go to one worker; unless
  ``--dask_npartitions`` or ``--dask_partition_size`` is given, the ranges get one partition each.

Beam 2.77's DaskRunner, as measured here (tests/pipeline/test_train_dask.py keeps the measurement): ``finish_bundle``
output is dropped; only the last branch of a graph is computed; every tagged output of a multi-output ParDo reaches
the consumer of any one of them; ``Read`` sources crash; there are no metrics (``result.metrics()`` raises), and a
partition's outputs are held in one list in memory. The pipelines are built around all of these.
"""

from __future__ import annotations

from collections.abc import Sequence

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

DEFAULT_RUNNER = "FnApiRunner"
RUNNER_ALIASES = {
    "DaskRunner": "apache_beam.runners.dask.dask_runner.DaskRunner",
    "daskrunner": "apache_beam.runners.dask.dask_runner.DaskRunner",
}


def _flag_given(args: Sequence[str], name: str) -> bool:
    return any(a == name or a.startswith(name + "=") for a in args)


def runner_name(args: Sequence[str]) -> str:
    """The ``--runner`` value among the Beam args, or the default."""
    runner = PipelineOptions(list(args)).view_as(StandardOptions).runner
    return runner or DEFAULT_RUNNER


def pipeline_options(beam_args: Sequence[str], *, num_ranges: int) -> PipelineOptions:
    """PipelineOptions from the pass-through Beam flags, with the defaults above filled in."""
    runner = runner_name(beam_args)
    args = _drop_value_of(list(beam_args), "--runner") + [f"--runner={RUNNER_ALIASES.get(runner, runner)}"]
    if "dask" in runner.lower() and not (_flag_given(args, "--dask_npartitions") or _flag_given(args, "--dask_partition_size")):
        args.append(f"--dask_npartitions={max(1, num_ranges)}")
    return PipelineOptions(args)


def _drop_value_of(args: list[str], flag: str) -> list[str]:
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == flag:
            skip = True
        elif not a.startswith(flag + "="):
            out.append(a)
    return out


def is_dask(options: PipelineOptions) -> bool:
    return "dask" in (options.view_as(StandardOptions).runner or "").lower()
