"""The pipeline schedule of a plan at unit costs (F=1, B=2, W=1): makespan, bubble and activation peak."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dsctl.launch.batch import BatchPlan
from dsctl.launch.layout import ParallelLayout
from dsctl.launch.rules import DUAL_SCHEDULES, stages_per_rank
from dsctl.launch.schedule import OpCosts, simulate


@dataclass(frozen=True)
class ScheduleFigures:
    """Simulated pipeline figures at unit costs F=1, B=2, W=1, F&B=F+B (time in units of one forward chunk)."""

    schedule: str
    num_stages: int
    num_ranks: int
    micro_batches: int
    makespan: float
    bubble: float
    bubble_fraction: float
    bubble_formula: float | None
    peak_activations: int
    params_per_rank: str


#: micro-batches beyond which the plan simulates this many and extrapolates (the bubble no longer changes)
MAX_SIMULATED_MICRO_BATCHES = 256


def schedule_figures(layout: ParallelLayout, batch: BatchPlan) -> ScheduleFigures | None:
    """Run the schedule simulator (another package) if it is present; None otherwise.

    Costs F=1, B=2, W=1, F&B=F+B, so every rank does the same work: ``makespan = busy + bubble`` with
    ``busy = micro-batches x chunks per micro-batch per rank x (F+B)``. Beyond
    :data:`MAX_SIMULATED_MICRO_BATCHES` the bubble and the activation peak no longer depend on the count
    (dualpipe-facts.md section 6), so the simulation runs at that count and the makespan is extended by the
    extra micro-batches' busy time.
    """
    stages = layout.num_stages
    if stages < 2 and layout.schedule in DUAL_SCHEDULES:
        return None
    m = batch.micro_batches
    m_sim = min(m, MAX_SIMULATED_MICRO_BATCHES)
    if layout.schedule == "interleaved" and m_sim < m:  # Megatron's rule: a multiple of pp
        m_sim = max(layout.pp, m_sim - m_sim % layout.pp)
    result = simulate(layout.schedule, stages, m_sim, OpCosts(f=1.0, b=2.0, w=1.0, fb=None))
    chunks_per_micro_batch = stages_per_rank(layout.schedule) if layout.schedule != "dualpipe" else 1
    makespan = float(result.makespan) + (m - m_sim) * chunks_per_micro_batch * 3.0
    bubble = float(result.bubble)
    formula = getattr(result, "formula_bubble", None)
    return ScheduleFigures(
        schedule=layout.schedule, num_stages=stages, num_ranks=layout.pp, micro_batches=m,
        makespan=makespan, bubble=bubble, bubble_fraction=bubble / makespan if makespan else 0.0,
        bubble_formula=float(formula) if isinstance(formula, (int, float)) else None,
        peak_activations=int(_peak(result.peak_activations)),
        params_per_rank="2x" if layout.schedule in DUAL_SCHEDULES else "1x",
    )


def _peak(value: Any) -> int:
    try:
        return int(max(value))
    except TypeError:
        return int(value)
