"""Balanced EPLB mode: DeepSeek's reference plan refined by local search, never worse on any layer.

Method (see docs/eplb-balanced.md):
1. Run the reference (``dsctl.eplb.reference``). Its group -> node assignment is kept (an exhaustive search over
   partitions never beat it in the measurements of the spec), so every (layer, node) pair is an independent
   sub-problem for the hierarchical policy; the global policy has one sub-problem per layer.
2. Swap refinement: pairwise swaps between the most loaded GPU and any other GPU (``swap_refine``).
3. Recount: move 1-3 replicas from a donor expert to a hot expert (on the most loaded GPU, or with the heaviest
   replicas), re-pack by swaps, keep the move if the largest GPU load dropped (``recount_search``). Only the
   bottleneck node(s) of each layer are searched, since only they decide the layer's max GPU load.
4. Co-location: duplicate-avoiding swaps, then swap away a second replica of an expert on one GPU whenever a
   partner keeps both GPUs at or below the layer's max (``spread_duplicates``), then swap-and-repair attempts
   that are kept only if the max does not rise and co-location drops (``repair_duplicates``).
5. Per layer, keep the reference plan if the refined one has a larger max GPU load (float64 comparison).

Every search runs under fixed iteration budgets, so the output is deterministic and independent of machine speed.
Loads are float64 in the unit of ``weight`` (tokens). Shapes as in ``dsctl.eplb.placement``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dsctl.eplb.balanced.search import Batch, recount_search, repair_duplicates, spread_duplicates, swap_refine
from dsctl.eplb.exact import solve
from dsctl.eplb.placement import Placement, gpu_loads, placement_from_phy2log
from dsctl.eplb.reference import rebalance_reference

#: relative slack when deciding which nodes are a layer's bottleneck
_BOTTLENECK_REL = 1e-9
#: rounds of the swap-and-repair pass against co-located replicas
_REPAIR_ROUNDS = 24
#: small layouts (at most this many slots and experts per node) are finished by the exact search (dsctl.eplb.exact)
#: under a node budget per layer; it starts from the refined plan, so it only ever lowers a layer's max load
EXACT_FINISH_SLOTS = 32
EXACT_FINISH_EXPERTS = 16
EXACT_FINISH_BUDGET = 10_000


def split_batch(
    weight: np.ndarray, plan: Placement, num_gpus: int, num_nodes_eff: int
) -> tuple[Batch, np.ndarray]:
    """Cut ``plan`` into (layer, node) sub-problems: the Batch and ``ids`` int64 [B, X] (local -> logical expert).

    Sub-problem b = layer * num_nodes_eff + node holds slots [node * S, (node + 1) * S) of that layer. Every node
    must host a fixed set of X = E / num_nodes_eff experts (true for reference plans and for balanced plans).
    """
    num_layers, num_slots = plan.phy2log.shape
    num_experts = plan.logcnt.shape[1]
    slots_per_node = num_slots // num_nodes_eff
    rows = num_layers * num_nodes_eff
    slots = plan.phy2log.reshape(rows, slots_per_node)
    ordered = np.sort(slots, axis=1)
    first = np.ones_like(ordered, dtype=bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    experts_per_node = num_experts // num_nodes_eff
    ids = ordered[first].reshape(rows, experts_per_node)
    lookup = np.zeros((rows, num_experts), dtype=np.int64)
    np.put_along_axis(lookup, ids, np.broadcast_to(np.arange(experts_per_node), ids.shape), axis=1)
    layer = np.repeat(np.arange(num_layers), num_nodes_eff)
    w = np.asarray(weight, dtype=np.float64)[layer[:, None], ids]
    cnt = plan.logcnt[layer[:, None], ids].astype(np.int64)
    local = np.take_along_axis(lookup, slots, axis=1)
    batch = Batch(
        w=w, cnt=cnt, slot=local, num_gpus=num_gpus // num_nodes_eff, slots_per_gpu=num_slots // num_gpus
    )
    return batch, ids


def join_batch(batch: Batch, ids: np.ndarray, num_layers: int) -> Placement:
    """Inverse of ``split_batch``: a Placement (replica ranks follow slot order)."""
    phy2log = np.take_along_axis(ids, batch.slot, axis=1).reshape(num_layers, -1)
    return placement_from_phy2log(phy2log, int(ids.shape[1] * ids.shape[0] // num_layers))


def _bottleneck_rows(batch: Batch, num_layers: int) -> np.ndarray:
    """Sub-problems whose largest GPU load equals their layer's largest (within a relative 1e-9)."""
    node_max = batch.loads(np.arange(batch.w.shape[0])).max(axis=1).reshape(num_layers, -1)
    layer_max = node_max.max(axis=1, keepdims=True)
    return np.flatnonzero((node_max >= layer_max * (1.0 - _BOTTLENECK_REL)).ravel())


def _recount_rounds(batch: Batch) -> int:
    """Rounds per recount pass: 30,000 / (S * k) clamped to [10, 60] on nodes of <= 16 GPUs, 12 on larger ones.

    Keeps every V3-scale layout under about half a second of search on one core (docs/eplb-balanced.md).
    """
    if batch.num_gpus > 16:
        return 12
    work = batch.slot.shape[1] * batch.slots_per_gpu
    return int(min(60, max(10, 30_000 // max(1, work))))


def _max_amount(batch: Batch) -> int:
    """Replicas one recount move may shift: up to 3 on small nodes (one replica is a big step there), else 1."""
    return 3 if batch.num_gpus <= 16 else 1


def refine_placement(
    weight: np.ndarray, start: Placement, num_gpus: int, num_nodes_eff: int, passes: int = 2,
    progress: Callable[[int, int], None] | None = None,
) -> Placement:
    """Refine ``start`` (same layout) by swaps, recounts and duplicate spreading; no layer gets a larger max load.

    ``num_nodes_eff`` is the number of nodes for the hierarchical policy (groups stay on their node) and 1 for
    the global policy. ``progress(steps_done, num_steps)`` follows the refinement steps.
    """
    report = progress if progress is not None else (lambda done, total: None)
    num_layers = start.phy2log.shape[0]
    batch, ids = split_batch(weight, start, num_gpus, num_nodes_eff)
    every = np.arange(batch.w.shape[0])
    num_slots = batch.slot.shape[1]
    k = batch.slots_per_gpu
    recounts = passes if num_nodes_eff > 1 else 1
    steps = 4 + (recounts + 1 if k > 1 and batch.num_gpus > 1 else 0)
    report(1, steps)
    swap_refine(batch, every, max_iter=4 * num_slots, avoid_duplicates=False)
    report(2, steps)
    if k > 1 and batch.num_gpus > 1:
        rounds = _recount_rounds(batch)
        for done in range(recounts):
            rows = _bottleneck_rows(batch, num_layers)
            recount_search(
                batch, rows, rounds=rounds, refine_iter=max(8, batch.num_gpus // 2), max_amount=_max_amount(batch)
            )
            report(3 + done, steps)
        swap_refine(batch, every, max_iter=4 * num_slots, avoid_duplicates=True)
        report(3 + recounts, steps)
    layer_max = batch.loads(every).max(axis=1).reshape(num_layers, -1).max(axis=1)
    limit = np.repeat(layer_max, num_nodes_eff)
    spread_duplicates(batch, every, limit, max_iter=2 * num_slots)
    report(steps - 1, steps)
    repair_duplicates(batch, every, limit, rounds=_REPAIR_ROUNDS, refine_iter=max(8, batch.num_gpus // 2))
    report(steps, steps)
    refined = join_batch(batch, ids, num_layers)
    return keep_better_layers(weight, refined, start, num_gpus)


def keep_better_layers(weight: np.ndarray, candidate: Placement, fallback: Placement, num_gpus: int) -> Placement:
    """Per layer, ``candidate`` unless its max GPU load exceeds ``fallback``'s (then ``fallback``'s row)."""
    cand_max = gpu_loads(weight, candidate.phy2log, candidate.logcnt, num_gpus).max(axis=1)
    base_max = gpu_loads(weight, fallback.phy2log, fallback.logcnt, num_gpus).max(axis=1)
    worse = cand_max > base_max
    if not worse.any():
        return candidate
    phy2log = np.where(worse[:, None], fallback.phy2log, candidate.phy2log)
    return placement_from_phy2log(phy2log, candidate.logcnt.shape[1])


def rebalance_balanced(
    weight: np.ndarray, num_replicas: int, num_groups: int, num_nodes: int, num_gpus: int, policy: str,
    progress: Callable[[int, int], None] | None = None,
) -> Placement:
    """Balanced placement for ``weight`` [L, E] (validated): per layer max GPU load <= the reference's.

    ``policy`` is "hierarchical" (each group, with all its replicas, on one node) or "global".
    Returns a Placement whose replica ranks follow slot order.
    """
    reference = rebalance_reference(weight, num_replicas, num_groups, num_nodes, num_gpus, policy)
    nodes_eff = num_nodes if policy == "hierarchical" else 1
    w = np.asarray(weight, dtype=np.float64)
    refined = refine_placement(w, reference, num_gpus, nodes_eff, progress=progress)
    if num_replicas // nodes_eff > EXACT_FINISH_SLOTS or w.shape[1] // nodes_eff > EXACT_FINISH_EXPERTS:
        return refined
    groups_eff = num_groups if policy == "hierarchical" else 1
    current = gpu_loads(w, refined.phy2log, refined.logcnt, num_gpus).max(axis=1)
    exact = solve(w, num_replicas, num_gpus, groups_eff, nodes_eff, start=current, node_budget=EXACT_FINISH_BUDGET)
    if not exact.improved.any():
        return refined
    phy2log = np.where(exact.improved[:, None], exact.phy2log, refined.phy2log)
    return placement_from_phy2log(phy2log, w.shape[1])
