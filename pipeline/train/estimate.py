"""The training pre-flight: unique chunks, driver memory and merge-loop time predicted from a sample of the corpus.

The merge loop runs on the driver after the whole corpus is counted, and its memory is fixed by the unique chunks
the count finds: a run that cannot fit used to fail after hours. Before the count, this reads a sample spread over
the planned corpus (``pipeline/train/sample.py``: 64 windows at positions spaced evenly over the corpus's bytes,
inside uncompressed ranges, compressed streams and Parquet row groups alike, and small files read whole), counts
each window with the count stage's own counter, and fits the growth of unique chunks against bytes
(``bpe_core.train.growth``: Heaps' law, ``a·n^b``) to predict the whole corpus. The sample is ``SAMPLE_FRACTION`` of
the corpus, at least ``MIN_SAMPLE_BYTES`` and at most ``MAX_SAMPLE_BYTES``; a corpus within the sample is read
whole and its figures are exact. Where the sample cannot decide (heavy tails: its halves disagree, or a few
windows hold much of the text), the figures are a range, its high end at most twice its low end (``decided``).

Caveats: the weights of ``--weight`` change counts, not which chunks exist, and are not applied;
``--min-chunk-count K`` is predicted from the scale invariance of a power-law spectrum (chunks seen K times in n
bytes ~ chunks seen once in n/K bytes).
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
from dataclasses import asdict, dataclass

import numpy as np

from bpe_core.train.growth import (
    PowerLaw,
    growth_curve,
    incidence,
    merge_loop_memory,
    merge_loop_seconds,
    table_sizes,
    tail_exponents,
    words_within,
)
from bpe_core.train.sorted_counts import merge_sorted_counts
from pipeline.corpus.plan import CorpusPlan, CorpusSpec
from pipeline.errors import UsageError
from pipeline.train.sample import count_sample, range_file_bytes, sample_ranges, sample_window
from pipeline.train.settings import TrainSettings

SAMPLE_FRACTION = 0.05
MIN_SAMPLE_BYTES = 32 << 20
MAX_SAMPLE_BYTES = 512 << 20
DRIVER_MEMORY_SHARE = 0.8  # --driver-memory's default: this share of the launching machine's memory
SEED = 27
UNDECIDED = 0.25  # the other predictions this far apart: a range, not one number
LARGE_SAMPLE = 0.2  # a sample of this share of the corpus's text or more is also extrapolated along its own curve


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
    decided: bool = True  # False: the sample cannot decide (heavy tails); the figures are a range, low to high
    chunks_low: int = 0  # the range's ends (the point figures where decided)
    chunks_high: int = 0
    loop_memory_low: int = 0
    loop_memory_high: int = 0

    def __post_init__(self) -> None:
        if self.decided:
            for end in ("chunks_low", "chunks_high"):
                object.__setattr__(self, end, self.chunks)
            for end in ("loop_memory_low", "loop_memory_high"):
                object.__setattr__(self, end, self.loop_memory)

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
            f"estimate: {self.chunks_figure()} unique chunks ({how}); driver memory {self.memory_figure()} "
            f"(merge loop {_size(self.loop_memory)} + this process {_size(self.process_memory)}); "
            f"merge loop about {_duration(self.seconds)}"
        )

    def chunks_figure(self) -> str:
        """The unique chunks as a number, or where the sample cannot decide as a range that says so."""
        if self.decided:
            return f"{self.chunks:,}"
        return (
            f"between {self.chunks_low:,} and {self.chunks_high:,} (the sample cannot decide: heavy tails, a few "
            f"windows hold much of what is new; {self.chunks:,} in the middle)"
        )

    def memory_figure(self) -> str:
        if self.decided:
            return f"about {_size(self.driver_memory)}"
        low, high = self.process_memory + self.loop_memory_low, self.process_memory + self.loop_memory_high
        return f"between {_size(low)} and {_size(high)} (about {_size(self.driver_memory)})"


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
    sample = sample_ranges(plan, budget, spec=spec)
    counted = count_sample(sample, spec, settings, piece=sample_window(budget))
    tables, sizes, sample_file_bytes = counted.tables, counted.sizes, counted.file_bytes
    exact = sample_file_bytes >= total
    sample_text = sum(sizes)
    if not tables or not sample_text:  # only dead letters or empty documents in the sample: nothing to predict from
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
    fits = [_extrapolate(top, sample_text, text_bytes)]
    fits += [_extrapolate(_union([tables[i] for i in half]), sum(sizes[i] for i in half), text_bytes)
             for half in (order[0::2], order[1::2]) if half]  # fmt: skip
    large = sample_text >= LARGE_SAMPLE * text_bytes and len(curve) >= 3
    if large:
        fits.append(_from_curve(curve, sample_text, text_bytes))
    ests = [_estimate(settings, total, text_bytes, sample_text, len(tables), False, law, kept, singles)
            for law, kept in fits]  # fmt: skip
    along_curve = ests.pop() if large else None
    return _with_range(ests[0], ests[1:], along_curve, text_spread(counted.draws)), curve


def text_spread(draws: list[tuple[int, int]]) -> float:
    """The relative standard error of the corpus's text predicted from the sample: of the mean text per stored
    byte over the sample's draws (windows and ranges read whole). Windows of short documents all hold about as
    much text (a few per mille); where a few long documents are met by a few windows and missed by the rest,
    it is large (0.15-0.2 on the heavy-tailed corpus of the tests)."""
    ratios = np.array([text / stored for text, stored in draws if stored > 0], dtype=np.float64)
    if len(ratios) < 2 or ratios.mean() <= 0:
        return 0.0
    return float(ratios.std(ddof=1) / ratios.mean() / np.sqrt(len(ratios)))


def _extrapolate(top, text: int, text_bytes: int):
    """The words law of a sample's incidence table and what it predicts for ``text_bytes``: (law, kept(K))."""
    _, n_words, n_bytes = table_sizes(top)
    b_words, b_bytes = tail_exponents(top)
    words = PowerLaw(n_words / text**b_words, b_words)
    word_bytes = PowerLaw(n_bytes / text**b_bytes, b_bytes)

    def predicted(k: float) -> tuple[float, float]:  # seen k times in n bytes ~ seen once in n / k bytes
        return words(text_bytes / k), word_bytes(text_bytes / k)

    return words, predicted


def _from_curve(curve, text: int, text_bytes: int):
    """The law of the sample's own growth over its top two doublings, and what it predicts for ``text_bytes``."""
    top, below = curve[-1], curve[-3]
    b_words = math.log(top.words / max(1.0, below.words)) / math.log(top.text_bytes / max(1.0, below.text_bytes))
    b_bytes = math.log(top.word_bytes / max(1.0, below.word_bytes)) / math.log(top.text_bytes / below.text_bytes)
    words = PowerLaw(top.words / text**b_words, b_words)
    word_bytes = PowerLaw(top.word_bytes / text**b_bytes, b_bytes)

    def predicted(k: float) -> tuple[float, float]:
        return words(text_bytes / k), word_bytes(text_bytes / k)

    return words, predicted


def _union(tables):
    return merge_sorted_counts([incidence(t) for t in tables])


def _with_range(est: Estimate, halves: list[Estimate], along_curve: Estimate | None, spread: float) -> Estimate:
    """The estimate with a range where the sample cannot decide (heavy tails: a few windows hold much of what is
    new, or much of the text). Undecided: the other predictions (of the sample's two disjoint halves, each its own
    spectrum to the whole corpus; for a sample of ``LARGE_SAMPLE`` of the corpus or more, of its own growth curve:
    the extrapolation is then short and the curve measured, where the spectrum's rule was set on 5% samples of 64
    windows) move the whole sample's by a factor that, times that of two standard errors of the corpus's text
    (``text_spread``) through Heaps' exponent, is over ``1 + UNDECIDED``. The range is then as wide as the rule
    allows, twice as high at its high end as at its low end, around the whole sample's prediction, or around the
    geometric middle of it and the curve's (the ranges of only the predictions' spread, or around the middle of the
    halves', missed more often: benchmarks/bench_estimate.py). The driver memory's range likewise."""
    text = (1 + 2 * spread) ** est.growth_b
    others = halves + ([along_curve] if along_curve else [])
    factor = text * max([_factor(est.chunks, o.chunks) for o in others] + [1.0])
    if factor <= 1 + UNDECIDED:
        return est
    low, high = _double(est.chunks, along_curve.chunks if along_curve else est.chunks)
    m_low, m_high = _double(est.loop_memory, along_curve.loop_memory if along_curve else est.loop_memory)
    return dataclasses.replace(est, decided=False, chunks=int(min(high, max(low, est.chunks))), chunks_low=low,
                               chunks_high=high, loop_memory=int(min(m_high, max(m_low, est.loop_memory))),
                               loop_memory_low=m_low, loop_memory_high=m_high)  # fmt: skip


def _double(a: int, b: int) -> tuple[int, int]:
    """The 2x range around the geometric middle of ``a`` and ``b``."""
    middle = (a * b) ** 0.5
    return int(middle / 2**0.5) + 1, int(middle * 2**0.5)


def _factor(a: float, b: float) -> float:
    return max(a, b) / max(1.0, min(a, b))


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
    high = est.process_memory + est.loop_memory_high
    if limit and not est.decided and est.driver_memory <= limit < high:
        warnings.append(
            f"the driver may need up to {_size(high)}, over --driver-memory {_size(limit)}: the sample cannot decide "
            f"(heavy tails); the run goes ahead on the middle of the range, {_size(est.driver_memory)}"
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
        decided=est.decided,  # False: the sample cannot decide; the figures are ranges (low, high)
        unique_chunks_range=[est.chunks_low, est.chunks_high],
        driver_memory=est.driver_memory,
        driver_memory_range=[est.process_memory + est.loop_memory_low, est.process_memory + est.loop_memory_high],
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
        f"  unique chunks    {est.chunks_figure()}"
        + ("" if est.exact else f" (unique chunks ~ {est.growth_a:.3g}·n^{est.growth_b:.2f}, n in bytes of text)"),
        f"  merge loop       {est.words:,} words of {_size(est.word_bytes)}, {est.merges:,} merges, about "
        f"{_duration(est.seconds)} of CPU",
        f"  driver memory    {est.memory_figure()} (merge loop {_size(est.loop_memory)} + this process "
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
