"""Seeded damage on a multi-plane plan, one ibnetdiscover dump per plane: the acceptance scenario of verify.

``scenario(num_nodes, radix)`` builds the plan, seeds 15 kinds of damage spread over the planes, renders one
dump per plane (each plane is its own subnet: its own LIDs), a node-name map for the hosts left with default
descriptions, the GUIDs recorded before the damage, and perfquery output (per plane) with two bad ports.
``expected`` lists, per seeded damage, the finding kind and one cable end it must name. ``score`` gives recall
and the findings no damage explains. Used by ``bench_topology_verify.py`` (16,384 GPUs) and the unit tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dsctl.profiles.loader import ProfileStore
from dsctl.topology.api import make_spec, plan_files
from dsctl.topology.export import cabling_csv
from dsctl.topology.observed import render_ibnetdiscover
from dsctl.topology.plan import build_plan
from dsctl.topology.summary import summarize
from dsctl.topology.verify import VerifyResult

Link = tuple[str, str, str, str]
DEFAULT_DESC = "MT4129 ConnectX-7 Mellanox Technologies"


@dataclass
class Scenario:
    plan_json: str
    dumps: list[tuple[str, str]]
    name_map: str
    recorded_guids: str
    counters: list[tuple[str, str]]
    expected: list[tuple[str, str, tuple[str, str]]] = field(default_factory=list)  # (damage, kind, end)
    resolved_by_map: list[tuple[str, str]] = field(default_factory=list)  # NIC ends that only the map names


def _guid(kind: str, i: int) -> str:
    return f"{(0xB83FD20300000000 if kind == 'S' else 0x946DAE0300000000) + i:016x}"


def scenario(num_nodes: int = 2048, radix: int | None = None) -> Scenario:
    """The plan of ``num_nodes`` H800 nodes (mpft, 8 planes) and its damaged dumps."""
    store = ProfileStore()
    plan = build_plan(make_spec("mpft", num_nodes, store.node("h800-hgx"), store.switch("ib-ndr-64"), radix=radix))
    k = plan.spec.radix
    rows = [r.split(",") for r in cabling_csv(plan).splitlines()[1:]]
    links: list[Link] = [(r[3], r[4], r[5], r[6]) for r in rows]
    plane_of = {n: int(p) for n, t, p in zip(plan.device_names, plan.device_tier, plan.device_plane, strict=True)
                if t > 0}
    radix_of = {n: k for n in plane_of}
    guids: dict[str, str] = {}
    for i, name in enumerate(plane_of, 1):
        guids[name] = _guid("S", i)
    for i, (a, b, _, _) in enumerate(links, 1):
        if a not in plane_of:
            guids[f"{a} {b}"] = _guid("H", i)
    recorded = dict(guids)
    expected: list[tuple[str, str, tuple[str, str]]] = []
    rates: dict[Link, str] = {}
    descs: dict[str, str] = {}
    nodes = [n for n in plan.device_names if n not in plane_of]
    half = k // 2

    def node_link(node: str, nic: str) -> Link:
        return next(x for x in links if x[0] == node and x[1] == nic)

    def at(leaf: str, port: int) -> Link:
        return next(x for x in links if (x[2], x[3]) == (leaf, str(port)) or (x[0], x[1]) == (leaf, str(port)))

    def put(old: Link, new: Link) -> None:
        links[links.index(old)] = new

    # 1 missing (plane 0)
    gone = node_link(nodes[0], "mlx5_0")
    links.remove(gone)
    expected.append(("missing", "missing", (gone[0], gone[1])))
    # 2 extra (plane 1): two uplinks of a leaf unplugged, a leaf-to-leaf loop cable in their place
    up1, up2 = at("p1-leaf02", half + 1), at("p1-leaf02", half + 2)
    links.remove(up1)
    links.remove(up2)
    links.append(("p1-leaf02", str(half + 1), "p1-leaf02", str(half + 2)))
    expected += [("extra", "extra", ("p1-leaf02", str(half + 1))), ("extra", "missing", (up1[0], up1[1])),
                 ("extra", "missing", (up2[0], up2[1]))]
    # 3 swapped within a leaf (plane 2): ports 3 and 7
    a, b = at("p2-leaf03", 3), at("p2-leaf03", 7)
    put(a, (a[0], a[1], a[2], b[3]))
    put(b, (b[0], b[1], b[2], a[3]))
    expected += [("swap in leaf", "swapped", (a[0], a[1])), ("swap in leaf", "swapped", (b[0], b[1]))]
    # 4 swapped across leaves (plane 3)
    a, b = at("p3-leaf01", 5), at("p3-leaf04", 7)
    put(a, (a[0], a[1], b[2], b[3]))
    put(b, (b[0], b[1], a[2], a[3]))
    expected += [("swap across leaves", "swapped", (a[0], a[1])), ("swap across leaves", "swapped", (b[0], b[1]))]
    # 5 cross-plane (planes 4/5): a node's mlx5_4 and mlx5_5 cables exchanged at the node
    node = nodes[min(5, len(nodes) - 1)]
    a, b = node_link(node, "mlx5_4"), node_link(node, "mlx5_5")
    put(a, (a[0], a[1], b[2], b[3]))
    put(b, (b[0], b[1], a[2], a[3]))
    expected += [("cross-plane", "cross_plane", (node, "mlx5_4")), ("cross-plane", "cross_plane", (node, "mlx5_5"))]
    # 6 port offset by one (plane 6): the cable of port 10 slipped to port 11, whose own cable is unplugged
    a, b = at("p6-leaf02", 6), at("p6-leaf02", 7)
    links.remove(b)
    put(a, (a[0], a[1], a[2], "7"))
    expected.append(("offset by one", "port_offset", (a[0], a[1])))
    # 7 out-of-radix port (plane 7): the leaf reports 129 ports (split mode) and a cable at port 100
    a = at("p7-leaf03", 4)
    put(a, (a[0], a[1], a[2], "100"))
    radix_of["p7-leaf03"] = 129
    expected.append(("out-of-radix port", "impossible_port", (a[0], a[1])))
    # 8-10 link rates: 2x, HDR, 1x
    for damage, plane, rate, kind in (("trained at 2x", 0, "2xNDR", "degraded_width"),
                                      ("trained at HDR", 1, "4xHDR", "degraded_speed"),
                                      ("trained at 1x", 2, "1xNDR", "degraded_width")):
        link = at(f"p{plane}-leaf05", 2)
        rates[link] = rate
        expected.append((damage, kind, (link[0], link[1])))
    # 11 replaced HCA (plane 3): new GUID, same description
    node = nodes[min(9, len(nodes) - 1)]
    guids[f"{node} mlx5_3"] = "0002c9030badbeef"
    expected.append(("replaced HCA GUID", "guid_changed", (node, "mlx5_3")))
    # 12 duplicate GUID (plane 4): two HCAs burnt with the same GUID
    n1, n2 = nodes[min(12, len(nodes) - 1)], nodes[min(13, len(nodes) - 1)]
    guids[f"{n2} mlx5_4"] = guids[f"{n1} mlx5_4"]
    expected.append(("duplicate GUID", "duplicate_guid", (f"{n1} mlx5_4", "")))
    # 13 default descriptions (plane 5): one leaf's hosts unnamed; the name map names them
    by_map: list[tuple[str, str]] = []
    for port in range(1, half + 1):
        link = at("p5-leaf06", port) if len(nodes) > 5 * half else at("p5-leaf01", port)
        descs[f"{link[0]} {link[1]}"] = DEFAULT_DESC
        by_map.append((link[0], link[1]))
    name_map = "# hosts of p5-leaf06 (default NodeDescription)\n" + "".join(
        f'0x{guids[f"{n} {nic}"]} "{n} {nic}"\n' for n, nic in by_map)
    # render one dump per plane: a link belongs to the plane of its switch (the subnet it is in)
    per_plane: dict[int, list[Link]] = {}
    for link in links:
        switch = link[2] if link[2] in plane_of else link[0]
        per_plane.setdefault(plane_of[switch], []).append(link)
    dumps = []
    lids: dict[int, dict[str, int]] = {}
    for plane in sorted(per_plane):
        group = per_plane[plane]
        text = render_ibnetdiscover(group, radix_of, guids=guids, descs=descs,
                                    rates={i: rates[x] for i, x in enumerate(group) if x in rates})
        dumps.append((f"plane{plane}.ibnet", text))
        lids[plane] = _lids(group, radix_of)
    # 14-15 counters (planes 6 and 7), plus a clean port
    bad = at("p6-leaf07", 3)
    flap = at("p7-leaf07", half + 3)
    counters = [
        ("plane6.perfquery", _perfquery(lids[6]["S:p6-leaf07"], 3, symbol=5000, rcv=250)
         + _perfquery(lids[6]["S:p6-leaf07"], 4)),
        ("plane7.perfquery", _perfquery(lids[7]["S:p7-leaf07"], half + 3, downed=7)),
    ]
    expected += [("counters over threshold", "error_counters", ("p6-leaf07", "3")),
                 ("link downed repeatedly", "link_downed", ("p7-leaf07", str(half + 3)))]
    _ = (bad, flap)
    recorded_text = "".join(f'0x{g} "{n}"\n' for n, g in sorted(recorded.items()))
    return Scenario(plan_files(plan, summarize(plan))["plan.json"], dumps, name_map, recorded_text, counters,
                    expected, by_map)


def _lids(links: list[Link], radix: dict[str, int]) -> dict[str, int]:
    """The LIDs ``render_ibnetdiscover`` gives (sorted node keys, from 1)."""
    keys = set()
    for a, ap, b, bp in links:
        for dev, port in ((a, ap), (b, bp)):
            keys.add(f"S:{dev}" if dev in radix else f"H:{dev} {port}")
    return {key: i for i, key in enumerate(sorted(keys), 1)}


def _perfquery(lid: int, port: int, symbol: int = 0, rcv: int = 0, downed: int = 0) -> str:
    return (f"# Port extended counters: Lid {lid} port {port} (CapMask: 0x5300 CapMask2: 0x0000002)\n"
            f"PortSelect:......................{port}\nCounterSelect:...................0x0000\n"
            f"SymbolErrorCounter:..............{symbol}\nLinkErrorRecoveryCounter:........0\n"
            f"LinkDownedCounter:...............{downed}\nPortRcvErrors:...................{rcv}\n"
            "PortXmitDiscards:................0\n")


def score(result: VerifyResult, sc: Scenario) -> tuple[float, list[str], list[str]]:
    """(recall, damages not found, findings no damage explains)."""
    used: set[int] = set()
    missed = []
    for damage, kind, end in sc.expected:
        hit = next((i for i, f in enumerate(result.findings) if f.kind == kind and i not in used and (
            end in ((f.a_device, f.a_port), (f.b_device, f.b_port)) or (end[0] in (f.a_device, f.b_device)
            and not end[1]))), None)
        if hit is None:
            missed.append(f"{damage}: {kind} at {end}")
        else:
            used.add(hit)
    false = [f"{f.kind}: {f.message}" for i, f in enumerate(result.findings) if i not in used]
    return 1 - len(missed) / len(sc.expected), missed, false
