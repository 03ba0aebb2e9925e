"""Identical planes: when plane ``p`` is plane ``r`` with other switch names (same cables, capacities and NIC
ports, node for node) and carries the same flows (NIC ``k_p`` of every node in place of NIC ``k_r``), its max-min
solution is plane ``r``'s with link and endpoint indices moved over. A multi-plane fat tree under a symmetric
workload (all-to-all, EP dispatch/combine) has 8 such planes: the simulator solves one and maps the rest.

Only routings that do not draw per plane qualify (``adaptive``, ``static``; ECMP hashes every plane with its own
seed, as different NIC addresses do on real switches), and only fabrics without failed links.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dsctl.topology.sim.graph import SimGraph
from dsctl.topology.sim.traffic import Flows

#: routings whose paths depend on the plane's structure alone (not on a per-plane random draw)
SYMMETRIC_ROUTINGS = ("adaptive", "static")


@dataclass(frozen=True)
class PlaneMap:
    """How plane ``plane`` maps onto the solved plane ``ref``: ``links[i]`` is the plane's link that plays the
    role of ``ref_links[i]`` (both int64 [plane's network links], in index order); an endpoint ``e`` of plane
    ``ref`` is endpoint ``e + nic_shift`` of plane ``plane``."""

    plane: int
    ref: int
    ref_links: np.ndarray
    links: np.ndarray
    nic_shift: int


def _relabelled_links(graph: SimGraph, plane: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(link indices of ``plane`` in index order, their (kind, capacity, src, dst) rows with every switch named by
    its rank among the plane's switches); None when the plane has no network link."""
    links = np.flatnonzero(graph.link_plane == plane)
    if not len(links):
        return None
    num_nodes = graph.num_nodes
    switches = np.flatnonzero((graph.device_plane == plane) & (np.arange(len(graph.device_plane)) >= num_nodes))
    rank = np.full(len(graph.device_plane), -1, dtype=np.int64)
    rank[:num_nodes] = np.arange(num_nodes)
    rank[switches] = num_nodes + np.arange(len(switches))
    src, dst = graph.link_src[links], graph.link_dst[links]
    if (rank[src] < 0).any() or (rank[dst] < 0).any():  # a cable to another plane's switch: not a clean plane
        return None
    rows = np.stack([graph.link_kind[links].astype(np.float64), graph.link_cap[links], rank[src].astype(np.float64),
                     rank[dst].astype(np.float64)], axis=1)
    return links, rows


def plane_maps(graph: SimGraph, routing: str, dead: np.ndarray) -> dict[int, PlaneMap]:
    """Planes that are copies of a lower plane (``plane -> PlaneMap``); empty when the routing, a failure or the
    wiring rules symmetry out. One NIC per node on each plane is required (NIC ``k`` of a node is on plane
    ``nic_plane[k]``)."""
    if routing not in SYMMETRIC_ROUTINGS or dead.any() or graph.num_planes < 2:
        return {}
    k = graph.nics_per_node
    nic_of_plane = {int(p): i for i, p in enumerate(graph.nic_plane.tolist())}
    if len(nic_of_plane) != k or len(nic_of_plane) != graph.num_planes:
        return {}
    ref = 0
    ref_view = _relabelled_links(graph, ref)
    if ref_view is None:
        return {}
    ref_links, ref_rows = ref_view
    maps = {}
    ref_eps = np.arange(graph.num_nodes) * k + nic_of_plane[ref]
    for plane in range(1, graph.num_planes):
        view = _relabelled_links(graph, plane)
        if view is None or view[1].shape != ref_rows.shape or not np.array_equal(view[1], ref_rows):
            continue
        links, _ = view
        shift = nic_of_plane[plane] - nic_of_plane[ref]
        position = np.full(graph.num_links, -1, dtype=np.int64)
        position[ref_links] = np.arange(len(ref_links))
        eps = ref_eps + shift
        same_ports = all(np.array_equal(_moved(ours, position, links), theirs)
                         for ours, theirs in ((graph.ep_up[ref_eps], graph.ep_up[eps]),
                                              (graph.ep_down[ref_eps], graph.ep_down[eps])))
        if same_ports and np.array_equal(graph.ep_pos[ref_eps], graph.ep_pos[eps]):
            maps[plane] = PlaneMap(plane, ref, ref_links, links, shift)
    return maps


def _moved(ref_links: np.ndarray, position: np.ndarray, links: np.ndarray) -> np.ndarray:
    """The mapped plane's links standing where ``ref_links`` (link ids of the ref plane, -1 for none) stand;
    -2 for a link that is not on the ref plane (then nothing matches)."""
    out = np.full(len(ref_links), -1, dtype=np.int64)
    cabled = ref_links >= 0
    pos = position[ref_links[cabled]]
    out[cabled] = np.where(pos >= 0, links[np.maximum(pos, 0)], -2)
    return out


def same_flows(ref: Flows, flows: Flows, nic_shift: int) -> bool:
    """Whether ``flows`` (of a mapped plane) are ``ref``'s flows on that plane's NICs, flow for flow."""
    return (len(ref) == len(flows) and np.array_equal(ref.src + nic_shift, flows.src)
            and np.array_equal(ref.dst + nic_shift, flows.dst) and np.array_equal(ref.members, flows.members)
            and np.array_equal(ref.bytes, flows.bytes) and np.array_equal(ref.job, flows.job))


def move_link_values(values: np.ndarray, plane_map: PlaneMap, into: np.ndarray) -> None:
    """Add ``values`` (per link, [L], nonzero on the ref plane's links) onto the mapped plane's links of ``into``."""
    into[plane_map.links] += values[plane_map.ref_links]
