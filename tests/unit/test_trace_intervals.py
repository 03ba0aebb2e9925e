"""Interval algebra of dsctl.trace.intervals: hand cases and hypothesis invariants against a brute-force grid."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.trace.intervals import coverage, covered_lengths, subtract, total, union

SPAN = 60
intervals = st.lists(st.tuples(st.integers(0, SPAN), st.integers(0, 15)), max_size=12).map(
    lambda pairs: (np.array([float(s) for s, _ in pairs]), np.array([float(min(SPAN, s + d)) for s, d in pairs])))


def grid(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Brute force: which unit cells [t, t+1) of [0, SPAN) the intervals cover (integer endpoints)."""
    cells = np.zeros(SPAN, dtype=bool)
    for a, b in zip(s.astype(int), e.astype(int), strict=True):
        cells[a:b] = True
    return cells


def test_union_merges_nested_overlapping_touching_and_drops_empty() -> None:
    s, e = union([5, 0, 2, 10, 20, 30], [9, 4, 3, 20, 25, 30])
    assert s.tolist() == [0, 5, 10] and e.tolist() == [4, 9, 25]
    assert total(s, e) == 23


def test_union_of_nothing_and_gap_merging() -> None:
    s, e = union([], [])
    assert s.size == 0 and total(s, e) == 0
    s, e = union([0, 10], [5, 12], gap_us=5)
    assert s.tolist() == [0] and e.tolist() == [12]


def test_coverage_hand_case() -> None:
    cov = coverage((np.array([0.0, 90.0]), np.array([50.0, 100.0])), (np.array([40.0]), np.array([70.0])), 0, 100)
    assert (cov.window_us, cov.a_us, cov.b_us, cov.both_us, cov.neither_us) == (100, 60, 30, 10, 20)


def test_coverage_clips_to_the_window() -> None:
    cov = coverage((np.array([-50.0]), np.array([500.0])), (np.array([90.0]), np.array([200.0])), 0, 100)
    assert (cov.a_us, cov.b_us, cov.both_us, cov.neither_us) == (100, 10, 10, 0)


def test_covered_lengths_hand_case() -> None:
    cover = union([0, 20], [10, 30])
    got = covered_lengths(np.array([5.0, 12.0, 0.0, 40.0]), np.array([25.0, 18.0, 30.0, 50.0]), cover)
    assert got.tolist() == [10, 0, 20, 0]


@settings(max_examples=150)
@given(intervals)
def test_union_matches_brute_force_and_never_exceeds_the_sum(a) -> None:
    s, e = union(*a)
    assert total(s, e) == grid(*a).sum()
    assert total(s, e) <= float(np.sum(a[1] - a[0]))
    assert np.all(s[1:] > e[:-1]) and np.all(e > s)


@settings(max_examples=150)
@given(intervals, intervals)
def test_coverage_invariants(a, b) -> None:
    cov = coverage(a, b, 0, SPAN)
    ga, gb = grid(*a), grid(*b)
    assert cov.a_us == ga.sum() and cov.b_us == gb.sum()
    assert cov.both_us == (ga & gb).sum()
    assert cov.neither_us == (~ga & ~gb).sum()
    assert cov.both_us <= min(cov.a_us, cov.b_us)
    exposed = total(*subtract(union(*b), union(*a)))
    assert exposed + cov.both_us == cov.b_us  # exposed + overlapped == comm busy
    assert cov.a_us + cov.b_us - cov.both_us + cov.neither_us == cov.window_us


@settings(max_examples=150)
@given(intervals, intervals)
def test_covered_lengths_and_subtract_match_brute_force(a, cover) -> None:
    got = covered_lengths(a[0], a[1], union(*cover))
    gc = grid(*cover)
    for i in range(a[0].size):
        assert got[i] == gc[int(a[0][i]):int(a[1][i])].sum()
    rest = subtract(union(*a), union(*cover))
    assert total(*rest) == (grid(*a) & ~gc).sum()
