"""Lower bounds on the largest GPU load any EPLB placement can reach: the one home of every bound (docs/eplb.md).

Model: E experts with loads w_e share S slots on P GPUs of exactly k = S / P slots each; expert e gets r_e >= 1
replicas (sum r_e = S), each carrying w_e / r_e (tokens split equally between replicas). T = the largest GPU load.

- ``min_max_replica_load``: m*, the smallest achievable largest per-replica load (the apportionment greedy, giving
  each extra slot to the largest w / r, attains it). T >= m*.
- ``slot_bound``: replica granularity. A GPU holds exactly k replicas, so at most j - 1 of them can carry more than
  T / j (j = 2..k). For a candidate T, each expert needs r_e >= ceil(w_e / T) replicas; it contributes r_e replicas
  above T / j unless it is split further, to ceil(w_e j / T) replicas. Choosing which experts to split within the
  S slots is a knapsack; its fractional relaxation gives the fewest replicas above T / j any count vector can reach.
  T is infeasible if that number exceeds (j - 1) P; the bound is the largest infeasible T found by bisection.
- ``global_lower_bound``: max(total / P, m*, slot bound), valid for any placement.
- ``hierarchical_lower_bound``: groups (with all their replicas) confined to one node, G / N groups per node,
  S = R / N slots and P = GPUs / N per node: min over group -> node partitions of the max over nodes of the node's
  own global bound. Above ``MAX_PARTITIONS`` partitions, a weaker closed form (each group's node carries that group
  plus the lightest other groups; each group alone obeys its own bound), still valid.
All loads are float64 in the unit of the input (tokens); results are per row or per layer, float64.
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np

#: above this many group -> node partitions the hierarchical bound uses its weaker closed form (8 groups on 4 nodes:
#: 105; 16 groups on 4 nodes: 2.6 million)
MAX_PARTITIONS = 20_000
#: bisection steps of the slot bound (the bracket shrinks 2**36-fold; the result stays on the valid side)
_BISECT_STEPS = 36
#: relative slack in the feasibility test, so rounding can only make the slot bound weaker, never invalid
_SLACK = 1e-12


def min_max_replica_load(weight: np.ndarray, num_slots: int) -> np.ndarray:
    """m* per row, float64 [rows], for ``weight`` [rows, X] sharing ``num_slots`` >= X slots (float64 greedy)."""
    weight = np.asarray(weight, dtype=np.float64)
    rows, num_items = weight.shape
    counts = np.ones((rows, num_items), dtype=np.float64)
    index = np.arange(rows)
    for _ in range(num_slots - num_items):
        pick = np.argmax(weight / counts, axis=1)
        counts[index, pick] += 1.0
    result: np.ndarray = (weight / counts).max(axis=1)
    return result


def _passes(weight: np.ndarray, total_t: np.ndarray, j: int, num_slots: int, limit: int) -> np.ndarray:
    """Per row: can some count vector with every replica <= T keep at most ``limit`` replicas above T / j?

    ``weight`` [rows, X]; ``total_t`` [rows] the candidate T. The minimal counts r0 = ceil(w / T) are tried first
    (cheap); rows they do not settle solve the fractional knapsack (module doc).
    """
    t = total_t[:, None] * (1.0 + _SLACK)
    tau = t / j
    r0 = np.maximum(1.0, np.ceil(weight / t))
    above0 = np.where(weight / r0 > tau, r0, 0.0)
    capacity = num_slots - r0.sum(axis=1)
    ok = (capacity >= 0) & (above0.sum(axis=1) <= limit)
    hard = np.flatnonzero((capacity >= 0) & ~ok)
    if not hard.size:
        return ok
    w, r0, above0, capacity, tau = weight[hard], r0[hard], above0[hard], capacity[hard], tau[hard]
    r1 = np.maximum(1.0, np.ceil(w / tau))
    cost = np.where(above0 > 0, r1 - r0, 0.0)  # extra slots to bring the expert under T / j
    ratio = np.where(above0 > 0, above0 / np.maximum(cost, 1.0), -1.0)
    order = np.argsort(-ratio, axis=1, kind="stable")
    cost_sorted = np.take_along_axis(cost, order, axis=1)
    gain_sorted = np.take_along_axis(above0, order, axis=1)
    spent_before = np.cumsum(cost_sorted, axis=1) - cost_sorted
    room = np.clip(capacity[:, None] - spent_before, 0.0, None)
    share = np.divide(np.minimum(room, cost_sorted), cost_sorted, out=np.zeros_like(room), where=cost_sorted > 0)
    fewest = np.ceil(above0.sum(axis=1) - (share * gain_sorted).sum(axis=1) - 1e-9)
    ok[hard] = fewest <= limit
    return ok


def _feasible(weight: np.ndarray, t: np.ndarray, num_slots: int, num_gpus: int) -> np.ndarray:
    """Per row: does T = ``t`` pass every threshold test j = 2..k (see module doc)?"""
    k = num_slots // num_gpus
    feasible = np.ones(weight.shape[0], dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):  # an all-zero row may hold T = 0
        for j in range(2, k + 1):
            rows = np.flatnonzero(feasible)
            if not rows.size:
                break
            feasible[rows] = _passes(weight[rows], t[rows], j, num_slots, (j - 1) * num_gpus)
    return feasible


def slot_bound(weight: np.ndarray, num_slots: int, num_gpus: int, start: np.ndarray | None = None) -> np.ndarray:
    """The replica-granularity bound per row (see module doc), float64 [rows]; at least ``start`` when given.

    ``weight`` [rows, X] sharing ``num_slots`` slots on ``num_gpus`` GPUs of k = num_slots / num_gpus slots each.
    Rows whose ``start`` already passes the test cost one test; only the others are bisected.
    """
    weight = np.asarray(weight, dtype=np.float64)
    rows = weight.shape[0]
    k = num_slots // num_gpus
    lo = np.zeros(rows) if start is None else np.asarray(start, dtype=np.float64).copy()
    if k < 2 or rows == 0:
        return lo
    hi = np.maximum(lo, k * weight.max(axis=1, initial=0.0))  # every replica <= T / k: the test always passes
    todo = np.flatnonzero((hi > lo) & ~_feasible(weight, lo, num_slots, num_gpus))
    sub_w, sub_lo, sub_hi = weight[todo], lo[todo], hi[todo]
    for _ in range(_BISECT_STEPS):
        if not todo.size:
            break
        mid = 0.5 * (sub_lo + sub_hi)
        ok = _feasible(sub_w, mid, num_slots, num_gpus)
        sub_lo = np.where(ok, sub_lo, mid)
        sub_hi = np.where(ok, mid, sub_hi)
        if np.all(sub_hi <= sub_lo * (1.0 + 1e-12)):
            break
    lo[todo] = sub_lo
    return lo


def global_lower_bound(weight: np.ndarray, num_replicas: int, num_gpus: int) -> np.ndarray:
    """max(total / P, m*, slot bound) per row, float64 [rows]: no placement of ``weight`` [rows, X] does better."""
    weight = np.asarray(weight, dtype=np.float64)
    base = np.maximum(weight.sum(axis=1) / num_gpus, min_max_replica_load(weight, num_replicas))
    return slot_bound(weight, num_replicas, num_gpus, base)


def equal_partitions(items: tuple[int, ...], block: int) -> list[list[tuple[int, ...]]]:
    """All partitions of ``items`` into blocks of ``block`` items (block order canonical: by smallest member)."""
    if not items:
        return [[]]
    first, rest = items[0], items[1:]
    out: list[list[tuple[int, ...]]] = []
    for mates in combinations(rest, block - 1):
        remaining = tuple(i for i in rest if i not in mates)
        for tail in equal_partitions(remaining, block):
            out.append([(first, *mates), *tail])
    return out


def num_partitions(num_groups: int, block: int) -> int:
    """Ways to split ``num_groups`` groups into unordered blocks of ``block``."""
    blocks = num_groups // block
    return math.factorial(num_groups) // (math.factorial(block) ** blocks * math.factorial(blocks))


def hierarchical_lower_bound(
    weight: np.ndarray, num_replicas: int, num_groups: int, num_nodes: int, num_gpus: int
) -> np.ndarray:
    """Bound for plans that keep every group (and its replicas) on one node, float64 [L]; >= the global bound."""
    weight = np.asarray(weight, dtype=np.float64)
    num_layers, num_experts = weight.shape
    group_size = num_experts // num_groups
    block = num_groups // num_nodes
    slots_per_node = num_replicas // num_nodes
    gpus_per_node = num_gpus // num_nodes
    grouped = weight.reshape(num_layers, num_groups, group_size)
    overall = global_lower_bound(weight, num_replicas, num_gpus)
    if num_partitions(num_groups, block) > MAX_PARTITIONS:
        group_load = grouped.sum(axis=2)
        lightest = np.sort(group_load, axis=1)[:, : block - 1].sum(axis=1, keepdims=True)
        node_floor = (group_load + lightest) / gpus_per_node
        alone = global_lower_bound(grouped.reshape(-1, group_size), slots_per_node, gpus_per_node)
        per_group = np.maximum(node_floor, alone.reshape(num_layers, num_groups)).max(axis=1)
        return np.asarray(np.maximum(overall, per_group))
    blocks = list(combinations(range(num_groups), block))
    block_index = {b: i for i, b in enumerate(blocks)}
    members = np.array(blocks, dtype=np.int64)  # [nb, block]
    block_weight = grouped[:, members, :].reshape(num_layers * len(blocks), block * group_size)
    block_cost = global_lower_bound(block_weight, slots_per_node, gpus_per_node).reshape(num_layers, len(blocks))
    partitions = np.array(
        [[block_index[b] for b in part] for part in equal_partitions(tuple(range(num_groups)), block)],
        dtype=np.int64,
    )  # [np, N]
    per_partition = block_cost[:, partitions].max(axis=2)  # [L, np]
    return np.asarray(np.maximum(overall, per_partition.min(axis=1)))
