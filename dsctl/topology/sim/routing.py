"""Routing over the simulator's graph: shortest (equal-cost) paths between NIC endpoints of one plane.

For every switch ``x`` and destination leaf ``t`` the next hops are the live switch links ``x -> y`` with
``dist(y, t) = dist(x, t) - 1`` (breadth-first distances over live links). A path is chosen hop by hop:

- ``static``: by destination, as a subnet manager fills forwarding tables (ftree-like): at hop h the
  destination's position ``p`` on its leaf picks candidate ``(p // D) mod k`` where ``k`` is the number of
  candidates and ``D`` the product of the distinct next switches of the earlier hops (so the first hop spreads
  the destinations of one leaf over the spines, the next picks among parallel cables). Same routes every run.
- ``ecmp``: a seeded per-flow hash picks one candidate at every hop (one QP = one path).
- ``adaptive``: ideal adaptive routing: a flow is spread evenly over all its equal-cost paths (each switch
  splits it over its candidates in proportion to the paths onward, which balances load even around a failed
  cable), so a flow is a fractional "bundle" of links shared by every flow between the same two leaves.

Routes index into links 0..L-1 and bundles L..L+B-1 (``Routes.bundle_*``, CSR rows by bundle).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from dsctl.errors import InputError
from dsctl.topology.sim import compiled
from dsctl.topology.sim.graph import MAX_NEXT_HOP_ENTRIES, SW_DOWN, SW_UP, SimGraph

ROUTINGS = ("static", "ecmp", "adaptive")
_FAR = np.iinfo(np.int16).max


@dataclass(frozen=True)
class NextHops:
    """Next-hop table: for switch s (0..S-1) and leaf t (0..T-1), candidates ``link[ptr[s,t] : ptr[s,t]+cnt[s,t]]``.

    ``dist`` int16 [S, T] switch hops to leaf t (``_FAR`` unreachable); ``nsw`` [S, T] distinct next switches;
    ``dev_switch`` maps a device index to s (-1 for nodes), ``leaf_col`` a device index to t (-1 if not a leaf).
    ``share`` float64 [entries]: fraction of the equal-cost paths from s to t that start with each candidate.
    """

    dist: np.ndarray
    ptr: np.ndarray
    cnt: np.ndarray
    nsw: np.ndarray
    link: np.ndarray
    dev_switch: np.ndarray
    leaf_col: np.ndarray
    share: np.ndarray


def _path_shares(dist: np.ndarray, es: np.ndarray, et: np.ndarray, ey: np.ndarray) -> np.ndarray:
    """For each candidate (s -> y toward t): paths(y, t) / paths(s, t), counting equal-cost paths by distance."""
    paths = np.where(dist == 0, 1.0, 0.0)
    level = dist[es, et]
    for d in range(1, int(level.max(initial=0)) + 1):
        at = level == d
        np.add.at(paths, (es[at], et[at]), paths[ey[at], et[at]])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(paths[es, et] > 0, paths[ey, et] / paths[es, et], 0.0)


def next_hops(graph: SimGraph, dead: np.ndarray, planes: Iterable[int] | None = None) -> NextHops:
    """Distances and next-hop candidates over live switch links (``dead`` bool [L] marks failed links), on
    ``planes`` (default every plane; a plane left out is unreachable: nothing may be routed on it)."""
    num_dev = len(graph.device_names)
    tier = np.array(graph.device_tier)
    switches = np.flatnonzero(tier != "node")
    leaves = np.flatnonzero(tier == "leaf")
    dev_switch = np.full(num_dev, -1, dtype=np.int64)
    dev_switch[switches] = np.arange(len(switches))
    leaf_col = np.full(num_dev, -1, dtype=np.int64)
    leaf_col[leaves] = np.arange(len(leaves))
    num_s, num_t = len(switches), len(leaves)
    live = np.flatnonzero(((graph.link_kind == SW_UP) | (graph.link_kind == SW_DOWN)) & ~dead)
    dist = np.full((num_s, num_t), _FAR, dtype=np.int16)
    entries_s, entries_t, entries_l, entries_y = [], [], [], []
    total = 0
    for plane in range(graph.num_planes) if planes is None else planes:
        p_sw = np.flatnonzero(graph.device_plane[switches] == plane)
        p_leaf = np.flatnonzero(graph.device_plane[leaves] == plane)
        if not len(p_leaf):
            continue
        edges = live[graph.link_plane[live] == plane]
        src = dev_switch[graph.link_src[edges]]
        dst = dev_switch[graph.link_dst[edges]]
        local = np.full(num_s, -1, dtype=np.int64)
        local[p_sw] = np.arange(len(p_sw))
        ls, ld = local[src], local[dst]
        d = np.full((len(p_sw), len(p_leaf)), _FAR, dtype=np.int16)
        d[local[dev_switch[leaves[p_leaf]]], np.arange(len(p_leaf))] = 0
        order = np.argsort(ls, kind="stable")
        ls_sorted, ld_sorted = ls[order], ld[order]
        starts = np.r_[0, np.flatnonzero(np.diff(ls_sorted)) + 1] if len(order) else np.zeros(0, dtype=np.int64)
        for level in range(len(p_sw)):
            if not len(order):
                break
            front = d[ld_sorted] == level
            reach = np.logical_or.reduceat(front, starts, axis=0)
            rows = ls_sorted[starts]
            new = reach & (d[rows] == _FAR)
            if not new.any():
                break
            block = d[rows]
            block[new] = level + 1
            d[rows] = block
        dist[np.ix_(p_sw, p_leaf)] = d
        # candidates: edge x -> y, every leaf t with d[y, t] = d[x, t] - 1
        good = (d[ld] != _FAR) & (d[ld].astype(np.int32) == d[ls].astype(np.int32) - 1)
        e_idx, t_idx = np.nonzero(good)
        total += len(e_idx)
        if total > MAX_NEXT_HOP_ENTRIES:
            raise InputError(f"the plan is too large to simulate: more than {MAX_NEXT_HOP_ENTRIES:,} next-hop "
                             "entries", hint="simulate a smaller plan (fewer nodes or pods)")
        entries_s.append(src[e_idx])
        entries_t.append(p_leaf[t_idx])
        entries_l.append(edges[e_idx])
        entries_y.append(dst[e_idx])
    cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64))  # noqa: E731
    es, et, el, ey = cat(entries_s), cat(entries_t), cat(entries_l), cat(entries_y)
    key = es * num_t + et
    order = np.lexsort((el, key))
    key, el, ey, es, et = key[order], el[order], ey[order], es[order], et[order]
    cnt = np.bincount(key, minlength=num_s * num_t)
    ptr = np.cumsum(cnt) - cnt
    # distinct next switches per (switch, leaf): parallel cables to one switch count once
    # one entry per (switch, leaf, next switch): a sort of one int64 key (np.unique over columns, or numpy 2's
    # hashed unique, costs a second at 16,384 GPUs)
    pairs = np.sort(key * num_s + ey)
    pairs = pairs[np.r_[True, pairs[1:] != pairs[:-1]]] if len(pairs) else pairs
    nsw = np.bincount(pairs // num_s, minlength=num_s * num_t)
    return NextHops(dist, ptr.reshape(num_s, num_t), cnt.reshape(num_s, num_t), nsw.reshape(num_s, num_t), el,
                    dev_switch, leaf_col, _path_shares(dist, es, et, ey))


@dataclass(frozen=True)
class Routes:
    """Routes of F flows: ``flow_routes`` int32 [F, H] ids (-1 padding) into links (< L) and bundles (>= L);
    bundle b uses ``bundle_link[bundle_ptr[b]:bundle_ptr[b+1]]`` with fractions ``bundle_frac``.
    ``routable`` bool [F]: False where no live path exists (those rows hold -1 only)."""

    flow_routes: np.ndarray
    bundle_ptr: np.ndarray
    bundle_link: np.ndarray
    bundle_frac: np.ndarray
    routable: np.ndarray


def _walk(hops: NextHops, graph: SimGraph, start: np.ndarray, target: np.ndarray, routing: str,
          key: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Links of one path per flow from switch ``start`` to leaf column ``target`` (int32 [F, max hops], -1 pad)."""
    num_t = hops.dist.shape[1]
    # flow-long arrays in int32 where the tables allow (4.2M flows per plane at 16,384 GPUs)
    small = np.int32 if hops.dist.size < 1 << 31 and len(hops.link) < 1 << 31 else np.int64
    dist, nsw = hops.dist.ravel(), hops.nsw.ravel()
    cnt, ptr = hops.cnt.ravel().astype(small), hops.ptr.ravel().astype(small)
    link_table, next_switch = hops.link.astype(small), hops.dev_switch.astype(small)[graph.link_dst]
    cell = start.astype(small) * small(num_t) + target  # flat (switch, leaf) index: one gather per table
    steps = int(dist[cell].max()) if len(start) else 0
    out = np.full((len(start), steps), -1, dtype=np.int32)
    div = np.ones(len(start), dtype=np.int64) if routing != "ecmp" else np.ones(0, dtype=np.int64)
    moving: np.ndarray | slice = slice(None)
    draws = np.empty(len(start) if routing == "ecmp" else 0)  # one buffer for every hop's draws
    for h in range(steps):
        here = dist[cell] > 0
        if not here.all():
            moving = np.flatnonzero(here) if isinstance(moving, slice) else moving[here]
            cell = cell[here]
        if not len(cell):
            break
        k = cnt[cell]
        if routing == "ecmp":
            draw = rng.random(out=draws[:len(cell)])  # the same numbers as rng.random(len(cell))
            draw *= k
            pick = draw.astype(small)
            del draw
            np.minimum(pick, k - 1, out=pick)
        else:
            pick = (key[moving] // div[moving]) % k
            div[moving] *= np.maximum(nsw[cell], 1)
        pick += ptr[cell]
        link = link_table[pick]
        del pick, k
        out[moving, h] = link
        cell %= num_t
        cell += next_switch[link] * small(num_t)
    return out


def _bundles(hops: NextHops, graph: SimGraph, start: np.ndarray, target: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split over every equal-cost path from each (start switch, target leaf) pair: CSR (ptr [B+1], link, fraction)."""
    num_b = len(start)
    rows, links, fracs = [], [], []
    s_row: np.ndarray = np.arange(num_b)
    s_cur: np.ndarray = start.copy()
    s_frac: np.ndarray = np.ones(num_b)
    num_s = len(hops.dist)
    while len(s_row):
        t = target[s_row]
        k = hops.cnt[s_cur, t]
        rep = np.repeat(np.arange(len(s_row)), k)
        off = np.arange(len(rep)) - np.repeat(np.cumsum(k) - k, k)
        entry = np.repeat(hops.ptr[s_cur, t], k) + off
        link = hops.link[entry]
        frac = np.repeat(s_frac, k) * hops.share[entry]
        row = s_row[rep]
        rows.append(row)
        links.append(link)
        fracs.append(frac)
        nxt = hops.dev_switch[graph.link_dst[link]]
        going = hops.dist[nxt, target[row]] > 0
        merged_key = row[going] * num_s + nxt[going]
        uniq, inv = np.unique(merged_key, return_inverse=True)
        s_frac = np.bincount(inv, weights=frac[going], minlength=len(uniq))
        s_row, s_cur = uniq // num_s, uniq % num_s
    all_rows = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    all_links = np.concatenate(links) if links else np.zeros(0, dtype=np.int64)
    all_fracs = np.concatenate(fracs) if fracs else np.zeros(0)
    uniq, inv = np.unique(all_rows * graph.num_links + all_links, return_inverse=True)
    merged = np.bincount(inv, weights=all_fracs, minlength=len(uniq))
    row, link = uniq // graph.num_links, uniq % graph.num_links
    ptr = np.r_[0, np.cumsum(np.bincount(row, minlength=num_b))]
    return ptr, link, merged


def _pairs(start: np.ndarray, target: np.ndarray, num_t: int) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys ``start * num_t + target`` ascending, each flow's position among them), as ``np.unique``
    with ``return_inverse`` but by a table over the key range (no sort of the flows) when that range is small."""
    wide = (int(start.max(initial=0)) + 1) * num_t >= 1 << 31
    key = start.astype(np.int64) * num_t + target if wide else start.astype(np.int32) * np.int32(num_t) + target
    span = int(key.max(initial=-1)) + 1
    if span > 4 * len(key) + (1 << 16):
        return np.unique(key, return_inverse=True)
    seen = np.zeros(span, dtype=bool)
    seen[key] = True
    position = (np.cumsum(seen) - 1).astype(np.int32)
    return np.flatnonzero(seen), position[key]


def _compiled_ecmp(graph: SimGraph, hops: NextHops, dead: np.ndarray, src_ep: np.ndarray, dst_ep: np.ndarray,
                   seed: int, scratch: compiled.Scratch | None = None) -> Routes:
    """``route_flows`` under ECMP by the compiled kernels (the same routes from the same draws)."""
    out, ok = compiled.ecmp_routes(
        src_ep, dst_ep, graph.ep_leaf, graph.ep_up, graph.ep_down, np.ascontiguousarray(dead, dtype=np.bool_),
        hops.dev_switch, hops.leaf_col, hops.dist.ravel(), hops.cnt.ravel(), hops.ptr.ravel(), hops.link,
        hops.dev_switch[graph.link_dst], hops.dist.shape[1], _FAR, np.random.default_rng(seed), scratch)
    return Routes(out, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0), ok)


def route_flows(graph: SimGraph, hops: NextHops, dead: np.ndarray, src_ep: np.ndarray, dst_ep: np.ndarray,
                routing: str, seed: int, scratch: compiled.Scratch | None = None) -> Routes:
    """Route NIC-to-NIC flows: NIC up link, switch path, NIC down link. ``dead`` bool [L] failed links.
    ``scratch``: buffers the compiled ECMP routes may reuse (the routes are then valid until its next use)."""
    if routing not in ROUTINGS:
        raise InputError(f"{routing!r} is not valid; use static, ecmp or adaptive", field="routing")
    if graph.num_links + len(src_ep) >= 1 << 31:
        raise InputError(f"{len(src_ep):,} flows are too many to route at once")
    if compiled.chosen(routing, len(src_ep)):
        return _compiled_ecmp(graph, hops, dead, np.asarray(src_ep), np.asarray(dst_ep), seed, scratch)
    # endpoint ids index tables only: int32 ids (the all-to-all builders') stay int32, no flow-long int64 copies
    src_ep, dst_ep = (a if a.dtype.kind == "i" else a.astype(np.int64) for a in (np.asarray(src_ep),
                                                                                  np.asarray(dst_ep)))
    num_f = len(src_ep)
    num_t = hops.dist.shape[1]
    small = np.int32 if hops.dist.size < 1 << 31 and graph.num_links < 1 << 31 else np.int64
    # flow-long arrays in int32 where the tables allow it (a 16,384-GPU plane routes 4.2M flows at once)
    s_leaf, d_leaf = graph.ep_leaf.astype(small)[src_ep], graph.ep_leaf.astype(small)[dst_ep]
    ok = (s_leaf >= 0) & (d_leaf >= 0)  # index -1 (uncabled) is masked by the leaf test
    start = hops.dev_switch.astype(small)[s_leaf]
    target = hops.leaf_col.astype(small)[d_leaf]
    del s_leaf, d_leaf
    dist = hops.dist.ravel()[start * small(num_t) + target]
    up, down = graph.ep_up.astype(small)[src_ep], graph.ep_down.astype(small)[dst_ep]
    ok &= ~dead[up] & ~dead[down] & (dist != _FAR)
    dist[~ok] = 0
    everyone = bool((dist > 0).all())
    cross: np.ndarray | slice = slice(None) if everyone else np.flatnonzero(dist > 0)
    del dist
    empty = np.zeros(0, dtype=np.int64)
    if routing == "adaptive":
        uniq, inv = _pairs(start if everyone else start[cross], target if everyone else target[cross], num_t)
        del start, target
        ptr, link, frac = _bundles(hops, graph, uniq // num_t, uniq % num_t)
        out = np.full((num_f, 3), -1, dtype=np.int32)
        out[cross, 1] = inv
        out[cross, 1] += graph.num_links
        del inv
    else:
        rng = np.random.default_rng(seed)
        if everyone:
            key = graph.ep_pos[dst_ep] if routing == "static" else dst_ep[:0]
            path = _walk(hops, graph, start, target, routing, key, rng)
        else:
            key = graph.ep_pos[dst_ep[cross]] if routing == "static" else dst_ep[:0]
            path = _walk(hops, graph, start[cross], target[cross], routing, key, rng)
        del start, target
        out = np.full((num_f, path.shape[1] + 2), -1, dtype=np.int32)
        if everyone:
            out[:, 1:-1] = path
        else:
            out[cross, 1:-1] = path
        del path
        ptr, link, frac = np.zeros(1, dtype=np.int64), empty, np.zeros(0)
    out[:, 0] = up
    out[:, -1] = down
    out[~ok, 0] = -1
    out[~ok, -1] = -1
    return Routes(out, ptr, link, frac, ok)
