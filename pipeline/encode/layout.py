"""Where the shards of one job go: their names, folders and files, and which ranges each shard holds. No Beam here.

Layout of an encoding ``--out DIR`` (the formats' files: pipeline/encode/formats/)::

    {prefix}-{i:05d}-of-{n:05d}{suffix}                  shard i's files, one per suffix of its format
    dead_letters/{prefix}-{i:05d}-of-{n:05d}.jsonl       rejected documents of shard i (only if there are any)
    _shards/{prefix}-{i:05d}-of-{n:05d}.json             shard i is complete: its counts, files and their sha256
    _shards/job.json                                     the job's identity (pipeline/encode/resume.py)
    _tmp/                                                removed at the end of a run (no longer written)
    manifest.json, COMPLETED                             written last, by the driver

Shards and ranges: the planner cuts the inputs into small ranges (the reading unit) and :func:`assign_shards` gives
consecutive ranges, in input order, to output shards of about ``--shard-size`` input bytes
(``ShardLayout.range_to_shard``), before anything runs. A shard is one unit of work (pipeline/encode/write.py),
written range by range and batch by batch, streaming, to temporary names that are renamed when whole; its stats
file (which names every range it holds) is written after its data files, so a shard with a stats file is complete,
and one without is rewritten by the next run. Nothing in these files depends on times or runners.
"""

from __future__ import annotations

from dataclasses import dataclass

import fsspec

from pipeline.corpus.plan import CorpusRange
from pipeline.encode.formats import FORMATS, ShardFormat
from pipeline.storage.paths import join

STATS_DIR = "_shards"
TMP_DIR = "_tmp"
DEAD_DIR = "dead_letters"
JOB_FILE = "job.json"
_NUMBER = "[0-9]" * 5


@dataclass(frozen=True)
class ShardLayout:
    """Where and how the shards of one job are written: small and picklable, it travels with the writing DoFns."""

    out_dir: str
    prefix: str
    num_shards: int
    shard_format: str
    dtype: str
    tokenizer_digest: str = ""
    fingerprint: str = ""
    range_to_shard: tuple[int, ...] = ()  # the shard of each range (by range index); empty: one shard per range
    root: str = ""  # the inputs' common folder: documents are named relative to it (portable outputs)
    # --shuffle's seed: then range_to_shard groups the ranges for reading only, and every shard holds documents of
    # every range (pipeline/encode/shuffle.py)
    shuffle: int | None = None

    def relative(self, source: str) -> str:
        """``source`` (a planned input path) as the output names it: relative to :attr:`root` where it lies below.

        >>> ShardLayout("out", "t", 1, "parquet", "uint16", root="/data/c").relative("/data/c/a/x.jsonl")
        'a/x.jsonl'
        """
        if self.root and source.startswith(self.root.rstrip("/") + "/"):
            return source[len(self.root.rstrip("/")) + 1 :]
        return source

    @property
    def format(self) -> ShardFormat:
        return FORMATS[self.shard_format]

    def shard_of(self, range_index: int) -> int:
        return self.range_to_shard[range_index] if self.range_to_shard else range_index

    def shards_built_from(self, range_index: int) -> tuple[int, ...] | range:
        """The shards that hold documents of range ``range_index``: its one shard, or with ``--shuffle`` all."""
        return range(self.num_shards) if self.shuffle is not None else (self.shard_of(range_index),)

    def ranges_of(self, index: int) -> list[int]:
        """The range indices of shard ``index``, in input order."""
        if not self.range_to_shard:
            return [index]
        return [r for r, s in enumerate(self.range_to_shard) if s == index]

    def name(self, index: int) -> str:
        """``{prefix}-{index:05d}-of-{num_shards:05d}``: the name of shard ``index``, its files' stem."""
        return f"{self.prefix}-{index:05d}-of-{self.num_shards:05d}"

    def name_glob(self, prefix: str | None = None) -> str:
        """The glob of every shard name of ``prefix`` (this layout's by default; ``*``: any prefix), of any count."""
        return f"{self.prefix if prefix is None else prefix}-{_NUMBER}-of-{_NUMBER}"

    def path(self, *parts: str) -> str:
        return join(self.out_dir, *parts)

    def data_files(self, index: int) -> list[str]:
        """The file names of shard ``index`` in its format."""
        return [self.name(index) + suffix for suffix in self.format.suffixes]

    def stats_path(self, index: int) -> str:
        return self.path(STATS_DIR, self.name(index) + ".json")

    def stats_glob(self) -> str:
        """Every stats file of this prefix (a listing counts the complete shards)."""
        return self.path(STATS_DIR, self.name_glob() + ".json")

    def dead_letters_path(self, index: int) -> str:
        return self.path(DEAD_DIR, self.name(index) + ".jsonl")


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


def common_root(paths: list[str]) -> str:
    """The deepest folder holding every path (local absolute paths, or URLs of one scheme and bucket); "" if none.

    >>> common_root(["/d/c/a.jsonl", "/d/c/sub/b.jsonl"]), common_root(["gs://b/x/a.jsonl", "gs://b/x/y.jsonl"])
    ('/d/c', 'gs://b/x')
    """
    import posixpath

    if not paths:
        return ""
    schemes = {p.split("://", 1)[0] if "://" in p else "" for p in paths}
    if len(schemes) != 1:
        return ""
    scheme = schemes.pop()
    rests = [p.split("://", 1)[1] if scheme else p for p in paths]
    if not scheme and not all(r.startswith("/") for r in rests):
        return ""
    root = posixpath.commonpath([posixpath.dirname(r) for r in rests])
    if scheme:
        return f"{scheme}://{root}" if root else ""
    return root
