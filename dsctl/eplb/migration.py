"""Migration-aware EPLB: reach (nearly) the unconstrained balance while moving as few replicas as possible.

A replica "moves" when a physical slot holds a different logical expert than in the previous placement (the new
expert's weights must be copied into that slot). Bytes moved = replicas moved x bytes per routed expert (the command
layer multiplies). Shapes as in ``dsctl.eplb.placement``: L layers, E experts, R slots, slot s on GPU s // (R / G).

Method, per layer:
1. Unconstrained plan U (balanced or reference algorithm) and its balancedness b_U. Threshold on the max GPU load:
   max_U / (1 - tolerance), i.e. achieved balancedness >= b_U * (1 - tolerance).
2. U is relabelled to best match the previous plan: nodes (hierarchical), then GPUs inside nodes, are paired by
   greedy maximum overlap of their expert multisets, and inside a GPU every expert already there keeps its slot.
   Its number of changed slots is the budget never to exceed (U relabelled is the fallback).
3. Repair: swaps between the most loaded GPU and another one, the swap adding the fewest changed slots among
   those that bring both GPUs under the threshold first (``threshold_repair``). Counts stay as they were.
4. Layers the repair cannot fix: walk from the previous plan towards U (relabelled) and towards the balanced local
   search started from the previous plan, one slot change at a time (the change giving the lowest max GPU load,
   then the lowest sum of squared loads), stop as soon as the threshold is met, then undo unneeded changes. A node
   whose expert set differs between the previous plan and the goal (the group -> node assignment changed) is
   taken from the goal whole before the walk starts.
The candidate meeting the threshold with the fewest changed slots wins, per layer.
Changing a slot only ever puts the goal's expert in that slot; every intermediate plan keeps every expert at >= 1
replica and (hierarchical) every node's expert set, so the result is always a valid plan of the same policy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dsctl.eplb.balanced import REL_EPS, Batch, join_batch, rebalance_balanced, refine_placement, split_batch
from dsctl.eplb.placement import Placement, balancedness, gpu_loads, placement_from_phy2log
from dsctl.eplb.reference import rebalance_reference
from dsctl.errors import InputError

#: placement algorithms of every eplb command: DeepSeek's EPLB (exact) and dsctl's refinement
ALGORITHMS = ("reference", "balanced")
#: at most this many undo steps after a walk (each undoes one unneeded change per layer)
PRUNE_STEPS = 48


@dataclass(frozen=True)
class MigrationResult:
    """Outcome of a migration-aware rebalance.

    - ``placement``: the new plan (replica ranks follow slot order).
    - ``replicas_moved``: slots whose expert changed versus the previous plan (all layers); per layer int64 [L].
    - ``unconstrained_replicas_moved``: the same count for the unconstrained plan after relabelling; per layer [L].
    - ``target_balancedness`` float64 [L]: balancedness (mean / max GPU load) of the unconstrained plan.
    - ``balancedness`` float64 [L]: achieved; ``previous_balancedness`` [L]: the previous plan on the new loads.
    - ``tolerance``: allowed relative shortfall versus the target (0.01 = 1 %).
    """

    placement: Placement
    replicas_moved: int
    replicas_moved_per_layer: np.ndarray
    unconstrained_replicas_moved: int
    unconstrained_moved_per_layer: np.ndarray
    target_balancedness: np.ndarray
    balancedness: np.ndarray
    previous_balancedness: np.ndarray
    tolerance: float


def check_previous(previous: Placement, num_layers: int, num_experts: int, num_replicas: int) -> None:
    """Raise InputError unless ``previous`` fits the layout: phy2log [L, R] with ids in [0, E), each expert present."""
    phy2log = np.asarray(previous.phy2log)
    if phy2log.shape != (num_layers, num_replicas):
        raise InputError(
            f"previous placement has phy2log shape {list(phy2log.shape)}; expected [{num_layers}, {num_replicas}] "
            "(layers x replicas of the new statistics)",
            hint="pass the placement computed for the same model and layout (--previous)",
        )
    if phy2log.size and (phy2log.min() < 0 or phy2log.max() >= num_experts):
        raise InputError(
            f"previous placement phy2log holds expert ids outside [0, {num_experts}) "
            f"(found {int(phy2log.min())}..{int(phy2log.max())})"
        )
    counts = np.zeros((num_layers, num_experts), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(num_layers), num_replicas), phy2log.ravel()), 1)
    missing = np.argwhere(counts == 0)
    if missing.size:
        layer, expert = (int(v) for v in missing[0])
        raise InputError(
            f"previous placement has no replica of expert {expert} in layer {layer} "
            f"({len(missing)} (layer, expert) pairs without a replica); every expert needs >= 1"
        )


def _greedy_match(overlap: np.ndarray) -> np.ndarray:
    """Pair rows (previous units) with columns (goal units) by repeatedly taking the largest overlap.

    Returns ``take`` int64 [n]: goal unit placed at previous unit i. Ties: first in row-major order.
    """
    size = overlap.shape[0]
    work = overlap.astype(np.float64).copy()
    take = np.zeros(size, dtype=np.int64)
    for _ in range(size):
        flat = int(np.argmax(work))
        row, col = divmod(flat, size)
        take[row] = col
        work[row, :] = -np.inf
        work[:, col] = -np.inf
    return take


def _histograms(units: np.ndarray, num_experts: int) -> np.ndarray:
    """Expert multiset of each unit: ``units`` [n, m] expert ids -> counts int64 [n, E]."""
    count = units.shape[0]
    cells = (np.arange(count)[:, None] * num_experts + units).ravel()
    return np.bincount(cells, minlength=count * num_experts).reshape(count, num_experts)


def _overlap(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Multiset overlap sum_e min(left[i, e], right[j, e]) -> [n, n]."""
    return np.minimum(left[:, None, :], right[None, :, :]).sum(axis=2)


def relabel_to_match(
    goal: np.ndarray, previous: np.ndarray, num_experts: int, num_gpus: int, num_nodes_eff: int
) -> np.ndarray:
    """``goal`` phy2log [L, R] with nodes, GPUs and slots permuted to keep as many previous slots as possible.

    Loads per GPU are unchanged (whole GPUs move; the slot order inside a GPU does not matter); for the
    hierarchical policy whole nodes move, so every group stays on one node.
    """
    num_layers, num_slots = goal.shape
    k = num_slots // num_gpus
    gpus_per_node = num_gpus // num_nodes_eff
    out = np.empty_like(goal)
    for layer in range(num_layers):
        goal_gpus = goal[layer].reshape(num_gpus, k)
        prev_gpus = previous[layer].reshape(num_gpus, k)
        goal_hist = _histograms(goal_gpus, num_experts)
        prev_hist = _histograms(prev_gpus, num_experts)
        node_goal = goal_hist.reshape(num_nodes_eff, gpus_per_node, num_experts).sum(axis=1)
        node_prev = prev_hist.reshape(num_nodes_eff, gpus_per_node, num_experts).sum(axis=1)
        node_take = _greedy_match(_overlap(node_prev, node_goal))
        gpu_take = np.empty(num_gpus, dtype=np.int64)
        for node in range(num_nodes_eff):
            prev_block = np.arange(node * gpus_per_node, (node + 1) * gpus_per_node)
            goal_block = np.arange(node_take[node] * gpus_per_node, (node_take[node] + 1) * gpus_per_node)
            take = _greedy_match(_overlap(prev_hist[prev_block], goal_hist[goal_block]))
            gpu_take[prev_block] = goal_block[take]
        for gpu in range(num_gpus):
            out[layer, gpu * k : (gpu + 1) * k] = _align_slots(goal_gpus[gpu_take[gpu]], prev_gpus[gpu])
    return out


def _align_slots(items: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """Order the expert ids ``items`` [k] so that experts also in ``previous`` [k] keep those slots."""
    remaining = list(int(v) for v in items)
    placed: list[int | None] = [None] * len(previous)
    for pos, expert in enumerate(int(v) for v in previous):
        if expert in remaining:
            remaining.remove(expert)
            placed[pos] = expert
    fill = iter(remaining)
    return np.array([v if v is not None else next(fill) for v in placed], dtype=np.int64)


def _hybrid_start(previous: np.ndarray, goal: np.ndarray, num_experts: int, num_nodes_eff: int) -> np.ndarray:
    """``previous`` [L, R] with every node whose expert set differs from ``goal``'s replaced by ``goal``'s slots.

    Walking from there to ``goal`` keeps every node's expert set fixed, so each intermediate plan keeps whole
    groups on nodes (the hierarchical policy); for the global policy (one node) sets always match.
    """
    num_layers, num_slots = previous.shape
    units = num_layers * num_nodes_eff
    prev_nodes = previous.reshape(units, -1)
    goal_nodes = goal.reshape(units, -1)
    same = ((_histograms(prev_nodes, num_experts) > 0) == (_histograms(goal_nodes, num_experts) > 0)).all(axis=1)
    out = np.where(same[:, None], prev_nodes, goal_nodes)
    return out.reshape(num_layers, num_slots)


def _layer_state(weight: np.ndarray, phy2log: np.ndarray, num_gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """Counts int64 [A, E] and per-GPU loads float64 [A, G] of plans ``phy2log`` [A, R]."""
    num_experts = weight.shape[1]
    counts = _histograms(phy2log, num_experts)
    loads = gpu_loads(weight, phy2log, np.maximum(counts, 1), num_gpus)
    return counts, loads


def _walk(
    weight: np.ndarray,
    start: np.ndarray,
    goal: np.ndarray,
    threshold: np.ndarray,
    num_gpus: int,
    until_met: bool,
    max_steps: int | None = None,
) -> np.ndarray:
    """Change slots of ``start`` [L, R] to ``goal``'s expert one at a time (best change first).

    ``until_met`` True: stop a layer once its max GPU load <= ``threshold[l]``. Candidates are the slots that touch
    the most loaded GPU; a layer where none helps jumps to ``goal``. False (pruning): only changes that keep the
    max <= threshold are allowed; stop when none is left or after ``max_steps`` steps.
    """
    weight = np.asarray(weight, dtype=np.float64)
    num_slots = start.shape[1]
    num_experts = weight.shape[1]
    k = num_slots // num_gpus
    gpu_of = np.arange(num_slots) // k
    cur = start.copy()
    for _ in range(num_slots + 1 if max_steps is None else max_steps):
        counts, loads = _layer_state(weight, cur, num_gpus)
        differ = cur != goal
        peak = loads.max(axis=1)
        need = differ.any(axis=1) & ((peak > threshold) if until_met else True)
        act = np.flatnonzero(need)
        if act.size == 0:
            break
        count = act.size
        idx = np.arange(count)[:, None]
        w = weight[act]
        cnt = counts[act]
        a = cur[act]
        b = goal[act]
        diff_act = differ[act]
        if until_met:
            # only changes that touch the most loaded GPU can lower it: a slot on it, or one turning into an
            # expert it holds; keep the first ``width`` such slots (slot order) to bound the work
            top = loads[act].argmax(axis=1)
            on_top = gpu_of[None, :] == top[:, None]
            top_experts = a[np.arange(count)[:, None], top[:, None] * k + np.arange(k)[None, :]]  # [A, k]
            feeds_top = (b[:, :, None] == top_experts[:, None, :]).any(axis=2)
            wanted = diff_act & (on_top | feeds_top)
            width = min(num_slots, 4 * k + 8)
            cols = np.argsort(~wanted, axis=1, kind="stable")[:, :width]
        else:
            cols = np.broadcast_to(np.arange(num_slots), (count, num_slots))
        a = np.take_along_axis(a, cols, axis=1)
        b = np.take_along_axis(b, cols, axis=1)
        diff_sel = np.take_along_axis(diff_act, cols, axis=1)
        slot_gpu = gpu_of[cols]
        c_a = np.take_along_axis(cnt, a, axis=1)
        c_b = np.take_along_axis(cnt, b, axis=1)
        valid = diff_sel & (c_a >= 2)
        w_a = np.take_along_axis(w, a, axis=1)
        w_b = np.take_along_axis(w, b, axis=1)
        va_new = w_a / np.maximum(c_a - 1, 1)
        vb_new = w_b / (c_b + 1)
        cells = ((np.arange(count)[:, None] * num_gpus + gpu_of[None, :]) * num_experts + cur[act]).ravel()
        per_gpu = np.bincount(cells, minlength=count * num_gpus * num_experts).reshape(count, num_gpus, num_experts)
        gpu_axis = np.arange(num_gpus)[None, :, None]
        held_a = per_gpu[idx[:, :, None], gpu_axis, a[:, None, :]]  # [A, G, R]
        held_b = per_gpu[idx[:, :, None], gpu_axis, b[:, None, :]]
        new = (
            loads[act][:, :, None]
            + held_a * (va_new - w_a / np.maximum(c_a, 1))[:, None, :]
            + held_b * (vb_new - w_b / np.maximum(c_b, 1))[:, None, :]
        )
        np.put_along_axis(
            new,
            slot_gpu[:, None, :],
            np.take_along_axis(new, slot_gpu[:, None, :], axis=1) + (vb_new - va_new)[:, None, :],
            axis=1,
        )
        new_max = new.max(axis=1)
        if not until_met:
            valid &= new_max <= threshold[act][:, None]
        new_max = np.where(valid, new_max, np.inf)
        best_max = new_max.min(axis=1)
        tied = new_max <= best_max[:, None] * (1.0 + 1e-12)
        spread = np.where(tied & valid, (new * new).sum(axis=1), np.inf)
        pick = spread.argmin(axis=1)
        found = np.isfinite(best_max)
        rows = act[found]
        chosen = cols[found, pick[found]]
        cur[rows, chosen] = goal[rows, chosen]
        stuck = act[~found]
        if until_met and stuck.size:
            cur[stuck] = goal[stuck]
        if not until_met and not found.any():
            break
    return cur


def unconstrained_placement(
    weight: np.ndarray, num_replicas: int, num_groups: int, num_nodes: int, num_gpus: int, policy: str, algorithm: str
) -> Placement:
    """The placement ``algorithm`` plans for ``weight`` [layers, experts] with no previous placement to keep."""
    if algorithm == "balanced":
        return rebalance_balanced(weight, num_replicas, num_groups, num_nodes, num_gpus, policy)
    if algorithm == "reference":
        return rebalance_reference(weight, num_replicas, num_groups, num_nodes, num_gpus, policy)
    raise InputError(f"{algorithm!r} is not one of {', '.join(ALGORITHMS)}", field="algorithm")


def _whole_groups(phy2log: np.ndarray, num_experts: int, num_groups: int, num_nodes_eff: int) -> np.ndarray:
    """bool [L]: each node's distinct experts are exactly E / N whole groups (the hierarchical structure)."""
    num_layers = phy2log.shape[0]
    units = num_layers * num_nodes_eff
    present = _histograms(phy2log.reshape(units, -1), num_experts) > 0  # [units, E]
    per_group: np.ndarray = present.reshape(units, num_groups, num_experts // num_groups)
    whole = np.all(per_group, axis=2) | ~np.any(per_group, axis=2)
    ok = np.all(whole, axis=1) & (present.sum(axis=1) == num_experts // num_nodes_eff)
    result: np.ndarray = np.all(ok.reshape(num_layers, num_nodes_eff), axis=1)
    return result


def _consider(
    weight: np.ndarray,
    previous: np.ndarray,
    candidate: np.ndarray,
    threshold: np.ndarray,
    num_gpus: int,
    best: np.ndarray,
    best_moved: np.ndarray,
) -> np.ndarray:
    """Per layer, adopt ``candidate`` into ``best`` (in place) if it meets the threshold with fewer moved slots.

    Returns bool [L]: the candidate meets the threshold (whether adopted or not).
    """
    _, loads = _layer_state(weight, candidate, num_gpus)
    moved = (candidate != previous).sum(axis=1)
    meets: np.ndarray = loads.max(axis=1) <= threshold
    better = meets & (moved < best_moved)
    best[better] = candidate[better]
    best_moved[better] = moved[better]
    return meets


def rebalance_with_previous(
    weight: np.ndarray,
    previous: Placement,
    num_replicas: int,
    num_groups: int,
    num_nodes: int,
    num_gpus: int,
    policy: str,
    tolerance: float = 0.01,
    algorithm: str = "balanced",
    target: Placement | None = None,
) -> MigrationResult:
    """Plan for ``weight`` [L, E] (validated) that moves few replicas away from ``previous``.

    ``policy`` "hierarchical" | "global" (resolved); ``tolerance`` in [0, 1): relative balancedness shortfall allowed
    versus the unconstrained plan; ``algorithm`` "balanced" | "reference" for the unconstrained plan; ``target``
    that unconstrained plan when already computed (the Pareto search reuses it across tolerances).
    """
    if not 0.0 <= tolerance < 1.0 or not np.isfinite(tolerance):
        raise InputError(f"{tolerance} must be in [0, 1) (a relative shortfall, 0.01 = 1 %)", field="tolerance")
    weight = np.asarray(weight, dtype=np.float64)
    num_layers, num_experts = weight.shape
    check_previous(previous, num_layers, num_experts, num_replicas)
    prev = np.asarray(previous.phy2log, dtype=np.int64)
    nodes_eff = num_nodes if policy == "hierarchical" else 1

    if target is None:
        target = unconstrained_placement(weight, num_replicas, num_groups, num_nodes, num_gpus, policy, algorithm)
    target_loads = gpu_loads(weight, target.phy2log, target.logcnt, num_gpus)
    target_bal = balancedness(target_loads)
    threshold = target_loads.max(axis=1) / (1.0 - tolerance)

    relabelled = relabel_to_match(target.phy2log, prev, num_experts, num_gpus, nodes_eff)
    budget = (relabelled != prev).sum(axis=1)
    best = relabelled.copy()
    best_moved = budget.copy()

    structured = _whole_groups(prev, num_experts, num_groups, nodes_eff) if policy == "hierarchical" else None
    can_search = structured is None or bool(structured.all())
    met = np.zeros(num_layers, dtype=bool)
    if can_search:
        # swap-only repair of the previous plan against the threshold, few changed slots first
        batch, ids = split_batch(weight, placement_from_phy2log(prev, num_experts), num_gpus, nodes_eff)
        threshold_repair(batch, batch.slot.copy(), np.repeat(threshold, nodes_eff), max_iter=num_replicas)
        met = _consider(weight, prev, join_batch(batch, ids, num_layers).phy2log, threshold, num_gpus, best, best_moved)
    # layers the repair could not fix (counts must change, or groups must change node): walk towards full plans
    todo = np.flatnonzero(~met)
    if todo.size:
        sub_w, sub_prev, sub_thr = weight[todo], prev[todo], threshold[todo]
        sub_best, sub_moved = best[todo], best_moved[todo]
        goals = [relabelled[todo]]
        if can_search:
            start = placement_from_phy2log(sub_prev, num_experts)
            goals.append(refine_placement(sub_w, start, num_gpus, nodes_eff).phy2log)
        for goal in goals:
            base = _hybrid_start(sub_prev, goal, num_experts, nodes_eff)
            walked = _walk(sub_w, base, goal, sub_thr, num_gpus, until_met=True)
            walked = _walk(sub_w, walked, base, sub_thr, num_gpus, until_met=False, max_steps=PRUNE_STEPS)
            if policy == "hierarchical":
                keep = _whole_groups(walked, num_experts, num_groups, nodes_eff)
                walked = np.where(keep[:, None], walked, sub_best)
            _consider(sub_w, sub_prev, walked, sub_thr, num_gpus, sub_best, sub_moved)
        best[todo], best_moved[todo] = sub_best, sub_moved

    placement = placement_from_phy2log(best, num_experts)
    achieved = balancedness(gpu_loads(weight, placement.phy2log, placement.logcnt, num_gpus))
    prev_counts = np.maximum(_histograms(prev, num_experts), 1)
    previous_bal = balancedness(gpu_loads(weight, prev, prev_counts, num_gpus))
    return MigrationResult(
        placement=placement,
        replicas_moved=int(best_moved.sum()),
        replicas_moved_per_layer=best_moved.astype(np.int64),
        unconstrained_replicas_moved=int(budget.sum()),
        unconstrained_moved_per_layer=budget.astype(np.int64),
        target_balancedness=target_bal,
        balancedness=achieved,
        previous_balancedness=previous_bal,
        tolerance=float(tolerance),
    )


def threshold_repair(batch: Batch, original: np.ndarray, limit: np.ndarray, max_iter: int) -> None:
    """Swap replicas between GPUs until every GPU load is <= ``limit[b]``, preferring swaps that move few replicas.

    ``batch`` holds the sub-problems (modified in place; counts are not changed), ``original`` int64 [B, S] their
    previous slot contents (local ids) and ``limit`` float64 [B]. Each step, per sub-problem whose top GPU is over
    its limit: among swaps of a top-GPU slot with a slot elsewhere that bring both GPUs to <= limit, take the one
    that adds the fewest changed slots (versus ``original``), then the lowest pair maximum; if none fixes the top
    GPU, take the swap with the lowest pair maximum that still lowers it; stop a sub-problem when neither exists.
    """
    k, num_gpus, num_slots = batch.slots_per_gpu, batch.num_gpus, batch.num_slots
    if num_gpus == 1:
        return
    gpu_of = batch.gpu_of_slot
    active = np.arange(batch.slot.shape[0])
    for _ in range(max_iter):
        if active.size == 0:
            return
        values = batch.slot_values(active)
        count = active.size
        idx = np.arange(count)
        loads = values.reshape(count, num_gpus, k).sum(axis=2)
        top = loads.argmax(axis=1)
        top_load = loads[idx, top]
        over = top_load > limit[active]
        if not over.any():
            return
        active, values, loads, top, top_load = active[over], values[over], loads[over], top[over], top_load[over]
        count = active.size
        idx = np.arange(count)
        slot = batch.slot[active]
        orig = original[active]
        top_slots = top[:, None] * k + np.arange(k)[None, :]
        top_values = np.take_along_axis(values, top_slots, axis=1)
        diff = top_values[:, :, None] - values[:, None, :]  # [A, k, S]
        pair = np.maximum(top_load[:, None, None] - diff, loads[:, gpu_of][:, None, :] + diff)
        elsewhere = (gpu_of[None, :] != top[:, None])[:, None, :]
        fixes = elsewhere & (pair <= limit[active][:, None, None])
        lowers = elsewhere & (pair < top_load[:, None, None] * (1.0 - REL_EPS))
        a = np.take_along_axis(slot, top_slots, axis=1)[:, :, None]  # [A, k, 1]
        b = slot[:, None, :]  # [A, 1, S]
        orig_i = np.take_along_axis(orig, top_slots, axis=1)[:, :, None]
        orig_j = orig[:, None, :]
        added = (b != orig_i).astype(np.int64) + (a != orig_j) - (a != orig_i) - (b != orig_j)
        scale = np.maximum(top_load, 1e-300)[:, None, None]
        fix_score = np.where(fixes, added * 4.0 + pair / scale, np.inf).reshape(count, -1)
        low_score = np.where(lowers, pair, np.inf).reshape(count, -1)
        has_fix = np.asarray(np.isfinite(fix_score).any(axis=1), dtype=bool)
        score = np.where(has_fix[:, None], fix_score, low_score)
        best = score.argmin(axis=1)
        ok = np.isfinite(score[idx, best])
        if not ok.any():
            return
        rows_ok = active[ok]
        slot_i = top_slots[idx, best // num_slots][ok]
        slot_j = (best % num_slots)[ok]
        held = batch.slot[rows_ok, slot_i]
        batch.slot[rows_ok, slot_i] = batch.slot[rows_ok, slot_j]
        batch.slot[rows_ok, slot_j] = held
        active = rows_ok
