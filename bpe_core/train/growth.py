"""How unique chunks grow with the bytes read, predicted from a sample: the training pre-flight's algorithm.

The merge loop's memory and time are fixed by the unique chunks it is given, known only after the whole corpus is
counted. Unique chunks follow Heaps' law, ``U(n) ≈ a·n^b`` with ``b < 1`` (GigaToken fits ``3.45·n^0.62`` on
OpenWebText, n in bytes), so a sample predicts them: count each sampled unit (a byte window, a file, a row group)
into a sorted table, merge the tables pairwise as a tree (level ``l`` holds nodes of ``2^l`` units: the growth
curve at several sample sizes, each point a mean over disjoint unions), and extrapolate from the whole sample with
the exponent of its incidence spectrum (``tail_exponents``: why not a fit of the curve is measured there).

The memory and time of the merge loop for a predicted (words, bytes, merges) are the measured figures of the native
loop (``merge_loop_memory``, ``merge_loop_seconds``).

>>> from bpe_core.train.sorted_counts import sorted_counts_from_dict as t
>>> curve, top = growth_curve([t({b"ab": 1}), t({b"ab": 2, b"cd": 1})], [10, 10])
>>> [(p.units, p.text_bytes, p.words) for p in curve], tail_exponents(top)
([(1, 10.0, 1.5), (2, 20.0, 2.0)], (0.0, 0.0))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bpe_core.train.sorted_counts import SortedCounts, merge_sorted_counts


@dataclass(frozen=True)
class GrowthPoint:
    """One level of the merge tree: nodes of ``units`` sampled units, their means (text bytes, unique chunks,
    unique chunks of two bytes or more: the merge loop's words, and those words' bytes)."""

    level: int
    units: int
    nodes: int
    text_bytes: float
    chunks: float
    words: float
    word_bytes: float


@dataclass(frozen=True)
class PowerLaw:
    """``a·n^b``, fitted in log-log space."""

    a: float
    b: float

    def __call__(self, n: float) -> float:
        return self.a * n**self.b if n > 0 else 0.0

    def inverse(self, value: float) -> float:
        """The n at which the law reaches ``value``."""
        return (value / self.a) ** (1.0 / self.b) if value > 0 and self.a > 0 and self.b > 0 else 0.0


def table_sizes(table: SortedCounts) -> tuple[int, int, int]:
    """(unique chunks, words: chunks of two bytes or more, the words' bytes) of a sorted table."""
    lengths = np.diff(np.asarray(table.offsets, dtype=np.int64))
    words = lengths >= 2
    return len(lengths), int(words.sum()), int(lengths[words].sum())


def incidence(table: SortedCounts) -> SortedCounts:
    """The table with every count 1: merged, such tables count the units each chunk was found in."""
    return SortedCounts(table.offsets, table.data, np.ones(len(table.counts), dtype=np.int64))


def growth_curve(tables: Sequence[SortedCounts], text_bytes: Sequence[int]) -> tuple[list[GrowthPoint], SortedCounts]:
    """The growth of unique chunks over a sample, and the sample's incidence table (each chunk with the number of
    units it was found in). ``tables[i]`` holds the counts of unit ``i`` (``text_bytes[i]`` bytes of text), in an
    order that does not follow the corpus (the caller shuffles it). Level 0 is the units alone; each next level
    merges neighbouring nodes pairwise (an odd last node is carried up as it is, and left out of that level's
    means). The last point is the whole sample."""
    if len(tables) != len(text_bytes) or not tables:
        raise ValueError(f"growth_curve needs one size per table and at least one table, got {len(tables)} tables")
    nodes = [(incidence(t), float(n), 1) for t, n in zip(tables, text_bytes, strict=True)]
    points, level = [], 0
    while True:
        full = [node for node in nodes if node[2] == 2**level] or nodes
        sizes = [table_sizes(node[0]) for node in full]
        points.append(
            GrowthPoint(
                level,
                full[0][2],
                len(full),
                float(np.mean([node[1] for node in full])),
                float(np.mean([s[0] for s in sizes])),
                float(np.mean([s[1] for s in sizes])),
                float(np.mean([s[2] for s in sizes])),
            )
        )
        if len(nodes) == 1:
            return points, nodes[0][0]
        pairs = zip(nodes[::2], nodes[1::2], strict=False)
        merged = [(merge_sorted_counts([a[0], b[0]]), a[1] + b[1], a[2] + b[2]) for a, b in pairs]
        nodes = merged + ([nodes[-1]] if len(nodes) % 2 else [])
        level += 1


def tail_exponents(incidence_table: SortedCounts) -> tuple[float, float]:
    """Heaps' exponents of the words (chunks of two bytes or more) and of their bytes, from a sample's incidence
    spectrum: with ``Q1`` words found in exactly one unit and ``Q2`` in exactly two, a Zipf tail of exponent ``b``
    gives ``Q2 / Q1 = (1 - b) / 2``, so ``b = 1 - 2·Q2/Q1`` (for the bytes, each word weighted by its length).

    Why the spectrum and not a fit of the curve: within a sample of spread windows the curve is steeper than the
    corpus's (each window adds words of its own documents that the rest of the corpus mostly repeats), and it bends
    down as the sample grows. Measured, words predicted against words counted: on 5% samples of the shared corpora
    concatenated in two orders, and 32 MB samples of the 0.1 and 0.3 GB scale corpora, this rule +14%, +3%, -7%,
    +15%; a power law fitted on the curve's top four levels +49%, +34%, +58% (5 MB sample), +138%; the local slope
    ``Q1 / U`` (Good-Turing) +28%, +16%, +22%, +94%.
    """
    lengths = np.diff(np.asarray(incidence_table.offsets, dtype=np.int64))
    words = lengths >= 2
    units, lengths = np.asarray(incidence_table.counts)[words], lengths[words]
    out = []
    for weight in (np.ones_like(lengths), lengths):
        q1, q2 = float(weight[units == 1].sum()), float(weight[units == 2].sum())
        out.append(min(1.0, max(0.0, 1.0 - 2.0 * q2 / q1)) if q1 > 0 else 0.0)
    return out[0], out[1]


# The native merge loop's peak RSS above the process it runs in, as a function of its words (unique chunks of two
# bytes or more, after --min-chunk-count / --max-chunks), their bytes and the merges asked for. Fitted on
# `train --from-counts` peak RSS minus `beam-bpe --version`'s (see benchmarks/bench_scale.py bench_estimate).
# Measured (2 shared cores: memory does not move with the load) on the counts of the shared corpora concatenated
# (566k words) and of the 0.3 GB scale corpus (1.01M words), each whole and cut by --max-chunks to 100k and 300k, at
# 16,384 and 65,536 tokens: 12 runs, 39-167 MiB; a least-squares fit of the relative error with the per-word bytes
# held at 16.6 (the 16-byte word and its share of the counts read), this model within -14% .. +13% of every one.
# (The loop's 16-byte pair slots took the per-byte term from 17.5 to 11.8: most pairs come from a word's bytes.)
MEMORY_FIXED = 20 << 20
MEMORY_PER_WORD = 16.6
MEMORY_PER_WORD_BYTE = 11.8
MEMORY_PER_MERGE = 800.0
# Merge-loop seconds on one core of the machine measured (see the same benchmark): building the words and pair
# table is linear in their bytes; each merge touches the words holding its pair.
# Process CPU seconds less 0.55 s of start-up, same 12 runs (0.12-2.1 s): the model within 0.25 s of each.
SECONDS_PER_WORD_BYTE = 137e-9
SECONDS_PER_MERGE = 10.9e-6


def merge_loop_memory(words: float, word_bytes: float, merges: int) -> int:
    """Bytes of peak memory the merge loop adds to its process (the measured model, not an upper bound)."""
    return int(MEMORY_FIXED + MEMORY_PER_WORD * words + MEMORY_PER_WORD_BYTE * word_bytes + MEMORY_PER_MERGE * merges)


def merge_loop_seconds(words: float, word_bytes: float, merges: int) -> float:
    """Seconds of the merge loop (one core, the measured model)."""
    return SECONDS_PER_WORD_BYTE * word_bytes + SECONDS_PER_MERGE * merges


def words_within(memory: int, mean_word_bytes: float, merges: int) -> int:
    """The most words whose merge loop stays within ``memory`` bytes (0 where even none fit)."""
    per_word = MEMORY_PER_WORD + MEMORY_PER_WORD_BYTE * mean_word_bytes
    room = memory - MEMORY_FIXED - MEMORY_PER_MERGE * merges
    return max(0, int(room / per_word))
