"""Translate a ``beam-bpe train`` or ``encode`` job into the Dataflow job description, without submitting anything.

    python -m pipeline.cli.dataflow train --input gs://B/corpus/*.jsonl --vocab-size 32000 --out gs://B/tok \\
        --runner DataflowRunner --project P --region R --temp_location gs://B/tmp \\
        --dataflow_job_file job.json [--staged_copy DIR]

The same checks, plan and graph as the real launch, then the DataflowRunner with ``--dry_run``: it translates the
graph and builds the job, and stops before the service is called. Beam 2.77's dry run writes no job file (the
file is written by ``create_job``, which also submits), so this module finishes the description itself: the
Dataflow client stages what a real launch would stage (the pipeline proto, ``--extra_package`` wheels, the
pickled main session, the dependency list), but into ``--staged_copy`` (a temporary folder by default) instead of
``--staging_location``, and the job, naming the ``gs://`` locations, is written to ``--dataflow_job_file``. It
needs the inputs to be listable (planning reads their sizes) and nothing else: no credentials, no Dataflow API.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence

import apache_beam as beam
from apache_beam.options.pipeline_options import DebugOptions, GoogleCloudOptions, PipelineOptions, StandardOptions
from apache_beam.portability.api import beam_runner_api_pb2

from pipeline.errors import UsageError
from pipeline.launch.checks import runner_kind
from pipeline.launch.options import pipeline_options
from pipeline.storage.files import write_atomic


def translate(command: str, argv: Sequence[str], *, staged_copy: str | None = None) -> dict:
    """Translate ``beam-bpe COMMAND ARGV`` (with ``--dataflow_job_file``); return a summary of the job written."""
    from pipeline.cli import build_parser

    args, beam_args = build_parser().parse_known_args([command, *map(str, argv)])
    beam_args = [a for a in beam_args if not a.startswith("--dry_run")] + ["--dry_run=True"]
    options = PipelineOptions(beam_args)
    job_file = options.view_as(DebugOptions).dataflow_job_file
    if runner_kind(options.view_as(StandardOptions).runner) != "dataflow":
        raise UsageError("the translation check is for --runner DataflowRunner")
    if not job_file:
        raise UsageError("pass --dataflow_job_file=PATH: the job description is written there")
    if getattr(args, "workers", None) is not None:
        raise UsageError(f"--workers {args.workers} runs worker processes on this machine, not on Dataflow: drop it "
                         "(Dataflow takes --num_workers and --max_num_workers)")  # fmt: skip
    if command == "train":
        pipeline, summary = _train_graph(args, beam_args)
    elif command == "encode":
        pipeline, summary = _encode_graph(args, beam_args)
    else:
        raise UsageError(f"the command must be train or encode, got {command!r}")
    result = pipeline.run()  # --dry_run: translated and built, not submitted
    staged = _describe(result.job, job_file, staged_copy or tempfile.mkdtemp(prefix="beam-bpe-staged-"))
    return dict(summary, job_file=job_file, **staged)


def _train_graph(args: argparse.Namespace, beam_args: list[str]) -> tuple[beam.Pipeline, dict]:
    from pipeline.cli.train import job_from_args
    from pipeline.train import job as tp

    job = job_from_args(args)
    if job.from_counts:
        raise UsageError("--from-counts trains from existing counts with no pipeline: there is no job to translate")
    plan = tp.plan_train(job, beam_args)  # the same plan as the real launch
    pipeline = beam.Pipeline(options=pipeline_options(beam_args, num_ranges=len(plan.corpus.ranges)))
    tp.build_train_graph(pipeline, plan)
    return pipeline, {"command": "train", "ranges": len(plan.corpus.ranges), "bytes": plan.corpus.total_bytes}


def _encode_graph(args: argparse.Namespace, beam_args: list[str]) -> tuple[beam.Pipeline, dict]:
    from pipeline.cli.encode import job_from_args
    from pipeline.encode import job as ep

    plan = ep.plan_encode(job_from_args(args), beam_args)  # the same plan, hence fingerprint, as the real launch
    pipeline = beam.Pipeline(options=pipeline_options(beam_args, num_ranges=len(plan.corpus.ranges)))
    ep.build_encode_graph(pipeline, plan)
    return pipeline, {"command": "encode", "ranges": len(plan.corpus.ranges), "bytes": plan.corpus.total_bytes}


def _describe(job, job_file: str, staged_copy: str) -> dict:
    """Stage into ``staged_copy`` what a launch would upload, write the job description, return what it holds."""
    from apache_beam.runners.dataflow.internal import apiclient

    class CopyingClient(apiclient.DataflowApplicationClient):
        def stage_file_with_retry(self, gcs_or_local_path, file_name, stream_or_path, mime_type=None, total_size=None):
            folder = os.path.join(staged_copy, gcs_or_local_path.split("://", 1)[-1].strip("/"))
            os.makedirs(folder, exist_ok=True)
            stream = open(stream_or_path, "rb") if isinstance(stream_or_path, str) else stream_or_path
            with stream, open(os.path.join(folder, file_name), "wb") as out:
                out.write(stream.read())

    gcp = job.options.view_as(GoogleCloudOptions)
    no_auth = gcp.no_auth
    gcp.no_auth = True  # the client is built for staging only: no credentials looked up, no API called
    try:
        CopyingClient(job.options, job.root_staging_location).create_job_description(job)
    finally:
        gcp.no_auth = no_auth
    write_atomic(job_file, (job.json() + "\n").encode())
    return summarize(json.loads(job.json()), job.proto_pipeline, staged_copy)


def summarize(description: dict, proto: beam_runner_api_pb2.Pipeline, staged_copy: str) -> dict:
    """Step names (the transforms of the pipeline proto, as the Dataflow UI shows them), staged packages, image."""
    pool = description["environment"]["workerPools"][0]
    return {
        "job_name": description["name"],
        "steps": sorted(t.unique_name for t in proto.components.transforms.values() if t.unique_name),
        "packages": [dict(p, copy=_copy_of(p["location"], staged_copy)) for p in pool.get("packages", [])],
        "container_images": sorted({i["containerImage"] for i in pool.get("sdkHarnessContainerImages", [])}),
        "experiments": description["environment"].get("experiments", []),
        "staged_copy": staged_copy,
    }


def _copy_of(location: str, staged_copy: str) -> str:
    """The local copy of a staged file: the API names it storage.googleapis.com/BUCKET/PATH for gs://BUCKET/PATH."""
    for prefix in ("gs://", "storage.googleapis.com/"):
        location = location.removeprefix(prefix)
    return os.path.join(staged_copy, location.lstrip("/"))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.cli.dataflow", description=__doc__.splitlines()[0], allow_abbrev=False
    )
    parser.add_argument("command", choices=("train", "encode"))
    parser.add_argument(
        "--staged_copy", help="folder receiving the files a launch would upload (default: a temporary one)"
    )
    known, rest = parser.parse_known_args(argv)
    try:
        summary = translate(known.command, rest, staged_copy=known.staged_copy)
    except (ValueError, OSError) as exc:
        print(f"beam-bpe dataflow_job: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({k: v for k, v in summary.items() if k != "steps"} | {"steps": len(summary["steps"])}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
