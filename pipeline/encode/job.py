"""Entry point: encode a corpus into token-id shards with Apache Beam (``beam-bpe encode --input ...``).

    tokenizer check, plan, lease, resume check                          (driver: here and pipeline/encode/run.py)
    WriteShards: one unit per shard, its ranges read, encoded, written  (Beam, any runner: pipeline/encode/write.py)
    inputs read again -> manifest.json -> the format's files -> COMPLETED (driver: finish_encode)

Output shards of about ``--shard-size`` input bytes (as stored) each, made of consecutive ranges in input order and
fixed by the plan before anything runs (pipeline/encode/layout.py); each shard is complete as soon as it is
written, so a stopped run keeps it. A rerun into the same directory skips the shards
that are complete and rewrites the rest; the result is byte-identical to an uninterrupted run. A directory holding
(part of) a job with another tokenizer, input list or settings is refused (pipeline/encode/resume.py).
"""

from __future__ import annotations

import dataclasses
import posixpath
import time
from dataclasses import dataclass

import bpe_core
from pipeline.corpus.plan import CorpusPlan, plan_corpus
from pipeline.encode.formats import get_format
from pipeline.encode.layout import ShardLayout, assign_shards, common_root
from pipeline.encode.policy import job_policy
from pipeline.encode.resume import job_identity, sha256_json
from pipeline.encode.run import build_encode_graph, encode_outputs, finish_encode, prepare_output, stopped
from pipeline.encode.settings import EncodeJob, resolve_shard_size
from pipeline.encode.shuffle_keys import shuffled_shard_count
from pipeline.encode.tokenizer import open_tokenizer
from pipeline.errors import UsageError
from pipeline.launch.checks import check_launch
from pipeline.launch.progress import Reporter
from pipeline.storage.lease import Lease

__all__ = ["EncodePlan", "build_encode_graph", "plan_encode", "run_encode"]


@dataclass(frozen=True)
class EncodePlan:
    """What an encoding run will do, fixed before anything runs; the same for every runner and the Dataflow
    translation (hence the same fingerprint)."""

    job: EncodeJob
    tok: bpe_core.Tokenizer
    ref: object  # the TokenizerRef the workers load
    policy: object  # the resolved special-token / BOS / EOS policy
    corpus: CorpusPlan
    identity: dict
    layout: ShardLayout


def plan_encode(job: EncodeJob, beam_args: list[str]) -> EncodePlan:
    """Check the runner options and the tokenizer, plan the corpus and the shards: what can fail before any work."""
    paths = {"--input": [i.pattern for i in job.inputs], "--tokenizer": [job.tokenizer], "--out": [job.out]}
    check_launch(beam_args, paths=paths)  # a runner option that cannot work fails here, before any work
    s = job.settings
    tok, ref = open_tokenizer(job.tokenizer, s.pretokenizer)  # a bad hash or version stops here, before any work
    policy = job_policy(tok, s)  # the flags and the separators the shard format implies
    refuse_output_in_inputs(job.out, job.inputs)  # before the listing: the output must never be read as input
    corpus = plan_corpus(list(job.inputs), job.corpus, range_bytes=job.range_bytes)
    refuse_output_in_inputs(job.out, job.inputs, [f.path for f in corpus.files])
    job = dataclasses.replace(job, shard_size=resolve_shard_size(job.shard_size, corpus.total_bytes))
    dtype = get_format(s.shard_format).dtype(tok.n_vocab)
    identity = job_identity(job, ref.digest, corpus, dataclasses.asdict(policy), dtype)
    fingerprint = sha256_json(identity)
    range_to_shard = assign_shards(corpus.ranges, job.shard_size)
    num_shards = range_to_shard[-1] + 1 if range_to_shard else 0
    if s.shuffle is not None:  # the groups read together stay; the shards come from the bytes alone
        num_shards = shuffled_shard_count(corpus.ranges, job.shard_size)
    root = common_root([f.path for f in corpus.files])
    layout = ShardLayout(job.out, s.prefix, num_shards, s.shard_format, dtype, ref.digest, fingerprint,
                         range_to_shard, root=root, shuffle=s.shuffle)  # fmt: skip
    return EncodePlan(job, tok, ref, policy, corpus, identity, layout)


def refuse_output_in_inputs(out: str, inputs, files: list[str] = ()) -> None:
    """Refuse an ``--out`` at or under an input folder (an ``--input DIR``, a recursive pattern's folder), equal to
    a pattern's folder, or holding a file the inputs match: a later run would read the output's own files as input
    (and with ``--overwrite`` delete what it reads)."""
    root = out.rstrip("/")
    for spec in inputs:
        pattern = spec.pattern.rstrip("/")
        static = pattern.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0]
        folder, below = posixpath.dirname(static + "x"), "**" in pattern
        if static == pattern:  # no wildcard: a folder is read whole, a file is only itself
            folder, below = (pattern, True) if _is_dir(pattern) else ("", False)
        if folder and (root == folder or (below and root.startswith(folder.rstrip("/") + "/"))):
            raise UsageError(
                f"--out {out} is {'at or under' if below else 'the folder of'} the input folder {folder} (--input "
                f"{spec.pattern}): a later run would read the output's files as input; choose an --out outside it"
            )
    inside = [f for f in files if f.startswith(root + "/")]
    if inside:
        raise UsageError(f"--input matches {inside[0]}, inside --out {out}: choose an --out outside the inputs")


def _is_dir(path: str) -> bool:
    import fsspec

    try:
        fs, p = fsspec.core.url_to_fs(path)
        return bool(fs.isdir(p))
    except (OSError, ValueError):
        return False


def run_encode(job: EncodeJob, beam_args: list[str] | None = None, *, reporter: Reporter | None = None) -> dict:
    """Check, plan, encode (Beam) and finish the output directory; return the manifest (plus a ``run`` section
    that is printed, not written: runner, seconds, shards skipped as already complete, shards redone and why).

    >>> run_encode(EncodeJob("tok.bpe", (InputSpec("c/*.jsonl.gz"),), "out"))  # doctest: +SKIP
    """
    beam_args = list(beam_args or [])
    reporter = reporter or Reporter()
    started = time.perf_counter()
    plan = plan_encode(job, beam_args)
    corpus, layout = plan.corpus, plan.layout
    reporter.stage(
        "plan",
        files=len(corpus.files),
        ranges=len(corpus.ranges),
        bytes=corpus.total_bytes,
        shards=layout.num_shards,
        fingerprint=layout.fingerprint[:16],
    )
    with Lease(job.out, command="encode") as lease:  # one job per output: a second one is refused here
        out = prepare_output(plan, lease)
        with stopped([out]):  # Ctrl-C included: what is complete, and the temporary files removed or named
            encode_outputs([out], beam_args, reporter)
            return finish_encode(out, reporter, beam_args, started)
