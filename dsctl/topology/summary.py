"""The numbers an operator wants from a plan: switches, cables, optics, cost, bandwidth, hops, growth room."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dsctl.cluster.plan_file import CABLE_KINDS
from dsctl.topology.plan import Plan, max_nodes


@dataclass(frozen=True)
class CableCounts:
    """Cables by kind, whole cluster. Optics: one transceiver at each end of every cable (assumption)."""

    node_leaf: int
    leaf_spine: int
    spine_core: int
    total: int
    num_transceivers: int


@dataclass(frozen=True)
class CostEstimate:
    """USD: switches, switch-to-switch links and NIC-to-leaf cables at the switch profile's unit prices."""

    switches_usd: float
    inter_switch_links_usd: float
    endpoint_links_usd: float
    total_usd: float
    per_gpu_usd: float


@dataclass(frozen=True)
class UnusedPorts:
    """Switch ports with no cable, whole cluster: leaf NIC-side, leaf uplink side, spine, core."""

    leaf_down: int
    leaf_up: int
    spine: int
    core: int
    total: int


@dataclass(frozen=True)
class PlanSummary:
    """Summary of a plan. Bandwidths in Gb/s (one direction); costs in USD.

    ``bisection_gbps_per_plane`` = min(NICs, leaf uplinks[, spine uplinks]) / 2 x port rate: the traffic that
    can cross a cut splitting a plane's NICs in halves. ``max_switch_hops``: switches on the longest
    shortest path between two NICs of one plane. ``max_nodes``: nodes this kind reaches with these
    switches and planes before it needs another tier.
    """

    kind: str
    node_profile: str
    switch_profile: str
    num_nodes: int
    num_gpus: int
    num_nics_per_node: int
    num_planes: int
    rails_per_plane: int
    radix: int
    port_gbps: float
    oversubscription: float
    leaves_per_plane: int
    spines_per_plane: int
    cores_per_plane: int
    pods_per_plane: int
    num_switches: int
    cables: CableCounts
    cost: CostEstimate
    bisection_gbps_per_plane: float
    bisection_gbps_total: float
    max_switch_hops: int
    max_nodes: int
    growth: str
    unused_ports: UnusedPorts
    notes: tuple[str, ...] = ()


def summarize(plan: Plan) -> PlanSummary:
    """Count everything in ``plan``; O(cables) numpy work."""
    spec, layout = plan.spec, plan.layout
    kinds = np.bincount(plan.cable_kind, minlength=len(CABLE_KINDS))
    n_cables = plan.num_cables
    cables = CableCounts(int(kinds[0]), int(kinds[1]), int(kinds[2]), n_cables, 2 * n_cables)
    switch_cost = spec.switch_usd * plan.num_switches
    isl_cost = spec.link_usd * int(kinds[1] + kinds[2])
    ep_cost = spec.endpoint_link_usd * int(kinds[0])
    total = switch_cost + isl_cost + ep_cost
    num_gpus = spec.num_nodes * spec.num_gpus_per_node
    cost = CostEstimate(switch_cost, isl_cost, ep_cost, total, total / num_gpus if num_gpus else 0.0)

    per_plane = [len(layout.ep_node), len(layout.leaf_spine.lower)]
    if layout.spine_core is not None and layout.num_cores:
        per_plane.append(len(layout.spine_core.lower))
    crossing = min(per_plane) if layout.num_leaves > 1 else per_plane[0]
    bisection = crossing / 2 * spec.port_gbps
    if layout.num_leaves == 1:
        hops = 1
    elif spec.tiers == 2 or layout.num_pods == 1:
        hops = 3
    else:
        hops = 5

    down, up = plan.ports_used()
    free = plan.device_ports.astype(np.int64) - down - up
    tier = plan.device_tier
    leaf = tier == 1
    leaf_down_free = int((spec.leaf_down_ports - down[leaf]).sum())
    leaf_up_free = int((spec.radix - spec.leaf_down_ports - up[leaf]).sum())
    unused = UnusedPorts(leaf_down_free, leaf_up_free, int(free[tier == 2].sum()), int(free[tier == 3].sum()),
                         int(free[tier > 0].sum()))

    limit = max_nodes(spec.kind, spec.radix, spec.num_nics_per_node, spec.num_planes, spec.oversubscription)
    nxt = "a fourth tier (or larger switches)" if spec.tiers == 3 else "a third tier (ft3) or larger switches"
    growth = (f"{spec.kind} with {spec.radix}-port switches and {spec.num_planes} plane(s) grows to "
              f"{limit:,} nodes ({limit * spec.num_gpus_per_node:,} GPUs) before it needs {nxt}")
    notes: list[str] = []
    if layout.num_leaves == 1:
        notes.append("every plane fits on one leaf switch, so no spine layer is planned")
    elif spec.tiers == 3 and layout.num_pods == 1:
        notes.append("one pod holds every NIC, so no core layer is planned")
    if spec.kind == "mpft" and spec.num_planes > 1:
        notes.append("traffic between planes is forwarded inside a node (NVLink/PCIe), never by the fabric")
    return PlanSummary(
        kind=spec.kind, node_profile=spec.node_profile, switch_profile=spec.switch_profile,
        num_nodes=spec.num_nodes, num_gpus=num_gpus, num_nics_per_node=spec.num_nics_per_node,
        num_planes=spec.num_planes, rails_per_plane=spec.rails_per_plane, radix=spec.radix,
        port_gbps=spec.port_gbps, oversubscription=spec.oversubscription,
        leaves_per_plane=layout.num_leaves, spines_per_plane=layout.num_spines,
        cores_per_plane=layout.num_cores, pods_per_plane=layout.num_pods if spec.tiers == 3 else 1,
        num_switches=plan.num_switches, cables=cables, cost=cost,
        bisection_gbps_per_plane=bisection, bisection_gbps_total=bisection * spec.num_planes,
        max_switch_hops=hops, max_nodes=limit, growth=growth, unused_ports=unused, notes=tuple(notes),
    )
