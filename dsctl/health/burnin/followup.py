"""Follow-up rounds: test each object of an ambiguous finding on its own, against proven-good partners.

For a NIC: a pair with a proven-good NIC of another node on the same leaf (the path is the two NIC links only).
For a cable direction: a proven-good NIC pair whose static route crosses that direction and nothing else that
is unproven (found by routing candidate pairs with the simulator). For a GPU: a proven-good GPU of its node.
Tests are packed into rounds whose endpoints are disjoint; each test runs in both directions, as the probe does.
"""

from __future__ import annotations

import numpy as np

from dsctl.health.burnin.design import Round, leaf_positions, make_round, plain_routes
from dsctl.health.burnin.locate import Obj, num_cables
from dsctl.topology.sim.graph import SimGraph
from dsctl.topology.sim.routing import NextHops

#: candidate partners routed per cable direction
MAX_CANDIDATES = 4096


def _good_eps(graph: SimGraph, proven: np.ndarray, eps: np.ndarray) -> np.ndarray:
    return eps[proven[graph.ep_up[eps]] & proven[graph.ep_down[eps]]]


def _through(graph: SimGraph, hops: NextHops, proven: np.ndarray, link: int, src: np.ndarray, dst: np.ndarray
             ) -> tuple[int, int] | None:
    """The first pair (src[i], dst[i]) whose route uses ``link`` and otherwise proven links only."""
    if not len(src):
        return None
    routes = plain_routes(graph, hops, src, dst, "ib")
    ok = (routes == link).any(axis=1)
    others = np.where((routes >= 0) & (routes != link), ~proven[np.maximum(routes, 0)], False).any(axis=1)
    hit = np.flatnonzero(ok & ~others)
    return (int(src[hit[0]]), int(dst[hit[0]])) if len(hit) else None


def tests_for(graph: SimGraph, hops: NextHops, proven: np.ndarray, obj: Obj, busy: set[int]
              ) -> list[tuple[str, int, int]]:
    """(kind, a, b) pairs that test ``obj`` alone; [] where no proven-good partner exists."""
    by_leaf = leaf_positions(graph)
    if obj.kind == "nic":
        leaf = int(graph.ep_leaf[obj.key])
        node = obj.key // graph.nics_per_node
        mates = _good_eps(graph, proven, by_leaf.get(leaf, np.zeros(0, dtype=np.int64)))
        good = [int(q) for q in mates if q // graph.nics_per_node != node and int(q) not in busy]
        return [("ib", obj.key, good[0])] if good else []
    if obj.kind == "gpu":
        node = obj.key // graph.gpus_per_node
        gpus = node * graph.gpus_per_node + np.arange(graph.gpus_per_node)
        good = [int(g) for g in gpus if g != obj.key and proven[graph.gpu_out[g]] and proven[graph.gpu_in[g]]
                and int(g) + (1 << 40) not in busy]
        return [("nvlink", obj.key, good[0])] if good else []
    if obj.kind != "cable":
        return []
    out = []
    c, num_c = obj.key, num_cables(graph)
    leaf = int(graph.link_src[c])
    plane = int(graph.device_plane[leaf])
    home = _good_eps(graph, proven, by_leaf.get(leaf, np.zeros(0, dtype=np.int64)))
    away = np.concatenate([_good_eps(graph, proven, eps) for lf, eps in by_leaf.items()
                           if lf != leaf and int(graph.device_plane[lf]) == plane] or [np.zeros(0, np.int64)])
    home = np.array([q for q in home.tolist() if q not in busy], dtype=np.int64)
    away = np.array([q for q in away.tolist() if q not in busy], dtype=np.int64)[:MAX_CANDIDATES]
    for link in (c, c + num_c):
        pair = None
        for a in home[:4].tolist():
            pair = (_through(graph, hops, proven, link, np.full(len(away), a), away) if link == c else
                    _through(graph, hops, proven, link, away, np.full(len(away), a)))
            if pair:
                break
        if pair and not set(pair) & busy:
            out.append(("ib", *pair))
            busy |= set(pair)
    return out


def follow_up_rounds(graph: SimGraph, hops: NextHops, proven: np.ndarray, groups: list[list[Obj]], first: int
                     ) -> list[Round]:
    """Rounds testing every object of every ambiguous group alone, endpoints disjoint within a round."""
    pending = [obj for group in groups for obj in group]
    rounds: list[Round] = []
    while pending and len(rounds) < 4:
        busy: set[int] = set()
        ib: list[tuple[int, int]] = []
        nv: list[tuple[int, int]] = []
        later = []
        for obj in pending:
            tests = tests_for(graph, hops, proven, obj, busy)
            if not tests and obj.kind in ("nic",) and obj.key in busy:
                later.append(obj)
                continue
            for kind, a, b in tests:
                key = (1 << 40) if kind == "nvlink" else 0
                busy |= {a + key, b + key}
                (nv if kind == "nvlink" else ib).append((a, b))
        for kind, pairs in (("follow-up", ib), ("nvlink-follow-up", nv)):
            if pairs:
                ends_a = np.array([p[0] for p in pairs], dtype=np.int64)
                ends_b = np.array([p[1] for p in pairs], dtype=np.int64)
                name = f"follow-up-{first + len(rounds) + 1}"
                rounds.append(make_round(graph, hops, name, "nvlink" if kind != "follow-up" else "follow-up",
                                         np.r_[ends_a, ends_b], np.r_[ends_b, ends_a]))
        if later == pending:
            break
        pending = later
    return rounds
