"""Wiring plans: every switch and every cable of a multi-plane fat-tree cluster, with a summary.

Kinds (``PlanSpec.kind``):

- ``mpft``  multi-plane fat tree (DeepSeek): NIC i of every node is on plane ``i mod P``; each plane is an
  independent two-tier leaf/spine tree; P defaults to the node's compute-NIC count.
- ``mrft``  multi-rail fat tree: one shared two-tier fabric; each leaf serves one rail (NIC index), spines
  are shared by all rails, so traffic between rails crosses the fabric instead of the node.
- ``ft2``   one two-tier fabric, node-contiguous: a node's NICs sit side by side on the same leaf.
- ``ft3``   one k-ary three-tier fabric (pods of edge + aggregation switches, core layer), node-contiguous.

Device indices: nodes 0..N-1, then the switches of plane 0 (leaves, spines, cores), plane 1, ...
Cable table (numpy, one entry per cable, C cables): ``plane`` int16, ``kind`` int8 (0 node-leaf,
1 leaf-spine, 2 spine-core), ``a_dev``/``b_dev`` int32 device index (a = lower tier), ``a_port``/``b_port``
int16: switch ports 1..radix; on a node end ``a_port`` is the 0-based NIC index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dsctl.cluster.plan_file import MAX_ENDPOINTS as PLAN_MAX_ENDPOINTS
from dsctl.cluster.plan_file import MAX_NICS_PER_NODE
from dsctl.errors import InputError, one_of
from dsctl.names import NODE_NAME_RULE, plain_node_name, shown
from dsctl.topology.fabric import PlaneLayout, build_three_tier, build_two_tier
from dsctl.topology.naming import (
    NameTemplates,
    check_host_descriptions,
    check_templates,
    format_names,
    require_unique,
)
from dsctl.topology.sizing import check_radix

KINDS = ("mpft", "mrft", "ft2", "ft3")
#: (switch tiers, rail-optimized leaves) for each kind
_SHAPE = {"mpft": (2, True), "mrft": (2, True), "ft2": (2, False), "ft3": (3, False)}


def default_templates(kind: str) -> NameTemplates:
    """Default names; three-tier planes put the pod in leaf and spine names."""
    if kind == "ft3":
        return NameTemplates(leaf="p{plane}-pod{pod:02d}-leaf{leaf:02d}",
                             spine="p{plane}-pod{pod:02d}-spine{spine:02d}", core="p{plane}-core{core:04d}")
    return NameTemplates()


@dataclass(frozen=True)
class PlanSpec:
    """Everything a plan is built from. Costs in USD, port rate in Gb/s."""

    kind: str
    num_nodes: int
    num_nics_per_node: int
    num_gpus_per_node: int
    num_planes: int
    radix: int
    port_gbps: float
    switch_usd: float
    link_usd: float
    endpoint_link_usd: float
    oversubscription: float = 1.0
    templates: NameTemplates = field(default_factory=NameTemplates)
    node_profile: str = ""
    switch_profile: str = ""
    link: str = ""  # width x speed every port should train at (4xNDR); "" = inferred from port_gbps

    @property
    def tiers(self) -> int:
        return _SHAPE[self.kind][0]

    @property
    def rail_optimized(self) -> bool:
        return _SHAPE[self.kind][1]

    @property
    def rails_per_plane(self) -> int:
        return self.num_nics_per_node // self.num_planes

    @property
    def leaf_down_ports(self) -> int:
        """NIC-facing ports per leaf: k/2 non-blocking, floor(k·R/(R+1)) at R:1 oversubscription."""
        if self.tiers == 3:
            return self.radix // 2
        return math.floor(self.radix * self.oversubscription / (self.oversubscription + 1) + 1e-9)


def max_nodes(kind: str, radix: int, nics: int, planes: int, oversubscription: float = 1.0) -> int:
    """Most nodes ``kind`` can hold with ``radix``-port switches before it needs another tier.

    Two-tier: at most ``radix`` leaves per plane (each must reach every spine); three-tier: k³/4 NICs per plane.
    """
    rails = nics // planes
    tiers, rail_opt = _SHAPE[kind]
    if tiers == 3:
        return radix**3 // 4 // rails
    down = math.floor(radix * oversubscription / (oversubscription + 1) + 1e-9)
    if rail_opt:
        return (radix // rails) * down
    return radix * down // rails


#: largest fabric dsctl plans in one go (4M NIC endpoints): bounds the cable tables and the memory they take; the
#: plan.json reader holds every plan to the same bound (one home: dsctl.cluster.plan_file)
MAX_ENDPOINTS = PLAN_MAX_ENDPOINTS


def default_planes(kind: str, nics: int) -> int:
    return nics if kind == "mpft" else 1


def check_spec(spec: PlanSpec) -> PlanSpec:
    """Validate a spec; every problem is an InputError naming the field."""
    if spec.kind not in KINDS:
        raise InputError(f"{shown(spec.kind)} is not a topology kind; use {one_of(KINDS)}", field="kind")
    check_radix(spec.radix)
    if spec.num_nodes <= 0:
        raise InputError(f"must be at least 1, got {spec.num_nodes}", field="nodes")
    per_node = max(spec.num_nics_per_node, spec.num_gpus_per_node)
    if spec.num_nodes * per_node > MAX_ENDPOINTS:
        raise InputError(
            f"{spec.num_nodes:,} x {per_node} NICs or GPUs = "
            f"{spec.num_nodes * per_node:,} endpoints is above dsctl's planning limit of "
            f"{MAX_ENDPOINTS:,} endpoints (the cable table would not fit in memory)",
            hint="plan one pod or one plane at a time", field="nodes",
        )
    if spec.num_nics_per_node < 1:
        raise InputError(f"node profile {spec.node_profile!r} has no compute NICs to cable")
    if spec.num_nics_per_node > MAX_NICS_PER_NODE:
        raise InputError(f"node profile {spec.node_profile!r} has {spec.num_nics_per_node} compute NICs; a plan "
                         f"holds at most {MAX_NICS_PER_NODE} per node")
    if spec.num_planes < 1 or spec.num_nics_per_node % spec.num_planes:
        divisors = [d for d in range(1, spec.num_nics_per_node + 1) if spec.num_nics_per_node % d == 0]
        raise InputError(f"{spec.num_planes} must divide the {spec.num_nics_per_node} compute NICs "
                         f"per node; use {one_of([str(d) for d in divisors])}", field="planes")
    if not (math.isfinite(spec.oversubscription) and 1.0 <= spec.oversubscription <= 16.0):
        raise InputError(f"{spec.oversubscription} must be between 1 (non-blocking) and 16",
                         field="oversubscription")
    if spec.tiers == 3 and spec.oversubscription != 1.0:
        raise InputError("is supported for two-tier kinds (mpft, mrft, ft2) only; ft3 plans are non-blocking",
                         field="oversubscription")
    if spec.leaf_down_ports >= spec.radix:
        raise InputError(f"{spec.oversubscription} leaves no uplink port on a {spec.radix}-port leaf",
                         field="oversubscription")
    check_templates(spec.templates)
    limit = max_nodes(spec.kind, spec.radix, spec.num_nics_per_node, spec.num_planes, spec.oversubscription)
    if spec.num_nodes > limit:
        fits = []
        for kind in KINDS:
            planes = default_planes(kind, spec.num_nics_per_node)
            over = spec.oversubscription if _SHAPE[kind][0] == 2 else 1.0
            cap = max_nodes(kind, spec.radix, spec.num_nics_per_node, planes, over)
            if kind != spec.kind and cap >= spec.num_nodes:
                fits.append(f"{kind} (up to {cap:,})")
        hint = (f"{one_of(fits)} would fit" if fits else
                f"no kind fits {spec.num_nodes:,} nodes with {spec.radix}-port switches; use more ports per switch")
        raise InputError(
            f"{spec.num_nodes:,} is more than {spec.kind} supports with {spec.radix}-port switches "
            f"and {spec.num_planes} plane(s): at most {limit:,} nodes", hint=hint, field="nodes")
    return spec


@dataclass(frozen=True)
class Plan:
    """A complete wiring plan (see the module docstring for index and cable-table conventions).

    ``device_*`` arrays are [D] over all devices: ``device_tier`` int8 (0 node, 1 leaf, 2 spine, 3 core),
    ``device_plane`` int16 (-1 for nodes), ``device_pod`` int16 (0-based; -1 for nodes and cores),
    ``device_ports`` int16 (ports on the device; NIC count for nodes).
    """

    spec: PlanSpec
    layout: PlaneLayout
    device_names: list[str]
    device_tier: np.ndarray
    device_plane: np.ndarray
    device_pod: np.ndarray
    device_ports: np.ndarray
    nic_names: list[str]
    nic_plane: np.ndarray
    cable_plane: np.ndarray
    cable_kind: np.ndarray
    a_dev: np.ndarray
    a_port: np.ndarray
    b_dev: np.ndarray
    b_port: np.ndarray

    @property
    def num_cables(self) -> int:
        return len(self.cable_kind)

    @property
    def num_switches(self) -> int:
        return int(np.count_nonzero(self.device_tier > 0))

    def port_label(self, dev: int, port: int) -> str:
        """What a person reads on the device: the NIC name on a node, the port number on a switch."""
        return self.nic_names[port] if self.device_tier[dev] == 0 else str(port)

    def ports_used(self) -> tuple[np.ndarray, np.ndarray]:
        """(down, up) cabled ports per device, int64 [D] each: cables arriving from below / leaving upwards."""
        n = len(self.device_names)
        return (np.bincount(self.b_dev, minlength=n), np.bincount(self.a_dev, minlength=n))


def build_plan(spec: PlanSpec) -> Plan:
    """Generate every switch and cable for ``spec`` (validated first). Vectorised: O(cables) numpy work."""
    check_spec(spec)
    rails = spec.rails_per_plane
    if spec.tiers == 3:
        layout = build_three_tier(spec.num_nodes, rails, spec.radix)
    else:
        layout = build_two_tier(spec.num_nodes, rails, spec.radix, spec.leaf_down_ports,
                                spec.oversubscription, spec.rail_optimized)
    n_nodes, planes = spec.num_nodes, spec.num_planes
    n_leaf, n_spine, n_core = layout.num_leaves, layout.num_spines, layout.num_cores
    width = n_leaf + n_spine + n_core
    plane_base = n_nodes + np.arange(planes, dtype=np.int64) * width

    # devices
    t = spec.templates
    node_names = format_names(t.node, "node_name", n=np.arange(1, n_nodes + 1))
    odd = next((n for n in node_names if not plain_node_name(n)), None)
    if odd is not None:
        raise InputError(f"{shown(t.node)} makes node name {shown(odd)}: {NODE_NAME_RULE}",
                         hint="e.g. --node-name 'gpu{n:04d}'", field="node_name")
    nic_names = format_names(t.nic, "nic_name", nic=np.arange(spec.num_nics_per_node),
                             nic1=np.arange(1, spec.num_nics_per_node + 1))
    check_host_descriptions(node_names, nic_names)
    plane_col = np.repeat(np.arange(planes), width)
    tier_local = np.concatenate([np.full(n_leaf, 1), np.full(n_spine, 2), np.full(n_core, 3)]).astype(np.int8)
    pod_local = np.concatenate([layout.leaf_pod, layout.spine_pod, np.full(n_core, -1)]).astype(np.int16)
    number_local = np.concatenate([layout.leaf_number, layout.spine_number, layout.core_number])
    tiers = np.tile(tier_local, planes)
    pods = np.tile(pod_local, planes)
    numbers = np.tile(number_local, planes)
    switch_names: list[str] = [""] * (planes * width)
    for tier, template, name_field, key in ((1, t.leaf, "leaf_name", "leaf"), (2, t.spine, "spine_name", "spine"),
                                            (3, t.core, "core_name", "core")):
        idx = np.flatnonzero(tiers == tier)
        if not len(idx):
            continue
        cols = {"plane": plane_col[idx], key: numbers[idx]}
        if tier < 3:
            cols["pod"] = pods[idx].astype(np.int64) + 1
        for i, name in zip(idx.tolist(), format_names(template, name_field, **cols), strict=True):
            switch_names[i] = name
    device_names = node_names + switch_names
    require_unique(device_names, "nodes and switches")
    require_unique(nic_names, "NICs of one node")
    device_tier = np.concatenate([np.zeros(n_nodes, dtype=np.int8), tiers])
    device_plane = np.concatenate([np.full(n_nodes, -1, dtype=np.int16), plane_col.astype(np.int16)])
    device_pod = np.concatenate([np.full(n_nodes, -1, dtype=np.int16), pods])
    device_ports = np.concatenate([np.full(n_nodes, spec.num_nics_per_node, dtype=np.int16),
                                   np.full(planes * width, spec.radix, dtype=np.int16)])

    # one plane's cables in local switch indices, then every plane with offsets
    ls, sc = layout.leaf_spine, layout.spine_core
    e, u = len(layout.ep_node), len(ls.lower)
    v = 0 if sc is None else len(sc.lower)
    per_plane = e + u + v
    kind_l = np.concatenate([np.zeros(e), np.ones(u), np.full(v, 2)]).astype(np.int8)
    a_loc = np.concatenate([layout.ep_node, ls.lower, [] if sc is None else sc.lower + n_leaf]).astype(np.int64)
    a_prt = np.concatenate([layout.ep_rail, ls.lower_port, [] if sc is None else sc.lower_port]).astype(np.int64)
    b_loc = np.concatenate([layout.ep_leaf, ls.upper + n_leaf,
                            [] if sc is None else sc.upper + n_leaf + n_spine]).astype(np.int64)
    b_prt = np.concatenate([layout.ep_port, ls.upper_port, [] if sc is None else sc.upper_port]).astype(np.int64)
    plane_of = np.repeat(np.arange(planes, dtype=np.int64), per_plane)
    is_node = np.tile(kind_l == 0, planes)
    a_dev = np.tile(a_loc, planes) + np.where(is_node, 0, plane_base[plane_of])
    # node end: the port is the NIC index; rail r of plane p is NIC p + r·P
    a_port = np.where(is_node, plane_of + np.tile(a_prt, planes) * planes, np.tile(a_prt, planes))
    b_dev = np.tile(b_loc, planes) + plane_base[plane_of]
    nic_plane = np.arange(spec.num_nics_per_node) % planes
    return Plan(spec, layout, device_names, device_tier, device_plane, device_pod, device_ports, nic_names,
                nic_plane.astype(np.int16), plane_of.astype(np.int16), np.tile(kind_l, planes),
                a_dev.astype(np.int32), a_port.astype(np.int16), b_dev.astype(np.int32),
                np.tile(b_prt, planes).astype(np.int16))
