"""Exact optimum of the EPLB placement problem as a mixed-integer programme, solved by HiGHS (optional extra).

Same problem as dsctl.eplb.exact (docs/eplb.md "Exact optimum"): X experts with loads w_e share S slots on P GPUs
of exactly k = S / P slots; counts r_e >= 1 (sum S), each replica carrying w_e / r_e; minimise the largest GPU
load T. The load of a replica depends on its expert's count, so the count is chosen among its few possible values:

- z[e, c] binary: expert e gets c replicas (sum over c = 1); only c with w_e / c <= U (the incumbent) and
  c <= S - (the other experts' smallest counts) are columns;
- y[e, c, g] integer in [0, min(c, k)]: replicas of e on GPU g under that choice; sum over g = c z[e, c];
- each GPU holds k replicas; its load sum (w_e / c) y[e, c, g] <= T; GPU loads non-increasing (GPUs are
  interchangeable, so this removes their permutations); lb <= T <= U, lb the dsctl.eplb.bounds bound.

Hierarchical (groups confined to nodes): every group -> node partition, each block of G / N groups solved as one
node (cached per block), as the search does; the layer's bound is the smallest over partitions of the largest
block bound. HiGHS reports a dual bound when its time runs out, so a layer not closed still gets a valid lower
bound (the gap remaining). Loads are scaled to a mean GPU load of 1 inside the solver and float64 tokens outside.

``highspy`` is imported only inside ``solve``; ``available()`` says whether it is installed.
"""

from __future__ import annotations

import importlib.util
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsctl.eplb.bounds import equal_partitions, global_lower_bound

#: relative gap below which a layer counts as proved (HiGHS's own feasibility and optimality tolerances are ~1e-7)
PROOF_REL_GAP = 1e-6
#: the MILP looks for plans at least this much (relative) below the start: then "none" proves the start optimal
#: within it, and HiGHS proves infeasibility far faster than it closes the gap of a feasible model
STRICT = 1e-7
#: default seconds one `--prove` run may spend in the MILP over all its layers (each layer gets an equal share of
#: what is left; unspent time passes to later layers)
DEFAULT_PROVE_TIME_S = 60.0
#: largest --prove-time-s accepted (an hour)
MAX_PROVE_TIME_S = 3600.0
#: most integer columns one node's MILP may have (y[e, c, g] plus z[e, c]); a node above it is not attempted
#: (checked before building: ~100 bytes a column in HiGHS, and branch and bound is hopeless far beyond it)
MAX_MILP_COLUMNS = 200_000


def available() -> bool:
    """Is the optional solver (``pip install 'dsctl[milp]'``, the ``highspy`` package) importable?"""
    return importlib.util.find_spec("highspy") is not None


@dataclass(frozen=True)
class MilpResult:
    """Per layer: ``optimum`` float64 [L] (best found), ``lower`` float64 [L] (a valid lower bound: the MILP's
    dual bound, never below the combinatorial bound), ``proved`` bool [L] (lower within PROOF_REL_GAP of
    optimum), ``phy2log`` int64 [L, R] a plan reaching ``optimum`` where one beat the start (else -1 rows),
    ``improved`` bool [L], ``seconds`` float64 [L] spent per layer."""

    optimum: np.ndarray
    lower: np.ndarray
    proved: np.ndarray
    phy2log: np.ndarray
    improved: np.ndarray
    seconds: np.ndarray


@dataclass(frozen=True)
class _NodeAnswer:
    value: float  # best max GPU load found at or below the cap (inf: none)
    lower: float  # valid lower bound on the node's optimum (the cap when nothing is at or below it)
    slots: np.ndarray | None  # local expert of each slot (slot s on GPU s // k), for ``value``


def count_choices(weight: np.ndarray, num_slots: int, cap: float, max_pairs: int = MAX_MILP_COLUMNS
                  ) -> list[tuple[int, int]] | None:
    """The (expert, count) pairs worth a column: w_e / c <= ``cap`` and the others' smallest counts fit; None when
    no count vector keeps every replica at or below ``cap``, [] when there would be more than ``max_pairs``
    (counted before the list is built)."""
    num_items = len(weight)
    if not math.isfinite(cap):
        smallest = np.ones(num_items, dtype=np.int64)
    elif cap > 0:
        smallest = np.maximum(np.ceil(weight / cap * (1.0 - 1e-12)), 1).astype(np.int64)
    else:
        smallest = np.where(weight > 0, num_slots + 1, 1).astype(np.int64)
    spare = num_slots - int(smallest.sum())
    if spare < 0:
        return None
    if num_items * (spare + 1) > max_pairs:
        return []
    return [(e, c) for e in range(num_items) for c in range(int(smallest[e]), int(smallest[e]) + spare + 1)]


def _node_model(w: np.ndarray, pairs: list[tuple[int, int]], num_gpus: int, k: int, lower: float, cap: float,
                highspy: Any) -> Any:
    """The HighsLp of one node (module doc), columns [z (n), y (n x P, pair-major), T]."""
    n, p = len(pairs), num_gpus
    expert = np.array([e for e, _ in pairs], dtype=np.int64)
    count = np.array([c for _, c in pairs], dtype=np.int64)
    share = w[expert] / count
    y = n + np.arange(n * p).reshape(n, p)
    t_col = n + n * p
    gpu = np.tile(np.arange(p), n)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    lo: list[np.ndarray] = []
    hi: list[np.ndarray] = []

    def block(r: np.ndarray, c: np.ndarray, v: np.ndarray, low: np.ndarray, high: np.ndarray) -> None:
        rows.append(r + sum(len(x) for x in lo))
        cols.append(c)
        vals.append(v)
        lo.append(low)
        hi.append(high)

    num_items = len(w)
    block(expert, np.arange(n), np.ones(n), np.ones(num_items), np.ones(num_items))  # one count per expert
    block(np.concatenate([np.repeat(np.arange(n), p), np.arange(n)]), np.concatenate([y.ravel(), np.arange(n)]),
          np.concatenate([np.ones(n * p), -count.astype(np.float64)]), np.zeros(n), np.zeros(n))  # c replicas
    block(gpu, y.ravel(), np.ones(n * p), np.full(p, float(k)), np.full(p, float(k)))  # k slots per GPU
    block(np.concatenate([gpu, np.arange(p)]), np.concatenate([y.ravel(), np.full(p, t_col)]),
          np.concatenate([np.repeat(share, p), -np.ones(p)]), np.full(p, -np.inf), np.zeros(p))  # load <= T
    if math.isfinite(cap):  # at most j - 1 replicas above cap / j on a GPU (k slots, load <= cap)
        for j in range(2, k + 1):
            heavy = np.flatnonzero(share > cap / j * (1.0 + 1e-12))
            if len(heavy) == 0:
                continue
            block(np.tile(np.arange(p), len(heavy)), y[heavy].ravel(), np.ones(len(heavy) * p),
                  np.full(p, -np.inf), np.full(p, j - 1.0))
    r, c, v = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    order = np.lexsort((r, c))
    num_cols = t_col + 1
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = num_cols, int(sum(len(x) for x in lo))
    lp.col_cost_ = np.concatenate([np.zeros(num_cols - 1), [1.0]])
    lp.col_lower_ = np.concatenate([np.zeros(num_cols - 1), [lower]])
    lp.col_upper_ = np.concatenate([np.ones(n), np.repeat(np.minimum(count, k), p).astype(np.float64),
                                    [cap if math.isfinite(cap) else np.inf]])
    lp.row_lower_, lp.row_upper_ = np.concatenate(lo), np.concatenate(hi)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.searchsorted(c[order], np.arange(num_cols + 1)).astype(np.int32)
    lp.a_matrix_.index_ = r[order].astype(np.int32)
    lp.a_matrix_.value_ = v[order]
    lp.integrality_ = [highspy.HighsVarType.kInteger] * (num_cols - 1) + [highspy.HighsVarType.kContinuous]
    return lp


def solve_node(weight: np.ndarray, num_slots: int, num_gpus: int, cap: float, time_s: float) -> _NodeAnswer:
    """MILP for one node (or the whole global problem): ``weight`` [X], plans with max load <= ``cap`` only."""
    import highspy

    w = np.asarray(weight, dtype=np.float64)
    k = num_slots // num_gpus
    scale = float(w.sum()) / num_gpus
    combinatorial = float(global_lower_bound(w[None, :], num_slots, num_gpus)[0])
    if scale <= 0:
        slots = np.concatenate([np.arange(len(w)), np.zeros(num_slots - len(w), dtype=np.int64)])
        return _NodeAnswer(0.0, 0.0, slots)
    pairs = count_choices(w, num_slots, cap, MAX_MILP_COLUMNS // (num_gpus + 1))
    if pairs is None or combinatorial > cap * (1.0 + 1e-12):
        return _NodeAnswer(math.inf, cap, None)
    if not pairs or time_s <= 0:  # too large a model, or no time left
        return _NodeAnswer(math.inf, combinatorial, None)
    model = _node_model(w / scale, pairs, num_gpus, k, combinatorial / scale, cap / scale, highspy)
    # highspy.Highs (the Python wrapper) writes a banner to stdout when built, which would corrupt JSON output;
    # the binding underneath it is the same solver without the banner (absent from highspy's type stubs)
    solver = getattr(highspy, "_Highs")()  # noqa: B009
    for name, value in (("output_flag", False), ("time_limit", float(time_s)), ("mip_rel_gap", PROOF_REL_GAP / 10),
                        ("mip_abs_gap", 0.0), ("random_seed", 0)):
        solver.setOptionValue(name, value)
    solver.passModel(model)
    solver.run()
    status = solver.getModelStatus()
    if status == highspy.HighsModelStatus.kInfeasible:
        return _NodeAnswer(math.inf, cap, None)
    info = solver.getInfo()
    lower = max(combinatorial, float(info.mip_dual_bound) * scale) if math.isfinite(info.mip_dual_bound) \
        else combinatorial
    if info.primal_solution_status != highspy.SolutionStatus.kSolutionStatusFeasible:
        return _NodeAnswer(math.inf, lower, None)
    n = len(pairs)
    placed = np.rint(np.asarray(solver.getSolution().col_value)[n:n + n * num_gpus]).astype(np.int64)
    per_gpu = placed.reshape(n, num_gpus)
    expert = np.array([e for e, _ in pairs], dtype=np.int64)
    count = np.array([c for _, c in pairs], dtype=np.int64)
    slots = np.concatenate([np.repeat(expert, per_gpu[:, g]) for g in range(num_gpus)])
    value = float((per_gpu * (w[expert] / count)[:, None]).sum(axis=0).max())
    return _NodeAnswer(value, min(lower, value), slots)


def solve_layer(weight: np.ndarray, num_replicas: int, num_gpus: int, num_groups: int, num_nodes: int,
                start: float, time_s: float) -> tuple[float, float, np.ndarray | None]:
    """One layer ``weight`` [E]: (best max load, valid lower bound, phy2log row int64 [R] or None if nothing beat
    ``start``). Hierarchical when ``num_nodes`` > 1."""
    w = np.asarray(weight, dtype=np.float64)
    deadline = time.monotonic() + time_s
    if num_nodes <= 1:
        got = solve_node(w, num_replicas, num_gpus, start, time_s)
        better = got.slots is not None and got.value < start
        return min(got.value, start), min(got.lower, start), got.slots if better else None
    group_size = len(w) // num_groups
    block_size = num_groups // num_nodes
    slots_per_node, gpus = num_replicas // num_nodes, num_gpus // num_nodes

    def members(b: tuple[int, ...]) -> np.ndarray:
        return np.concatenate([np.arange(g * group_size, (g + 1) * group_size) for g in b])

    partitions = equal_partitions(tuple(range(num_groups)), block_size)
    blocks = sorted({b for part in partitions for b in part})
    cheap = {b: float(global_lower_bound(w[members(b)][None, :], slots_per_node, gpus)[0]) for b in blocks}
    partitions.sort(key=lambda part: max(cheap[b] for b in part))
    solved: dict[tuple[int, ...], _NodeAnswer] = {}
    best, best_row = start, None
    lower = math.inf
    for part in partitions:
        bound = max(cheap[b] for b in part)
        value = 0.0
        rows: list[np.ndarray] = []
        for b in sorted(part, key=lambda b: -cheap[b]):
            if bound >= best:
                break
            if b not in solved:
                solved[b] = solve_node(w[members(b)], slots_per_node, gpus, best,
                                       max(0.0, deadline - time.monotonic()))
            got = solved[b]
            bound = max(bound, got.lower)
            value = max(value, got.value)
            if got.slots is not None:
                rows.append(members(b)[got.slots])
        lower = min(lower, bound)
        if len(rows) == num_nodes and value < best:
            best, best_row = value, np.concatenate(rows)
    return best, min(lower, best), best_row


def solve(weight: np.ndarray, num_replicas: int, num_gpus: int, num_groups: int = 1, num_nodes: int = 1,
          start: np.ndarray | None = None, time_s: float = DEFAULT_PROVE_TIME_S) -> MilpResult:
    """``solve_layer`` for every row of ``weight`` [L, E] from the achievable max loads ``start`` float64 [L]
    (None: no incumbent), within ``time_s`` seconds over all layers (layer i gets what is left / layers left)."""
    w = np.asarray(weight, dtype=np.float64)
    rows = w.shape[0]
    optimum, lower, seconds = np.empty(rows), np.empty(rows), np.zeros(rows)
    improved = np.zeros(rows, dtype=bool)
    phy2log = np.full((rows, num_replicas), -1, dtype=np.int64)
    deadline = time.monotonic() + time_s
    for i in range(rows):
        began = time.monotonic()
        first = math.inf if start is None else float(start[i]) * (1.0 - STRICT)
        share = max(0.0, deadline - began) / (rows - i)
        optimum[i], lower[i], row = solve_layer(w[i], num_replicas, num_gpus, num_groups, num_nodes, first, share)
        if row is not None:
            phy2log[i] = row
            improved[i] = start is None or optimum[i] < float(start[i]) * (1.0 - 1e-9)
        elif start is not None:
            optimum[i] = float(start[i])  # (solve_layer's best is the strict cap, just below the start)
        seconds[i] = time.monotonic() - began
    proved = lower >= optimum * (1.0 - PROOF_REL_GAP)
    return MilpResult(optimum, np.minimum(lower, optimum), proved, phy2log, improved, seconds)
