"""Several tokenizers, one read: ``beam-bpe encode --tokenizer A --tokenizer B ... --out OUT``.

    plan per tokenizer (its folder OUT/<stem>/, identity, shards), the leases, resume checks     (driver)
    WriteShards: one unit per shard any tokenizer still needs, read once, encoded and written   (Beam)
                 into each folder whose shard is not complete
    per tokenizer: finish_encode (pipeline/encode/run.py), as the single-tokenizer job           (driver)

The corpus is read and parsed once (about 3 s per GB, a third of an encoding job once the encoder is fast) and each
tokenizer's branch is the single-tokenizer job's own stages on its own layout, so each folder holds the same files
as a separate ``encode --tokenizer X --out OUT/<stem>`` run, with its own manifest, fingerprint, resume, ``--merge``
and end of run (``finish_encode``, the same code): a folder that is complete is left as it is, and a shard is read
only where some folder still needs it. The tokenizers share one plan, so their shards hold the same ranges.
"""

from __future__ import annotations

import contextlib
import dataclasses
import posixpath
import time

from pipeline.encode.job import EncodePlan, plan_encode
from pipeline.encode.run import encode_outputs, finish_encode, prepare_output, stopped
from pipeline.encode.settings import EncodeJob
from pipeline.errors import UsageError
from pipeline.launch.progress import Reporter
from pipeline.storage.lease import Lease
from pipeline.storage.paths import join


def tokenizer_folders(tokenizers: list[str]) -> list[str]:
    """The folder name of each tokenizer: its file's name without the suffix (``cl100k.bpe`` -> ``cl100k``, a
    folder by its name); two with the same name are refused, naming both."""
    names: dict[str, str] = {}
    for path in tokenizers:
        base = posixpath.basename(path.rstrip("/"))
        stem = base.split(".", 1)[0] if "." in base[1:] else base
        if stem in names:
            raise UsageError(
                f"--tokenizer {names[stem]} and --tokenizer {path} would both write into OUT/{stem}/: give each "
                "tokenizer a file of its own name (copy or rename one), or encode them in two runs"
            )
        names[stem] = path
    return list(names)


def plan_branches(job: EncodeJob, tokenizers: list[str], beam_args: list[str]) -> list[EncodePlan]:
    """Plan every tokenizer's job into ``job.out/<stem>/``, each checked and refused on its own before any work."""
    stems = tokenizer_folders(tokenizers)
    return [
        plan_encode(dataclasses.replace(job, tokenizer=path, out=join(job.out, stem)), beam_args)
        for stem, path in zip(stems, tokenizers, strict=True)
    ]


def run_encode_several(
    job: EncodeJob, tokenizers: list[str], beam_args: list[str] | None = None, *, reporter: Reporter | None = None
) -> dict[str, dict]:
    """Encode the corpus of ``job`` with every tokenizer in one read; return each folder's manifest by stem. The
    leases of ``job.out`` and of every ``job.out/<stem>`` are held from before the first folder is touched to after
    the last COMPLETED (a run into one of the folders alone is refused meanwhile)."""
    beam_args, reporter = list(beam_args or []), reporter or Reporter()
    started = time.perf_counter()
    plans = plan_branches(job, tokenizers, beam_args)
    corpus = plans[0].corpus
    reporter.stage("plan", files=len(corpus.files), ranges=len(corpus.ranges), bytes=corpus.total_bytes,
                   tokenizers=len(plans), shards=plans[0].layout.num_shards)  # fmt: skip
    with contextlib.ExitStack() as stack:
        top = stack.enter_context(Lease(job.out, command="encode"))
        leases = [stack.enter_context(Lease(p.job.out, command="encode", group=top.record.run_id)) for p in plans]
        outputs = [prepare_output(p, lease) for p, lease in zip(plans, leases, strict=True)]
        with stopped(outputs):  # Ctrl-C included: what each folder keeps
            encode_outputs(outputs, beam_args, reporter)
            return {
                posixpath.basename(o.plan.job.out.rstrip("/")): finish_encode(o, reporter, beam_args, started)
                for o in outputs
            }
