"""The DualPipe README's bubble formulas and the cost regimes in which a simulation reproduces them exactly.

With F, B (full backward), W (weight part), I = B - W and FB (overlapped F&B), PP = number of stages:

- 1F1B: bubble (PP-1)(F+B), always exact; makespan (M+PP-1)(F+B).
- ZB1P: (PP-1)(F+B-2W), exact when W <= min(F, I) and M >= PP; makespan M(F+B) + bubble.
- Interleaved 1F1B (v = 2 chunks per rank, R = PP/2 ranks, F and B per chunk): (R-1)(F+B), exact for all costs;
  makespan v M (F+B) + bubble (Narayanan et al. SC'21: (R-1)(F+B)/v of a rank's whole-model F and B).
- DualPipe, DualPipeV: (PP/2-1)(FB+B-3W), exact when F = I and W <= F; makespan
  (C-PP-1) FB + (PP+1)(F+B) + bubble, with C the micro-batches (DualPipeV: 2C).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dsctl.launch.schedule.costs import OpCosts
from dsctl.launch.schedule.interleaved import INTERLEAVED_CHUNKS


@dataclass(frozen=True)
class FormulaCheck:
    """README bubble of a schedule; ``exact``: these costs are in its exact regime (``regime`` says which)."""

    bubble: float
    exact: bool
    regime: str
    makespan: float | None


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


def _at_most(a: float, b: float) -> bool:
    return a <= b or _close(a, b)


def formula_check(schedule: str, num_stages: int, num_micro_batches: int, costs: OpCosts) -> FormulaCheck:
    f, b, w, i, fb = costs.f, costs.b, costs.w, costs.i, costs.fb_cost
    pp, mb = num_stages, num_micro_batches
    if schedule == "1f1b":
        bubble = (pp - 1) * (f + b)
        return FormulaCheck(bubble, True, "(PP-1)(F+B): exact for all costs", (mb + pp - 1) * (f + b))
    if schedule == "interleaved":
        ranks = pp // INTERLEAVED_CHUNKS
        bubble = (ranks - 1) * (f + b)
        return FormulaCheck(bubble, True, "(R-1)(F+B) with R = PP/2 ranks, F and B per chunk: exact for all costs",
                            INTERLEAVED_CHUNKS * mb * (f + b) + bubble)
    if schedule == "zb1p":
        bubble = (pp - 1) * (f + b - 2 * w)
        exact = _at_most(w, min(f, i)) and mb >= pp
        regime = "(PP-1)(F+B-2W): exact when W <= min(F, I) and micro-batches >= PP"
        return FormulaCheck(bubble, exact, regime, mb * (f + b) + bubble if exact else None)
    bubble = (pp / 2 - 1) * (fb + b - 3 * w)
    exact = _close(f, i) and _at_most(w, f)
    chunks = mb if schedule == "dualpipe" else 2 * mb
    makespan = (chunks - pp - 1) * fb + (pp + 1) * (f + b) + bubble
    regime = "(PP/2-1)(F&B+B-3W): exact when F = I (B = F+W) and W <= F"
    return FormulaCheck(bubble, exact, regime, makespan if exact else None)
