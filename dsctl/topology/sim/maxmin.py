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
        if not num_b:  # padding -1 counts into a slot that is dropped
            load += np.bincount(col + 1, weights=weight, minlength=num_links + 1)[1:]
            continue
        plain = (col >= 0) & (col < num_links)
        load += np.bincount(col[plain], weights=weight[plain], minlength=num_links)
        if num_b:
            bundled = col >= num_links
            per_bundle += np.bincount(col[bundled] - num_links, weights=weight[bundled], minlength=num_b)
    if num_b:
        rows = np.repeat(np.arange(num_b), np.diff(bundle_ptr))
        load += np.bincount(bundle_link, weights=bundle_frac * per_bundle[rows], minlength=num_links)
    return load


#: a round freezes its flows by scanning every flow's routes when the full routes hold at least this share of the
#: active route entries; below it, through a route -> flows index built on first need (one sort of the entries)
SCAN_SHARE = 0.25


def _csr(keys: np.ndarray, values: np.ndarray, num_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """(ptr [num_keys+1], values grouped by key, in their order within a key)."""
    # 16-bit keys sort by radix in linear time (every plane of a 16,384-GPU MPFT has fewer routes than that)
    order = np.argsort(keys.astype(np.uint16) if num_keys <= 1 << 16 else keys, kind="stable")
    return np.r_[0, np.cumsum(np.bincount(keys, minlength=num_keys))], values[order]


def _route_index(local_routes: np.ndarray, rows: np.ndarray, num_r: int) -> tuple[np.ndarray, np.ndarray]:
    """Route -> flows CSR (ptr [num_r+1], flow ids) over the flows ``rows``: a route's flows in column order, then
    flow order (a stable counting sort of the route entries, one column at a time: no array as long as every
    entry besides the result)."""
    flows = rows.astype(np.int32 if len(local_routes) < 1 << 31 else np.int64)
    every = len(rows) == len(local_routes)  # rows are then 0..F-1: the columns are read as they are

    def column(c: int) -> np.ndarray:
        return local_routes[:, c] if every else local_routes[rows, c]

    counts = [np.bincount(column(c) + 1, minlength=num_r + 1)[1:] for c in range(local_routes.shape[1])]
    ptr = np.r_[0, np.cumsum(np.sum(counts, axis=0))] if counts else np.zeros(num_r + 1, dtype=np.int64)
    out = np.empty(int(ptr[-1]), dtype=flows.dtype)
    # slots in int32 where they fit: flow-long int64 temporaries are each mapped fresh (and faulted in) by malloc
    slot = np.int32 if len(out) < 1 << 31 else np.int64
    free = ptr[:-1].astype(slot)  # next free slot of each route
    for c, count in enumerate(counts):
        col, vals = column(c), flows  # gathered again: one column alive at a time
        if not (col >= 0).all():
            keep = col >= 0
            col, vals = col[keep], flows[keep]
        order: np.ndarray | slice
        if (col[1:] >= col[:-1]).all():  # already grouped (the up links of flows made source by source)
            order, key = slice(None), col
        else:
            order = np.argsort(col.astype(np.uint16) if num_r <= 1 << 16 else col, kind="stable")
            key = col[order]
        del col
        # the j-th entry of route r in this column goes to free[r] + j
        pos = (free - (np.cumsum(count) - count).astype(slot))[key]
        del key
        pos += np.arange(len(pos), dtype=slot)
        out[pos] = vals[order]
        del pos, order
        free += count
    return ptr, out


#: up to this many CSR rows are gathered by slicing (a round fills one link or two: a few slices cost less than
#: the eight array calls of the vectorised gather)
SLICED_ROWS = 8


def _gather(ptr: np.ndarray, values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Concatenation of the CSR rows ``keys``."""
    if len(keys) <= SLICED_ROWS:
        bounds = [(int(ptr[k]), int(ptr[k + 1])) for k in keys.tolist()]
        return (values[bounds[0][0]:bounds[0][1]] if len(bounds) == 1
                else np.concatenate([values[a:b] for a, b in bounds] or [values[:0]]))
    count = ptr[keys + 1] - ptr[keys]
    offset = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    return values[np.repeat(ptr[keys], count) + offset]


def _local_routes(flow_routes: np.ndarray, num_all: int, bundle_link: np.ndarray, num_b: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(links the problem touches [n] ascending, routes in local ids int32 [F, H]: links 0..n-1, bundles n.., -1)."""
    seen = np.zeros(num_all + num_b + 1, dtype=bool)  # by id + 1: the padding -1 and the bundles land aside
    for col in flow_routes.T:
        seen[col + 1] = True
    touched = seen[1:num_all + 1]
    touched[bundle_link] = True
    links = np.flatnonzero(touched)
    to_local = np.full(num_all + num_b + 1, -1, dtype=np.int32)  # the last entry answers the padding id -1
    to_local[links] = np.arange(len(links), dtype=np.int32)
    to_local[num_all:num_all + num_b] = len(links) + np.arange(num_b, dtype=np.int32)
    local_routes = np.empty(flow_routes.shape, dtype=np.int32)
    for c, col in enumerate(flow_routes.T):
        local_routes[:, c] = to_local[col]
    return links, local_routes


def _per_route(local_routes: np.ndarray, rows: np.ndarray | None, weight: np.ndarray | None, num_r: int
               ) -> np.ndarray:
    """Per-route sum of ``weight`` [F] (or count) over the route entries of flows ``rows`` (None: every flow)."""
    out = np.zeros(num_r + 1)
    for c in range(local_routes.shape[1]):
        ids = local_routes[:, c] if rows is None else local_routes[rows, c]
        w = None if weight is None else (weight if rows is None else weight[rows])
        out += np.bincount(ids + 1, weights=w, minlength=num_r + 1)
    return out[1:]


def max_min(flow_routes: np.ndarray, members: np.ndarray, capacity: np.ndarray, bundle_ptr: np.ndarray,
            bundle_link: np.ndarray, bundle_frac: np.ndarray) -> Solution:
    """Max-min fair per-member rates (see module docstring). ``capacity`` float64 [L] bytes/s (> 0 on every link
    a flow uses); ``members`` float64 [F] > 0.

    Incremental: the active load of every link is kept up to date by subtracting the flows frozen in a round.
    A round that freezes a large share of the flows finds them by one scan of the routes; otherwise through a
    route -> flows index (built once, when first needed, over the flows still active), so a round costs
    O(L + entries of the flows it freezes).
    """
    num_all = len(capacity)
    num_b = len(bundle_ptr) - 1
    flow_routes = np.asarray(flow_routes)
    members = np.asarray(members, dtype=np.float64)
    num_f = len(members)
    rate = np.zeros(num_f)
    # work on the links this problem touches only (one plane of a large fabric), in int32 local ids
    links, local_routes = _local_routes(flow_routes, num_all, bundle_link, num_b)
    num_links = len(links)
    num_r = num_links + num_b
    bundle_link_local = np.searchsorted(links, bundle_link)
    capacity_local = capacity[links].astype(np.float64)
    residual = capacity_local.copy()
    b_rows = np.repeat(np.arange(num_b), np.diff(bundle_ptr))
    link_bundle_ptr, link_bundles = _csr(bundle_link_local, b_rows, num_links)
    route_count = _per_route(local_routes, None, None, num_r)
    active_entries = float(route_count.sum())
    # one whole-number member count for every flow (all-to-all planes): a sum of k of them is k times it, exactly
    same = float(members[0]) if num_f and (members == members[0]).all() else 0.0
    whole = same > 0 and same == round(same) and same * max(active_entries, 1.0) < 2.0 ** 53

    def per_route_members(rows: np.ndarray | None, count: np.ndarray | None) -> np.ndarray:
        if whole:
            return (count if count is not None else _per_route(local_routes, rows, None, num_r)) * same
        return _per_route(local_routes, rows, members, num_r)

    def link_weight(route_delta: np.ndarray) -> np.ndarray:
        out = route_delta[:num_links]
        if num_b:
            out = out.copy()
            out += np.bincount(bundle_link_local, weights=bundle_frac * route_delta[num_links:][b_rows],
                               minlength=num_links)
        return out

    link_w = link_weight(per_route_members(None, route_count))
    active = np.zeros(num_f, dtype=bool)
    for c in range(local_routes.shape[1]):
        active |= local_routes[:, c] >= 0
    num_active = int(np.count_nonzero(active))
    index: tuple[np.ndarray, np.ndarray] | None = None
    stamp = np.zeros(0, dtype=np.int64)
    level = 0.0
    rounds = 0
    tiny = 1e-12 * max(float(members.max(initial=0.0)), 1.0)
    full_at = FULL_TOLERANCE * capacity_local
    while active_entries > 0:
        rounds += 1
        used = link_w > tiny
        if not used.any():
            break
        share = residual[used] / link_w[used]
        low = float(share.min())
        step = max(low, 0.0)
        level += step
        np.subtract(residual, step * link_w, out=residual, where=used)  # as residual - step * 0 elsewhere
        full = np.flatnonzero(used & (residual <= full_at))
        if not len(full):  # rounding left no link exactly full: take the tightest
            full = np.flatnonzero(used)[share <= low * (1 + 1e-9)]
        full_routes = full
        if num_b:
            full_routes = np.r_[full, num_links + np.unique(_gather(link_bundle_ptr, link_bundles, full))]
        if index is None and route_count[full_routes].sum() >= SCAN_SHARE * active_entries:
            hit = np.zeros(num_r + 1, dtype=bool)  # hit[-1] stays False for the padding id
            hit[full_routes] = True
            on_full = np.zeros(num_f, dtype=bool)
            for c in range(local_routes.shape[1]):
                on_full |= hit[local_routes[:, c]]
            frozen = np.flatnonzero(on_full & active)
        else:
            if index is None:
                index = _route_index(local_routes, np.flatnonzero(active), num_r)
                stamp = np.zeros(num_f, dtype=np.int32)
            cand = _gather(*index, full_routes)
            cand = cand[active[cand]]
            stamp[cand] = np.arange(len(cand))
            frozen = cand[stamp[cand] == np.arange(len(cand))]  # each flow once, without sorting
        rate[frozen] = level
        active[frozen] = False
        num_active -= len(frozen)
        if not num_active:  # the last flows: nothing left to update (one round, often, under adaptive routing)
            break
        if index is None:  # a scan round, or the round before the index: counts decide the next round's way
            gone = _per_route(local_routes, frozen, None, num_r)
            route_count -= gone
            active_entries -= float(gone.sum())
            delta = per_route_members(frozen, gone)
        else:  # few flows: their route rows at once
            ids = local_routes[frozen].ravel() + 1
            delta = np.bincount(ids, weights=np.repeat(members[frozen], local_routes.shape[1]),
                                minlength=num_r + 1)[1:]
            active_entries -= float(np.count_nonzero(ids))
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
