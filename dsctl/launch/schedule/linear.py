"""1F1B and ZB1P (ZB-H1) programs: one stage per rank, rank r = stage r, all micro-batches enter at rank 0."""

from __future__ import annotations

from dsctl.launch.schedule.geometry import Geometry
from dsctl.launch.schedule.program import RankProgram


def one_f_one_b_program(geometry: Geometry, rank: int) -> RankProgram:
    """1F1B: ``min(PP - r - 1, M)`` warm-up forwards, then (F, B) pairs, then the remaining backwards."""
    p = RankProgram(geometry, rank)
    num_mb = geometry.num_micro_batches
    warm = min(geometry.num_stages - rank - 1, num_mb)
    for _ in range(warm):
        p.compute_forward(0)
    for _ in range(num_mb - warm):
        p.compute_forward(0)
        p.compute_backward(0)
    for _ in range(warm):
        p.compute_backward(0)
    return p


def zb1p_program(geometry: Geometry, rank: int) -> RankProgram:
    """ZB-H1: 1F1B with every backward split into I and W; stage r keeps ``r`` weight-gradient ops pending
    through the steady state (a W runs right after an I only while more than ``r`` are queued), and the held
    W's fill the cool-down. Peak activations stay those of 1F1B.
    """
    p = RankProgram(geometry, rank)
    num_mb = geometry.num_micro_batches
    warm = min(geometry.num_stages - rank - 1, num_mb)
    for _ in range(warm):
        p.compute_forward(0)
    for _ in range(num_mb - warm):
        p.compute_forward(0)
        p.compute_backward(0, split=True)
        if p.pending_weights > rank:
            p.compute_weight()
    for _ in range(warm):
        p.compute_backward(0, split=True)
        p.compute_weight()
    while p.pending_weights:
        p.compute_weight()
    return p
