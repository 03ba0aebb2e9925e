"""Interval algebra on numpy arrays: unions, coverage of two interval classes, and per-interval overlap.

An *interval set* is a pair of 1-D float arrays ``(starts, ends)`` of the same length, in microseconds, with
``starts <= ends``. Raw sets may be unsorted, nested and overlapping; :func:`union` returns the canonical form:
sorted, disjoint, non-touching intervals of positive length. Every function here is a sort plus vectorised sweeps
(O(n log n)), never a Python loop over intervals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


def _as_arrays(starts: object, ends: object) -> tuple[FloatArray, FloatArray]:
    s = np.asarray(starts, dtype=np.float64).ravel()
    e = np.asarray(ends, dtype=np.float64).ravel()
    if s.shape != e.shape:
        raise ValueError(f"starts and ends differ in length ({s.size} vs {e.size})")
    return s, e


def union(starts: object, ends: object, gap_us: float = 0.0) -> tuple[FloatArray, FloatArray]:
    """Merge intervals into sorted disjoint ones (µs); zero-length intervals vanish.

    ``gap_us`` > 0 also merges intervals separated by gaps up to that long (used to draw at pixel resolution).
    Returns ``(starts, ends)``, each of shape ``(k,)``, ``k <= n``.
    """
    s, e = _as_arrays(starts, ends)
    keep = e > s
    s, e = s[keep], e[keep]
    if s.size == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)  # furthest end of every interval up to and including i
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1] + gap_us
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return s[first], reach[last]


def union_lengths(group: NDArray[np.int64], starts: FloatArray, ends: FloatArray, num_groups: int) -> FloatArray:
    """|union| (µs) of the intervals of each group at once: shape ``(num_groups,)``, ``group[i]`` in
    ``0..num_groups-1``.

    The same merge as :func:`union`, for all groups in one sort (a union per group costs a Python call per group:
    300,000 one-kernel streams took 100 s). The running furthest end must restart at each group, which
    ``np.maximum.accumulate`` cannot do on floats; on the ends' ranks among all the times (exact integers that
    keep the order) it can, by lifting group g above every earlier group by ``g * (number of times + 1)``.
    """
    s, e = _as_arrays(starts, ends)
    g = np.asarray(group, dtype=np.int64).ravel()
    keep = e > s
    s, e, g = s[keep], e[keep], g[keep]
    out = np.zeros(num_groups)
    if s.size == 0:
        return out
    order = np.lexsort((s, g))
    s, e, g = s[order], e[order], g[order]
    times, rank = np.unique(np.concatenate([s, e]), return_inverse=True)
    rank = rank.reshape(-1).astype(np.int64)
    s_rank, e_rank = rank[:s.size], rank[s.size:]
    lift = g * (times.size + 1)
    reach = np.maximum.accumulate(e_rank + lift) - lift  # furthest end so far within the group (as a rank)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = (g[1:] != g[:-1]) | (s_rank[1:] > reach[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    np.add.at(out, g[first], times[reach[last]] - s[first])
    return out


def total(starts: FloatArray, ends: FloatArray) -> float:
    """Sum of lengths (µs) of an interval set that is already disjoint (e.g. from :func:`union`)."""
    return float(np.sum(ends - starts)) if starts.size else 0.0


def clip(starts: FloatArray, ends: FloatArray, lo: float, hi: float) -> tuple[FloatArray, FloatArray]:
    """Intervals cut to the window ``[lo, hi]`` (µs); those wholly outside become zero-length at a window edge."""
    s = np.clip(starts, lo, hi)
    e = np.clip(ends, lo, hi)
    return s, e


@dataclass(frozen=True)
class Coverage:
    """How the time of a window splits between two interval classes A (compute) and B (communication), in µs.

    ``a_us`` = |union A|, ``b_us`` = |union B|, ``both_us`` = |union A ∩ union B|, ``neither_us`` = window minus
    |union A ∪ union B|. Identities: ``both_us <= min(a_us, b_us)``, ``a_us + b_us - both_us + neither_us ==
    window_us``.
    """

    window_us: float
    a_us: float
    b_us: float
    both_us: float
    neither_us: float


def coverage(a: tuple[FloatArray, FloatArray], b: tuple[FloatArray, FloatArray], lo: float, hi: float) -> Coverage:
    """Sweep both raw interval sets (any order, nesting allowed) inside the window ``[lo, hi]`` (µs).

    Every interval contributes +1 at its start and -1 at its end to its class counter; after sorting the 2(n+m)
    boundaries, a segment between consecutive boundaries is covered by A (B) where A's (B's) running count is
    positive.
    """
    a_s, a_e = clip(*_as_arrays(*a), lo, hi)
    b_s, b_e = clip(*_as_arrays(*b), lo, hi)
    window = max(0.0, hi - lo)
    times = np.concatenate([a_s, a_e, b_s, b_e, [lo, hi]])
    na, nb = a_s.size, b_s.size
    da = np.concatenate([np.ones(na), -np.ones(na), np.zeros(2 * nb + 2)])
    db = np.concatenate([np.zeros(2 * na), np.ones(nb), -np.ones(nb), np.zeros(2)])
    order = np.argsort(times, kind="stable")
    times, da, db = times[order], da[order], db[order]
    # running counts after each boundary; a segment [t_i, t_i+1] has the counts after boundary i. Ties at the same
    # time give zero-length segments, so their order does not matter.
    ca = np.cumsum(da)[:-1] > 0.5
    cb = np.cumsum(db)[:-1] > 0.5
    seg = np.diff(times)
    a_us = float(seg[ca].sum())
    b_us = float(seg[cb].sum())
    both = float(seg[ca & cb].sum())
    neither = max(0.0, window - (a_us + b_us - both))
    return Coverage(window_us=window, a_us=a_us, b_us=b_us, both_us=both, neither_us=neither)


def covered_lengths(starts: FloatArray, ends: FloatArray, cover: tuple[FloatArray, FloatArray]) -> FloatArray:
    """For each interval ``[starts[i], ends[i]]``, the length (µs) of it lying under the disjoint set ``cover``.

    ``cover`` must be canonical (from :func:`union`). Uses the cumulative covered-measure function
    ``C(t) = |cover ∩ (-inf, t]|`` evaluated with ``searchsorted``: covered = C(end) - C(start). Shape ``(n,)``.
    """
    c_s, c_e = cover
    s, e = _as_arrays(starts, ends)
    if c_s.size == 0 or s.size == 0:
        return np.zeros(s.size)
    before = np.concatenate([[0.0], np.cumsum(c_e - c_s)])  # covered length of intervals 0..k-1

    def measure(t: FloatArray) -> FloatArray:
        k = np.searchsorted(c_s, t, side="right") - 1  # last cover interval starting at or before t
        inside = np.where(k >= 0, np.clip(t - c_s[np.maximum(k, 0)], 0.0, (c_e - c_s)[np.maximum(k, 0)]), 0.0)
        return np.where(k >= 0, before[np.maximum(k, 0)] + inside, 0.0)

    return np.maximum(measure(e) - measure(s), 0.0)


def subtract(base: tuple[FloatArray, FloatArray], cut: tuple[FloatArray, FloatArray]) -> tuple[FloatArray, FloatArray]:
    """``base`` minus ``cut``, both canonical (from :func:`union`); returns a canonical set (µs).

    Sweep with counters: +1/-1 for base, -1/+1 for cut-as-blocker; keep segments where base is on and cut is off.
    """
    b_s, b_e = base
    c_s, c_e = cut
    if b_s.size == 0 or c_s.size == 0:
        return b_s.copy(), b_e.copy()
    times = np.concatenate([b_s, b_e, c_s, c_e])
    nb, nc = b_s.size, c_s.size
    db = np.concatenate([np.ones(nb), -np.ones(nb), np.zeros(2 * nc)])
    dc = np.concatenate([np.zeros(2 * nb), np.ones(nc), -np.ones(nc)])
    order = np.argsort(times, kind="stable")
    times, db, dc = times[order], db[order], dc[order]
    on = (np.cumsum(db)[:-1] > 0.5) & (np.cumsum(dc)[:-1] < 0.5)
    return union(times[:-1][on], times[1:][on])
