"""The training pre-flight: unique chunks, driver memory and merge-loop time predicted from a sample of the corpus.

The merge loop runs on the driver after the whole corpus is counted, and its memory is fixed by the unique chunks
the count finds: a run that cannot fit used to fail after hours. Before the count, this reads a sample spread over
the planned corpus (``SAMPLE_UNITS`` byte windows of uncompressed text/JSONL, or whole compressed files and Parquet
row groups, at positions spaced evenly over the corpus's bytes), counts each unit with the count stage's own
counter, and fits the growth of unique chunks against bytes (``bpe_core.train.growth``: Heaps' law, ``a·n^b``) to
predict the whole corpus. The sample is ``SAMPLE_FRACTION`` of the corpus, at least ``MIN_SAMPLE_BYTES`` and at most
``MAX_SAMPLE_BYTES``; a corpus within the sample is read whole and its figures are exact.

Caveats: compressed files are sampled whole, file by file (a stream cannot be entered in the middle); the weights of
``--weight`` change counts, not which chunks exist, and are not applied; ``--min-chunk-count K`` is predicted from
the scale invariance of a power-law spectrum (chunks seen K times in n bytes ~ chunks seen once in n/K bytes).
"""

from __future__ import annotations

import dataclasses
import os
import random
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow.compute as pc

from bpe_core.train.growth import (
    PowerLaw,
    growth_curve,
    merge_loop_memory,
    merge_loop_seconds,
    tail_exponents,
    words_within,
)
from bpe_core.train.sorted_counts import SortedChunkCounter, SortedCounts, merge_sorted_counts
from pipeline.corpus.plan import CorpusPlan, CorpusSpec
from pipeline.corpus.records import CorpusRange
from pipeline.errors import UsageError
from pipeline.train.settings import TrainSettings

SAMPLE_FRACTION = 0.05
MIN_SAMPLE_BYTES = 32 << 20
MAX_SAMPLE_BYTES = 512 << 20
SAMPLE_UNITS = 64
DRIVER_MEMORY_SHARE = 0.8  # --driver-memory's default: this share of the launching machine's memory
SEED = 27


@dataclass(frozen=True)
class Estimate:
    """The pre-flight's figures for one corpus and settings (bytes are text bytes unless named ``file_bytes``)."""

    file_bytes: int  # the planned corpus's files
    text_bytes: int  # predicted text of the whole corpus (exact when ``exact``)
    sample_text_bytes: int
    sample_units: int
    exact: bool  # the sample is the whole corpus
    growth_a: float  # unique words (chunks of two bytes or more) ~ a·n^b, n in text bytes
    growth_b: float
    chunks: int  # predicted unique chunks of the corpus
    words: int  # of them, the merge loop's words (two bytes or more), after --min-chunk-count / --max-chunks
    word_bytes: int
    merges: int
    process_memory: int  # the launching process now (the merge loop adds to it)
    loop_memory: int
    seconds: float
    reachable_vocab: int  # at most this many tokens: 256 + special tokens + pair occurrences of the words
    by_min_count: tuple[tuple[int, int, int], ...] = ()  # (K, words, their bytes) left by --min-chunk-count K
    curve: tuple[tuple[int, int, int], ...] = ()  # the sample's growth: (units, text bytes, unique chunks), means

    @property
    def driver_memory(self) -> int:
        return self.process_memory + self.loop_memory

    def to_manifest(self) -> dict:
        return {**asdict(self), "driver_memory": self.driver_memory}

    def line(self) -> str:
        """The one line every train run prints before counting."""
        how = (
            "exact: the whole corpus was read"
            if self.exact
            else f"fitted {self.growth_a:.3g}·n^{self.growth_b:.2f} on {_size(self.sample_text_bytes)} of text in "
            f"{self.sample_units} samples, {self.sample_text_bytes / max(1, self.text_bytes):.1%} of the corpus"
        )
        return (
            f"estimate: {self.chunks:,} unique chunks ({how}); driver memory about {_size(self.driver_memory)} "
            f"(merge loop {_size(self.loop_memory)} + this process {_size(self.process_memory)}); "
            f"merge loop about {_duration(self.seconds)}"
        )


def sample_ranges(plan: CorpusPlan, budget: int, *, units: int = SAMPLE_UNITS) -> list[tuple[CorpusRange, int]]:
    """``(range, file bytes)`` of the sample: at ``units`` positions spaced evenly over the corpus's bytes, a byte
    window of ``budget / units`` (uncompressed text/JSONL) or the whole range holding it (a compressed file, a
    Parquet row group: of these, an evenly spaced selection within the budget, at least one), each once, in corpus
    order. A budget of the corpus's size or more is every range, whole."""
    sized = list(zip(plan.ranges, range_file_bytes(plan), strict=True))
    total = sum(size for _, size in sized)
    if budget >= total:
        return sized
    window = sample_window(budget, units)
    windows, whole, starts, position, k = {}, {}, [], 0, 0
    for _, size in sized:
        starts.append(position)
        position += size
    for i in range(units):
        target = (i + 0.5) * total / units
        while k + 1 < len(sized) and starts[k + 1] <= target:
            k += 1
        rng, size = sized[k]
        if rng.kind == "bytes" and size > window:
            begin = rng.start + min(size - window, max(0, int(target - starts[k]) - window // 2))
            windows[(k, begin)] = (rng._replace(start=begin, end=begin + window), window)
        else:
            whole[(k, rng.start)] = (rng, size)
    room = max(0, budget - window * len(windows))
    hits = list(whole.items())
    mean = sum(size for _, (_, size) in hits) / max(1, len(hits))
    keep = max(1, min(len(hits), int(room // max(1, mean)))) if hits else 0
    chosen = {hits[int((j + 0.5) * len(hits) / keep)][0] for j in range(keep)}  # spread, not the first ones
    picked = {**windows, **{key: unit for key, unit in whole.items() if key in chosen}}
    return [picked[key] for key in sorted(picked)]


def sample_window(budget: int, units: int = SAMPLE_UNITS) -> int:
    """Bytes of one sampled window (and of one piece of a range read whole)."""
    return max(1 << 12, budget // units)


def range_file_bytes(plan: CorpusPlan) -> list[int]:
    """The stored bytes of each range: its byte span (a byte range, a whole file, a range of several small files),
    or a row group's share of its file. One pass over the plan (was a scan of every file and range per row group:
    quadratic in the file count)."""
    groups: dict[str, int] = {}
    for r in plan.ranges:
        if r.kind == "row_group":
            groups[r.source] = groups.get(r.source, 0) + 1
    file_size = {f.path: f.size for f in plan.files if f.path in groups}
    return [
        file_size[r.source] // groups[r.source] if r.kind == "row_group" else max(0, r.end - r.start)
        for r in plan.ranges
    ]


def count_sample(
    sample: list[tuple[CorpusRange, int]], spec: CorpusSpec, settings: TrainSettings, *, piece: int
) -> tuple[list[SortedCounts], list[int], int]:
    """One sorted table per sampled window, or per ``piece`` bytes of text of a range read whole (a file or row
    group holds many pieces: the growth between them is what the fit needs), the text bytes of each, and the file
    bytes read."""
    from pipeline.corpus.readers import read_range  # pyarrow readers, as the count stage reads

    tables, sizes, file_bytes = [], [], 0
    for rng, size in sample:
        file_bytes += size
        limit = piece if rng.kind != "bytes" else 1 << 62
        counter, text = SortedChunkCounter(settings.pre), 0
        for batch in read_range(rng, spec):
            lengths = _lengths(batch.texts)
            start = 0
            while start < len(lengths):
                end = start + max(1, int(np.searchsorted(np.cumsum(lengths[start:]), limit - text, "left")) + 1)
                counter.add(batch.texts[start:end], num_threads=None)
                text += int(lengths[start:end].sum())
                start = end
                if text >= limit:
                    tables.append(_take(counter))
                    sizes.append(text)
                    counter, text = SortedChunkCounter(settings.pre), 0
        if text:
            tables.append(_take(counter))
            sizes.append(text)
    return tables, sizes, file_bytes


def _take(counter: SortedChunkCounter) -> SortedCounts:
    parts, _ = counter.take(1)
    return parts[0][1] if parts else SortedCounts(*_empty())


def _empty():
    return np.zeros(1, np.int32), np.zeros(0, np.uint8), np.zeros(0, np.int64)


def _lengths(texts) -> np.ndarray:
    """UTF-8 bytes of each text (an Arrow column where the reader made one; the readers check UTF-8)."""
    arrow = getattr(texts, "arrow", None)
    if arrow is not None:
        return pc.binary_length(arrow).to_numpy(zero_copy_only=False).astype(np.int64)
    return np.array([len(t.encode("utf-8", "surrogatepass")) for t in texts], dtype=np.int64)


def estimate_corpus(
    plan: CorpusPlan, spec: CorpusSpec, settings: TrainSettings, *, sample_bytes: int | None = None
) -> Estimate:
    """Sample, count and extrapolate: the predicted figures of training on the whole of ``plan``. The sample is
    ``sample_bytes`` of the files (default: ``sample_budget``)."""
    est, curve = _sample_and_fit(plan, spec, settings, sample_bytes)
    return dataclasses.replace(  # this process's memory once the sample's tables are freed
        est, curve=tuple((p.units, int(p.text_bytes), int(p.chunks)) for p in curve), process_memory=process_memory()
    )


def _sample_and_fit(plan, spec, settings, sample_bytes) -> tuple[Estimate, list]:
    total = sum(range_file_bytes(plan))
    budget = sample_budget(total) if sample_bytes is None else sample_bytes
    sample = sample_ranges(plan, budget)
    tables, sizes, sample_file_bytes = count_sample(sample, spec, settings, piece=sample_window(budget))
    exact = sample_file_bytes >= total
    sample_text = sum(sizes)
    if not tables:  # nothing but dead letters in the sample: nothing to predict from
        return _estimate(settings, total, 0, 0, 0, True, PowerLaw(0, 1), lambda k: (0.0, 0.0), 0), []
    order = list(range(len(tables)))
    random.Random(SEED).shuffle(order)  # neighbours in the tree are not neighbours in the corpus
    curve, top = growth_curve([tables[i] for i in order], [sizes[i] for i in order])
    whole = curve[-1]
    singles = whole.chunks - whole.words  # single bytes: at most 256, all seen
    if exact:
        counts = merge_sorted_counts(tables)
        lengths, n = np.diff(counts.offsets.astype(np.int64)), counts.counts

        def kept(k: float) -> tuple[float, float]:
            keep = (lengths >= 2) & (n >= k)
            return float(keep.sum()), float(lengths[keep].sum())

        law = PowerLaw(whole.words / sample_text, 1.0)
        return _estimate(settings, total, sample_text, sample_text, len(tables), True, law, kept, singles), curve
    text_bytes = int(total * sample_text / max(1, sample_file_bytes))
    b_words, b_bytes = tail_exponents(top)
    words = PowerLaw(whole.words / sample_text**b_words, b_words)
    word_bytes = PowerLaw(whole.word_bytes / sample_text**b_bytes, b_bytes)

    def predicted(k: float) -> tuple[float, float]:  # seen k times in n bytes ~ seen once in n / k bytes
        return words(text_bytes / k), word_bytes(text_bytes / k)

    return _estimate(settings, total, text_bytes, sample_text, len(tables), False, words, predicted, singles), curve


def sample_budget(total: int) -> int:
    """Bytes of the default sample of a corpus of ``total`` bytes."""
    return min(MAX_SAMPLE_BYTES, max(MIN_SAMPLE_BYTES, int(SAMPLE_FRACTION * total)))


def _estimate(settings, total, text_bytes, sample_text, units, exact, law, kept, singles) -> Estimate:
    s = settings
    merges = max(0, (s.vocab_size or 256) - 256 - len(s.special_tokens))
    all_words, _ = kept(1)
    words, word_bytes = kept(max(1, s.min_chunk_count))
    if s.max_chunks and words > s.max_chunks:
        word_bytes, words = word_bytes * s.max_chunks / words, s.max_chunks
    thresholds = sorted({round(1.5**i) for i in range(1, 40)})
    return Estimate(
        file_bytes=total,
        text_bytes=int(text_bytes),
        sample_text_bytes=int(sample_text),
        sample_units=units,
        exact=exact,
        growth_a=law.a,
        growth_b=law.b,
        chunks=int(round(all_words + singles)),
        words=int(round(words)),
        word_bytes=int(round(word_bytes)),
        merges=merges,
        process_memory=process_memory(),
        loop_memory=merge_loop_memory(words, word_bytes, merges),
        seconds=merge_loop_seconds(words, word_bytes, merges),
        reachable_vocab=256 + len(s.special_tokens) + max(0, int(word_bytes - words)),
        by_min_count=tuple((k, *map(int, kept(k))) for k in thresholds if k >= 2),
    )


def process_memory() -> int:
    """Resident bytes of this process now (VmRSS; 0 where /proc is absent)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def machine_memory() -> int:
    """Bytes of memory of this machine (0 where unknown)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def default_driver_memory() -> int:
    return int(DRIVER_MEMORY_SHARE * machine_memory())


def check_estimate(est: Estimate, settings: TrainSettings, limit: int) -> list[str]:
    """Refuse a run whose driver is predicted over ``limit`` bytes (0: no limit), naming the settings that would
    fit; return the warnings to print (a vocabulary size the corpus cannot reach)."""
    warnings = []
    if settings.vocab_size and settings.vocab_size > est.reachable_vocab:
        warnings.append(
            f"--vocab-size {settings.vocab_size:,} is more than this corpus can reach: about {est.words:,} unique "
            f"chunks of {_size(est.word_bytes)} allow at most about {est.reachable_vocab:,} tokens "
            f"({'exact' if est.exact else 'estimated from the sample'}); training will stop there"
        )
    if limit and est.driver_memory > limit:
        raise UsageError(
            f"the driver would need about {_size(est.driver_memory)} for {est.words:,} unique chunks "
            f"(merge loop {_size(est.loop_memory)} + launcher {_size(est.process_memory)}), over --driver-memory "
            f"{_size(limit)}: {' or '.join(fitting_settings(est, settings, limit))}; or raise --driver-memory "
            "(0 turns the check off) on a machine with more memory. Nothing was counted"
        )
    return warnings


def fitting_settings(est: Estimate, settings: TrainSettings, limit: int) -> list[str]:
    """The ``--max-chunks`` and ``--min-chunk-count`` that bring the driver within ``limit`` (the merge loop
    within 90% of the room the launcher leaves: the estimate's margin)."""
    room = int(0.9 * (limit - est.process_memory))
    mean = est.word_bytes / max(1, est.words)
    most = words_within(room, mean, est.merges)
    if most <= 0:
        return [f"even no chunk fits: {_size(est.process_memory)} is used before the merge loop starts"]
    out = [f"--max-chunks {_round_down(most):,}"]
    for k, words, word_bytes in est.by_min_count:
        if k > settings.min_chunk_count and merge_loop_memory(words, word_bytes, est.merges) <= room:
            out.append(f"--min-chunk-count {k:,}")
            break
    return out


def preflight(plan: CorpusPlan, spec: CorpusSpec, settings: TrainSettings, *, limit: int, reporter) -> Estimate:
    """The line every counting run starts with: the estimate as a stage of ``reporter``, its warnings, and the
    refusal of a driver predicted over ``limit`` bytes (0: no check) before anything is counted or written."""
    est = estimate_corpus(plan, spec, settings)
    reporter.stage(
        "estimate",
        unique_chunks=est.chunks,
        driver_memory=est.driver_memory,
        merge_loop_seconds=round(est.seconds, 1),
        sample_text_bytes=est.sample_text_bytes,
        exact=est.exact,
        driver_memory_limit=limit,
    )
    for warning in check_estimate(est, settings, limit):
        reporter.stage("warning", message=warning)
    return est


def report(est: Estimate, settings: TrainSettings, limit: int) -> str:
    """``train --estimate``'s report: the sample, its growth, the predicted figures, the check."""
    how = "read whole: the figures are exact" if est.exact else f"{est.sample_text_bytes / max(1, est.text_bytes):.1%}"
    lines = [
        f"corpus   {_size(est.file_bytes)} in files, {'' if est.exact else 'about '}{_size(est.text_bytes)} of text",
        f"sample   {_size(est.sample_text_bytes)} of text in {est.sample_units} pieces ({how})",
        "growth in the sample (mean over disjoint unions of pieces):",
        "      pieces        text   unique chunks",
        *(f"  {units:10,}  {_size(size):>10}  {chunks:14,}" for units, size, chunks in est.curve),
        "predicted for the whole corpus:",
        f"  unique chunks    {est.chunks:,}"
        + ("" if est.exact else f" (unique chunks ~ {est.growth_a:.3g}·n^{est.growth_b:.2f}, n in bytes of text)"),
        f"  merge loop       {est.words:,} words of {_size(est.word_bytes)}, {est.merges:,} merges, about "
        f"{_duration(est.seconds)} of CPU",
        f"  driver memory    about {_size(est.driver_memory)} (merge loop {_size(est.loop_memory)} + this process "
        f"{_size(est.process_memory)}); --driver-memory {_size(limit) if limit else 'off'}",
        f"  vocabulary       at most about {est.reachable_vocab:,} tokens can be reached",
    ]
    try:
        lines += [f"warning: {w}" for w in check_estimate(est, settings, limit)]
        lines.append("fits: the run would go ahead" if limit else "no --driver-memory check (0)")
    except UsageError as exc:
        lines.append(f"refused: {exc}")
    return "\n".join(lines)


def _round_down(n: int) -> int:
    digits = max(0, len(str(n)) - 2)
    return n // 10**digits * 10**digits


def _size(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s" if seconds >= 1 else "under 1 s"
