"""A shuffled shard's stats file, in the plain shards' shape (pipeline/encode/shards.py): one entry per input range
it holds documents or dead letters of, or is the home shard of, with that range's documents, tokens, text bytes and
dead letters in this shard (and per file, for a range of several small files). No Beam here.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.encode.layout import ShardLayout
from pipeline.encode.shards import SUMS


def shard_stats(layout: ShardLayout, index: int, table: pa.Table, refs: list, verify: bool, batches: int) -> dict:
    """The shard's stats in the plain shards' shape: one entry per range it holds documents of, or is home to."""
    known, dead, several = {}, {}, set()
    for ref in refs:
        known.update(ref.ranges)
        for i, (source, kind, multi, letters) in ref.dead.items():
            known[i], dead[i] = (source, kind), len(letters)
            if multi:
                several.add(i)
    sums = {i: dict.fromkeys((*SUMS, "dead_letters"), 0) for i in known}
    files: dict[int, dict] = {}
    if table.num_rows:
        lengths = pc.list_value_length(table.column("tokens")).to_numpy(zero_copy_only=False).astype(np.int64)
        ranges = table.column("range").to_numpy()
        text = table.column("text_bytes").to_numpy()
        sources = table.column("source").to_pylist()
        for r in np.unique(ranges).tolist():
            mask = ranges == r
            n = int(mask.sum())
            sums[r].update(documents=n, tokens=int(lengths[mask].sum()), text_bytes=int(text[mask].sum()),
                           verified=n if verify else 0)  # fmt: skip
            if r in several:
                files[r] = _files_of(np.array(sources, dtype=object)[mask], lengths[mask], text[mask])
    entries = []
    for i in sorted(known):
        s = sums[i]
        s["dead_letters"] = dead.get(i, 0)
        s["documents_read"] = s["documents"] + s["dead_letters"]
        entry = dict(s, index=i, source=known[i][0])
        if i in files:
            entry["sources"] = files[i]
        entries.append(entry)
    kinds = [known[i][1] for i in sorted(known) if known[i][1]]
    totals = {key: sum(e[key] for e in entries) for key in (*SUMS, "dead_letters")}
    return {"index": index, "name": layout.name(index), "fingerprint": layout.fingerprint,
            "position_kind": kinds[0] if kinds else "", "batches": batches, **totals, "ranges": entries}  # fmt: skip


def _files_of(sources: np.ndarray, lengths: np.ndarray, text: np.ndarray) -> dict:
    """A range of several files: its documents, tokens and text bytes in this shard per file, in path order."""
    paths = sorted(set(sources.tolist()))
    out = {"paths": paths, "documents": [], "tokens": [], "text_bytes": []}
    for p in paths:
        m = sources == p
        out["documents"].append(int(m.sum()))
        out["tokens"].append(int(lengths[m].sum()))
        out["text_bytes"].append(int(text[m].sum()))
    return out
