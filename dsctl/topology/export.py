"""Text exports of a plan: cabling.csv, switches.csv, plan.json, Slurm's topology.conf/.yaml, and the expected
fabric per plane as ibnetdiscover prints it and as ibdiagnet's topology file (with its IBNL definitions).

Pure functions from a ``Plan`` to strings; the command layer writes them (all-or-nothing).

The plan.json schema (and its reader) lives in :mod:`dsctl.cluster.plan_file`, which every group reads.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from dsctl.cluster import hostlist
from dsctl.cluster.plan_file import CABLE_COLUMNS, CABLE_KINDS, DEVICE_COLUMNS, PLAN_SCHEMA, TIER_NAMES
from dsctl.names import check_slurm_conf_name
from dsctl.topology import ibdmtopo
from dsctl.topology.observed import render_ibnetdiscover
from dsctl.topology.plan import Plan
from dsctl.topology.summary import PlanSummary


def _cable_columns(plan: Plan) -> tuple[list[int], list[str], list[str], list[str], list[str], list[int]]:
    names = np.array(plan.device_names, dtype=object)
    nics = np.array(plan.nic_names, dtype=object)
    is_node = plan.device_tier[plan.a_dev] == 0
    a_port = np.where(is_node, nics[np.where(is_node, plan.a_port, 0)], plan.a_port.astype(object))
    kinds = np.array(CABLE_KINDS, dtype=object)[plan.cable_kind]
    return (plan.cable_plane.tolist(), kinds.tolist(), names[plan.a_dev].tolist(), a_port.tolist(),
            names[plan.b_dev].tolist(), plan.b_port.tolist())


def cabling_csv(plan: Plan) -> str:
    """One row per cable: ``cable,plane,kind,a_device,a_port,b_device,b_port`` (cable numbered from 1)."""
    cols = _cable_columns(plan)
    lines = [f"{i},{p},{k},{a},{ap},{b},{bp}" for i, (p, k, a, ap, b, bp) in enumerate(zip(*cols, strict=True), 1)]
    return "cable," + ",".join(CABLE_COLUMNS) + "\n" + "\n".join(lines) + ("\n" if lines else "")


def switches_csv(plan: Plan) -> str:
    """One row per switch: ``name,tier,plane,pod,ports,down_used,up_used,free``."""
    down, up = plan.ports_used()
    idx = np.flatnonzero(plan.device_tier > 0)
    free = plan.device_ports[idx].astype(np.int64) - down[idx] - up[idx]
    tiers = np.array(TIER_NAMES, dtype=object)[plan.device_tier[idx]]
    rows = zip([plan.device_names[i] for i in idx.tolist()], tiers.tolist(), plan.device_plane[idx].tolist(),
               plan.device_pod[idx].tolist(), plan.device_ports[idx].tolist(), down[idx].tolist(),
               up[idx].tolist(), free.tolist(), strict=True)
    lines = [f"{n},{t},{pl},{po + 1 if po >= 0 else ''},{pt},{d},{u},{f}" for n, t, pl, po, pt, d, u, f in rows]
    return "name,tier,plane,pod,ports,down_used,up_used,free\n" + "\n".join(lines) + ("\n" if lines else "")


def spec_data(plan: Plan) -> dict[str, Any]:
    s = plan.spec
    return {
        "kind": s.kind, "num_nodes": s.num_nodes, "num_nics_per_node": s.num_nics_per_node,
        "num_gpus_per_node": s.num_gpus_per_node, "num_planes": s.num_planes, "radix": s.radix,
        "port_gbps": s.port_gbps, "oversubscription": s.oversubscription, "switch_usd": s.switch_usd,
        "link_usd": s.link_usd, "endpoint_link_usd": s.endpoint_link_usd, "node_profile": s.node_profile,
        "switch_profile": s.switch_profile, "link": s.link,
        "templates": {"node": s.templates.node, "nic": s.templates.nic, "leaf": s.templates.leaf,
                      "spine": s.templates.spine, "core": s.templates.core},
    }


def plan_json(plan: Plan, summary_data: dict[str, Any]) -> str:
    """The whole plan as JSON (schema in the module docstring). ``summary_data`` is ``to_data(summary)``."""
    tiers = np.array(TIER_NAMES, dtype=object)[plan.device_tier]
    devices = [list(r) for r in zip(plan.device_names, tiers.tolist(), plan.device_plane.tolist(),
                                    plan.device_pod.tolist(), plan.device_ports.tolist(), strict=True)]
    cables = [list(r) for r in zip(*_cable_columns(plan), strict=True)]
    doc = {
        "schema": PLAN_SCHEMA,
        "spec": spec_data(plan),
        "summary": summary_data,
        "nics": plan.nic_names,
        "nic_plane": plan.nic_plane.tolist(),
        "device_columns": list(DEVICE_COLUMNS),
        "devices": devices,
        "cable_columns": list(CABLE_COLUMNS),
        "cables": cables,
    }
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    # one device / cable per line keeps the file greppable and diffable
    return text.replace(",[", ",\n[").replace("[[", "[\n[") + "\n"


def _groups(keys: np.ndarray, values: np.ndarray) -> list[tuple[int, list[int]]]:
    """(key, values in input order) for each distinct key, keys ascending."""
    order = np.argsort(keys, kind="stable")
    k, v = keys[order], values[order]
    cuts = np.flatnonzero(np.diff(k)) + 1
    return [(int(ks[0]), vs.tolist()) for ks, vs in zip(np.split(k, cuts), np.split(v, cuts), strict=True)
            if len(ks)]


def _tree(plan: Plan) -> list[tuple[str, str, list[str]]]:
    """Plane 0 as a tree: (switch, "Nodes" or "Switches", child names), leaves first.

    Every plane of these kinds places nodes identically, so plane 0 stands for all. Each node is listed under
    the leaf of its first NIC in plane 0; spines list the leaves they are cabled to, cores the spines.
    """
    p0 = plan.cable_plane == 0
    node_cab = np.flatnonzero(p0 & (plan.cable_kind == 0))
    # first cable of each node in plane 0 (lowest NIC index)
    order = node_cab[np.lexsort((plan.a_port[node_cab], plan.a_dev[node_cab]))]
    first = order[np.r_[True, plan.a_dev[order][1:] != plan.a_dev[order][:-1]]] if len(order) else order
    leaf_of_node = plan.b_dev[first]
    names = plan.device_names
    for name in names:  # checked when formatted; a second guard because a '#' or '=' would rewrite the file
        check_slurm_conf_name(name, "device name")
    out: list[tuple[str, str, list[str]]] = []
    for leaf, nodes in _groups(leaf_of_node, plan.a_dev[first]):
        out.append((names[leaf], "Nodes", [names[n] for n in nodes]))
    listed = np.unique(leaf_of_node)
    for kind in (1, 2):
        cab = np.flatnonzero(p0 & (plan.cable_kind == kind))
        if not len(cab):
            continue
        pairs = np.unique(np.stack([plan.b_dev[cab], plan.a_dev[cab]], axis=1), axis=0)
        pairs = pairs[np.isin(pairs[:, 1], listed)]
        for upper, children in _groups(pairs[:, 0], pairs[:, 1]):
            out.append((names[upper], "Switches", [names[c] for c in children]))
        listed = np.unique(pairs[:, 0])
    return out


def slurm_topology(plan: Plan, summary: PlanSummary) -> str:
    """topology.conf for Slurm's topology/tree plugin, from plane 0 (see ``_tree``)."""
    spec = plan.spec
    lines = [
        "# Slurm topology.conf (TopologyPlugin=topology/tree) generated by dsctl topology plan",
        f"# kind={spec.kind} nodes={spec.num_nodes} planes={spec.num_planes} radix={spec.radix}",
        "# Plane 0 is written out; the other planes place every node on the same leaf numbers.",
    ]
    for switch, what, children in _tree(plan):
        lines.append(f"SwitchName={switch} {what}={hostlist.compress(children)}")
    return "\n".join(lines) + "\n"


def slurm_topology_yaml(plan: Plan) -> str:
    """topology.yaml (Slurm 25.05+, man topology.yaml(5)): a ``tree`` topology (the default, plane 0 as in
    topology.conf) and a ``block`` topology with one block per leaf (the nodes that share a leaf in every plane).

    ``block_sizes`` is the smallest leaf's node count (every block must have at least that many nodes). Slurm
    reads topology.yaml instead of topology.conf when both exist. Names are double-quoted YAML scalars (device
    names hold no quotes or backslashes: ``dsctl.names``).
    """
    spec = plan.spec
    tree = _tree(plan)
    leaves = [(switch, children) for switch, what, children in tree if what == "Nodes"]
    lines = [
        "# Slurm topology.yaml (Slurm 25.05+) generated by dsctl topology plan",
        f"# kind={spec.kind} nodes={spec.num_nodes} planes={spec.num_planes} radix={spec.radix}",
        "# Plane 0 is written out; the other planes place every node on the same leaf numbers.",
        "# Slurm reads this file instead of topology.conf when both exist.",
        f'- topology: "{spec.kind}-tree"',
        "  cluster_default: true",
        "  tree:",
        "    switches:",
    ]
    for switch, what, children in tree:
        key = "nodes" if what == "Nodes" else "children"
        lines += [f'    - switch: "{switch}"', f'      {key}: "{hostlist.compress(children)}"']
    if leaves:
        lines += [f'- topology: "{spec.kind}-block"', "  cluster_default: false", "  block:",
                  "    block_sizes:", f"      - {min(len(c) for _, c in leaves)}", "    blocks:"]
        for leaf, children in leaves:
            lines += [f'    - block: "{leaf}"', f'      nodes: "{hostlist.compress(children)}"']
    return "\n".join(lines) + "\n"


def expected_ibnetdiscover(plan: Plan, link: str) -> dict[int, str]:
    """What ``ibnetdiscover`` on each plane should print for this plan, by plane: its cables in ibnetdiscover's
    format, every link at ``link`` (``4xNDR``), synthetic GUIDs unique across planes (as real node GUIDs are:
    switches by device index, NICs by node and NIC index). ``dsctl topology verify`` reads them back to no
    findings."""
    planes, _, a_dev, a_port, b_dev, b_port = _cable_columns(plan)
    names = plan.device_names
    num_nics = len(plan.nic_names)
    nic_index = {n: i for i, n in enumerate(plan.nic_names)}
    node_index = {names[i]: i for i in np.flatnonzero(plan.device_tier == 0).tolist()}
    switches = np.flatnonzero(plan.device_tier > 0).tolist()
    switch_guid = {names[i]: f"{0xB83FD20300000000 + i + 1:016x}" for i in switches}
    per_plane: dict[int, list[tuple[str, str, str, str]]] = {p: [] for p in range(plan.spec.num_planes)}
    guids: dict[str, str] = dict(switch_guid)
    for p, a, ap, b, bp in zip(planes, a_dev, a_port, b_dev, b_port, strict=True):
        per_plane[p].append((a, str(ap), b, str(bp)))
        if a in node_index:
            guids[f"{a} {ap}"] = f"{0x0002C90300000000 + node_index[a] * num_nics + nic_index[ap] + 1:016x}"
    ports = plan.device_ports.tolist()
    out = {}
    for plane, links in per_plane.items():
        radix = {names[i]: ports[i] for i in np.flatnonzero((plan.device_tier > 0) & (plan.device_plane == plane))
                 .tolist()}
        out[plane] = render_ibnetdiscover(links, radix, guids=guids, default_rate=link or "4xNDR")
    return out


def expected_topology_files(plan: Plan, link: str) -> dict[str, str]:
    """Each plane as an ibdiagnet topology file (``ibdiagnet -t``, see :mod:`dsctl.topology.ibdmtopo`), by file
    name: ``expected-plane<P>.topo`` plus the IBNL definitions its system types need, ``ibnl/<TYPE>.ibnl``
    (a ``DSCTL_SW<ports>`` switch per radix; a ``DSCTL_HOST_P<P>`` host per plane with one single-port CA per
    NIC of that plane). Every link is at ``link`` (``4xNDR`` -> ``-4x-100G->``). InputError for a device name
    with '/' or a NIC name that is not an IBNL name."""
    planes, _, a_dev, a_port, b_dev, b_port = _cable_columns(plan)
    names = plan.device_names
    ibdmtopo.check_names(names, plan.nic_names)
    ports = plan.device_ports.tolist()
    spec = plan.spec
    per_plane: dict[int, list[tuple[str, str, str, str]]] = {p: [] for p in range(spec.num_planes)}
    for p, a, ap, b, bp in zip(planes, a_dev, a_port, b_dev, b_port, strict=True):
        per_plane[p].append((a, str(ap), b, str(bp)))
    out: dict[str, str] = {}
    ibnl: dict[str, str] = {}
    for plane, links in per_plane.items():
        switches = np.flatnonzero((plan.device_tier > 0) & (plan.device_plane == plane)).tolist()
        radix = {names[i]: ports[i] for i in switches}
        nics = [n for n, p in zip(plan.nic_names, plan.nic_plane.tolist(), strict=True) if p == plane]
        host = f"{ibdmtopo.HOST_TYPE}_P{plane}"
        types = [host, *sorted({ibdmtopo.switch_type(r) for r in radix.values()})]
        header = [f"ibdiagnet topology file (IBDM format) of plane {plane}, written by dsctl topology plan",
                  f"kind={spec.kind} nodes={spec.num_nodes} planes={spec.num_planes} link={link}",
                  f"system types: {', '.join(types)} (IBNL files in ibnl/); compare with the fabric:",
                  f"  ibdiagnet -t expected-plane{plane}.topo --out_ibnl_dir ibnl  (run on a plane-{plane} HCA)"]
        out[f"expected-plane{plane}.topo"] = ibdmtopo.render_topology_file(links, radix, host, link, header)
        ibnl[f"ibnl/{host}.ibnl"] = ibdmtopo.ibnl_host(host, nics)
        for num in sorted(set(radix.values())):
            ibnl[f"ibnl/{ibdmtopo.switch_type(num)}.ibnl"] = ibdmtopo.ibnl_switch(num)
    return {**out, **dict(sorted(ibnl.items()))}
