"""Judging one round: a flow is slow when it is below a stated fraction of its simulated expectation AND a
robust outlier of its round.

For flow f with expectation ``E_f`` (Gb/s, the simulator's max-min rate for exactly the round's flows) and
measured median ``M_f`` and minimum ``m_f`` over the repeats: ``r_f = M_f / E_f``. With ``med`` and ``MAD`` the
median and median absolute deviation of ``r`` over the round and ``s = max(1.4826 MAD, MAD_FLOOR * med)``:

- slow  : ``r_f < fraction`` and ``(med - r_f) / s > k``
- flaky : not slow, but the same test holds for ``m_f / E_f`` (slow in some repeats only: a flapping link)
- good  : neither, and clearly fine: ``r_f >= fraction`` or at most ``k / 2`` scaled MADs below ``med``; a good
  flow proves every link on its path. A flow in between (not slow, not clearly fine) proves nothing.

No per-SKU constants: the only numbers are ``fraction`` (default 0.9) and ``k`` (default 4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dsctl.thresholds import MAD_K, SLOW_FRACTION

#: the scaled MAD is at least this fraction of the median: a noiseless round has MAD 0, and a small round (8
#: flows of a CI host) has a MAD of chance; with k = 4 a flow must be >= 16% below the median to be an outlier,
#: so noise of a few % never flags while a 1.25x (and any 4x) slowdown does
MAD_FLOOR = 0.04
#: rounds with fewer flows judge against the statistics of the design rounds (a follow-up has a few flows)
MIN_FLOWS_FOR_STATS = 16


@dataclass(frozen=True)
class Measured:
    """What a round measured per flow (float64 [F] Gb/s): median and minimum over the repeats; ``answered``
    bool [F] False where the probe gave no number (counted as slow: nothing went through)."""

    median_gbps: np.ndarray
    min_gbps: np.ndarray
    answered: np.ndarray


@dataclass(frozen=True)
class Judgement:
    """Per flow of a round: ``ratio`` (median / expected), ``ratio_min``, ``slow``, ``flaky``, ``good`` bool [F];
    ``median``/``scale``: the round statistics used (of the median ratios)."""

    ratio: np.ndarray
    ratio_min: np.ndarray
    slow: np.ndarray
    flaky: np.ndarray
    good: np.ndarray
    median: float
    scale: float


def robust(values: np.ndarray) -> tuple[float, float]:
    """(median, scale): ``scale = max(1.4826 MAD, MAD_FLOOR * median)``."""
    if not len(values):
        return 1.0, MAD_FLOOR
    med = float(np.median(values))
    mad = float(np.median(np.abs(values - med)))
    return med, max(1.4826 * mad, MAD_FLOOR * abs(med), 1e-12)


def judge(expected_gbps: np.ndarray, measured: Measured, fraction: float = SLOW_FRACTION,
          mad_k: float = MAD_K, reference: tuple[float, float, float, float] | None = None) -> Judgement:
    """Judge the flows of one round. ``reference`` = (median, scale) of median ratios and of min ratios to use
    instead of the round's own when it has fewer than MIN_FLOWS_FOR_STATS flows."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(measured.answered & (expected_gbps > 0), measured.median_gbps / expected_gbps, 0.0)
        ratio_min = np.where(measured.answered & (expected_gbps > 0), measured.min_gbps / expected_gbps, 0.0)
    if reference is not None and len(ratio) < MIN_FLOWS_FOR_STATS:
        med, scale, med_min, scale_min = reference
    else:
        (med, scale), (med_min, scale_min) = robust(ratio), robust(ratio_min)
    depth = (med - ratio) / scale
    slow = (ratio < fraction) & (depth > mad_k)
    flaky = ~slow & (ratio_min < fraction) & ((med_min - ratio_min) / scale_min > mad_k)
    # a flow proves its links only when clearly fine: at the fraction, or at most k/2 MADs below the median
    good = ~slow & ~flaky & ((ratio >= fraction) | (depth <= mad_k / 2))
    return Judgement(ratio, ratio_min, slow, flaky, good, med, scale)


def statistics(judgements: list[Judgement]) -> tuple[float, float, float, float]:
    """Pooled (median, scale) of median ratios and of min ratios over several rounds (the reference above)."""
    if not judgements:
        return 1.0, MAD_FLOOR, 1.0, MAD_FLOOR
    med, scale = robust(np.concatenate([j.ratio for j in judgements]))
    med_min, scale_min = robust(np.concatenate([j.ratio_min for j in judgements]))
    return med, scale, med_min, scale_min
