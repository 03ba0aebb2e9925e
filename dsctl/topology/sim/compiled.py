"""Kernels compiled by numba for large ECMP planes: the hop-by-hop ECMP walk and progressive filling.

Optional (``pip install dsctl[fast]``): numba is imported on first use only, and the simulator asks
``chosen()`` before using the kernels for an ECMP plane of at least MIN_FLOWS flows. The numpy code stays the
reference (``routing._walk``, ``maxmin.max_min``, ``maxmin.route_loads``): the kernels do the same arithmetic in
the same order (the walk consumes the same random draws, the filling the same rounds), and
tests/unit/test_topology_sim_compiled.py holds them to the reference on random ECMP cases with failed cables.

Why compiled: a 16,384-GPU ECMP plane has 4.2M flows, 16.8M route entries and ~5,300 distinct bottleneck levels
(one round each). numpy pays ~20 calls a round and touches every route entry through index arrays; the kernel
does one pass over the L links a round and visits each route entry a fixed number of times in all (counting,
indexing, freezing): O(rounds x L + entries), over the links still carrying flows only. Rates differ from the
reference only by the order of additions. The flow-long buffers (~200 MB a plane) are reused plane after plane
(``Scratch``): fresh pages cost the kernel more CPU time than the kernels spend on them.

Compiled code cache: numba keeps it beside this module (``__pycache__``), or, where that folder is not writable,
in the user's cache folder (``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba``); compiling costs 3-18 s once per
install, CPU and source. No folder in /tmp: cached machine code is loaded and run, and dsctl runs as root.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np

from dsctl.topology.sim.maxmin import FULL_TOLERANCE, Solution

#: flows from which a plane is worth the kernels' load (~0.5 s: numba's import and its cached machine code)
MIN_FLOWS = 1 << 18


def chosen(routing: str, num_flows: int) -> bool:
    """Whether the simulator routes and solves a plane of ``num_flows`` flows by these kernels: ECMP, at least
    MIN_FLOWS flows, numba installed."""
    return routing == "ecmp" and num_flows >= MIN_FLOWS and available()


def available() -> bool:
    """True when numba can be imported (the ``fast`` extra is installed; a caller may hide it by setting
    ``sys.modules["numba"] = None``, as the benchmarks do to time the numpy reference)."""
    try:
        return importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):  # ValueError: a module in sys.modules without a spec (None)
        return False


class Scratch:
    """Flow-long buffers kept from one plane to the next: a 16,384-GPU ECMP plane needs ~200 MB of them, and fresh
    pages cost more CPU time (the kernel faults and zeroes them: ~1 s over 8 planes) than the kernels spend on them.
    Arrays taken from one named buffer share its memory with those taken from it before (the routing walk's
    temporaries and the filling's lists are never alive together); they are valid until its next use."""

    def __init__(self) -> None:
        self._buffers: dict[str, np.ndarray] = {}

    def take(self, name: str, parts: list[tuple[int, Any]]) -> list[np.ndarray]:
        """Uninitialised 1-D arrays of (length, dtype) ``parts``, side by side in the buffer ``name`` (grown when
        short)."""
        sizes = [-(-n * np.dtype(t).itemsize // 64) * 64 for n, t in parts]  # 64-byte aligned
        buf = self._buffers.pop(name, None)
        if buf is None or len(buf) < sum(sizes):
            del buf  # the old buffer goes before the larger one comes
            buf = np.empty(sum(sizes), dtype=np.uint8)
        self._buffers[name] = buf
        out, start = [], 0
        for (n, t), size in zip(parts, sizes, strict=True):
            out.append(buf[start:start + n * np.dtype(t).itemsize].view(t))
            start += size
        return out


def _take(scratch: Scratch | None, name: str, parts: list[tuple[int, Any]]) -> list[np.ndarray]:
    return [np.empty(n, dtype=t) for n, t in parts] if scratch is None else scratch.take(name, parts)


def _links(routes: np.ndarray, members: np.ndarray, nbytes: np.ndarray, local: np.ndarray, carried: np.ndarray
           ) -> tuple[int, int]:
    """Kernel: number the links the routes use 0..n-1 in ascending id into ``local`` (int32 [L], -1 elsewhere),
    add ``members * nbytes`` of every flow to its links in ``carried`` [L] (each of ``members``, ``nbytes`` float64
    [F], or [1] for one value for all); returns (n, route entries)."""
    num_f, num_h = routes.shape
    entries = 0
    for f in range(num_f):
        for c in range(num_h):
            r = routes[f, c]
            if r >= 0:
                local[r] = 0
                carried[r] += members[f if members.shape[0] > 1 else 0] * nbytes[f if nbytes.shape[0] > 1 else 0]
                entries += 1
    num_l = 0
    for r in range(local.shape[0]):
        if local[r] == 0:
            local[r] = num_l
            num_l += 1
    return num_l, entries


def _fill(routes: np.ndarray, members: np.ndarray, uniform: float, capacity: np.ndarray, local: np.ndarray,
          num_l: int, tol: float, other: np.ndarray, flows: np.ndarray, rate: np.ndarray, load: np.ndarray) -> int:
    """Kernel: progressive filling of ``maxmin.max_min`` (same rounds, same arithmetic per link) over ``routes``
    int32 [F, H] (-1 padding) numbered by ``local``; ``capacity`` float64 [L]. Writes ``rate`` [F] and ``load``
    [L]; returns the rounds.

    Each link keeps the list of its route entries, and each entry
    the flow's other links (``other`` [entries * (H - 1)], local ids): a link that fills freezes the entries whose
    other links filled no earlier (processing stamps), so no per-flow array is read at random. The rate of a flow
    is the level of its first full link, set at the end. ``members`` float64 [F] (or [1], one value for all) is
    read through ``flows`` [entries] only when the values differ (``uniform`` 0.0)."""
    num_f, num_h = routes.shape
    width = num_h - 1
    links = np.empty(num_l, np.int64)
    for r in range(local.shape[0]):
        if local[r] >= 0:
            links[local[r]] = r
    cap = np.empty(num_l)
    for i in range(num_l):
        cap[i] = capacity[links[i]]
    residual = cap.copy()
    weight = np.zeros(num_l + 1)  # slot num_l: the padding of ``other`` points there (never read)
    count = np.zeros(num_l + 1, np.int64)
    num_active = 0
    top = 0.0
    for f in range(num_f):
        routed = False
        for c in range(num_h):
            r = routes[f, c]
            if r >= 0:
                i = local[r]
                weight[i] += members[f if members.shape[0] > 1 else 0]
                count[i + 1] += 1
                routed = True
        if routed:
            num_active += 1
            top = max(top, members[f if members.shape[0] > 1 else 0])
    ptr = np.cumsum(count)
    entries = ptr[num_l]
    free = ptr[:-1].copy()
    for c in range(num_h):  # column by column: the entries of one column fill few lists at a time
        for f in range(num_f):
            r = routes[f, c]
            if r < 0:
                continue
            i = local[r]
            j = free[i]
            free[i] = j + 1
            if flows.shape[0]:
                flows[j] = f
            k = j * width
            for c2 in range(num_h):
                if c2 != c:
                    r2 = routes[f, c2]
                    other[k] = local[r2] if r2 >= 0 else num_l
                    k += 1
    tiny = 1e-12 * max(top, 1.0)
    share = np.empty(num_l)
    full = np.empty(num_l, np.int64)
    level_of = np.full(num_l, np.inf)  # the level at which each link filled
    stamp = np.full(num_l + 1, np.iinfo(np.int64).max)  # order in which full links froze their entries
    done = 0
    level = 0.0
    rounds = 0
    act = np.arange(num_l)  # the links still carrying active flows (weight > tiny; weights only fall), ascending
    num_act = num_l
    while entries > 0:
        rounds += 1
        low = np.inf
        kept = 0
        for n in range(num_act):
            i = act[n]
            if weight[i] > tiny:
                act[kept] = i
                kept += 1
                share[i] = residual[i] / weight[i]
                low = min(low, share[i])
        num_act = kept
        if not num_act:
            break
        step = max(low, 0.0)
        level += step
        num_full = 0
        for n in range(num_act):
            i = act[n]
            residual[i] -= step * weight[i]
            if residual[i] <= tol * cap[i]:
                full[num_full] = i
                num_full += 1
        if num_full == 0:  # rounding left no link exactly full: take the tightest
            for n in range(num_act):
                i = act[n]
                if share[i] <= low * (1 + 1e-9):
                    full[num_full] = i
                    num_full += 1
        for n in range(num_full):
            i = full[n]
            stamp[i] = done
            done += 1
            level_of[i] = level
            mine = stamp[i]
            for j in range(ptr[i], ptr[i + 1]):  # branch-free: whether an entry is frozen is a coin toss
                k = j * width
                live = True
                links_here = 1
                for c in range(width):
                    o = other[k + c]
                    live &= stamp[o] >= mine
                    links_here += o < num_l
                m = (uniform if uniform > 0.0 else members[flows[j]]) * live  # x - 0.0 is x: frozen changes nothing
                num_active -= live
                entries -= links_here * live  # weight[i] is left as it is: it is set to 0 at the end of the round
                for c in range(width):
                    weight[other[k + c]] -= m  # padding lands in the spare slot num_l
        if num_active == 0:
            break
        for n in range(num_full):
            weight[full[n]] = 0.0
    for i in range(num_l):
        load[links[i]] = max(cap[i] - residual[i], 0.0)
    for f in range(num_f):
        low = np.inf
        for c in range(num_h):
            r = routes[f, c]
            if r >= 0:
                low = min(low, level_of[local[r]])
        rate[f] = low if low < np.inf else 0.0
    return rounds


def _ecmp_start(src: np.ndarray, dst: np.ndarray, ep_leaf: np.ndarray, ep_up: np.ndarray, ep_down: np.ndarray,
                dead: np.ndarray, dev_switch: np.ndarray, leaf_col: np.ndarray, dist: np.ndarray, num_t: int,
                far: int, ok: np.ndarray, up: np.ndarray, down: np.ndarray, cell: np.ndarray, moving: np.ndarray
                ) -> tuple[int, int]:
    """Kernel: the set-up of ``routing.route_flows`` for F flows of NIC endpoints ``src``/``dst``: ``ok`` [F]
    (both NICs cabled and live, the leaves connected), the NIC links ``up``/``down`` [F] (-1 where not ok), and
    the walkers: flows that cross switches, in order, with their (switch, leaf) ``cell``; returns (walkers, the
    most switch hops)."""
    num = 0
    steps = 0
    for f in range(src.shape[0]):
        s_leaf = ep_leaf[src[f]]
        d_leaf = ep_leaf[dst[f]]
        u = ep_up[src[f]]
        d = ep_down[dst[f]]
        good = s_leaf >= 0 and d_leaf >= 0 and not dead[u] and not dead[d]
        hops = 0
        c = 0
        if good:
            c = dev_switch[s_leaf] * num_t + leaf_col[d_leaf]
            hops = dist[c]
            good = hops != far
        ok[f] = good
        up[f] = u if good else -1
        down[f] = d if good else -1
        if good and hops > 0:
            cell[num] = c
            moving[num] = f
            num += 1
            steps = max(steps, hops)
    return num, steps


def _moving(dist: np.ndarray, cell: np.ndarray, moving: np.ndarray, num: int) -> int:
    """Kernel: keep the first ``num`` walkers whose ``cell`` is not yet at its leaf (in order); returns how many."""
    kept = 0
    for i in range(num):
        if dist[cell[i]] > 0:
            cell[kept] = cell[i]
            moving[kept] = moving[i]
            kept += 1
    return kept


def _hop(cell: np.ndarray, moving: np.ndarray, num: int, draw: np.ndarray, cnt: np.ndarray, ptr: np.ndarray,
         link_table: np.ndarray, next_switch: np.ndarray, num_t: int, out: np.ndarray, hop: int) -> None:
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
    import numba  # the optional extra, loaded on first use

    # cache=True: machine code beside this module, or in the user's cache folder when that is read-only (above)
    return {f.__name__: numba.njit(cache=True, nogil=True)(f) for f in (_links, _fill, _ecmp_start, _moving, _hop)}


def ecmp_routes(src: np.ndarray, dst: np.ndarray, ep_leaf: np.ndarray, ep_up: np.ndarray, ep_down: np.ndarray,
                dead: np.ndarray, dev_switch: np.ndarray, leaf_col: np.ndarray, dist: np.ndarray, cnt: np.ndarray,
                ptr: np.ndarray, link_table: np.ndarray, next_switch: np.ndarray, num_t: int, far: int,
                rng: np.random.Generator, scratch: Scratch | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``routing.route_flows`` under ECMP: (routes int32 [F, 2 + most switch hops], ok bool [F]), the same links
    from the same draws: ``rng.random(walkers)`` hop by hop, walkers in flow order. ``dist``, ``cnt``, ``ptr``
    are the next-hop tables flattened over (switch, leaf) cells; ``next_switch`` [L] the switch a link enters.
    With ``scratch`` the routes are one of its buffers (valid until its next use)."""
    kernels = _kernels()
    num_f = len(src)
    ok = np.empty(num_f, dtype=np.bool_)
    wide = np.int64 if num_f >= 1 << 31 or len(dist) >= 1 << 31 else np.int32  # flow-long: int32 where ids fit
    up, down, cell, moving, draws = _take(scratch, "work", [(num_f, np.int32), (num_f, np.int32), (num_f, wide),
                                                             (num_f, wide), (num_f, np.float64)])
    num, steps = kernels["_ecmp_start"](src, dst, ep_leaf, ep_up, ep_down, dead, dev_switch, leaf_col, dist, num_t,
                                        far, ok, up, down, cell, moving)
    width = int(steps) + 2
    out = _take(scratch, "routes", [(num_f * width, np.int32)])[0].reshape(num_f, width)
    out.fill(-1)
    out[:, 0] = up
    out[:, -1] = down
    num = int(num)
    for hop in range(int(steps)):
        num = int(kernels["_moving"](dist, cell, moving, num))
        if not num:
            break
        kernels["_hop"](cell, moving, num, rng.random(num, out=draws[:num]), cnt, ptr, link_table, next_switch,
                        num_t, out, hop + 1)
    return out, ok


def _values(a: np.ndarray) -> np.ndarray:
    """float64 [F], or [1] where ``a`` is one value broadcast (no flow-long copy of a constant column)."""
    a = np.asarray(a, dtype=np.float64)
    return a[:1].copy() if a.ndim == 1 and len(a) > 1 and a.strides[0] == 0 else np.ascontiguousarray(a)


def compiled_max_min(flow_routes: np.ndarray, members: np.ndarray, capacity: np.ndarray, nbytes: np.ndarray,
                     scratch: Scratch | None = None) -> tuple[Solution, np.ndarray]:
    """``maxmin.max_min`` without bundles, and ``maxmin.route_loads(flow_routes, members * nbytes, ...)``,
    compiled: (solution, carried bytes float64 [L]). ``flow_routes`` int [F, H] link ids, -1 padding; ``members``
    float64 [F] > 0; ``nbytes`` float64 [F] bytes per member; ``capacity`` float64 [L]. Besides the routes it holds
    (H - 1) local link ids per route entry (int16 while a plane uses fewer than 32,768 links: 100 MB for a
    16,384-GPU ECMP plane). With ``scratch`` the rates are one of its buffers (valid until its next use)."""
    kernels = _kernels()
    routes = np.ascontiguousarray(flow_routes, dtype=np.int32)
    members = _values(members)
    capacity = np.ascontiguousarray(capacity, dtype=np.float64)
    local = np.full(len(capacity), -1, dtype=np.int32)
    carried = np.zeros(len(capacity))
    num_l, entries = kernels["_links"](routes, members, _values(nbytes), local, carried)
    small = np.int16 if num_l < 1 << 15 else np.int32
    uniform = float(members[0]) if len(members) and (members == members[0]).all() else 0.0
    other, flows, rate = _take(scratch, "work", [(int(entries) * max(routes.shape[1] - 1, 0), small),
                                                 (0 if uniform > 0 else int(entries), np.int32),
                                                 (len(routes), np.float64)])
    load = np.zeros(len(capacity))
    rounds = int(kernels["_fill"](routes, members, uniform, capacity, local, int(num_l), FULL_TOLERANCE, other,
                                  flows, rate, load))
    return Solution(rate, load, rounds), carried
