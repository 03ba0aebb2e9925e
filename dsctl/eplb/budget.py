"""Redundancy where it pays: a total slot budget over all MoE layers (memory) spent per layer, against the
uniform count (docs/eplb.md "Per-layer replica budget"; CRAFT, arXiv 2603.28768, reports 1.14x throughput from
per-layer counts).

Every layer needs R_l slots, a multiple of the GPU count P (equal slots per GPU), at least E (every expert once).
An MoE step waits for each layer's most loaded GPU, so the objective is sum over layers of the max GPU load.
Method: per layer and candidate R (E rounded up to a multiple of P, then + P, + 2P, ... up to ``EXTRA_LEVELS``
slots per GPU above the uniform count, at most ``max_per_gpu``), the planned max GPU load (the chosen algorithm
run at that R; the lower bound is not used as the predictor: at R = E it is far below what any plan reaches);
greedy marginal allocation gives the next P slots to the layer whose max load drops most, until the budget is
spent. Both the per-layer and the uniform allocation
are then planned (balanced or reference algorithm) and measured on the same statistics.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dsctl.eplb.balanced import rebalance_balanced
from dsctl.eplb.checks import check_layout, check_planning_work, check_weight, planning_work
from dsctl.eplb.placement import gpu_loads
from dsctl.eplb.reference import rebalance_reference
from dsctl.errors import InputError

#: most slots per GPU a layer may get (V3 deployments use 9-10)
DEFAULT_MAX_PER_GPU = 16
#: candidate counts go up to this many slots per GPU above the uniform count
EXTRA_LEVELS = 3


@dataclass(frozen=True)
class BudgetResult:
    """Per-layer slots ``slots_per_layer`` int64 [L] (sum = ``total_slots``) against ``uniform_slots`` per layer;
    ``max_load_*`` float64 [L] the planned max GPU load per layer of each allocation; ``gain`` = 1 - sum(per
    layer) / sum(uniform) (the predicted drop of the MoE step time)."""

    total_slots: int
    uniform_slots: int
    slots_per_layer: np.ndarray
    max_load_per_layer: np.ndarray
    max_load_uniform: np.ndarray
    balancedness_per_layer: float
    balancedness_uniform: float
    gain: float
    num_gpus: int
    num_nodes: int
    policy: str
    algorithm: str


def _plan_max(weight: np.ndarray, slots: np.ndarray, num_groups: int, num_nodes: int, num_gpus: int,
              policy: str, algorithm: str) -> tuple[np.ndarray, np.ndarray]:
    """(max GPU load [L], balancedness [L]) planning each layer with its own slot count."""
    top = np.zeros(weight.shape[0])
    bal = np.zeros(weight.shape[0])
    for r in np.unique(slots):
        rows = np.flatnonzero(slots == r)
        w = weight[rows]
        run = rebalance_balanced if algorithm == "balanced" else rebalance_reference
        p = run(w, int(r), num_groups, num_nodes, num_gpus, policy)
        loads = gpu_loads(w, p.phy2log, p.logcnt, num_gpus)
        top[rows] = loads.max(axis=1)
        mx = loads.max(axis=1)
        bal[rows] = np.divide(loads.mean(axis=1), mx, out=np.ones_like(mx), where=mx > 0)
    return top, bal


def allocate_slots(weight: np.ndarray, *, total_slots: int, num_gpus: int, num_nodes: int, num_groups: int,
                   policy: str = "auto", algorithm: str = "balanced",
                   max_per_gpu: int = DEFAULT_MAX_PER_GPU) -> BudgetResult:
    """Spend ``total_slots`` over the layers of ``weight`` [L, E] (see module doc); InputError on bad input."""
    checked, _ = check_weight(weight, "statistics")
    layers, experts = checked.shape
    if total_slots % layers or (total_slots // layers) % num_gpus:
        raise InputError(f"{total_slots} must be {layers} layers x a multiple of {{gpus}} {num_gpus} "
                         "(so that the uniform allocation it is compared with exists)", field="total_slots",
                         mentions=("gpus",))
    uniform = total_slots // layers
    layout = check_layout(layers, experts, uniform, num_groups, num_nodes, num_gpus, policy)
    lowest = -(-experts // num_gpus) * num_gpus
    levels = list(range(lowest, max(uniform, num_gpus * min(max_per_gpu, uniform // num_gpus + EXTRA_LEVELS)) + 1,
                        num_gpus))
    work = sum(planning_work(layers, r, algorithm) for r in levels)
    check_planning_work(work + 2 * planning_work(layers, uniform, algorithm),  # + the per-layer and uniform plans
                        f"eplb budget over {len(levels):,} slot counts with --algorithm {algorithm}")
    predicted = np.stack([_plan_max(checked, np.full(layers, r), num_groups, num_nodes, num_gpus, layout.policy,
                                    algorithm)[0] for r in levels], axis=1)  # [L, levels]
    level = np.zeros(layers, dtype=np.int64)
    left = (total_slots - layers * lowest) // num_gpus
    for _ in range(left):
        room = level + 1 < len(levels)
        drop = np.where(room, predicted[np.arange(layers), level] -
                        predicted[np.arange(layers), np.minimum(level + 1, len(levels) - 1)], -np.inf)
        if not np.isfinite(drop).any():
            break
        level[int(np.argmax(drop))] += 1
    slots = np.array(levels, dtype=np.int64)[level]
    spare = total_slots - int(slots.sum())
    if spare:  # every layer hit max_per_gpu: hand the rest to the first layers so the budgets are equal
        raise InputError(f"{total_slots} exceeds {max_per_gpu} slots per GPU on every layer", field="total_slots")
    per_max, per_bal = _plan_max(checked, slots, num_groups, num_nodes, num_gpus, layout.policy, algorithm)
    uni_max, uni_bal = _plan_max(checked, np.full(layers, uniform), num_groups, num_nodes, num_gpus,
                                 layout.policy, algorithm)
    gain = 1.0 - per_max.sum() / uni_max.sum() if uni_max.sum() > 0 else 0.0
    return BudgetResult(total_slots, uniform, slots, per_max, uni_max, float(per_bal.mean()), float(uni_bal.mean()),
                        float(gain), num_gpus, num_nodes, layout.policy, algorithm)
