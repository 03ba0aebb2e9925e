"""Vectorised construction of one fat-tree plane: leaves, spines (and cores), and the cable table between them.

All functions return local indices (leaves 0..L-1, spines 0..S-1, cores 0..C-1) and 1-based switch port
numbers. ``plan.py`` replicates one plane across all planes with index offsets.

Uplink spreading rule (two-tier and pod level): uplink j of leaf l goes to spine ``(j + o_l) mod S``.
A leaf with at least S uplinks reaches every spine; its offset ``o_l`` rotates the remainder so spines
stay balanced. A leaf with fewer than S uplinks (a partly filled leaf) starts at spine 0, so every pair
of leaves shares spine 0: at most 3 switch hops between any two NICs of a plane.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tier:
    """Links from a lower tier to an upper tier, one entry per cable.

    - ``lower`` / ``upper`` int64 [U]: local switch index in each tier.
    - ``lower_port`` / ``upper_port`` int64 [U]: 1-based port on each switch.
    - ``num_upper``: switches in the upper tier.
    """

    lower: np.ndarray
    lower_port: np.ndarray
    upper: np.ndarray
    upper_port: np.ndarray
    num_upper: int


def rank_within(groups: np.ndarray, num_groups: int) -> np.ndarray:
    """0-based rank of each element among the elements of its group, in input order. int64 [n]."""
    order = np.argsort(groups, kind="stable")
    counts = np.bincount(groups, minlength=num_groups)
    starts = np.cumsum(counts) - counts
    ranks = np.empty(len(groups), dtype=np.int64)
    ranks[order] = np.arange(len(groups)) - np.repeat(starts, counts)
    return ranks


def spread_uplinks(uplinks: np.ndarray, first_up_port: int, upper_ports: int) -> Tier:
    """Connect lower switches with ``uplinks[l]`` uplinks each to the fewest upper switches that fit.

    ``uplinks`` int [L]; uplink j of switch l uses its port ``first_up_port + j``. Each upper switch has
    ``upper_ports`` ports for this tier, numbered from 1 in the order its links arrive (by lower switch).
    """
    uplinks = np.asarray(uplinks, dtype=np.int64)
    total = int(uplinks.sum())
    num_lower = len(uplinks)
    lower = np.repeat(np.arange(num_lower), uplinks)
    starts = np.cumsum(uplinks) - uplinks
    j = np.arange(total) - np.repeat(starts, uplinks)
    num_upper = max(1, -(-total // upper_ports))
    while True:
        full = uplinks >= num_upper
        offsets = np.where(full, (np.cumsum(uplinks * full) - uplinks * full) % num_upper, 0)
        upper = (j + offsets[lower]) % num_upper
        load = np.bincount(upper, minlength=num_upper)
        if total == 0 or int(load.max()) <= upper_ports:
            break
        num_upper += 1
    upper_port = rank_within(upper, num_upper) + 1
    return Tier(lower, j + first_up_port, upper, upper_port, num_upper if total else 0)


@dataclass(frozen=True)
class PlaneLayout:
    """One plane, in local indices.

    - ``ep_node`` / ``ep_rail`` int64 [E]: node index and rail (NIC slot within the plane) of each endpoint.
    - ``ep_leaf`` / ``ep_port`` int64 [E]: leaf and 1-based leaf port it is cabled to.
    - ``leaf_pod`` int64 [L]: 0-based pod of each leaf (all 0 in a two-tier plane); ``spine_pod`` likewise.
    - ``leaf_spine``: leaf -> spine links; ``spine_core``: spine -> core links (None in a two-tier plane).
    - ``leaf_number`` / ``spine_number`` / ``core_number``: the 1-based numbers used in names
      (within the pod for three-tier planes).
    """

    ep_node: np.ndarray
    ep_rail: np.ndarray
    ep_leaf: np.ndarray
    ep_port: np.ndarray
    num_leaves: int
    leaf_pod: np.ndarray
    leaf_spine: Tier
    spine_pod: np.ndarray
    spine_core: Tier | None
    leaf_number: np.ndarray
    spine_number: np.ndarray
    core_number: np.ndarray
    leaf_down_ports: int

    @property
    def num_spines(self) -> int:
        return self.leaf_spine.num_upper

    @property
    def num_cores(self) -> int:
        return 0 if self.spine_core is None else self.spine_core.num_upper

    @property
    def num_pods(self) -> int:
        return int(self.leaf_pod.max()) + 1 if len(self.leaf_pod) else 0


def place_endpoints(num_nodes: int, rails: int, down_ports: int, rail_optimized: bool
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Assign the ``num_nodes * rails`` endpoints of a plane to leaf ports.

    Node-contiguous: endpoints in (node, rail) order fill leaves ``down_ports`` at a time.
    Rail-optimized: each rail gets its own ceil(num_nodes / down_ports) leaves, filled in node order.
    Returns (node, rail, leaf, port, num_leaves), each array int64 [num_nodes * rails].
    """
    if rail_optimized:
        per_rail = -(-num_nodes // down_ports)
        rail = np.repeat(np.arange(rails), num_nodes)
        node = np.tile(np.arange(num_nodes), rails)
        leaf = rail * per_rail + node // down_ports
        port = node % down_ports + 1
        return node, rail, leaf, port, per_rail * rails
    pos = np.arange(num_nodes * rails)
    node, rail = pos // rails, pos % rails
    return node, rail, pos // down_ports, pos % down_ports + 1, -(-len(pos) // down_ports)


def build_two_tier(num_nodes: int, rails: int, radix: int, down_ports: int, oversubscription: float,
                   rail_optimized: bool) -> PlaneLayout:
    """A leaf/spine plane: leaves have ``down_ports`` NIC ports and ceil(used/oversubscription) uplinks.

    A plane that fits on one leaf gets no spines.
    """
    node, rail, leaf, port, num_leaves = place_endpoints(num_nodes, rails, down_ports, rail_optimized)
    used = np.bincount(leaf, minlength=num_leaves)
    uplinks = np.minimum(np.ceil(used / oversubscription - 1e-9).astype(np.int64), radix - down_ports)
    if num_leaves == 1:  # one leaf per plane: a spine layer would carry nothing
        uplinks[:] = 0
    tier = spread_uplinks(uplinks, down_ports + 1, radix)
    zeros_l = np.zeros(num_leaves, dtype=np.int64)
    return PlaneLayout(node, rail, leaf, port, num_leaves, zeros_l, tier, np.zeros(tier.num_upper, dtype=np.int64),
                       None, np.arange(1, num_leaves + 1), np.arange(1, tier.num_upper + 1),
                       np.zeros(0, dtype=np.int64), down_ports)


def build_three_tier(num_nodes: int, rails: int, radix: int) -> PlaneLayout:
    """A k-ary three-tier plane, pods of k/2 edge (leaf) and up to k/2 aggregation (spine) switches.

    Non-blocking: each leaf has as many uplinks as used NIC ports, each aggregation switch as many core
    uplinks as used down ports. Aggregation switch i of every pod connects to core group i (cores i·k/2 ..),
    uplink c to core c of the group; a core's port p+1 faces pod p. A single leaf gets no aggregation
    switches and a single pod no cores.
    """
    half = radix // 2
    node, rail, leaf, port, num_leaves = place_endpoints(num_nodes, rails, half, False)
    used = np.bincount(leaf, minlength=num_leaves)
    leaf_pod = np.arange(num_leaves) // half
    num_pods = int(leaf_pod[-1]) + 1
    lowers, lports, uppers, uports, spine_pod, spine_local = [], [], [], [], [], []
    spine_base = 0
    for pod in range(num_pods):
        members = np.flatnonzero(leaf_pod == pod)
        tier = spread_uplinks(used[members] if num_leaves > 1 else np.zeros(1, dtype=np.int64), half + 1, half)
        lowers.append(members[tier.lower])
        lports.append(tier.lower_port)
        uppers.append(tier.upper + spine_base)
        uports.append(tier.upper_port)
        spine_pod.append(np.full(tier.num_upper, pod))
        spine_local.append(np.arange(tier.num_upper))
        spine_base += tier.num_upper
    leaf_spine = Tier(np.concatenate(lowers), np.concatenate(lports), np.concatenate(uppers),
                      np.concatenate(uports), spine_base)
    s_pod = np.concatenate(spine_pod)
    s_local = np.concatenate(spine_local)
    s_used = np.bincount(leaf_spine.upper, minlength=spine_base)
    if num_pods == 1:  # one pod: the aggregation layer already joins every leaf, no core needed
        s_used[:] = 0
    # core (group g = local agg index, member c): present where some pod's agg g has > c uplinks
    group_width = np.zeros(half, dtype=np.int64)
    np.maximum.at(group_width, s_local, s_used)
    core_base = np.cumsum(group_width) - group_width
    spine_of_up = np.repeat(np.arange(spine_base), s_used)
    up_starts = np.cumsum(s_used) - s_used
    c = np.arange(int(s_used.sum())) - np.repeat(up_starts, s_used)
    core = core_base[s_local[spine_of_up]] + c
    spine_core = Tier(spine_of_up, c + half + 1, core, s_pod[spine_of_up] + 1, int(group_width.sum()))
    leaf_number = np.arange(num_leaves) % half + 1
    return PlaneLayout(node, rail, leaf, port, num_leaves, leaf_pod, leaf_spine, s_pod, spine_core,
                       leaf_number, s_local + 1, np.arange(1, spine_core.num_upper + 1), half)
