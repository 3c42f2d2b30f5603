"""Entry point: encode a corpus into token-id shards with Apache Beam (``beam-bpe encode --input ...``).

    tokenizer check, plan, resume check (driver)
    ReadCorpus -> EncodeDocuments -> WriteShards                       (Beam, any runner, one terminal branch)
    shard stats -> manifest.json -> COMPLETED                            (driver)

Output shards of about ``--shard-size`` input bytes (as stored) each, made of consecutive ranges in input order and
fixed by the plan before anything runs. A rerun into the same directory skips the shards that are complete and
rewrites the rest; the result is byte-identical to an uninterrupted run. A directory
holding (part of) a job with another tokenizer, input list or settings is refused: every run records the job's
fingerprint in ``_shards/job.json`` before it writes anything, and every shard's stats file carries it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import time
from dataclasses import dataclass, field

import apache_beam as beam
import fsspec

import bpe_core
from pipeline.corpus.plan import DEFAULT_RANGE_BYTES, CorpusPlan, CorpusRange, CorpusSpec, InputSpec, plan_corpus
from pipeline.corpus.read import ReadCorpus
from pipeline.encode import shards as shard_io
from pipeline.encode.documents import EncodeDocuments, EncodeError, file_sha256, open_tokenizer, resolve_policy
from pipeline.encode.merge import merge_megatron, merged_files
from pipeline.encode.shards import SHARD_FORMATS, ShardLayout
from pipeline.encode.write import WriteShards
from pipeline.launch.checks import check_launch
from pipeline.launch.options import pipeline_options, run_to_end, runner_name
from pipeline.launch.progress import Reporter
from pipeline.storage.files import COMPLETED, MANIFEST, OutputError, exists, glob, read_bytes, remove
from pipeline.storage.manifest import finish_output

JOB_FILE = "job.json"
DEFAULT_SHARD_SIZE = 1 << 30
_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
}
SUMMED = ("documents_read", "documents", "dead_letters", "tokens", "text_bytes", "verified")


@dataclass(frozen=True)
class EncodeSettings:
    """How documents become shards, checked once when made: shard format and prefix, special-token policy,
    BOS/EOS, verification. The tokenizer's pre-tokenizer and special tokens come from its file, never from here
    (``pretokenizer`` only names the split of a rank-only ``.tiktoken`` file, which has none)."""

    shard_format: str = "parquet"
    pretokenizer: str | None = None
    special_tokens: str = "ordinary"
    bos: str | None = None  # None, "auto" or a token's text
    eos: str | None = None
    verify: bool = False
    prefix: str = "tokens"
    merge: bool = False  # megatron: also one .bin/.idx pair for the whole output (pipeline/encode/merge.py)

    def __post_init__(self) -> None:
        if self.shard_format not in SHARD_FORMATS:
            raise EncodeError(f"--shard-format must be one of {', '.join(SHARD_FORMATS)}, got {self.shard_format!r}")
        if self.merge and self.shard_format != "megatron":
            raise EncodeError(
                "--merge writes one Megatron .bin/.idx pair: it needs --shard-format megatron, "
                f"got {self.shard_format!r}"
            )
        if not self.prefix or any(c in self.prefix for c in "/\\*?[]") or self.prefix.startswith("."):
            raise EncodeError(f"--prefix must be a plain file-name prefix such as 'tokens', got {self.prefix!r}")
        if self.shard_format == "llmc" and self.eos is not None:
            raise EncodeError(
                "--eos with --shard-format llmc: llm.c's files hold one EOT token before each document, not after it "
                "(the tokenizer's <|endoftext|> or <|begin_of_text|>, or --bos TOKEN); --eos would add a second one"
            )
        if self.special_tokens not in ("ordinary", "allowed"):
            raise EncodeError(f"--special-tokens must be ordinary or allowed, got {self.special_tokens!r}")


@dataclass(frozen=True)
class EncodeJob:
    """Everything an encoding run needs besides the Beam options; local paths made absolute and checked once."""

    tokenizer: str
    inputs: tuple[InputSpec, ...]
    out: str
    corpus: CorpusSpec = field(default_factory=CorpusSpec)
    settings: EncodeSettings = field(default_factory=EncodeSettings)
    range_bytes: int = DEFAULT_RANGE_BYTES
    shard_size: int = DEFAULT_SHARD_SIZE
    overwrite: bool = False
    fail_at_shard: int | None = None  # test-only fault hook (see FinalizeShardFn)

    def __post_init__(self) -> None:
        if isinstance(self.shard_size, bool) or not isinstance(self.shard_size, int) or self.shard_size < 1:
            raise EncodeError(
                f"--shard-size must be a positive size such as 1GiB, 256MiB or 1000000, got {self.shard_size!r}"
            )
        if not self.inputs:
            raise EncodeError("nothing to encode: pass --input PATH_OR_GLOB (repeatable)")
        inputs = tuple(InputSpec(_absolute(i.pattern), i.weight) for i in self.inputs)
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "tokenizer", _absolute(self.tokenizer))
        object.__setattr__(self, "out", _absolute(self.out))


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
    bos, eos = shard_io.format_separators(s.shard_format, tok.special_tokens, s.bos, s.eos)  # datatrove, npy, llmc
    try:
        policy = resolve_policy(tok, special_tokens=s.special_tokens, bos=bos, eos=eos)
    except EncodeError as exc:
        if (bos, eos) == (s.bos, s.eos):
            raise
        implied = "an EOS after" if eos != s.eos else "an EOT before"
        raise EncodeError(f"--shard-format {s.shard_format} puts {implied} each document, and {exc}") from None
    corpus = plan_corpus(list(job.inputs), job.corpus, range_bytes=job.range_bytes)
    dtype = shard_io.shard_dtype(s.shard_format, tok.n_vocab)
    identity = job_identity(job, ref.digest, corpus, dataclasses.asdict(policy), dtype)
    fingerprint = sha256_json(identity)
    range_to_shard = assign_shards(corpus.ranges, job.shard_size)
    num_shards = range_to_shard[-1] + 1 if range_to_shard else 0
    layout = ShardLayout(job.out, s.prefix, num_shards, s.shard_format, dtype, ref.digest, fingerprint, range_to_shard)
    return EncodePlan(job, tok, ref, policy, corpus, identity, layout)


def parse_size(text: str) -> int:
    """``1GiB``, ``256MiB``, ``500MB`` or a number of bytes -> bytes; anything else raises EncodeError.

    >>> parse_size("256MiB"), parse_size("1000")
    (268435456, 1000)
    """
    value = str(text).strip().lower().replace(" ", "")
    number = value.rstrip("kmgtib")
    unit = value[len(number) :]
    try:
        size = float(number) * _SIZE_UNITS[unit]
    except (KeyError, ValueError):
        raise EncodeError(
            f"--shard-size must be a size such as 1GiB, 256MiB, 500MB or a number of bytes, got {text!r}"
        ) from None
    if size < 1 or size != int(size):
        raise EncodeError(f"--shard-size must be a whole number of bytes of at least 1, got {text!r}")
    return int(size)


def range_stored_bytes(ranges: list[CorpusRange]) -> list[int]:
    """The input bytes of each range as stored: its byte span, a whole (compressed) file's size, or for a Parquet
    row group its share of the file's size."""
    groups: dict[str, int] = {}
    for r in ranges:
        if r.kind == "row_group":
            groups[r.source] = groups.get(r.source, 0) + 1
    sizes = {source: _file_size(source) // n for source, n in groups.items()}
    return [sizes[r.source] if r.kind == "row_group" else r.end - r.start for r in ranges]


def _file_size(source: str) -> int:
    fs, path = fsspec.core.url_to_fs(source)
    return int(fs.size(path))


def assign_shards(ranges: list[CorpusRange], shard_size: int) -> tuple[int, ...]:
    """The output shard of each range: consecutive ranges in input order, a new shard where the bytes before a
    range reach the next multiple of ``shard_size``, numbered without gaps: ``ceil(bytes / shard_size)`` shards,
    within one (ranges do not split)."""
    shards: list[int] = []
    done = 0
    for size in range_stored_bytes(ranges):
        slot = done // shard_size
        shards.append(slot)
        done += size
    dense = {slot: i for i, slot in enumerate(sorted(set(shards)))}
    return tuple(dense[s] for s in shards)


def run_encode(job: EncodeJob, beam_args: list[str] | None = None, *, reporter: Reporter | None = None) -> dict:
    """Check, plan, encode (Beam) and finish the output directory; return the manifest (plus a ``run`` section
    that is printed, not written: runner, seconds, shards skipped as already complete).

    >>> run_encode(EncodeJob("tok.bpe", (InputSpec("c/*.jsonl.gz"),), "out"))  # doctest: +SKIP
    """
    beam_args = list(beam_args or [])
    reporter = reporter or Reporter()
    started = time.perf_counter()
    plan = plan_encode(job, beam_args)
    job, corpus, layout = plan.job, plan.corpus, plan.layout
    reporter.stage(
        "plan",
        files=len(corpus.files),
        ranges=len(corpus.ranges),
        bytes=corpus.total_bytes,
        fingerprint=layout.fingerprint[:16],
    )
    finished = prepare_encode_output(layout, plan.identity, overwrite=job.overwrite)
    if finished is not None:
        reporter.stage("done", out=job.out, already_complete=True)
        return dict(
            finished,
            run={
                "runner": runner_name(beam_args),
                "seconds": 0.0,
                "shards_skipped": layout.num_shards,
                "already_complete": True,
            },
        )
    done = complete_shards(layout)
    todo = [r for r in corpus.ranges if layout.shard_of(r.index) not in done]
    reporter.stage(
        "resume", shards=layout.num_shards, complete=len(done), todo=layout.num_shards - len(done), ranges=len(todo)
    )
    if todo:
        sizes = {f.path: f.size for f in corpus.files}
        shards = functools.partial(_shards_done, layout)
        with reporter.pipeline("encode", ranges=todo, file_sizes=sizes, beam_args=beam_args, shards=shards):
            _run_pipeline(dataclasses.replace(plan, corpus=CorpusPlan(corpus.files, todo)), beam_args)
    manifest = build_manifest(plan)
    if job.settings.merge:
        started_merge = time.perf_counter()
        manifest["merged"] = merge_shards(layout, manifest)
        reporter.stage("merge", files=len(manifest["merged"]["files"]), tokens=manifest["merged"]["tokens"],
                       seconds=round(time.perf_counter() - started_merge, 3))  # fmt: skip
    if job.settings.shard_format == "megatron":
        write_megatron_data_path(layout, manifest)
    finish_output(job.out, manifest)
    remove(layout.path(shard_io.TMP_DIR))
    seconds = round(time.perf_counter() - started, 3)
    reporter.stage("done", out=job.out, seconds=seconds)
    return dict(
        manifest,
        run={
            "runner": runner_name(beam_args),
            "seconds": seconds,
            "shards_skipped": len(done),
            "already_complete": False,
        },
    )


def _shards_done(layout: ShardLayout) -> tuple[int, int]:
    """(shards with a stats file, shards) for the progress bar: a listing, no file read."""
    return len(glob(layout.path(shard_io.STATS_DIR, f"{layout.prefix}-*-of-*.json"))), layout.num_shards


def build_encode_graph(pipeline: beam.Pipeline, plan: EncodePlan):
    """Add the encoding stages to ``pipeline``; return the terminal collection (one ShardWritten per shard)."""
    job, layout = plan.job, plan.layout
    batches = pipeline | "ReadCorpus" >> ReadCorpus(plan.corpus, job.corpus)
    encoded = batches | "EncodeDocuments" >> EncodeDocuments(
        plan.ref, plan.policy, layout.dtype, verify=job.settings.verify
    )
    return encoded | "WriteShards" >> WriteShards(layout, fail_at_shard=job.fail_at_shard)


def _run_pipeline(plan: EncodePlan, beam_args: list[str]) -> None:
    pipeline = beam.Pipeline(options=pipeline_options(beam_args, num_ranges=len(plan.corpus.ranges)))
    build_encode_graph(pipeline, plan)
    run_to_end(pipeline)


# ------------------------------------------------------------------ identity, resume, refusal
def job_identity(job: EncodeJob, tokenizer_digest: str, plan: CorpusPlan, policy: dict, dtype: str) -> dict:
    """What the output depends on (tokenizer, inputs, settings, library version): hashed into the fingerprint.

    The tokenizer counts by its digest (what decides the ids), not its file: a converted copy is the same job.
    """
    corpus = dataclasses.asdict(job.corpus)
    s = job.settings
    settings = dict(
        corpus,
        range_bytes=job.range_bytes,
        shard_size=job.shard_size,
        shard_format=s.shard_format,
        prefix=s.prefix,
        verify=s.verify,
        dtype=dtype,
        **policy,
    )
    if s.merge:  # only when given: the fingerprints of the jobs without it stay what they were
        settings["merge"] = True
    return {
        "tokenizer": {"digest": tokenizer_digest},
        "inputs": [{"path": f.path, "bytes": f.size} for f in plan.files],
        "settings": settings,
        "beam_bpe_version": bpe_core.__version__,
    }


def sha256_json(value: dict) -> str:
    """The job fingerprint: SHA-256 of the canonical JSON (sorted keys, no spaces) of ``value``."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def prepare_encode_output(layout: ShardLayout, identity: dict, *, overwrite: bool) -> dict | None:
    """Make ``out`` ready: the finished manifest if this very job is already complete, else None (resume).

    Refuses a directory holding a finished output of another kind, or (part of) an encoding job with another
    fingerprint. ``overwrite`` starts afresh whatever is there, removing only the files an encoding output has.
    """
    job_path = layout.path(shard_io.STATS_DIR, JOB_FILE)
    previous = json.loads(read_bytes(job_path)) if exists(job_path) else None
    completed = exists(layout.path(COMPLETED))
    if overwrite:
        _remove_outputs(layout, everything=True)
    elif previous is not None and sha256_json(previous) == layout.fingerprint:
        if completed:
            return json.loads(read_bytes(layout.path(MANIFEST)))
    elif previous is not None or completed:
        what = (
            f"a different encoding job ({_differences(previous, identity)} differ)"
            if previous
            else "a finished output of another job"
        )
        raise OutputError(
            f"{layout.out_dir} already holds {what}: choose another --out, or pass --overwrite to replace it"
        )
    remove(layout.path(COMPLETED))  # from here on the directory is incomplete until the run ends
    remove(layout.path(MANIFEST))
    remove(layout.path(MEGATRON_DATA_PATH))
    for name in merged_files(layout.prefix):  # a merged pair is rewritten from the complete shards
        remove(layout.path(name))
    remove(layout.path(shard_io.TMP_DIR))
    _remove_outputs(layout, everything=False)
    shard_io.write_file(job_path, (json.dumps(identity, indent=1, sort_keys=True) + "\n").encode())
    return None


def _differences(previous: dict, identity: dict) -> str:
    keys = [k for k in ("tokenizer", "inputs", "beam_bpe_version") if previous.get(k) != identity.get(k)]
    old, new = previous.get("settings", {}), identity["settings"]
    keys += [_flag_of(k) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return ", ".join(dict.fromkeys(keys)) or "settings"


def _flag_of(setting: str) -> str:
    """The flag a job setting comes from (``eos_id`` from ``--eos``, ``dtype`` from the tokenizer's size)."""
    if setting == "dtype":
        return "the id width (the tokenizer's size)"
    return "--" + setting.removesuffix("_id").replace("_", "-")


def _remove_outputs(layout: ShardLayout, *, everything: bool) -> None:
    """Remove shard files that are not complete shards of this job (all of them with ``everything``)."""
    keep = set() if everything else complete_shards(layout)
    fs, root = fsspec.core.url_to_fs(layout.out_dir)
    if not fs.exists(root):
        return
    pattern = ("*" if everything else layout.prefix) + "-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]*"
    mine = {n for i in keep for n in layout.data_files(i)} | {
        layout.name(i) + ext for i in keep for ext in (".jsonl", ".json")
    }
    for folder in (root, *(root.rstrip("/") + "/" + d for d in (shard_io.DEAD_DIR, shard_io.STATS_DIR))):
        for path in fs.glob(folder.rstrip("/") + "/" + pattern) + fs.glob(folder.rstrip("/") + "/.tmp-*"):
            if os.path.basename(path) not in mine:
                fs.rm(path)
    if everything:
        for name in (
            shard_io.STATS_DIR,
            shard_io.DEAD_DIR,
            MANIFEST,
            COMPLETED,
            MEGATRON_DATA_PATH,
            *merged_files(layout.prefix),
        ):
            remove(layout.path(name))


def complete_shards(layout: ShardLayout) -> set[int]:
    """Indices of the shards of this job that are complete: stats file of this fingerprint, files of its sizes."""
    done = set()
    fs, _ = fsspec.core.url_to_fs(layout.out_dir)
    for index in range(layout.num_shards):
        stats = shard_io.read_stats(layout, index)
        if stats is None:
            continue
        paths = {name: fsspec.core.url_to_fs(layout.path(name))[1] for name in stats["files"]}
        if all(fs.exists(p) and fs.size(p) == stats["files"][n]["bytes"] for n, p in paths.items()):
            done.add(index)
    return done


# ------------------------------------------------------------------ manifest
def build_manifest(plan: EncodePlan) -> dict:
    """The manifest from the shards' stats files (no times, no runner: a rerun writes the same bytes)."""
    layout, tok, job, identity, policy = plan.layout, plan.tok, plan.job, plan.identity, plan.policy
    shards = []
    ranges = {r.index: r for r in plan.corpus.ranges}
    for index in range(layout.num_shards):
        stats = shard_io.read_stats(layout, index)
        if stats is None:
            raise RuntimeError(
                f"the pipeline finished but shard {layout.name(index)} is missing from {layout.out_dir}: the "
                "runner did not run the writing step for it (see the runner notes in pipeline/launch/options.py); "
                "rerun the same command to write the missing shards"
            )
        for entry in stats["ranges"]:  # where each range is in its file, beside its counts
            rng = ranges[entry["index"]]
            entry.update(kind=rng.kind, start=rng.start, end=rng.end, first_row=rng.first_row)
        shards.append({k: v for k, v in stats.items() if k != "fingerprint"})
    totals = {key: sum(s[key] for s in shards) for key in SUMMED}
    manifest = {
        "kind": "beam-bpe encode",
        "fingerprint": layout.fingerprint,
        "tokenizer": _tokenizer_info(tok, job.tokenizer, job.settings.pretokenizer, identity, policy),
        "settings": identity["settings"],
        "inputs": identity["inputs"],
        "shards": shards,
        "sources": _per_source(shards, policy.extra_tokens),
        "documents_read": totals["documents_read"],
        "documents_written": totals["documents"],
        "dead_letters": totals["dead_letters"],
        "tokens": totals["tokens"],
        "text_bytes": totals["text_bytes"],
        "verified": totals["verified"],
    }
    check_reconciled(manifest)
    return manifest


def _tokenizer_info(tok, path: str, pretokenizer_option: str | None, identity: dict, policy) -> dict:
    info = tok.describe()
    keep = ("name", "family", "kind", "normalizer", "pretokenizer", "n_vocab", "special_tokens")
    return dict(
        {k: info[k] for k in keep}, path=path, sha256=file_sha256(path), pretokenizer_option=pretokenizer_option,
        **identity["tokenizer"], bos_id=policy.bos_id, eos_id=policy.eos_id,
    )  # fmt: skip


def _per_source(shards: list[dict], extra_tokens: int) -> list[dict]:
    by_source: dict[str, dict] = {}
    for s in (r for shard in shards for r in shard["ranges"]):
        acc = by_source.setdefault(s["source"], {"path": s["source"], "documents": 0, "text_bytes": 0, "tokens": 0})
        acc["documents"] += s["documents"]
        acc["text_bytes"] += s["text_bytes"]
        acc["tokens"] += s["tokens"] - extra_tokens * s["documents"]  # BOS/EOS are not text
    for acc in by_source.values():
        acc["bytes_per_token"] = round(acc["text_bytes"] / acc["tokens"], 4) if acc["tokens"] else None
    return [by_source[k] for k in sorted(by_source)]


MEGATRON_DATA_PATH = "megatron_data_path.txt"


def merge_shards(layout: ShardLayout, manifest: dict) -> dict:
    """``--merge``: the complete shards streamed into ``{prefix}.bin`` / ``{prefix}.idx``; the manifest's entry
    (prefix, files with bytes and sha256, documents, tokens), checked against the shards' totals."""
    merged = merge_megatron(
        layout.path(layout.prefix), [layout.path(s["name"]) for s in manifest["shards"]], layout.dtype
    )
    if (merged["documents"], merged["tokens"]) != (manifest["documents_written"], manifest["tokens"]):
        raise RuntimeError(
            f"the merged {layout.prefix}.bin/.idx hold {merged['documents']} documents and {merged['tokens']} tokens, "
            f"the shards {manifest['documents_written']} and {manifest['tokens']}: "
            "a shard changed while it was merged; rerun"
        )
    return {"prefix": layout.prefix, **merged}


def write_megatron_data_path(layout: ShardLayout, manifest: dict) -> None:
    """``megatron_data_path.txt``: ``weight prefix weight prefix ...`` on one line, the weights the shards' token
    counts, for Megatron-LM's ``--data-path`` (paste the line) or ``--data-args-path FILE`` (which reads
    ``f.read().split()`` into ``get_blend_from_list``). Shards without a document are left out (an empty dataset
    has nothing to sample); prefixes are absolute, so the file works from any directory. With ``--merge``: the one
    merged prefix and its token count."""
    merged = manifest.get("merged")
    if merged is not None:
        pairs = [f"{merged['tokens']} {layout.path(merged['prefix'])}"] if merged["documents"] else []
    else:
        pairs = [f"{s['tokens']} {layout.path(s['name'])}" for s in manifest["shards"] if s["documents"]]
    shard_io.write_file(layout.path(MEGATRON_DATA_PATH), (" ".join(pairs) + "\n").encode())


def check_reconciled(manifest: dict) -> None:
    read, written, dead = manifest["documents_read"], manifest["documents_written"], manifest["dead_letters"]
    if read != written + dead:
        raise RuntimeError(
            f"counts do not reconcile: documents_read={read} but documents_written={written} + dead_letters={dead}; "
            "a stage lost documents: this is a bug, please report it with the manifest"
        )


def summary_line(manifest: dict) -> str:
    """The one-line summary printed at the end of a run."""
    run = manifest.get("run", {})
    mb = manifest["text_bytes"] / 1e6
    rate = f", {mb / run['seconds']:.2f} MB/s" if run.get("seconds") else ""
    skipped = f", {run['shards_skipped']} already complete" if run.get("shards_skipped") else ""
    verified = f", {manifest['verified']} verified" if manifest["settings"]["verify"] else ""
    done = "already complete: " if run.get("already_complete") else ""
    return (
        f"{done}encoded {manifest['documents_written']} of {manifest['documents_read']} documents ({mb:.2f} MB) into "
        f"{manifest['tokens']} tokens in {len(manifest['shards'])} {manifest['settings']['shard_format']} shards"
        f"{skipped}; {manifest['dead_letters']} dead letters{verified}{rate}"
    )


# ------------------------------------------------------------------ paths
def _absolute(path: str) -> str:
    return path if "://" in path else os.path.abspath(path)
