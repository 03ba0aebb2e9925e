"""Burn-in rounds designed from a plan: which NIC talks to which, round by round, so that every cable is driven.

A *round* is a set of directed flows (NIC endpoint -> NIC endpoint, or GPU -> GPU over NVLink) that run at the
same time; every pair exchanges in both directions, so a round is a perfect matching of the endpoints it uses.
Endpoint ``e = node * K + nic`` and link ids are the simulator's (:mod:`dsctl.topology.sim.graph`).

Design, per plane, with the NICs of leaf ``a`` at positions ``0..n-1`` (port order, ``SimGraph.ep_pos``):

- ``intra-a``: ``(a, p) <-> (a, p + h)`` for ``p < h = n // 2`` (same leaf, other node): NIC links only.
- ``intra-b``: ``(a, p) <-> (a, h + (p + 1) mod h)``: new partners, so a slow NIC is told from its partner.
- ``cross-r`` (r = 1, 2): leaf ``a`` paired with leaf ``m_r(a)`` (``a XOR r`` when the leaf count is a power of
  two, else the circle method), ``(a, p) <-> (m_r(a), (p + r) mod n)``. Under static (ftree-like, destination-
  based) routing the first hop out of a leaf is chosen by the destination's position, so the n flows leaving a
  leaf use n distinct uplinks and the n flows entering a leaf n distinct down cables: on a non-blocking leaf
  every leaf-spine cable carries exactly one flow in each direction, at line rate. The offset r moves the source
  NIC of each uplink from round to round (a NIC and the uplink it feeds are then never confounded).
- ``nvlink``: GPU ``2i <-> 2i + 1`` inside every node.

Rounds run in the order cross-1, intra-a, intra-b, cross-2, nvlink: cross-1 alone covers a non-blocking
two-tier plane (intra-a a single-leaf one), the others make every fault separable.

Lower bound: in one round a leaf with n NICs can put at most n x line rate onto its k uplinks, so driving every
uplink at line rate needs at least ``ceil(k / n)`` rounds, and every NIC link at least 1: ``LB = max(1, max over
leaves ceil(k / n))`` network rounds (plus one NVLink round, which can overlap). The covering rounds are the
first rounds after which every cable direction was at line rate (checked by routing the flows with the
simulator and solving max-min rates); the other design rounds are there to localise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dsctl.topology.sim.graph import NIC_DOWN, NIC_UP, NVL_IN, NVL_OUT, SW_DOWN, SW_UP, SimGraph
from dsctl.topology.sim.maxmin import max_min
from dsctl.topology.sim.routing import NextHops, route_flows

#: a link counts as driven at line rate when its load reaches this fraction of its capacity
LINE_RATE_FRACTION = 0.999


@dataclass(frozen=True)
class Round:
    """One round: ``src``/``dst`` int64 [F] NIC endpoints (``kind`` != "nvlink") or GPUs (``kind`` == "nvlink");
    ``routes`` int32 [F, H] link ids (-1 padding) from the simulator's static routing; ``expected_gbps`` float64
    [F] the max-min rate of each flow in Gb/s when exactly this round's flows run on the healthy fabric."""

    name: str
    kind: str
    src: np.ndarray
    dst: np.ndarray
    routes: np.ndarray
    expected_gbps: np.ndarray

    @property
    def num_flows(self) -> int:
        return len(self.src)


@dataclass(frozen=True)
class CableCoverage:
    """Cable directions driven at line rate: ``driven`` bool [L] per link; counts per plane (-1 = NVLink)."""

    driven: np.ndarray
    per_plane: dict[int, tuple[int, int]]
    uncovered: tuple[str, ...]

    @property
    def fraction(self) -> float:
        done = sum(a for a, _ in self.per_plane.values())
        total = sum(b for _, b in self.per_plane.values())
        return done / total if total else 1.0


@dataclass(frozen=True)
class RoundDesign:
    """The designed rounds, how many of them cover every cable, and the lower bound (network rounds)."""

    rounds: tuple[Round, ...]
    covering_rounds: int
    lower_bound: int
    coverage: CableCoverage


def plain_routes(graph: SimGraph, hops: NextHops, src: np.ndarray, dst: np.ndarray, kind: str) -> np.ndarray:
    """Routes (int32 [F, H]) of flows: the simulator's static routing for NIC flows, NVLink out/in for GPUs."""
    if kind == "nvlink":
        return np.stack([graph.gpu_out[src], graph.gpu_in[dst]], axis=1).astype(np.int32)
    dead = np.zeros(graph.num_links, dtype=bool)
    return route_flows(graph, hops, dead, src, dst, "static", 0).flow_routes


def solve_rates(graph: SimGraph, routes: np.ndarray, capacity: np.ndarray | None = None) -> np.ndarray:
    """Max-min rate (Gb/s, float64 [F]) of each flow on ``capacity`` (bytes/s [L]; default: the plan's)."""
    cap = graph.link_cap if capacity is None else capacity
    if not len(routes):
        return np.zeros(0)
    sol = max_min(routes, np.ones(len(routes)), cap, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64),
                  np.zeros(0))
    return sol.rate * 8 / 1e9


def make_round(graph: SimGraph, hops: NextHops, name: str, kind: str, src: np.ndarray, dst: np.ndarray) -> Round:
    """A round of the given flows, routed and with their expected rates."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    routes = plain_routes(graph, hops, src, dst, kind)
    return Round(name, kind, src, dst, routes, solve_rates(graph, routes))


def leaf_positions(graph: SimGraph, selected: np.ndarray | None = None) -> dict[int, np.ndarray]:
    """Cabled NIC endpoints of every leaf (device index) in port order (of the ``selected`` bool [N] nodes)."""
    usable = graph.ep_leaf >= 0
    if selected is not None:
        usable &= np.repeat(selected, graph.nics_per_node)
    cabled = np.flatnonzero(usable)
    order = cabled[np.lexsort((graph.ep_pos[cabled], graph.ep_leaf[cabled]))]
    leaves, starts = np.unique(graph.ep_leaf[order], return_index=True)
    bounds = np.r_[starts, len(order)]
    return {int(leaf): order[bounds[i]:bounds[i + 1]] for i, leaf in enumerate(leaves)}


def _pairs(a: np.ndarray, b: np.ndarray, graph: SimGraph) -> tuple[np.ndarray, np.ndarray]:
    """Both directions of the pairs a[i] <-> b[i], dropping pairs on one node (they would not use the fabric)."""
    keep = a // graph.nics_per_node != b // graph.nics_per_node
    a, b = a[keep], b[keep]
    return np.r_[a, b], np.r_[b, a]


def _leaf_matching(num: int, r: int) -> list[tuple[int, int]]:
    """Round r (1-based) of a matching of ``num`` leaves: XOR for powers of two, the circle method otherwise."""
    if num < 2:
        return []
    if num & (num - 1) == 0:
        x = ((r - 1) % (num - 1)) + 1
        return [(a, a ^ x) for a in range(num) if a < a ^ x]
    m = num + (num % 2)
    ring = [0] + [1 + (k + r - 1) % (m - 1) for k in range(m - 1)]
    pairs = [(ring[k], ring[m - 1 - k]) for k in range(m // 2)]
    return [(a, b) for a, b in pairs if a < num and b < num]


def design_flows(graph: SimGraph, selected: np.ndarray | None = None
                 ) -> list[tuple[str, str, np.ndarray, np.ndarray]]:
    """(name, kind, src, dst) of every designed round (all planes at once; planes share no cable) over the
    ``selected`` bool [N] nodes (default all)."""
    by_leaf = leaf_positions(graph, selected)
    plane_leaves: dict[int, list[int]] = {}
    for leaf in sorted(by_leaf):
        plane_leaves.setdefault(int(graph.device_plane[leaf]), []).append(leaf)
    out = []
    for name in ("intra-a", "intra-b"):
        srcs, dsts = [], []
        for eps in by_leaf.values():
            h = len(eps) // 2
            if h == 0:
                continue
            first = np.arange(h)
            partner = h + first if name == "intra-a" else h + (first + 1) % h
            s, d = _pairs(eps[first], eps[partner], graph)
            srcs.append(s)
            dsts.append(d)
        if srcs:
            out.append((name, "intra", np.concatenate(srcs), np.concatenate(dsts)))
    for r in (1, 2):
        srcs, dsts = [], []
        for leaves in plane_leaves.values():
            for i, j in _leaf_matching(len(leaves), r):
                a, b = by_leaf[leaves[i]], by_leaf[leaves[j]]
                n = min(len(a), len(b))
                s, d = _pairs(a[:n], b[(np.arange(n) + r) % n], graph)
                srcs.append(s)
                dsts.append(d)
        if srcs:
            out.append((f"cross-{r}", "cross", np.concatenate(srcs), np.concatenate(dsts)))
    g = graph.gpus_per_node
    if g >= 2:
        nodes = np.arange(graph.num_nodes) if selected is None else np.flatnonzero(selected)
        base = nodes[:, None] * g
        even = (base + np.arange(0, g - 1, 2)).ravel()
        out.append(("nvlink", "nvlink", np.r_[even, even + 1], np.r_[even + 1, even]))
    order = ("cross-1", "intra-a", "intra-b", "cross-2", "nvlink")
    return sorted(out, key=lambda item: order.index(item[0]))


def driven_links(graph: SimGraph, rnd: Round) -> np.ndarray:
    """bool [L]: links the round loads to line rate (from the max-min rates of its flows)."""
    load = np.zeros(graph.num_links)
    valid = rnd.routes >= 0
    rate = np.broadcast_to((rnd.expected_gbps * 1e9 / 8)[:, None], rnd.routes.shape)
    np.add.at(load, rnd.routes[valid], rate[valid])
    return load >= LINE_RATE_FRACTION * graph.link_cap


def lower_bound(graph: SimGraph) -> int:
    """Network rounds needed at least: ``max(1, max over leaves ceil(uplinks / NICs))`` (module docstring)."""
    by_leaf = leaf_positions(graph)
    ups = np.bincount(graph.link_src[graph.link_kind == SW_UP], minlength=len(graph.device_names))
    worst = max((math.ceil(int(ups[leaf]) / len(eps)) for leaf, eps in by_leaf.items() if len(eps)), default=1)
    return max(1, worst)


def wanted_links(graph: SimGraph, selected: np.ndarray | None, nvlink: bool = True) -> np.ndarray:
    """bool [L]: the links a burn-in over the ``selected`` nodes should drive: every switch-to-switch cable
    direction, the NIC links and (with ``nvlink``) the NVLink links of the selected nodes."""
    kinds = (NIC_UP, NIC_DOWN, SW_UP, SW_DOWN, NVL_OUT, NVL_IN) if nvlink else (NIC_UP, NIC_DOWN, SW_UP, SW_DOWN)
    wanted = np.isin(graph.link_kind, kinds)
    if selected is not None:
        node = np.full(graph.num_links, -1, dtype=np.int64)
        nic = np.isin(graph.link_kind, (NIC_UP, NIC_DOWN))
        node[nic] = np.where(graph.link_kind[nic] == NIC_UP, graph.link_src[nic], graph.link_dst[nic])
        nvl = graph.link_gpu >= 0
        node[nvl] = graph.link_gpu[nvl] // graph.gpus_per_node
        wanted &= (node < 0) | selected[np.maximum(node, 0)]
    return wanted


def coverage(graph: SimGraph, rounds: list[Round] | tuple[Round, ...], selected: np.ndarray | None = None,
             nvlink: bool = True) -> CableCoverage:
    """Which cable directions (and NVLink directions) the rounds drive at line rate, per plane."""
    driven = np.zeros(graph.num_links, dtype=bool)
    for rnd in rounds:
        driven |= driven_links(graph, rnd)
    return coverage_of(graph, driven, selected, nvlink)


def coverage_of(graph: SimGraph, driven: np.ndarray, selected: np.ndarray | None = None, nvlink: bool = True
                ) -> CableCoverage:
    """The coverage of the ``driven`` bool [L] links among those a burn-in of ``selected`` should drive."""
    wanted = wanted_links(graph, selected, nvlink)
    per_plane = {}
    for plane in sorted(set(graph.link_plane[wanted].tolist())):
        mine = wanted & (graph.link_plane == plane)
        per_plane[int(plane)] = (int(np.count_nonzero(driven & mine)), int(np.count_nonzero(mine)))
    missing = np.flatnonzero(wanted & ~driven)
    return CableCoverage(driven, per_plane, tuple(graph.link_name(int(x)) for x in missing[:20]))


def design(graph: SimGraph, hops: NextHops, selected: np.ndarray | None = None, nvlink: bool = True) -> RoundDesign:
    """Every designed round, routed and rated, with the covering-round count and the lower bound, over the
    ``selected`` bool [N] nodes (default all; a subset may leave spine cables uncovered: the coverage says)."""
    rounds = [make_round(graph, hops, name, kind, s, d) for name, kind, s, d in design_flows(graph, selected)
              if nvlink or kind != "nvlink"]
    wanted = wanted_links(graph, selected, nvlink=False)
    driven = np.zeros(graph.num_links, dtype=bool)
    covering = len([r for r in rounds if r.kind != "nvlink"])
    for k, rnd in enumerate(r for r in rounds if r.kind != "nvlink"):
        driven |= driven_links(graph, rnd)
        if driven[wanted].all():
            covering = k + 1
            break
    return RoundDesign(tuple(rounds), covering, lower_bound(graph), coverage(graph, rounds, selected, nvlink))
