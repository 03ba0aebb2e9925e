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

from dsctl.eplb.bounds import equal_partitions

#: relative improvement the search must find to replace the incumbent (below it, plans count as equal)
REL_EPS = 1e-9
#: default search nodes per layer before giving up ("not proved")
DEFAULT_NODE_BUDGET = 300_000
#: most search nodes one `--prove` run spends over all its layers (~4-25 us each on one shared core: 1-8 s); each layer
#: gets at most DEFAULT_NODE_BUDGET and an equal share of what is left, so a run of many layers ends with the later
#: ones "not proved" instead of running for minutes
MAX_PROVE_NODES = 300_000
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
    bool [L] (False: the node budget ran out first), ``phy2log`` int64 [L, R] a plan reaching ``optimum`` where
    the search built one (else -1 rows), ``improved`` bool [L]: that plan is strictly better than the start,
    ``lower`` float64 [L] or None: a valid lower bound on each layer's optimum (the MILP's dual bound,
    dsctl.eplb.milp; the search gives none)."""

    optimum: np.ndarray
    proved: np.ndarray
    phy2log: np.ndarray
    improved: np.ndarray
    lower: np.ndarray | None = None


def _pack(items: np.ndarray, num_gpus: int, k: int, best: float, budget: _Budget) -> tuple[float, np.ndarray | None]:
    """Smallest max GPU load packing ``items`` (sorted descending, len = num_gpus * k) exactly k per GPU, if below
    ``best``: (load, GPU of each item int64 [n]); else (``best``, None)."""
    n = len(items)
    if k == 1:
        return (float(items[0]), np.arange(n)) if items[0] < best else (best, None)
    if k == 2:
        pairs = float((items[:num_gpus] + items[::-1][:num_gpus]).max())
        gpu = np.concatenate([np.arange(num_gpus), np.arange(num_gpus)[::-1]])
        return (pairs, gpu) if pairs < best else (best, None)
    loads = [0.0] * num_gpus
    counts = [0] * num_gpus
    assign = [0] * n
    values = items.tolist()
    smallest = values[-1]
    found = best
    found_assign: list[int] | None = None

    def dfs(i: int) -> None:
        nonlocal found, found_assign
        if i == n:
            top = max(loads)
            if top < found:
                found, found_assign = top, list(assign)
            return
        if not budget.spend():
            return
        item = values[i]
        tried: set[tuple[float, int]] = set()
        # identical replicas go to GPUs in non-decreasing order (their permutations are the same plan)
        first = assign[i - 1] if i > 0 and values[i - 1] == item else 0
        for g in range(first, num_gpus):
            if counts[g] >= k:
                continue
            key = (loads[g], counts[g])
            if key in tried:
                continue
            tried.add(key)
            # the GPU's remaining slots take at least the smallest item each
            if loads[g] + item + (k - counts[g] - 1) * smallest >= found * (1.0 - REL_EPS):
                continue
            loads[g] += item
            counts[g] += 1
            assign[i] = g
            dfs(i + 1)
            loads[g] -= item
            counts[g] -= 1

    dfs(0)
    return found, None if found_assign is None else np.array(found_assign, dtype=np.int64)


def _quick_bound(items: np.ndarray, num_gpus: int, k: int) -> float:
    """A lower bound for a fixed replica multiset (sorted descending, n = P k): the mean; the largest plus the k - 1
    smallest; and for j = 2..k, some GPU holds j of the (j - 1) P + 1 largest (pigeonhole): the j smallest of those
    plus the k - j smallest overall."""
    n = len(items)
    bound = max(float(items.sum()) / num_gpus, float(items[0] + items[n - k + 1:].sum()))
    for j in range(2, k + 1):
        top = (j - 1) * num_gpus + 1
        if top > n:
            break
        rest = float(items[n - (k - j):].sum()) if k > j else 0.0
        bound = max(bound, float(items[top - j:top].sum()) + rest)
    return bound


def solve_node(weight: np.ndarray, num_slots: int, num_gpus: int, start: float,
               budget: _Budget) -> tuple[float, np.ndarray | None]:
    """Exact min max GPU load for ``weight`` [X] (one node, or the whole global problem).

    ``start`` is an achievable max load (or inf). Returns (best, slot experts int64 [num_slots] (local ids, slot s
    on GPU s // k) or None if nothing beat ``start``). ``budget.left < 0`` afterwards means "not proved".
    """
    w = np.asarray(weight, dtype=np.float64)
    order = np.argsort(-w, kind="stable")
    ws = w[order]
    num_items = len(ws)
    k = num_slots // num_gpus
    best = float(start)
    best_slots: np.ndarray | None = None
    counts = [0] * num_items

    def above_ok(chosen: int) -> bool:
        for j in range(2, k + 1):
            tau = best / j * (1 + REL_EPS)
            above = sum(counts[e] for e in range(chosen) if ws[e] / counts[e] > tau)
            if above > (j - 1) * num_gpus:
                return False
        return True

    def leaf() -> None:
        nonlocal best, best_slots
        cnt = np.array(counts, dtype=np.int64)
        owner = np.repeat(np.arange(num_items), cnt)
        share = np.repeat(ws / cnt, cnt)
        sort = np.argsort(-share, kind="stable")
        items = share[sort]
        if not budget.spend() or _quick_bound(items, num_gpus, k) >= best * (1.0 - REL_EPS):
            return
        got, gpu = _pack(items, num_gpus, k, best, budget)
        if gpu is not None and got < best * (1.0 - REL_EPS):
            slot_order = np.argsort(gpu, kind="stable")
            best, best_slots = got, order[owner[sort][slot_order]]

    def rec(e: int, left: int) -> None:
        if budget.left < 0:
            return
        if e == num_items - 1:
            counts[e] = left
            if not (ws[e] > 0 and ws[e] / left >= best * (1.0 - REL_EPS)) and above_ok(num_items):
                leaf()
            counts[e] = 0
            return
        rest = num_items - e - 1
        for r in range(1, left - rest + 1):
            if ws[e] > 0 and ws[e] / r >= best * (1.0 - REL_EPS):
                continue
            counts[e] = r
            if above_ok(e + 1):
                rec(e + 1, left - r)
            if budget.left < 0:
                break
        counts[e] = 0

    if ws.sum() == 0:
        slots = np.concatenate([np.arange(num_items), np.zeros(num_slots - num_items, dtype=np.int64)])
        return 0.0, (order[slots] if start > 0 else None)
    rec(0, num_slots)
    return best, best_slots


def solve_layer(weight: np.ndarray, num_replicas: int, num_gpus: int, num_groups: int = 1, num_nodes: int = 1,
                start: float = float("inf"), node_budget: int = DEFAULT_NODE_BUDGET, budget: _Budget | None = None
                ) -> tuple[float, np.ndarray | None, bool]:
    """Exact optimum for one layer ``weight`` [E]; hierarchical when ``num_nodes`` > 1 (groups confined to nodes).

    Returns (optimum or best found, phy2log row int64 [R] or None if nothing beat ``start``, proved).
    """
    w = np.asarray(weight, dtype=np.float64)
    budget = _Budget(node_budget) if budget is None else budget
    num_experts = len(w)
    if num_nodes <= 1:
        best, slots = solve_node(w, num_replicas, num_gpus, start, budget)
        return best, slots, budget.left >= 0
    group_size = num_experts // num_groups
    block = num_groups // num_nodes
    slots_per_node, gpus = num_replicas // num_nodes, num_gpus // num_nodes
    cache: dict[tuple[int, ...], tuple[float, np.ndarray | None]] = {}
    best = float(start)
    best_row: np.ndarray | None = None

    def members(b: tuple[int, ...]) -> np.ndarray:
        return np.concatenate([np.arange(g * group_size, (g + 1) * group_size) for g in b])

    for part in equal_partitions(tuple(range(num_groups)), block):
        if not budget.spend():  # a partition costs time even when its blocks are cached
            break
        worst, rows = 0.0, []
        for b in sorted(part, key=lambda b: -float(w[members(b)].sum())):
            if b not in cache:
                cache[b] = solve_node(w[members(b)], slots_per_node, gpus, float("inf"), budget)
            value, local = cache[b]
            worst = max(worst, value)
            rows.append(None if local is None else members(b)[local])
            if worst >= best * (1.0 - REL_EPS) or budget.left < 0:
                break
        if worst < best * (1.0 - REL_EPS) and len(rows) == num_nodes and all(r is not None for r in rows):
            best, best_row = worst, np.concatenate([r for r in rows if r is not None])
        if budget.left < 0:
            break
    return best, best_row, budget.left >= 0


def solve(weight: np.ndarray, num_replicas: int, num_gpus: int, num_groups: int = 1, num_nodes: int = 1,
          start: np.ndarray | None = None, node_budget: int = DEFAULT_NODE_BUDGET,
          total_budget: int | None = None) -> ExactResult:
    """``solve_layer`` for every row of ``weight`` [L, E]; ``start`` float64 [L] achievable max loads (optional).

    ``total_budget`` bounds the nodes of all layers together: layer i gets min(``node_budget``, what is left /
    layers left), so unspent nodes pass to later layers; a layer given none is "not proved".

    Where nothing beats ``start`` and the search completed, ``start`` is the proved optimum (within REL_EPS).
    """
    w = np.asarray(weight, dtype=np.float64)
    rows = w.shape[0]
    optimum = np.empty(rows)
    proved = np.zeros(rows, dtype=bool)
    improved = np.zeros(rows, dtype=bool)
    phy2log = np.full((rows, num_replicas), -1, dtype=np.int64)
    left = total_budget
    for i in range(rows):
        first = float("inf") if start is None else float(start[i]) * (1.0 + 1e-9)
        share = node_budget if left is None else min(node_budget, left // (rows - i))
        budget = _Budget(share)
        value, row, proved[i] = solve_layer(w[i], num_replicas, num_gpus, num_groups, num_nodes, first,
                                            budget=budget)
        if left is not None:
            left = max(0, left - (share - budget.left))  # an overshoot (left < 0) counts too
        if row is not None:
            phy2log[i] = row
            improved[i] = start is None or value < float(start[i]) * (1.0 - REL_EPS)
        optimum[i] = value if row is not None or start is None else min(value, float(start[i]))
    return ExactResult(optimum, proved, phy2log, improved)
