"""Beam pipeline options for the entry points: pass-through flags, with defaults that work on this project's machines.

- Default runner: the in-process ``FnApiRunner``. Beam's ``DirectRunner`` first tries to download a Prism binary,
  which fails without network.
- ``--runner DaskRunner`` is accepted by its short name (Beam 2.77 and 2.78 resolve only its full module path).
- On Dask, ``beam.Create`` puts up to 128 elements in one partition, so every range would go to one worker; unless
  ``--dask_npartitions`` or ``--dask_partition_size`` is given, the ranges get one partition each.

Beam's DaskRunner, as measured here on 2.77 and 2.78 (tests/pipeline/test_train_dask.py keeps the measurement):
``finish_bundle`` output is dropped (up to 2.77; 2.78 delivers it); only the last branch of a graph is computed;
every tagged output of a multi-output ParDo reaches the consumer of any one of them; ``Read`` sources crash; there
are no metrics (``result.metrics()`` raises), and a partition's outputs are held in one list in memory. The
pipelines are built around all of these.
"""

from __future__ import annotations

from collections.abc import Sequence

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from pipeline.errors import UsageError

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
    if "dask" in runner.lower() and not (
        _flag_given(args, "--dask_npartitions") or _flag_given(args, "--dask_partition_size")
    ):
        args.append(f"--dask_npartitions={max(1, num_ranges)}")
    return PipelineOptions(args)


def with_workers(workers: int, beam_args: Sequence[str]) -> list[str]:
    """The Beam args of ``--workers N``: Beam's multi-process local runner with N worker processes, refused beside
    another ``--runner`` or a ``--direct_*`` option (the two would contradict each other).

    >>> with_workers(4, ["--temp_location=/tmp/x"])
    ['--temp_location=/tmp/x', '--direct_running_mode=multi_processing', '--direct_num_workers=4']
    """
    for arg in beam_args:
        flag, _, value = arg.partition("=")
        if flag.startswith("--direct_"):
            raise UsageError(f"--workers {workers} sets {flag} itself (multi_processing, {workers} workers): drop "
                             f"{flag}, or drop --workers and give Beam's --direct_* options alone")  # fmt: skip
    runner = runner_name(beam_args)
    if runner != DEFAULT_RUNNER:
        raise UsageError(
            f"--workers {workers} runs Beam's multi-process runner on this machine, but --runner {runner} was given: "
            f"drop --workers (size {runner}'s workers with its own options) or drop --runner"
        )
    return [*beam_args, "--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"]


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


def run_to_end(pipeline) -> None:
    """Run ``pipeline`` and wait for it; close the Dask client the Dask runner opens and never closes. Local worker
    processes ignore Ctrl-C and are stopped by the launcher (pipeline/launch/workers.py)."""
    from pipeline.launch.workers import workers_ignore_ctrl_c

    with workers_ignore_ctrl_c():
        result = pipeline.run()
        result.wait_until_finish()
    client = getattr(result, "client", None)
    if client is not None:
        client.close()


def check_beam_args(beam_args: Sequence[str], *, our_flags: Sequence[str] = ()) -> None:
    """Refuse any argument that no Beam options class parses, naming it and the nearest known flag.

    Beam itself only logs ``Discarding unparseable args`` and runs on, so ``--min-frequncy 5`` trained with the
    default. Every runner we support registers its options first (Beam adds ``DaskOptions`` only when its Dask
    module is imported). ``our_flags`` (the command's own) are offered as suggestions too.
    """
    import difflib

    from apache_beam.options.pipeline_options import _BeamArgumentParser

    # Beam's Dask runner (0.47 s to import) only where a Dask flag or runner asks for its options
    wants_dask = "dask" in runner_name(beam_args).lower() or any(a.startswith("--dask") for a in beam_args)
    dask_error = _register_dask_options() if wants_dask else None
    parser = _BeamArgumentParser(allow_abbrev=False)
    classes = {str(cls): cls for cls in PipelineOptions.__subclasses__()}
    for cls in classes.values():
        cls._add_argparse_args(parser)  # noqa: SLF001 - what PipelineOptions.get_all_options does
    known = {s for a in parser._actions for s in a.option_strings}  # noqa: SLF001
    flags = [a.split("=", 1)[0] for a in beam_args if a.startswith("-") and a.split("=", 1)[0] not in known]
    if not flags:  # names only: Beam checks the values when it builds the options
        return
    flag = flags[0]
    if flag.startswith("--dask_") and dask_error:
        raise UsageError(f"{flag} is an option of Beam's Dask runner, which cannot load here ({dask_error}): "
                                 "pip install 'dask[distributed]'")  # fmt: skip
    near = difflib.get_close_matches(flag, [*our_flags, *sorted(known)], n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]}?" if near else "; see beam-bpe COMMAND --help and Beam's pipeline options"
    raise UsageError(f"unrecognized argument {flag}: neither beam-bpe nor Apache Beam knows it{hint}")


def _register_dask_options() -> str | None:
    """Import Beam's Dask runner so that its options are known; the reason when it cannot be imported."""
    try:
        import apache_beam.runners.dask.dask_runner  # noqa: F401 - registers DaskOptions
    except ImportError as exc:
        return str(exc)
    return None
