"""Kernels compiled by numba for large ECMP planes: the hop-by-hop ECMP walk and progressive filling.

Optional (``pip install dsctl[fast]``): numba is imported on first use only, and the simulator asks
``available()`` before choosing a kernel for a plane of at least MIN_FLOWS flows. The numpy code stays the
reference (``routing._walk``, ``maxmin.max_min``, ``maxmin.route_loads``): the kernels do the same arithmetic in
the same order (the walk consumes the same random draws, the filling the same rounds), and
tests/unit/test_topology_sim_compiled.py holds them to the reference on random ECMP cases with failed cables.

Why compiled: a 16,384-GPU ECMP plane has 4.2M flows, 16.8M route entries and ~5,300 distinct bottleneck levels
(one round each). numpy pays ~20 calls a round and touches every route entry through index arrays; the kernel
does one pass over the L links a round and visits each route entry a fixed number of times in all (counting,
indexing, freezing): O(rounds x L + entries). Rates differ from the reference only by the order of additions.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np

from dsctl.topology.sim.maxmin import FULL_TOLERANCE, Solution

#: flows from which a plane is worth the kernels' load (~0.3 s: numba's import and its cached machine code)
MIN_FLOWS = 1 << 18


def available() -> bool:
    """True when numba can be imported (the ``fast`` extra is installed)."""
    return importlib.util.find_spec("numba") is not None


def _fill(routes: np.ndarray, members: np.ndarray, capacity: np.ndarray, carried_weight: np.ndarray,
          tol: float, rate: np.ndarray, load: np.ndarray, carried: np.ndarray) -> int:  # pragma: no cover (compiled)
    """Kernel: ``routes`` int32 [F, H] link ids (-1 padding); ``members`` float64 [F]; ``capacity`` float64 [L];
    ``carried_weight`` float64 [F]. Writes ``rate`` [F] (bytes/s per member), ``load`` [L] (steady bytes/s),
    ``carried`` [L] (sum of carried_weight over each link's flows); returns the rounds."""
    num_f, num_h = routes.shape
    num_all = capacity.shape[0]
    local = np.full(num_all, -1, np.int32)
    for f in range(num_f):
        for c in range(num_h):
            r = routes[f, c]
            if r >= 0:
                local[r] = 0
                carried[r] += carried_weight[f]
    num_l = 0
    for r in range(num_all):  # links in ascending order, as the reference numbers them
        if local[r] == 0:
            local[r] = num_l
            num_l += 1
    links = np.empty(num_l, np.int64)
    for r in range(num_all):
        if local[r] >= 0:
            links[local[r]] = r
    cap = np.empty(num_l)
    for i in range(num_l):
        cap[i] = capacity[links[i]]
    residual = cap.copy()
    weight = np.zeros(num_l)
    count = np.zeros(num_l + 1, np.int64)
    active = np.zeros(num_f, np.bool_)
    num_active = 0
    entries = 0
    top = 0.0
    for f in range(num_f):
        top = max(top, members[f])
        for c in range(num_h):
            r = routes[f, c]
            if r >= 0:
                i = local[r]
                weight[i] += members[f]
                count[i + 1] += 1
                entries += 1
                if not active[f]:
                    active[f] = True
                    num_active += 1
    ptr = np.cumsum(count)  # link -> flows index, flows ascending within a link
    flows = np.empty(entries, np.int32)
    free = ptr[:-1].copy()
    for f in range(num_f):
        for c in range(num_h):
            r = routes[f, c]
            if r >= 0:
                i = local[r]
                flows[free[i]] = f
                free[i] += 1
    tiny = 1e-12 * max(top, 1.0)
    share = np.empty(num_l)
    full = np.empty(num_l, np.int64)
    level = 0.0
    rounds = 0
    while entries > 0:
        rounds += 1
        low = np.inf
        used = False
        for i in range(num_l):
            if weight[i] > tiny:
                share[i] = residual[i] / weight[i]
                low = min(low, share[i])
                used = True
        if not used:
            break
        step = max(low, 0.0)
        level += step
        num_full = 0
        for i in range(num_l):
            if weight[i] > tiny:
                residual[i] -= step * weight[i]
                if residual[i] <= tol * cap[i]:
                    full[num_full] = i
                    num_full += 1
        if num_full == 0:  # rounding left no link exactly full: take the tightest
            for i in range(num_l):
                if weight[i] > tiny and share[i] <= low * (1 + 1e-9):
                    full[num_full] = i
                    num_full += 1
        for k in range(num_full):
            i = full[k]
            for j in range(ptr[i], ptr[i + 1]):
                f = flows[j]
                if not active[f]:
                    continue
                active[f] = False
                num_active -= 1
                rate[f] = level
                for c in range(num_h):
                    r = routes[f, c]
                    if r >= 0:
                        weight[local[r]] -= members[f]
                        entries -= 1
        if num_active == 0:
            break
        for k in range(num_full):
            weight[full[k]] = 0.0
    for i in range(num_l):
        load[links[i]] = max(cap[i] - residual[i], 0.0)
    return rounds


def _moving(dist: np.ndarray, cell: np.ndarray, moving: np.ndarray, num: int) -> int:  # pragma: no cover
    """Kernel: keep the first ``num`` walkers whose ``cell`` is not yet at its leaf (in order); returns how many."""
    kept = 0
    for i in range(num):
        if dist[cell[i]] > 0:
            cell[kept] = cell[i]
            moving[kept] = moving[i]
            kept += 1
    return kept


def _hop(cell: np.ndarray, moving: np.ndarray, num: int, draw: np.ndarray, cnt: np.ndarray, ptr: np.ndarray,
         link_table: np.ndarray, next_switch: np.ndarray, num_t: int, out: np.ndarray, hop: int) -> None:  # pragma: no cover
    """Kernel: one ECMP hop of ``routing._walk`` (candidate ``floor(draw * k)``, capped at k - 1)."""
    for i in range(num):
        c = cell[i]
        k = cnt[c]
        pick = min(int(draw[i] * k), k - 1)
        link = link_table[ptr[c] + pick]
        out[moving[i], hop] = link
        cell[i] = c % num_t + next_switch[link] * num_t


@functools.cache
def _kernels() -> dict[str, Callable[..., Any]]:
    import numba  # type: ignore[import-not-found, unused-ignore]  # optional extra, loaded on first use

    # cache=True keeps the machine code beside this module (or in the user's cache folder when that is read-only)
    return {f.__name__: numba.njit(cache=True, nogil=True)(f) for f in (_fill, _moving, _hop)}


def ecmp_walk(cell: np.ndarray, steps: int, dist: np.ndarray, cnt: np.ndarray, ptr: np.ndarray,
              link_table: np.ndarray, next_switch: np.ndarray, num_t: int, rng: np.random.Generator) -> np.ndarray:
    """``routing._walk`` under ECMP: links of one path per flow (int32 [F, steps], -1 pad) from the flat
    (switch, leaf) cells ``cell`` [F] (switch * num_t + leaf); draws ``rng.random(walkers)`` hop by hop as it does."""
    kernels = _kernels()
    cell = np.array(cell, dtype=np.int64)
    moving = np.arange(len(cell), dtype=np.int64)
    out = np.full((len(cell), steps), -1, dtype=np.int32)
    num = len(cell)
    for hop in range(steps):
        num = int(kernels["_moving"](dist, cell, moving, num))
        if not num:
            break
        kernels["_hop"](cell, moving, num, rng.random(num), cnt, ptr, link_table, next_switch, num_t, out, hop)
    return out


def compiled_max_min(flow_routes: np.ndarray, members: np.ndarray, capacity: np.ndarray,
                     carried_weight: np.ndarray) -> tuple[Solution, np.ndarray]:
    """``maxmin.max_min`` without bundles, and ``maxmin.route_loads(flow_routes, carried_weight, ...)``, in one
    compiled pass: (solution, carried float64 [L]). ``flow_routes`` int [F, H] link ids, -1 padding."""
    routes = np.ascontiguousarray(flow_routes, dtype=np.int32)
    members = np.ascontiguousarray(members, dtype=np.float64)
    capacity = np.ascontiguousarray(capacity, dtype=np.float64)
    weight = np.ascontiguousarray(carried_weight, dtype=np.float64)
    rate = np.zeros(len(members))
    load = np.zeros(len(capacity))
    carried = np.zeros(len(capacity))
    rounds = int(_kernels()["_fill"](routes, members, capacity, weight, FULL_TOLERANCE, rate, load, carried))
    return Solution(rate, load, rounds), carried
