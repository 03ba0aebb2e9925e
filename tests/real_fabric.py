"""A plan for the real DGX H100 SuperPOD ``ibnetdiscover`` dump in tests/data/topology/real/, derived from its
naming pattern by reading the dump text here (no dsctl code), and the dump's deviations from that plan.

The dump (one InfiniBand subnet, "P1") is rail-optimised: leaf ``IBLEAF-<R>-<S>`` serves rail R (1..4) of
scalable unit S (1..8); node ``c<NN>`` of unit S sits on port NN of each of its unit's rail leaves with its
rail-R HCA (described ``HCA-1/2/5/6``; unit 4's hosts keep the kernel names ``mlx5_0/1/4/5``); leaf uplink
ports 33 + 2(k-1) and 34 + 2(k-1) go to spine k (1..9), ports 8(S-1) + 2(R-1) + 1 and + 2. Port 65 of every
switch is its SHARP aggregation node (switch-internal).

Run directly to print the plan's JSON: ``python tests/real_fabric.py``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

DUMP = Path(__file__).parent / "data" / "topology" / "real" / "topograph_dgx_h100_superpod.ibnet"
RAILS = ("HCA-1", "HCA-2", "HCA-5", "HCA-6")
KERNEL_RAILS = ("mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5")
UNITS = range(1, 9)
NODES_PER_UNIT = 18
SPINES = range(1, 10)
SWITCH_PORTS = 65
DEFAULT_DESC = re.compile(r"^MT\d+ ConnectX")

_SWITCH = re.compile(r'^Switch\s+(\d+)\s+"S-([0-9a-f]+)"\s+# "[^;]*;([^:]+):')
_PORT = re.compile(r'^\[(\d+)\]\s+"([SH])-([0-9a-f]+)"\[(\d+)\].*?# "([^"]*)"')
_LEAF = re.compile(r"^([AB]\d\d)-P1-IBLEAF-0(\d)-0(\d)$")
_SPINE = re.compile(r"^([AB]\d\d)-P1-IBSPINE-0(\d)$")


def switch_ports(text: str) -> dict[str, dict[int, tuple[str, str, int, str]]]:
    """Switch short name -> port -> (peer kind S/H, peer GUID, peer port, peer description), from the dump."""
    out: dict[str, dict[int, tuple[str, str, int, str]]] = {}
    current = ""
    for line in text.splitlines():
        head = _SWITCH.match(line)
        if head:
            current = head.group(3)
            out[current] = {}
            continue
        port = _PORT.match(line.strip())
        if port and current and line.startswith("["):
            out[current][int(port.group(1))] = (port.group(2), port.group(3), int(port.group(4)), port.group(5))
    return out


def leaf_name(rail: int, unit: int, racks: dict[int, str]) -> str:
    return f"{racks[unit]}-P1-IBLEAF-0{rail}-0{unit}"


def names(text: str) -> tuple[dict[int, str], dict[int, str], dict[str, str]]:
    """(unit -> leaf rack, unit -> node-name prefix, spine number -> spine name) read from the dump."""
    ports = switch_ports(text)
    leaf_rack: dict[int, str] = {}
    spine: dict[int, str] = {}
    prefix_votes: dict[int, Counter[str]] = {s: Counter() for s in UNITS}
    for name, table in ports.items():
        leaf = _LEAF.match(name)
        if leaf:
            unit = int(leaf.group(3))
            leaf_rack[unit] = leaf.group(1)
            for _, _, _, desc in table.values():
                host = desc.split(" ")[0]
                found = re.match(r"^([ab]\d\d-p1-dgx-\d\d)-c\d\d$", host)
                if found:
                    prefix_votes[unit][found.group(1)] += 1
        found_spine = _SPINE.match(name)
        if found_spine:
            spine[int(found_spine.group(2))] = name
    prefix = {unit: votes.most_common(1)[0][0] for unit, votes in prefix_votes.items()}
    return leaf_rack, prefix, {str(k): v for k, v in spine.items()}


def node_name(unit: int, index: int, prefix: dict[int, str]) -> str:
    return f"{prefix[unit]}-c{index:02d}"


def plan_json(text: str) -> str:
    """plan.json (schema dsctl.topology.plan/1) of the pattern: 8 units x 18 nodes x 4 rails, 32 leaves, 9 spines;
    one subnet, so every NIC is on plane 0."""
    racks, prefix, spines = names(text)
    devices: list[list[object]] = []
    cables: list[list[object]] = []
    for unit in UNITS:
        for index in range(1, NODES_PER_UNIT + 1):
            devices.append([node_name(unit, index, prefix), "node", -1, unit - 1, len(RAILS)])
    for rail in range(1, len(RAILS) + 1):
        for unit in UNITS:
            devices.append([leaf_name(rail, unit, racks), "leaf", 0, unit - 1, SWITCH_PORTS])
    for k in SPINES:
        devices.append([spines[str(k)], "spine", 0, -1, SWITCH_PORTS])
    for unit in UNITS:
        for rail, nic in enumerate(RAILS, 1):
            leaf = leaf_name(rail, unit, racks)
            for index in range(1, NODES_PER_UNIT + 1):
                cables.append([0, "node-leaf", node_name(unit, index, prefix), nic, leaf, index])
            for k in SPINES:
                base = 8 * (unit - 1) + 2 * (rail - 1)
                for j in (1, 2):
                    cables.append([0, "leaf-spine", leaf, 32 + 2 * (k - 1) + j, spines[str(k)], base + j])
    doc = {"schema": "dsctl.topology.plan/1", "spec": {"kind": "rail-optimized", "link": "4xNDR", "port_gbps": 400,
                                                        "num_gpus_per_node": 8},
           "summary": {}, "nics": list(RAILS), "nic_plane": [0] * len(RAILS),
           "device_columns": ["name", "tier", "plane", "pod", "ports"], "devices": devices,
           "cable_columns": ["plane", "kind", "a_device", "a_port", "b_device", "b_port"], "cables": cables}
    return json.dumps(doc)


def kernel_name_map(text: str) -> str:
    """A node-name map naming unit hosts that kept kernel HCA names (``mlx5_5``) by their rail's plan NIC
    (``HCA-6``), keyed by the HCA's GUID as the dump prints it: what an operator writes for such a unit."""
    lines = []
    for table in switch_ports(text).values():
        for kind, guid, _, desc in table.values():
            parts = desc.split(" ")
            if kind == "H" and len(parts) == 2 and parts[1] in KERNEL_RAILS and "-dgx-" in parts[0]:
                lines.append(f'0x{guid} "{parts[0]} {RAILS[KERNEL_RAILS.index(parts[1])]}"')
    return "\n".join(sorted(set(lines))) + "\n"


def deviations(text: str) -> dict[str, set[tuple[str, int]]]:
    """Deviations from the plan, by leaf/spine port (switch short name, port), computed from the dump alone:

    - ``nic_wrong``: a host port holding a node's HCA that is not the planned one (other node or other rail);
    - ``default_ok``: a default-described HCA (no host name) at a planned host port whose planned HCA is seen
      nowhere else by name: matched by position; ``default_ambiguous``: one whose planned HCA sits elsewhere;
    - ``empty``: a planned host port with nothing on it;
    - ``foreign``: a host port with a host the plan does not have (UFM, "ubuntu");
    - ``uplink_wrong``: a leaf uplink not at its planned spine port; ``uplink_empty``: a planned uplink port empty;
    - ``internal``: a switch's SHARP aggregation node (port 65).
    """
    racks, prefix, spines = names(text)
    ports = switch_ports(text)
    out: dict[str, set[tuple[str, int]]] = {k: set() for k in ("nic_wrong", "default_ok", "default_ambiguous",
                                                               "empty", "foreign", "uplink_wrong", "uplink_empty",
                                                               "internal")}
    named = set()  # (node, rail index) of every HCA described by host name
    for table in ports.values():
        for kind, _, _, desc in table.values():
            parts = desc.split(" ")
            if kind == "H" and len(parts) == 2:
                for rail, pair in enumerate(zip(RAILS, KERNEL_RAILS, strict=True), 1):
                    if parts[1] in pair:
                        named.add((parts[0], rail))
    spine_number = {v: int(k) for k, v in spines.items()}
    for name, table in ports.items():
        for port, (_, _, _, desc) in table.items():
            if "Aggregation Node" in desc:
                out["internal"].add((name, port))
    for unit in UNITS:
        for rail, nic in enumerate(RAILS, 1):
            leaf = leaf_name(rail, unit, racks)
            table = ports.get(leaf, {})
            for index in range(1, NODES_PER_UNIT + 1):
                peer = table.get(index)
                want = (node_name(unit, index, prefix), nic, KERNEL_RAILS[rail - 1])
                if peer is None:
                    out["empty"].add((leaf, index))
                elif DEFAULT_DESC.match(peer[3]):
                    seen = (want[0], rail) in named
                    out["default_ambiguous" if seen else "default_ok"].add((leaf, index))
                elif peer[3].split(" ")[0] != want[0] or peer[3].split(" ")[1] not in want[1:]:
                    out["nic_wrong" if "-dgx-" in peer[3] else "foreign"].add((leaf, index))
            for port, (kind, _, _, _) in table.items():
                if port > NODES_PER_UNIT and port < 33 and kind == "H":
                    out["foreign"].add((leaf, port))
            for k in SPINES:
                base = 8 * (unit - 1) + 2 * (rail - 1)
                for j in (1, 2):
                    port = 32 + 2 * (k - 1) + j
                    peer = table.get(port)
                    if peer is None:
                        out["uplink_empty"].add((leaf, port))
                        continue
                    short = desc_short(peer[3])
                    if spine_number.get(short) != k or peer[2] != base + j:
                        out["uplink_wrong"].add((leaf, port))
    return out


def desc_short(desc: str) -> str:
    """``MF0;A10-P1-IBSPINE-02:MQM9701/U1`` -> ``A10-P1-IBSPINE-02``."""
    return desc.split(";")[-1].split(":")[0]


if __name__ == "__main__":
    print(plan_json(DUMP.read_text()))
