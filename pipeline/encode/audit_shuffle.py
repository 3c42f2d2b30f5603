"""``beam-bpe verify``'s document walk for a ``--shuffle`` output: every document once without input order.

A shuffled shard's documents come from every range in key order, so the plain walk's "positions rise inside the
shard's ranges" does not hold. What does, and proves each document is there once without a set of ids: each
document's key (recomputed from the manifest's seed and the document's id, pipeline/encode/shuffle_keys.py) puts it
in this very shard, and inside a shard ``(key, doc_id)`` strictly rises, so an id can be in one shard only and only
once there; with every document in one of the shard's listed ranges and the per-range counts equal to the
receipts', every document read is there exactly once. No Beam here.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pipeline.encode.audit_documents import _ShardWalk, holds, parse_doc_id
from pipeline.encode.shuffle_keys import shard_of_keys, shuffle_keys


def shuffled_walks(manifest: dict):
    """``check_documents``'s ``walk_of`` for a shuffled output (its seed and shard count), or None for a plain one."""
    seed = manifest.get("settings", {}).get("shuffle")
    if seed is None:
        return None
    num_shards = len(manifest["shards"])

    def walk_of(audit, shard: dict, owners: dict, index: int) -> ShuffledWalk:
        return ShuffledWalk(audit, shard, owners, seed=seed, index=index, num_shards=num_shards)

    return walk_of


class ShuffledWalk(_ShardWalk):
    """One shuffled shard's documents, in order: each in a range the shard lists, in this shard by its key, and
    ``(key, doc_id)`` strictly rising."""

    def __init__(self, audit, shard: dict, owners: dict, *, seed: int, index: int, num_shards: int) -> None:
        super().__init__(audit, shard, owners)
        self.seed, self.index, self.num_shards = seed, index, num_shards
        self.last_key: tuple[int, str] | None = None

    def batch(self, doc_ids: pa.Array) -> np.ndarray:
        found = self.locate(doc_ids)
        keys = shuffle_keys(self.seed, doc_ids)
        if found is None or len(doc_ids) == 0:
            return np.array([self.step(d) for d in doc_ids.to_pylist()], dtype=np.int64)
        local, _ = found
        ids = doc_ids.to_pylist()
        rising = all(a < b for a, b in zip(self._pairs(keys, ids), self._pairs(keys, ids)[1:], strict=False))
        first = (int(keys[0]), ids[0])
        if (
            not (local >= 0).all()
            or not (shard_of_keys(keys, self.num_shards) == self.index).all()
            or not rising
            or (self.last_key is not None and not self.last_key < first)
        ):
            return np.array([self.step(d) for d in ids], dtype=np.int64)
        self.counts += np.bincount(local, minlength=len(self.ranges))
        self.last_key = (int(keys[-1]), ids[-1])
        self.seen += len(ids)
        return local

    @staticmethod
    def _pairs(keys: np.ndarray, ids: list[str]) -> list[tuple[int, str]]:
        return list(zip(keys.tolist(), ids, strict=True))

    def step(self, doc_id: str) -> int:
        self.seen += 1
        parsed = parse_doc_id(doc_id)
        if parsed is None:
            self._problem(f"document id {doc_id!r} is not PATH@OFFSET or PATH#ROW")
            return -1
        key = int(shuffle_keys(self.seed, [doc_id])[0])
        home = int(shard_of_keys(np.array([key], np.uint64), self.num_shards)[0])
        if home != self.index:
            self._problem(f"document {doc_id} is in the wrong shard: its key (seed {self.seed}) puts it in {home}")
            return -1
        if self.last_key is not None and not self.last_key < (key, doc_id):
            self._problem(f"document {doc_id} is twice, or out of the seeded order, in this shard")
            return -1
        self.last_key = (key, doc_id)
        source, position = parsed
        for k, r in enumerate(self.ranges):
            if self.spans_hold(k, r, source, position):
                self.counts[k] += 1
                return k
        self._problem(f"document {doc_id} is in none of the input ranges this shard lists")
        return -1

    @staticmethod
    def spans_hold(k: int, r: dict, source: str, position: int) -> bool:
        return r["source"] == source and holds(r, position)
