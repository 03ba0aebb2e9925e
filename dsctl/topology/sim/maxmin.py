"""Max-min fair rates by progressive filling, vectorised over flows.

A flow f stands for ``members[f]`` interchangeable transfers that each get the same rate ``x_f`` (bytes/s);
it crosses routes ``flow_routes[f]``: a route id below L is one link, an id ``L + b`` is bundle b, a set of
links each carrying a fraction of the flow (adaptive routing). Link l carries
``load_l = sum_f members_f * x_f * a_lf`` (``a_lf`` = 1 on a plain link, the bundle fraction otherwise).

Progressive filling: raise every unfrozen ``x_f`` together; the rise that first fills some link is
``m = min_l residual_l / active_l`` with ``active_l = sum_{unfrozen f} members_f * a_lf``; freeze every flow
crossing a link filled in this round; repeat. Each round is a few bincounts over the unfrozen flows' route
entries, and frozen flows are dropped from the arrays, so the cost is O(sum over rounds of unfrozen entries);
rounds = distinct bottleneck levels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: a link whose residual is at most this fraction of its capacity counts as full
FULL_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Solution:
    """``rate`` float64 [F] bytes/s per member (0 for flows without routes); ``link_load`` float64 [L] bytes/s;
    ``rounds`` progressive-filling rounds."""

    rate: np.ndarray
    link_load: np.ndarray
    rounds: int


def route_loads(flow_routes: np.ndarray, weight: np.ndarray, num_links: int, bundle_ptr: np.ndarray,
                bundle_link: np.ndarray, bundle_frac: np.ndarray) -> np.ndarray:
    """Per-link sum of ``weight[f] * a_lf`` (float64 [L]); ``weight`` float [F]. Column by column (no copies of
    the whole route table)."""
    num_b = len(bundle_ptr) - 1
    load = np.zeros(num_links)
    per_bundle = np.zeros(num_b)
    for col in flow_routes.T:
        plain = (col >= 0) & (col < num_links)
        load += np.bincount(col[plain], weights=weight[plain], minlength=num_links)
        if num_b:
            bundled = col >= num_links
            per_bundle += np.bincount(col[bundled] - num_links, weights=weight[bundled], minlength=num_b)
    if num_b:
        rows = np.repeat(np.arange(num_b), np.diff(bundle_ptr))
        load += np.bincount(bundle_link, weights=bundle_frac * per_bundle[rows], minlength=num_links)
    return load


def _entries(flow_routes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(route id, flow) of every route entry, column by column (cheaper than a 2-D mask on tall arrays)."""
    ids, flows = [], []
    for col in flow_routes.T:
        valid = np.flatnonzero(col >= 0)
        ids.append(col[valid])
        flows.append(valid.astype(np.int32))
    if not ids:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(ids), np.concatenate(flows)


def _csr(keys: np.ndarray, values: np.ndarray, num_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """(ptr [num_keys+1], values grouped by key)."""
    # 16-bit keys sort by radix in linear time (every plane of a 16,384-GPU MPFT has fewer routes than that)
    order = np.argsort(keys.astype(np.uint16) if num_keys <= 1 << 16 else keys, kind="stable")
    return np.r_[0, np.cumsum(np.bincount(keys, minlength=num_keys))], values[order]


def _gather(ptr: np.ndarray, values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Concatenation of the CSR rows ``keys``."""
    count = ptr[keys + 1] - ptr[keys]
    offset = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    return values[np.repeat(ptr[keys], count) + offset]


def max_min(flow_routes: np.ndarray, members: np.ndarray, capacity: np.ndarray, bundle_ptr: np.ndarray,
            bundle_link: np.ndarray, bundle_frac: np.ndarray) -> Solution:
    """Max-min fair per-member rates (see module docstring). ``capacity`` float64 [L] bytes/s (> 0 on every link
    a flow uses); ``members`` float64 [F] > 0.

    Incremental: the active load of every link is kept up to date by subtracting the flows frozen in a round,
    found through a route -> flows index, so a round costs O(L + entries of the flows it freezes).
    """
    num_all = len(capacity)
    num_b = len(bundle_ptr) - 1
    flow_routes = np.asarray(flow_routes)
    members = np.asarray(members, dtype=np.float64)
    num_f = len(members)
    rate = np.zeros(num_f)
    # work on the links this problem touches only (one plane of a large fabric), in int32 local ids
    touched = np.zeros(num_all, dtype=bool)
    for col in flow_routes.T:
        touched[col[(col >= 0) & (col < num_all)]] = True
    touched[bundle_link] = True
    links = np.flatnonzero(touched)
    num_links = len(links)
    local_of = np.full(num_all, -1, dtype=np.int32)
    local_of[links] = np.arange(num_links, dtype=np.int32)
    local_routes = np.empty(flow_routes.shape, dtype=np.int32)
    for c, col in enumerate(flow_routes.T):
        plain = col < num_all
        local_routes[:, c] = np.where(plain, local_of[np.where(plain, col, 0)], col - num_all + num_links)
        local_routes[col < 0, c] = -1
    ent_route, ent_flow = _entries(local_routes)
    bundle_link_local = local_of[bundle_link].astype(np.int64)
    stamp = np.zeros(num_f, dtype=np.int64)
    capacity_local = capacity[links].astype(np.float64)
    residual = capacity_local.copy()
    num_r = num_links + num_b
    route_ptr, route_flows = _csr(ent_route, ent_flow, num_r)
    b_rows = np.repeat(np.arange(num_b), np.diff(bundle_ptr))
    link_bundle_ptr, link_bundles = _csr(bundle_link_local, b_rows, num_links)
    route_w = np.bincount(ent_route, weights=members[ent_flow], minlength=num_r)

    def link_weight(route_delta: np.ndarray) -> np.ndarray:
        out = route_delta[:num_links].copy()
        if num_b:
            out += np.bincount(bundle_link_local, weights=bundle_frac * route_delta[num_links:][b_rows],
                               minlength=num_links)
        return out

    link_w = link_weight(route_w)
    active = np.zeros(num_f, dtype=bool)
    active[ent_flow] = True
    level = 0.0
    rounds = 0
    tiny = 1e-12 * max(float(members.max(initial=0.0)), 1.0)
    while active.any():
        rounds += 1
        used = link_w > tiny
        if not used.any():
            break
        share = residual[used] / link_w[used]
        step = max(float(share.min()), 0.0)
        level += step
        residual -= step * np.where(used, link_w, 0.0)
        full = np.flatnonzero(used & (residual <= FULL_TOLERANCE * capacity_local))
        if not len(full):  # rounding left no link exactly full: take the tightest
            full = np.flatnonzero(used)[share <= share.min() * (1 + 1e-9)]
        full_routes = full
        if num_b:
            full_routes = np.r_[full, num_links + np.unique(_gather(link_bundle_ptr, link_bundles, full))]
        cand = _gather(route_ptr, route_flows, full_routes)
        cand = cand[active[cand]]
        stamp[cand] = np.arange(len(cand))
        frozen = cand[stamp[cand] == np.arange(len(cand))]  # each flow once, without sorting
        rate[frozen] = level
        active[frozen] = False
        routes = local_routes[frozen]
        keep = routes >= 0
        delta = np.bincount(routes[keep], weights=np.broadcast_to(members[frozen][:, None], routes.shape)[keep],
                            minlength=num_r)
        link_w -= link_weight(delta)
        link_w[full] = 0.0
    load = np.zeros(num_all)
    load[links] = np.maximum(capacity_local - residual, 0.0)
    return Solution(rate, load, rounds)


#: most re-solves of ``finish_times``; flows still running after them keep their last rates
MAX_PHASES = 64


def finish_times(flow_routes: np.ndarray, members: np.ndarray, nbytes: np.ndarray, capacity: np.ndarray,
                 bundle_ptr: np.ndarray, bundle_link: np.ndarray, bundle_frac: np.ndarray,
                 first: Solution | None = None) -> np.ndarray:
    """Completion time (s) of every flow of ``nbytes`` per member when rates are re-solved as flows finish.

    Fluid events: solve max-min on the flows still running, advance to the earliest finish, drop the finished
    flows, repeat (at most MAX_PHASES solves, then the remaining flows keep their rates). inf for flows without
    routes. ``first``: the solution of the full problem, if already computed.
    """
    num_f = len(members)
    left = np.asarray(nbytes, dtype=np.float64).copy()
    done = np.full(num_f, np.inf)
    running = np.flatnonzero((flow_routes >= 0).any(axis=1) & (left > 0)) if num_f else np.zeros(0, dtype=np.int64)
    done[(left <= 0) & (flow_routes >= 0).any(axis=1)] = 0.0
    now = 0.0
    for phase in range(MAX_PHASES):
        if not len(running):
            break
        if phase == 0 and first is not None:
            rate = first.rate[running]
        else:
            rate = max_min(flow_routes[running], members[running], capacity, bundle_ptr, bundle_link,
                           bundle_frac).rate
        with np.errstate(divide="ignore"):
            need = np.where(rate > 0, left[running] / np.maximum(rate, 1e-300), np.inf)
        if phase == MAX_PHASES - 1 or not np.isfinite(need).any():
            done[running] = now + need
            break
        step = float(need.min())
        finished = need <= step * (1 + 1e-9)
        now += step
        done[running[finished]] = now
        left[running] -= rate * step
        running = running[~finished]
    return done
