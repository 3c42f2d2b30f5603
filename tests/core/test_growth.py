"""bpe_core.train.growth: the growth curve of a sample and the exponent of its incidence spectrum (the training
pre-flight's algorithm), against independent counts."""

from __future__ import annotations

import numpy as np
import pytest

from bpe_core.train.growth import growth_curve, merge_loop_memory, table_sizes, tail_exponents, words_within
from bpe_core.train.sorted_counts import sorted_counts_from_dict


def _zipf_units(rng: np.random.Generator, exponent: float, units: int, size: int) -> list[dict[bytes, int]]:
    """``units`` units of ``size`` draws from a Zipf law whose Heaps exponent is ``exponent`` (rank r drawn with
    probability ~ r^(-1/exponent)), each word a distinct byte string of 3+ bytes."""
    ranks = np.arange(1, 2_000_001, dtype=np.float64)
    p = ranks ** (-1.0 / exponent)
    p /= p.sum()
    out = []
    for _ in range(units):
        counts: dict[bytes, int] = {}
        for r in rng.choice(len(p), size=size, p=p):
            key = b"w%d" % r
            counts[key] = counts.get(key, 0) + 1
        out.append(counts)
    return out


def test_curve_levels_are_means_of_disjoint_unions():
    units = [{b"ab": 1, b"x": 2}, {b"ab": 3, b"cd": 1}, {b"ef": 1}, {b"cd": 2, b"gh": 1}]
    curve, top = growth_curve([sorted_counts_from_dict(u) for u in units], [10, 20, 30, 40])
    assert [(p.level, p.units, p.nodes) for p in curve] == [(0, 1, 4), (1, 2, 2), (2, 4, 1)]
    assert curve[0].chunks == np.mean([len(u) for u in units])
    assert curve[1].words == np.mean([2, 3])  # {ab, cd} and {ef, cd, gh}
    assert curve[2].text_bytes == 100 and curve[2].chunks == 5 and curve[2].words == 4  # ab x cd ef gh
    # the top table counts the units each chunk was found in, not its occurrences
    seen: dict[bytes, int] = {}
    for u in units:
        for chunk in u:
            seen[chunk] = seen.get(chunk, 0) + 1
    data, o = top.data.tobytes(), top.offsets
    assert {data[o[i] : o[i + 1]]: int(c) for i, c in enumerate(top.counts)} == seen
    assert table_sizes(top) == (5, 4, 8)


def test_odd_node_is_carried_up_and_left_out_of_the_level_means():
    units = [{b"aa": 1}, {b"bb": 1}, {b"cc": 1}]
    curve, _ = growth_curve([sorted_counts_from_dict(u) for u in units], [1, 1, 1])
    assert [(p.units, p.nodes, p.words) for p in curve] == [(1, 3, 1.0), (2, 1, 2.0), (3, 1, 3.0)]


@pytest.mark.slow
@pytest.mark.parametrize("exponent", [0.5, 0.7])
def test_tail_exponent_predicts_unique_words_of_a_zipf_corpus(exponent):
    """A 5% sample (8 of 160 units) predicts the words of all 160 units within 20%; the counted words come from
    the units themselves, not from the code under test."""
    rng = np.random.default_rng(27)
    units = _zipf_units(rng, exponent, 160, 2000)
    sample = [units[i] for i in rng.choice(len(units), 8, replace=False)]
    curve, top = growth_curve([sorted_counts_from_dict(u) for u in sample], [2000] * len(sample))
    b, _ = tail_exponents(top)
    predicted = curve[-1].words * (len(units) / len(sample)) ** b
    counted = len(set().union(*units))
    assert abs(predicted / counted - 1) < 0.2, (exponent, b, predicted, counted)
    assert abs(b - exponent) < 0.15


def test_exponent_is_zero_where_every_word_repeats_across_units():
    tables = [sorted_counts_from_dict({b"ab": 1, b"cd": 2}) for _ in range(4)]
    _, top = growth_curve(tables, [5] * 4)
    assert tail_exponents(top) == (0.0, 0.0)


def test_memory_model_grows_with_words_and_words_within_inverts_it():
    assert merge_loop_memory(2_000_000, 16_000_000, 32_000) > merge_loop_memory(1_000_000, 8_000_000, 32_000)
    limit = 300 << 20
    most = words_within(limit, 8.0, 32_000)
    assert (
        merge_loop_memory(most, 8.0 * most, 32_000) <= limit < merge_loop_memory(most + 100, 8.0 * (most + 100), 32_000)
    )
    assert words_within(1 << 20, 8.0, 32_000) == 0
