"""``beam-bpe verify``'s document checks (steps 5 and 6 of ``pipeline/encode/audit.py``): every document once, in
the ranges its shard holds; ``--sample N`` documents encoded again from their inputs and compared id for id.

The walk keeps one cursor per shard (the range a document is in, the last position seen), never a set of ids, so
its memory is that of the format's reader. The sample is drawn before the walk (``numpy.random.default_rng(seed)``
over the output's document numbers, without repeats), kept during it, and encoded again afterwards, one input range
at a time, by the job's own readers and policy. No Beam here.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.corpus.plan import AUTO, CorpusSpec, format_of_file
from pipeline.corpus.records import CorpusRange
from pipeline.encode.formats import FORMATS
from pipeline.storage.paths import join

MAX_LINES = 20  # problems of one kind named per shard; the rest are counted


def check_documents(audit, manifest: dict, receipts: dict, *, sample: int, seed: int, walk_of=None) -> list:
    """Walk every shard's documents against its ranges; return the sampled ones: ``(shard, doc_id, range, ids)``.
    ``walk_of(audit, shard, owners, index)`` makes another walk (a shuffled output's: audit_shuffle.py)."""
    shard_format = manifest["settings"]["shard_format"]
    fmt = FORMATS.get(shard_format)
    if fmt is None or fmt.reader is None:
        audit.notes.append(
            f"{shard_format} shards keep no document ids: each document once and --sample were not checked "
            "(the files, the ranges and the counts were)"
        )
        return []
    batches_of = fmt.doc_batches or functools.partial(_batches_from_reader, fmt.reader)
    wanted = _draw(sum(s["documents"] for s in receipts["shards"]), sample, seed)
    owners = _range_owners(receipts)
    entries = {s["name"]: s for s in manifest["shards"]}
    picked: list[tuple[str, str, int, np.ndarray]] = []
    number = 0
    for index, shard in enumerate(receipts["shards"]):
        walk = _ShardWalk(audit, shard, owners) if walk_of is None else walk_of(audit, shard, owners, index)
        try:
            for doc_ids, load in batches_of(join(audit.out, shard["name"]), entries.get(shard["name"], shard)):
                local = walk.batch(doc_ids)
                hits = wanted[(wanted >= number) & (wanted < number + len(doc_ids))] - number
                if hits.size:
                    values, offsets = load()
                    for k in hits.tolist():
                        index = shard["ranges"][local[k]]["index"] if local[k] >= 0 else -1
                        ids = np.array(values[offsets[k] : offsets[k + 1]])
                        picked.append((shard["name"], doc_ids[k].as_py(), index, ids))
                number += len(doc_ids)
        except Exception as exc:  # noqa: BLE001 - a damaged shard is a finding, not a crash
            audit.problems.append(f"{shard['name']}: cannot be read ({type(exc).__name__}: {exc})")
            number += max(0, shard["documents"] - walk.seen)
            continue
        walk.finish()
        audit.checked["documents"] += walk.seen
    return picked


def _batches_from_reader(reader, prefix: str, shard: dict, size: int = 8192):
    """A format's ``(doc_id, ids)`` reader as verify's batches (for formats without ``doc_batches``)."""
    doc_ids: list[str] = []
    ids: list[np.ndarray] = []
    for doc_id, one in itertools.chain(reader(prefix, shard), [(None, None)]):
        if doc_id is not None:
            doc_ids.append(doc_id)
            ids.append(np.asarray(one))
        if doc_ids and (len(doc_ids) == size or doc_id is None):
            offsets = np.concatenate([[0], np.cumsum([len(a) for a in ids])]).astype(np.int64)
            values = np.concatenate(ids) if ids else np.zeros(0, np.int64)
            yield pa.array(doc_ids, pa.string()), (lambda v=values, o=offsets: (v, o))
            doc_ids, ids = [], []


def parse_doc_id(doc_id: str) -> tuple[str, int] | None:
    """``(source, position)`` of ``path@123`` / ``path#45``, or None where it is not such an id. The separator is
    not taken from the shard: one shard may hold ranges of a JSONL file (offsets) and of a Parquet file (rows)."""
    cut = max(doc_id.rfind("@"), doc_id.rfind("#"))
    position = doc_id[cut + 1 :]
    return (doc_id[:cut], int(position)) if cut > 0 and position.isdigit() else None


def _draw(total: int, sample: int, seed: int) -> np.ndarray:
    """The sampled document numbers over the whole output, sorted."""
    if sample <= 0 or total == 0:
        return np.zeros(0, np.int64)
    return np.sort(np.random.default_rng(seed).choice(total, size=min(sample, total), replace=False))


def _range_owners(receipts: dict) -> dict[str, list[tuple[dict, str]]]:
    """``{source: [(range, shard name)]}``: which shard holds each range (to name the shard a stray document is of)."""
    owners: dict[str, list[tuple[dict, str]]] = {}
    for shard in receipts["shards"]:
        for r in shard["ranges"]:
            owners.setdefault(r["source"], []).append((r, shard["name"]))
    return owners


def holds(r: dict, position: int) -> bool:
    """Whether range ``r`` (a receipt's) can hold a document at ``position`` (a line belongs to the range of its first
    byte; a row group's rows follow ``first_row``; a whole file holds any position)."""
    kind = r.get("kind")
    if kind == "bytes":
        return r["start"] <= position < r["end"]
    if kind == "row_group" and "documents_read" in r:
        return r.get("first_row", 0) <= position < r.get("first_row", 0) + r["documents_read"]
    return True


class _ShardWalk:
    """One shard's documents, in order, against its ranges: each in a range of the shard, positions rising."""

    def __init__(self, audit, shard: dict, owners: dict) -> None:
        self.audit, self.shard, self.owners = audit, shard, owners
        self.ranges = shard["ranges"]
        self.at = 0  # the range the last document was in
        self.last = -1  # its position
        self.counts = np.zeros(len(self.ranges), dtype=np.int64)
        self.spans = _spans(self.ranges)
        self.seen = 0
        self.reported = 0

    def batch(self, doc_ids: pa.Array) -> np.ndarray:
        """The shard's range (its place in the shard's list) of each document of a batch, or -1; one pass of Arrow
        and NumPy where every document is where it should be, the per-document :meth:`step` (to name the wrong
        ones) where not."""
        found = self.locate(doc_ids)
        if found is None:
            return np.array([self.step(d) for d in doc_ids.to_pylist()], dtype=np.int64)
        local, positions = found
        k = np.concatenate([[self.at], local])
        q = np.concatenate([[self.last], positions])
        rising = (k[1:] > k[:-1]) | ((k[1:] == k[:-1]) & (q[1:] > q[:-1]))
        if not (local >= 0).all() or not rising.all():
            return np.array([self.step(d) for d in doc_ids.to_pylist()], dtype=np.int64)
        self.counts += np.bincount(local, minlength=len(self.ranges))
        self.at, self.last = int(local[-1]), int(positions[-1])
        self.seen += len(doc_ids)
        return local

    def locate(self, doc_ids: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
        """The shard's range of each document (-1 where none) and its position; None where an id does not parse."""
        parsed = pc.extract_regex(doc_ids, r"^(?P<source>.*)[@#](?P<position>[0-9]+)$")
        if parsed.null_count:
            return None
        sources = parsed.field("source")
        positions = pc.cast(parsed.field("position"), pa.int64()).to_numpy()
        local = np.full(len(doc_ids), -1, dtype=np.int64)
        for source in pc.unique(sources).to_pylist():
            if source not in self.spans:
                continue
            mask = pc.equal(sources, source).to_numpy(zero_copy_only=False)
            starts, ends, ks = self.spans[source]
            p = positions[mask]
            slot = np.searchsorted(starts, p, side="right") - 1
            inside = (slot >= 0) & (p < ends[np.maximum(slot, 0)])
            local[mask] = np.where(inside, ks[np.maximum(slot, 0)], -1)
        return local, positions

    def step(self, doc_id: str) -> int:
        self.seen += 1
        parsed = parse_doc_id(doc_id)
        if parsed is None:
            self._problem(f"document id {doc_id!r} is not PATH@OFFSET or PATH#ROW")
            return -1
        source, position = parsed
        for k in range(self.at, len(self.ranges)):
            r = self.ranges[k]
            if r["source"] == source and holds(r, position) and (k > self.at or position > self.last):
                self.at, self.last = k, position
                self.counts[k] += 1
                return k
        self._stray(doc_id, source, position)
        return -1

    def _stray(self, doc_id: str, source: str, position: int) -> None:
        mine = [r for r in self.ranges if r["source"] == source and holds(r, position)]
        if mine:
            self._problem(f"document {doc_id} is twice (or out of order) in this shard")
            return
        others = [name for r, name in self.owners.get(source, []) if holds(r, position) and name != self.shard["name"]]
        if others:
            self._problem(f"document {doc_id} is twice: it belongs to a range of {others[0]}")
        else:
            self._problem(f"document {doc_id} is in none of the input ranges of the output")

    def finish(self) -> None:
        if self.seen != self.shard["documents"]:
            self._problem(f"holds {self.seen} documents, its receipt says {self.shard['documents']}")
        for r, count in zip(self.ranges, self.counts, strict=True):
            if "documents" in r and count != r["documents"] and self.seen == self.shard["documents"]:
                self._problem(f"input range {r['index']} holds {count} documents, its receipt says {r['documents']}")
        if self.reported > MAX_LINES:
            self.audit.problems.append(f"{self.shard['name']}: and {self.reported - MAX_LINES} more such problems")

    def _problem(self, text: str) -> None:
        self.reported += 1
        if self.reported <= MAX_LINES:
            self.audit.problems.append(f"{self._file()}: {text}")

    def _file(self) -> str:
        files = sorted(self.shard["files"])
        return files[0] if files else self.shard["name"]


def _spans(ranges: list[dict]) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``{source: (starts, ends, places)}`` of a shard's ranges, sorted by start: the positions each can hold."""
    by_source: dict[str, list[tuple[int, int, int]]] = {}
    for k, r in enumerate(ranges):
        if r.get("kind") == "bytes":
            span = (r["start"], r["end"])
        elif r.get("kind") == "row_group" and "documents_read" in r:
            span = (r.get("first_row", 0), r.get("first_row", 0) + r["documents_read"])
        else:
            span = (-1, 1 << 62)
        by_source.setdefault(r["source"], []).append((*span, k))
    out = {}
    for source, spans in by_source.items():
        spans.sort()
        out[source] = tuple(np.array(column, dtype=np.int64) for column in zip(*spans, strict=True))
    return out


def corpus_spec_of(settings: dict) -> CorpusSpec:
    """The job's ``CorpusSpec`` from the manifest's settings."""
    keys = ("format", "text_field", "text_column", "text_unit", "batch_bytes", "max_document_bytes")
    return CorpusSpec(**{k: settings[k] for k in keys if k in settings})


def corpus_range(r: dict, root: str, spec: CorpusSpec) -> CorpusRange:
    """The planned range a receipt names, with its source made absolute again from the manifest's ``root``."""
    source = (
        r["source"] if (not root or r["source"].startswith("/") or "://" in r["source"]) else join(root, r["source"])
    )
    fmt = format_of_file(source) if spec.format == AUTO else ""
    return CorpusRange(r["index"], source, 0, r["kind"], r["start"], r["end"], r.get("first_row", 0), format=fmt)
