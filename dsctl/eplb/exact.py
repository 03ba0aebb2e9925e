"""Exact optimum of the EPLB placement problem for small instances, by branch and bound (no solver dependency).

Problem (one layer; docs/eplb.md "Exact optimum"): X experts with loads w_e share S slots on P GPUs of exactly
k = S / P slots; choose counts r_e >= 1 (sum S), each replica carrying w_e / r_e, and put the replicas on GPUs so
that the largest GPU load T is smallest. Hierarchical: the G groups are split into N blocks of G / N (one per
node, S / N slots and P / N GPUs each), every replica of a group stays on its node; T = max over nodes.

Method: depth-first over count vectors (largest experts first; a count giving a replica >= the incumbent is cut,
and so is a partial vector with more than (j - 1) P replicas above T / j), then for each count vector an exact
packing (k = 2: pairing the i-th largest with the i-th smallest replica is optimal; k > 2: depth-first over GPUs
with symmetric GPUs tried once). The incumbent starts at the caller's plan (e.g. the balanced mode's max load),
so the search proves it optimal or finds better. A node budget bounds the work: past it the answer is "not
proved" (``ExactResult.proved`` False) and ``optimum`` is only the best found.
Loads float64 in the statistics' unit (tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from dsctl.eplb.bounds import _equal_partitions

#: relative improvement the search must find to replace the incumbent (below it, plans count as equal)
REL_EPS = 1e-9
#: default search nodes per layer before giving up ("not proved")
DEFAULT_NODE_BUDGET = 2_000_000
#: largest instance `--prove` attempts: slots per layer (beyond it the search is hopeless in seconds)
MAX_PROVE_SLOTS = 64


@dataclass
class _Budget:
    left: int

    def spend(self, amount: int = 1) -> bool:
        self.left -= amount
        return self.left >= 0


@dataclass(frozen=True)
class ExactResult:
    """Per layer: ``optimum`` float64 [L] (the smallest possible max GPU load, or the best found), ``proved``
    bool [L] (False: the node budget ran out first), ``counts`` int64 [L, E] replicas per expert at the optimum."""

    optimum: np.ndarray
    proved: np.ndarray
    counts: np.ndarray


def _pack(items: np.ndarray, num_gpus: int, k: int, best: float, budget: _Budget) -> float:
    """Smallest max GPU load packing ``items`` (sorted descending, len = num_gpus * k) exactly k per GPU, if it is
    below ``best`` (else returns ``best``)."""
    if k == 1:
        return min(best, float(items[0]))
    if k == 2:
        pairs = float((items[:num_gpus] + items[::-1][:num_gpus]).max())
        return min(best, pairs)
    loads = [0.0] * num_gpus
    counts = [0] * num_gpus
    values = items.tolist()
    n = len(values)
    suffix_min = values[-1]
    found = best

    def dfs(i: int) -> None:
        nonlocal found
        if i == n:
            found = min(found, max(loads))
            return
        if not budget.spend():
            return
        item = values[i]
        tried: set[tuple[float, int]] = set()
        for g in range(num_gpus):
            if counts[g] >= k:
                continue
            key = (loads[g], counts[g])
            if key in tried:
                continue
            tried.add(key)
            # the GPU's remaining slots take at least the smallest item each
            if loads[g] + item + (k - counts[g] - 1) * suffix_min >= found * (1.0 - REL_EPS):
                continue
            loads[g] += item
            counts[g] += 1
            dfs(i + 1)
            loads[g] -= item
            counts[g] -= 1

    dfs(0)
    return found


def _quick_bound(items: np.ndarray, num_gpus: int, k: int) -> float:
    """A fast lower bound for a fixed replica multiset (sorted descending): mean, largest + (k - 1) smallest."""
    return max(float(items.sum()) / num_gpus, float(items[0] + items[len(items) - k + 1:].sum()))


def solve_node(weight: np.ndarray, num_slots: int, num_gpus: int, start: float,
               budget: _Budget) -> tuple[float, np.ndarray | None, bool]:
    """Exact min max GPU load for ``weight`` [X] (one node or the global problem).

    ``start`` is an achievable max load (or inf). Returns (best, counts or None if nothing beat ``start``, proved).
    """
    w = np.asarray(weight, dtype=np.float64)
    order = np.argsort(-w, kind="stable")
    ws = w[order]
    num_items = len(ws)
    k = num_slots // num_gpus
    best = float(start)
    best_counts: np.ndarray | None = None
    if ws.sum() == 0:
        zero_counts = np.ones(num_items, dtype=np.int64)
        zero_counts[0] += num_slots - num_items
        return 0.0, zero_counts, True
    counts = [0] * num_items

    def above_ok(chosen: int, limit: float) -> bool:
        for j in range(2, k + 1):
            tau = limit / j
            above = sum(counts[e] for e in range(chosen) if ws[e] / counts[e] > tau * (1 + REL_EPS))
            if above > (j - 1) * num_gpus:
                return False
        return True

    def rec(e: int, left: int) -> None:
        nonlocal best, best_counts
        if budget.left < 0:
            return
        if e == num_items - 1:
            counts[e] = left
            if ws[e] / left >= best * (1.0 - REL_EPS) and ws[e] > 0:
                return
            items = np.sort(np.repeat(ws / np.array(counts, dtype=np.float64), counts))[::-1]
            if not budget.spend():
                return
            if _quick_bound(items, num_gpus, k) >= best * (1.0 - REL_EPS):
                return
            got = _pack(items, num_gpus, k, best, budget)
            if got < best * (1.0 - REL_EPS):
                best = got
                best_counts = np.array(counts, dtype=np.int64)
            return
        rest = num_items - e - 1
        low = 1 if ws[e] == 0 or not np.isfinite(best) else max(1, int(np.floor(ws[e] / best)) + 0)
        for r in range(max(1, low), left - rest + 1):
            if ws[e] > 0 and ws[e] / r >= best * (1.0 - REL_EPS):
                continue
            counts[e] = r
            if not above_ok(e + 1, best):
                continue
            rec(e + 1, left - r)
            if budget.left < 0:
                return
        counts[e] = 0

    rec(0, num_slots)
    proved = budget.left >= 0
    if best_counts is None:
        return best, None, proved
    out = np.empty(num_items, dtype=np.int64)
    out[order] = best_counts
    return best, out, proved


def solve_layer(weight: np.ndarray, num_replicas: int, num_gpus: int, num_groups: int = 1, num_nodes: int = 1,
                start: float = float("inf"), node_budget: int = DEFAULT_NODE_BUDGET) -> tuple[float, np.ndarray, bool]:
    """Exact optimum for one layer ``weight`` [E]; hierarchical when ``num_nodes`` > 1 (groups confined to nodes).

    Returns (optimum or best found, counts int64 [E] (zeros if nothing beat ``start``), proved).
    """
    w = np.asarray(weight, dtype=np.float64)
    budget = _Budget(node_budget)
    num_experts = len(w)
    if num_nodes <= 1:
        best, counts, proved = solve_node(w, num_replicas, num_gpus, start, budget)
        return best, counts if counts is not None else np.zeros(num_experts, dtype=np.int64), proved
    group_size = num_experts // num_groups
    block = num_groups // num_nodes
    slots, gpus = num_replicas // num_nodes, num_gpus // num_nodes
    cache: dict[tuple[int, ...], tuple[float, np.ndarray | None]] = {}
    best = float(start)
    best_counts = np.zeros(num_experts, dtype=np.int64)

    def members(b: tuple[int, ...]) -> np.ndarray:
        return np.concatenate([np.arange(g * group_size, (g + 1) * group_size) for g in b])

    for part in _equal_partitions(tuple(range(num_groups)), block):
        worst, parts_counts = 0.0, []
        for b in sorted(part, key=lambda b: -float(w[members(b)].sum())):
            if b not in cache:
                cache[b] = solve_node(w[members(b)], slots, gpus, float("inf"), budget)[:2]
            value, c = cache[b]
            worst = max(worst, value)
            parts_counts.append((b, c))
            if worst >= best * (1.0 - REL_EPS):
                break
        if worst < best * (1.0 - REL_EPS):
            best = worst
            for b, c in parts_counts:
                best_counts[members(b)] = c if c is not None else 0
        if budget.left < 0:
            break
    return best, best_counts, budget.left >= 0


def solve(weight: np.ndarray, num_replicas: int, num_gpus: int, num_groups: int = 1, num_nodes: int = 1,
          start: np.ndarray | None = None, node_budget: int = DEFAULT_NODE_BUDGET) -> ExactResult:
    """``solve_layer`` for every row of ``weight`` [L, E]; ``start`` float64 [L] achievable max loads (optional)."""
    w = np.asarray(weight, dtype=np.float64)
    rows = w.shape[0]
    optimum = np.empty(rows)
    proved = np.zeros(rows, dtype=bool)
    counts = np.zeros(w.shape, dtype=np.int64)
    for i in range(rows):
        first = float("inf") if start is None else float(start[i]) * (1.0 + 1e-9)
        optimum[i], counts[i], proved[i] = solve_layer(w[i], num_replicas, num_gpus, num_groups, num_nodes,
                                                       first, node_budget)
        if start is not None and optimum[i] > start[i]:
            optimum[i] = start[i]  # nothing beat the plan: it is the optimum (within REL_EPS) when proved
    return ExactResult(optimum, proved, counts)
