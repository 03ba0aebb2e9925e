"""Spread of the per-rank overlap figures across ranks (min, median, p95, max) and the worst ranks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from dsctl.trace.overlap import RankOverlap

#: figures summarised across ranks (attributes of OverlapMetrics)
SPREAD_FIELDS = ("wall_us", "compute_busy_us", "comm_busy_us", "overlapped_us", "exposed_comm_us", "idle_us",
                 "overlap_ratio", "exposed_comm_fraction")
WORST_RANKS = 8


def spread(rows: Sequence[RankOverlap]) -> dict[str, dict[str, float]] | None:
    """``{field: {min, median, p95, max, num_ranks}}`` over rank rows; None with fewer than two rows.

    p95 is numpy's linear-interpolated 95th percentile; ratios that are None (no communication) are left out.
    """
    if len(rows) < 2:
        return None
    out: dict[str, dict[str, float]] = {}
    for name in SPREAD_FIELDS:
        values = np.array([v for r in rows if (v := getattr(r.metrics, name)) is not None], dtype=np.float64)
        if values.size == 0:
            continue
        out[name] = {"min": round(float(values.min()), 6), "median": round(float(np.median(values)), 6),
                     "p95": round(float(np.percentile(values, 95)), 6), "max": round(float(values.max()), 6),
                     "num_ranks": int(values.size)}
    return out


def worst_ranks(rows: Sequence[RankOverlap], limit: int = WORST_RANKS) -> list[dict[str, object]]:
    """The rows with the most exposed communication (ties: lower rank first), as small dicts."""
    if len(rows) < 2:
        return []
    ordered = sorted(rows, key=lambda r: (-r.metrics.exposed_comm_us, r.rank, r.device))
    out = []
    for r in ordered[:limit]:
        m = r.metrics
        out.append({"rank": r.rank, "device": r.device, "source": r.source, "exposed_comm_us": m.exposed_comm_us,
                    "overlap_ratio": m.overlap_ratio, "wall_us": m.wall_us})
    return out
