"""Text exports of a plan: cabling.csv, switches.csv, plan.json, Slurm's topology.conf/.yaml, and the expected
fabric per plane as ibnetdiscover prints it and as ibdiagnet's topology file (with its IBNL definitions).

Pure functions from a ``Plan`` to strings; the command layer writes them (all-or-nothing).

The plan.json schema (and its reader) lives in :mod:`dsctl.cluster.plan_file`, which every group reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from dsctl.cluster.plan_file import CABLE_COLUMNS, CABLE_KINDS, DEVICE_COLUMNS, PLAN_SCHEMA, TIER_NAMES
from dsctl.topology import ibdmtopo
from dsctl.topology.plan import Plan
from dsctl.topology.slurm_tree import SwitchEntry, switch_tree
from dsctl.topology.summary import PlanSummary
from dsctl.topology.textcols import ROWS_PER_PIECE, column, decimal, encoded, lines


def _cable_columns(plan: Plan) -> tuple[list[int], list[str], list[str], list[str], list[str], list[int]]:
    names = np.array(plan.device_names, dtype=object)
    nics = np.array(plan.nic_names, dtype=object)
    is_node = plan.device_tier[plan.a_dev] == 0
    a_port = np.where(is_node, nics[np.where(is_node, plan.a_port, 0)], plan.a_port.astype(object))
    kinds = np.array(CABLE_KINDS, dtype=object)[plan.cable_kind]
    return (plan.cable_plane.tolist(), kinds.tolist(), names[plan.a_dev].tolist(), a_port.tolist(),
            names[plan.b_dev].tolist(), plan.b_port.tolist())


def _a_port_labels(plan: Plan, nic_texts: list[str], rows: slice) -> np.ndarray:
    """Column of the cables' a-end port labels: ``nic_texts[nic]`` at a node, the port number at a switch."""
    numbers = [str(i) for i in range(int(plan.a_port.max(initial=0)) + 1)]
    table = encoded(nic_texts + numbers)
    a_port = plan.a_port[rows].astype(np.int64)
    is_node = plan.device_tier[plan.a_dev[rows]] == 0
    return column(table[np.where(is_node, a_port, len(nic_texts) + a_port)])


def cabling_pieces(plan: Plan) -> Iterator[bytes]:
    """cabling.csv a block of cables at a time: ``cable,plane,kind,a_device,a_port,b_device,b_port`` (cable
    numbered from 1)."""
    yield ("cable," + ",".join(CABLE_COLUMNS) + "\n").encode()
    names, kinds = encoded(plan.device_names), encoded(list(CABLE_KINDS))
    for lo in range(0, plan.num_cables, ROWS_PER_PIECE):
        rows = slice(lo, min(lo + ROWS_PER_PIECE, plan.num_cables))
        yield lines(decimal(np.arange(rows.start + 1, rows.stop + 1)), ",", decimal(plan.cable_plane[rows]), ",",
                    column(kinds[plan.cable_kind[rows]]), ",", column(names[plan.a_dev[rows]]), ",",
                    _a_port_labels(plan, plan.nic_names, rows), ",", column(names[plan.b_dev[rows]]), ",",
                    decimal(plan.b_port[rows]), "\n")


def cabling_csv(plan: Plan) -> str:
    """One row per cable: ``cable,plane,kind,a_device,a_port,b_device,b_port`` (cable numbered from 1)."""
    return b"".join(cabling_pieces(plan)).decode()


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


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def plan_json_pieces(plan: Plan, summary_data: dict[str, Any]) -> Iterator[bytes]:
    """plan.json a block of rows at a time: the whole plan as JSON (schema in :mod:`dsctl.cluster.plan_file`),
    one device / cable per line (greppable, diffable). ``summary_data`` is ``to_data(summary)``.

    The text is that of ``json.dumps(doc, separators=(",", ":"))`` with ``",["`` and ``"[["`` broken after the
    ``,``/``[``: the head (everything before the devices) is dumped and broken so, the rows are written
    column-wise (names JSON-encoded once each)."""
    head = {"schema": PLAN_SCHEMA, "spec": spec_data(plan), "summary": summary_data, "nics": plan.nic_names,
            "nic_plane": plan.nic_plane.tolist(), "device_columns": list(DEVICE_COLUMNS)}
    yield (_json(head)[:-1].replace(",[", ",\n[").replace("[[", "[\n[") + ',"devices":[').encode()
    names = encoded([_json(n) for n in plan.device_names])
    tiers = encoded([_json(t) for t in TIER_NAMES])
    count = len(plan.device_names)
    for lo in range(0, count, ROWS_PER_PIECE):
        rows = slice(lo, min(lo + ROWS_PER_PIECE, count))
        yield lines(_row_start(lo, rows), column(names[rows]), ",", column(tiers[plan.device_tier[rows]]), ",",
                    decimal(plan.device_plane[rows]), ",", decimal(plan.device_pod[rows]), ",",
                    decimal(plan.device_ports[rows]), "]")
    yield ('],"cable_columns":' + _json(list(CABLE_COLUMNS)) + ',"cables":[').encode()
    kinds = encoded([_json(k) for k in CABLE_KINDS])
    nic_texts = [_json(n) for n in plan.nic_names]
    for lo in range(0, plan.num_cables, ROWS_PER_PIECE):
        rows = slice(lo, min(lo + ROWS_PER_PIECE, plan.num_cables))
        yield lines(_row_start(lo, rows), decimal(plan.cable_plane[rows]), ",", column(kinds[plan.cable_kind[rows]]),
                    ",", column(names[plan.a_dev[rows]]), ",", _a_port_labels(plan, nic_texts, rows), ",",
                    column(names[plan.b_dev[rows]]), ",", decimal(plan.b_port[rows]), "]")
    yield b"]}\n"


def _row_start(lo: int, rows: slice) -> np.ndarray:
    """``\\n[`` before the first row of a list, ``,\\n[`` before the others."""
    out = np.empty((rows.stop - rows.start, 3), dtype=np.uint8)
    out[:] = np.frombuffer(b",\n[", dtype=np.uint8)
    if lo == 0 and len(out):
        out[0, 0] = 0
    return out


def plan_json(plan: Plan, summary_data: dict[str, Any]) -> str:
    """The whole plan as JSON (see :func:`plan_json_pieces`)."""
    return b"".join(plan_json_pieces(plan, summary_data)).decode()


def slurm_topology(plan: Plan, summary: PlanSummary, tree: list[SwitchEntry] | None = None) -> str:
    """topology.conf for Slurm's topology/tree plugin, from plane 0 (``tree``: :func:`switch_tree` of ``plan``)."""
    spec = plan.spec
    lines = [
        "# Slurm topology.conf (TopologyPlugin=topology/tree) generated by dsctl topology plan",
        f"# kind={spec.kind} nodes={spec.num_nodes} planes={spec.num_planes} radix={spec.radix}",
        "# Plane 0 is written out; the other planes place every node on the same leaf numbers.",
    ]
    for entry in tree if tree is not None else switch_tree(plan):
        lines.append(f"SwitchName={entry.switch} {entry.what}={entry.children}")
    return "\n".join(lines) + "\n"


def slurm_topology_yaml(plan: Plan, tree: list[SwitchEntry] | None = None) -> str:
    """topology.yaml (Slurm 25.05+, man topology.yaml(5)): a ``tree`` topology (the default, plane 0 as in
    topology.conf) and a ``block`` topology with one block per leaf (the nodes that share a leaf in every plane).

    ``block_sizes`` is the smallest leaf's node count (every block must have at least that many nodes). Slurm
    reads topology.yaml instead of topology.conf when both exist. Names are double-quoted YAML scalars (device
    names hold no quotes or backslashes: ``dsctl.names``). ``tree``: :func:`switch_tree` of ``plan``.
    """
    spec = plan.spec
    tree = tree if tree is not None else switch_tree(plan)
    leaves = [entry for entry in tree if entry.what == "Nodes"]
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
    for entry in tree:
        key = "nodes" if entry.what == "Nodes" else "children"
        lines += [f'    - switch: "{entry.switch}"', f'      {key}: "{entry.children}"']
    if leaves:
        smallest = min(entry.count for entry in leaves)
        lines += [f'- topology: "{spec.kind}-block"', "  cluster_default: false", "  block:",
                  "    block_sizes:", f"      - {smallest}", "    blocks:"]
        for entry in leaves:
            lines += [f'    - block: "{entry.switch}"', f'      nodes: "{entry.children}"']
    return "\n".join(lines) + "\n"


def expected_topology_header(plan: Plan, plane: int, link: str) -> tuple[str, list[str], list[str]]:
    """(host system type, the file's comment lines, IBNL system types) of ``expected-plane<plane>.topo``."""
    spec = plan.spec
    radix = plan.device_ports[(plan.device_tier > 0) & (plan.device_plane == plane)].tolist()
    host = f"{ibdmtopo.HOST_TYPE}_P{plane}"
    types = [host, *sorted({ibdmtopo.switch_type(r) for r in radix})]
    header = [f"ibdiagnet topology file (IBDM format) of plane {plane}, written by dsctl topology plan",
              f"kind={spec.kind} nodes={spec.num_nodes} planes={spec.num_planes} link={link}",
              f"system types: {', '.join(types)} (IBNL files in ibnl/); compare with the fabric:",
              f"  ibdiagnet -t expected-plane{plane}.topo --out_ibnl_dir ibnl  (run on a plane-{plane} HCA)"]
    return host, header, types


def ibnl_files(plan: Plan) -> dict[str, str]:
    """The IBNL definitions the topology files name, by file name (``ibnl/<TYPE>.ibnl``), sorted by name: a
    ``DSCTL_SW<ports>`` switch per radix; a ``DSCTL_HOST_P<P>`` host per plane with one single-port CA per NIC of
    that plane. InputError for a device name with '/' or a NIC name that is not an IBNL name."""
    ibdmtopo.check_names(plan.device_names, plan.nic_names)
    ibnl: dict[str, str] = {}
    for plane in range(plan.spec.num_planes):
        host = f"{ibdmtopo.HOST_TYPE}_P{plane}"
        nics = [n for n, p in zip(plan.nic_names, plan.nic_plane.tolist(), strict=True) if p == plane]
        ibnl[f"ibnl/{host}.ibnl"] = ibdmtopo.ibnl_host(host, nics)
        radix = plan.device_ports[(plan.device_tier > 0) & (plan.device_plane == plane)].tolist()
        for num in sorted(set(radix)):
            ibnl[f"ibnl/{ibdmtopo.switch_type(num)}.ibnl"] = ibdmtopo.ibnl_switch(num)
    return dict(sorted(ibnl.items()))
