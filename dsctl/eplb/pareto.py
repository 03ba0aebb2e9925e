"""Balance versus migration: the Pareto front of (max GPU load, replicas moved) from a previous placement, budgets
on moves, and a "not worth it" answer when the gain is small (docs/eplb.md "Balance versus migration").

Candidates: the previous placement kept as it is (0 moves), and the migration-aware plan
(``dsctl.eplb.migration.rebalance_with_previous``) at each tolerance of ``TOLERANCES`` (0 = the unconstrained
balance, moving the fewest replicas that reach it). Each candidate is scored on the new statistics by
- ``max_load``: the sum over layers of the largest GPU load (tokens): the time an MoE step waits for its slowest
  GPU is proportional to it, so the relative drop versus "keep" is the predicted gain per step;
- ``replicas_moved`` (slots whose expert changes) and ``bytes_moved`` = replicas moved x bytes per expert.
The front keeps the candidates no other candidate beats on both counts. The chosen plan is, within the budgets
(``max_moves``, ``max_move_bytes``), the one moving the fewest replicas whose max load is within ``accept``
(relative, the --tolerance) of the lowest max load reachable within the budgets; if its gain over keeping the
previous placement is below ``min_gain`` (relative, 0.02 = 2%), the answer is "not worth it" and the previous
placement is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from dsctl.eplb.checks import EplbLayout
from dsctl.eplb.migration import MigrationResult, rebalance_with_previous, unconstrained_placement
from dsctl.eplb.move_cost import MoveFabric, MoveTime, break_even_steps, payback_s
from dsctl.eplb.placement import Placement, balancedness, gpu_loads
from dsctl.errors import InputError

#: tolerances tried (relative balancedness shortfall versus the unconstrained plan)
TOLERANCES = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1)
#: below this relative gain in max load per step, a rebalance is "not worth it" by default
DEFAULT_MIN_GAIN = 0.02


@dataclass(frozen=True)
class ParetoPoint:
    """One candidate plan scored on the new statistics (see module doc); ``tolerance`` None = keep previous."""

    tolerance: float | None
    max_load: float
    mean_balancedness: float
    replicas_moved: int
    bytes_moved: int | None
    gain: float  # 1 - max_load / max_load of "keep" (the predicted relative saving per step)
    on_front: bool
    within_budget: bool
    #: with a fabric (--plan): the moves simulated on it (None without)
    moves: MoveTime | None = None
    #: seconds of load-bound step time after which the moves pay back (move_s / gain); None without a fabric
    payback_s: float | None = None
    #: steps after which the moves pay back (payback_s / step_time_s); None without a fabric or a step time
    break_even_steps: float | None = None


@dataclass(frozen=True)
class TradeOff:
    """The Pareto table and the decision: ``chosen`` indexes ``points``; ``worth_it`` False keeps the previous."""

    points: tuple[ParetoPoint, ...]
    chosen: int
    worth_it: bool
    reason: str
    min_gain: float
    max_moves: int | None
    max_move_bytes: int | None
    num_slots: int  # slots over all layers (the denominator of "share of replicas moved")
    plan: str | None = None  # the fabric the moves were timed on (--plan), None when not timed
    step_time_s: float | None = None


def _score(weight: np.ndarray, placement: Placement, num_gpus: int) -> tuple[float, float]:
    loads = gpu_loads(weight, placement.phy2log, placement.logcnt, num_gpus)
    return float(loads.max(axis=1).sum()), float(balancedness(loads).mean())


def trade_off(
    weight: np.ndarray, previous: Placement, layout: EplbLayout, algorithm: str, expert_bytes: int | None,
    *, max_moves: int | None = None, max_move_bytes: int | None = None, min_gain: float = DEFAULT_MIN_GAIN,
    tolerances: tuple[float, ...] = TOLERANCES, accept: float = 0.01,
    progress: Callable[[int, int], None] | None = None,
    fabric: MoveFabric | None = None, step_time_s: float | None = None,
) -> tuple[TradeOff, Placement, MigrationResult | None]:
    """Score every candidate, mark the front, choose within the budgets (checked ``weight`` [L, E] and ``layout``).

    ``fabric``: also simulate each candidate's moves on that planned fabric (``dsctl.eplb.move_time``) and state
    when they pay back; ``step_time_s`` (seconds per step that scale with the max GPU load) turns that into steps.

    Returns (the table, the chosen placement, its migration result or None when the previous one is kept).
    """
    # the option rules (signs, ranges, what applies with what) are the request's (dsctl.eplb.request); what is
    # checked here needs the resolved model
    if max_move_bytes is not None and expert_bytes is None:
        raise InputError("needs the expert size: give {model}", hint="or use --max-moves", field="max_move_bytes",
                         mentions=("model",))
    if fabric is not None and expert_bytes is None:
        raise InputError("needs the expert size to time the moves: give {model}", field="fabric", mentions=("model",))
    report = progress if progress is not None else (lambda done, total: None)
    target = unconstrained_placement(weight, layout.num_replicas, layout.num_groups, layout.num_nodes, layout.num_gpus,
                            layout.policy, algorithm)
    keep_load, keep_bal = _score(weight, previous, layout.num_gpus)
    raw: list[tuple[float | None, float, float, int, MigrationResult | None]] = [(None, keep_load, keep_bal, 0, None)]
    for step, tol in enumerate(tolerances):
        result = rebalance_with_previous(weight, previous, layout.num_replicas, layout.num_groups, layout.num_nodes,
                                         layout.num_gpus, layout.policy, tol, algorithm, target=target)
        load, bal = _score(weight, result.placement, layout.num_gpus)
        raw.append((tol, load, bal, int(result.replicas_moved), result))
        report(step + 1, len(tolerances))
    points = []
    for tol_or_keep, load, bal, moved, candidate in raw:
        beaten = any((o_load <= load and o_moved <= moved) and (o_load < load or o_moved < moved)
                     for _, o_load, _, o_moved, _ in raw)
        size = None if expert_bytes is None else moved * expert_bytes
        fits = (max_moves is None or moved <= max_moves) and (max_move_bytes is None or (size or 0) <= max_move_bytes)
        gain = 1.0 - load / keep_load if keep_load > 0 else 0.0
        point = ParetoPoint(tol_or_keep, load, bal, moved, size, gain, not beaten, fits)
        if fabric is not None and expert_bytes is not None:
            # the fabric simulator (~60 modules) loads only when a fabric is given (--plan)
            from dsctl.eplb.move_time import time_moves

            new = previous if candidate is None else candidate.placement
            timed = time_moves(previous, new, layout.num_gpus, layout.num_nodes, expert_bytes, fabric)
            point = replace(point, moves=timed, payback_s=payback_s(timed.move_s, gain),
                            break_even_steps=break_even_steps(timed.move_s, gain, step_time_s))
        points.append(point)
    eligible = [i for i, p in enumerate(points) if p.within_budget]
    lowest = min(points[i].max_load for i in eligible)
    near = [i for i in eligible if points[i].max_load <= lowest * (1.0 + accept)]
    best = min(near, key=lambda i: (points[i].replicas_moved, points[i].max_load))
    gain = points[best].gain
    if best == 0:
        worth, reason = False, "no plan within the budget lowers the max load"
    elif gain < min_gain:
        worth, reason = False, (f"not worth it: the best plan within the budget saves {gain:.2%} of the max load per "
                                f"step, below --min-gain {min_gain:.2%}; keep the current placement")
    else:
        worth, reason = True, (f"worth it: {gain:.2%} less max load per step for {points[best].replicas_moved:,} "
                               f"replicas moved")
        best_moves = points[best].moves
        if best_moves is not None:
            reason += f", {best_moves.move_s:.3g} s of moves on the fabric"
            steps = points[best].break_even_steps
            reason += (f", paid back after {steps:,.0f} steps" if steps is not None else
                       f", paid back after {points[best].payback_s or 0:.3g} s of load-bound step time "
                       f"(give --step-time-s for steps)")
    chosen = best if worth else 0
    table = TradeOff(tuple(points), chosen, worth, reason, min_gain, max_moves, max_move_bytes,
                     int(np.asarray(previous.phy2log).size), None if fabric is None else fabric.plan_name,
                     step_time_s)
    chosen_result = raw[chosen][4]
    return table, (previous if chosen_result is None else chosen_result.placement), chosen_result
