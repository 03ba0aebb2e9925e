"""ibdiagnet's topology file (``ibdiagnet -t``): the plan's export, its IBNL files, the parser (round trip,
real ibutils files, malformed input, a property test that it never raises anything but InputError)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.topology.api import verify_texts
from dsctl.topology.ibdmtopo import (
    arrow,
    check_names,
    looks_like_topology_file,
    parse_topology_file,
    render_topology_file,
)
from dsctl.topology.observed_format import parse_observed

REAL = Path(__file__).resolve().parents[1] / "data" / "topology" / "real"


@cache
def _files(switch: str = "ib-ndr-64", kind: str = "mpft", radix: int = 16) -> dict[str, str]:
    from dsctl.profiles.loader import ProfileStore
    from dsctl.topology.api import make_spec, plan_files
    from dsctl.topology.plan import build_plan
    from dsctl.topology.summary import summarize

    store = ProfileStore()
    plan = build_plan(make_spec(kind, 40 if kind == "mpft" else 16, store.node("h800-hgx"), store.switch(switch),
                                radix=radix))
    return plan_files(plan, summarize(plan))


def _topo(files: dict[str, str]) -> list[tuple[str, str]]:
    return [(n, t) for n, t in files.items() if n.endswith(".topo")]


def test_plan_writes_one_topology_file_per_plane_and_its_ibnl_files() -> None:
    files = _files()
    assert [n for n, _ in _topo(files)] == [f"expected-plane{p}.topo" for p in range(8)]
    assert sorted(n for n in files if n.startswith("ibnl/")) == sorted(
        [f"ibnl/DSCTL_HOST_P{p}.ibnl" for p in range(8)] + ["ibnl/DSCTL_SW16.ibnl"])
    text = files["expected-plane3.topo"]
    assert "  ibdiagnet -t expected-plane3.topo --out_ibnl_dir ibnl" in text
    sections = text.split("\n\n")
    leaf = next(s for s in sections if s.startswith("DSCTL_SW16 p3-leaf01\n")).splitlines()
    assert leaf[1] == "    P1 -4x-100G-> DSCTL_HOST_P3 node0001 mlx5_3/P1"
    assert len(leaf) == 1 + 16  # 8 nodes + 8 uplinks, listed by port
    host = next(s for s in sections if s.startswith("DSCTL_HOST_P3 node0001\n")).splitlines()
    assert host == ["DSCTL_HOST_P3 node0001", "    mlx5_3/P1 -4x-100G-> DSCTL_SW16 p3-leaf01 P1"]


def _ibnl_ports(text: str) -> tuple[str, set[str], list[tuple[str, int, str]]]:
    """(TOPSYSTEM name, front-panel port names, nodes) of an IBNL file, checked against the grammar's shape."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    top = re.fullmatch(r"TOPSYSTEM ([A-Za-z][-A-Za-z0-9_.:%@~]+)", lines[0])
    assert top, lines[0]
    ports: set[str] = set()
    nodes: list[tuple[str, int, str]] = []
    for line in lines[1:]:
        node = re.fullmatch(r"NODE (SW|CA) (\d+) ([A-Za-z][-A-Za-z0-9_]+) ([A-Za-z][-A-Za-z0-9_.:]+)", line)
        conn = re.fullmatch(r"   (\d+) -> ([A-Za-z][-A-Za-z0-9_.:/]+)", line)
        assert node or conn, line
        if node:
            nodes.append((node.group(1), int(node.group(2)), node.group(4)))
        elif conn:
            assert 1 <= int(conn.group(1)) <= nodes[-1][1]
            assert conn.group(2) not in ports
            ports.add(conn.group(2))
    return top.group(1), ports, nodes


def test_every_system_type_and_port_of_the_topology_files_is_defined_by_an_ibnl_file() -> None:
    files = _files()
    defined = {}
    node_lists = {}
    for name, text in files.items():
        if name.startswith("ibnl/"):
            top, ports, nodes = _ibnl_ports(text)
            assert name == f"ibnl/{top}.ibnl"  # the file is named after its system (ibdm-ibnl-file guideline a)
            defined[top], node_lists[top] = ports, nodes
    assert node_lists["DSCTL_SW16"] == [("SW", 16, "U1")] and node_lists["DSCTL_HOST_P5"] == [("CA", 1, "mlx5_5")]
    assert defined["DSCTL_SW16"] == {f"P{n}" for n in range(1, 17)}
    assert defined["DSCTL_HOST_P5"] == {"mlx5_5/P1"}
    used = 0
    for _, text in _topo(files):
        current = None
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            if not line[0].isspace():
                kind, _system = line.split()
                current = kind
                continue
            port, _arrow, r_type, _r_name, r_port = line.split()
            assert port in defined[current] and r_port in defined[r_type]
            used += 1
    assert used == 2 * 640  # every cable from both ends


def test_topology_files_round_trip_to_zero_findings_and_a_seeded_swap_is_found() -> None:
    files = _files()
    result = verify_texts(files["plan.json"], _topo(files), "plan.json")
    assert result.findings == [] and result.matched_cables == result.expected_cables == 640
    assert [d.plane for d in result.dumps] == list(range(8)) and result.observed_format == "ibdm-topo"
    # swap node0001 and node0002 on p3-leaf01 (both listings of both cables)
    text = files["expected-plane3.topo"]
    swapped = (text.replace("node0001 mlx5_3/P1", "@A").replace("node0002 mlx5_3/P1", "node0001 mlx5_3/P1")
               .replace("@A", "node0002 mlx5_3/P1")
               .replace("DSCTL_HOST_P3 node0001\n    mlx5_3/P1 -4x-100G-> DSCTL_SW16 p3-leaf01 P1",
                        "DSCTL_HOST_P3 node0001\n    mlx5_3/P1 -4x-100G-> DSCTL_SW16 p3-leaf01 P2")
               .replace("DSCTL_HOST_P3 node0002\n    mlx5_3/P1 -4x-100G-> DSCTL_SW16 p3-leaf01 P2",
                        "DSCTL_HOST_P3 node0002\n    mlx5_3/P1 -4x-100G-> DSCTL_SW16 p3-leaf01 P1"))
    dumps = [(n, swapped if n == "expected-plane3.topo" else t) for n, t in _topo(files)]
    bad = verify_texts(files["plan.json"], dumps, "plan.json")
    got = sorted((f.kind, f.a_device, f.a_port, f.b_device, f.b_port, f.source, f.line) for f in bad.findings)
    assert got == [("swapped", "node0001", "mlx5_3", "p3-leaf01", "2", "expected-plane3.topo", 8),
                   ("swapped", "node0002", "mlx5_3", "p3-leaf01", "1", "expected-plane3.topo", 7)]
    assert bad.findings[0].action.startswith("swap the two cables at p3-leaf01:")


def test_split_port_plan_writes_2x_links_and_128_port_switches() -> None:
    files = _files("ib-ndr-128-split", radix=128)
    assert "ibnl/DSCTL_SW128.ibnl" in files
    text = files["expected-plane0.topo"]
    assert " -2x-100G-> " in text and " -4x-" not in text
    fabric = parse_topology_file(text, "p0")
    assert {link.rate for link in fabric.links} == {"2xNDR"}
    result = verify_texts(files["plan.json"], _topo(files), "plan.json")
    assert result.findings == [] and result.expected_link == "2xNDR"


@pytest.mark.parametrize(("rate", "text"), [
    ("4xNDR", "-4x-100G->"), ("4xHDR", "-4x-50G->"), ("2xNDR", "-2x-100G->"), ("4xXDR", "-4x-200G->"),
    ("4xEDR", "-4x-25G->"), ("4xFDR10", "-4x-FDR10G->"), ("1xSDR", "-1x-2.5G->"), ("", "->"), ("3xNDR", "->")])
def test_rate_arrows(rate: str, text: str) -> None:
    assert arrow(rate) == text
    if text != "->":
        parsed = parse_topology_file(f"DSCTL_SW4 s1\n    P1 {text} DSCTL_SW4 s2 P2\n")
        assert parsed.links[0].rate == rate


def test_real_ibutils_topology_files_parse() -> None:
    net = (REAL / "ibutils_network.topo").read_text()
    assert looks_like_topology_file(net)
    fabric = parse_observed(net, "network.topo")
    assert fabric.source_format == "ibdm-topo" and len(fabric.links) == 256
    hosts = [link for link in fabric.links if link.b.device.startswith("H-")]
    assert len(hosts) == 128 and {link.rate for link in fabric.links} == {"4xDDR"}
    assert (hosts[0].a.device, hosts[0].a.port, hosts[0].b.device, hosts[0].b.port) == ("SL1-1", "1", "H-1", "1")
    tree = parse_topology_file((REAL / "ibutils_4-ary-2-tree.topo").read_text(), "4-ary-2-tree.topo")
    assert len(tree.links) == 32  # 16 hosts + 16 leaf-spine cables, listed once from the leaf
    uplinks = {(lk.a.device, lk.a.port, lk.b.device, lk.b.port) for lk in tree.links if lk.b.device.startswith("SW-0")}
    assert len(uplinks) == 16 and ("SW-1-3", "8", "SW-0-3", "4") in uplinks


def test_ibdiagnet_style_host_types_and_cfg() -> None:
    # the shape ibdiagnet itself writes (HCA_<n> host types, <node>/P<n> ports, 'CFG:' on a switch line)
    text = ("Q3400 leaf1 CFG: main=4x\n    P73 -4x-100G-> Q3400 spine1 P1\n"
            "    P1 -4x-100G-> HCA_B_16 gpu0001 mlx5_0/P1\n\n"
            "HCA_B_16 gpu0001\n    mlx5_0/P1 -4x-100G-> Q3400 leaf1 P1\n    mlx5_1/P2 -> Q3400 leaf1 P2\n")
    fabric = parse_topology_file(text)
    ends = [(lk.a.device, lk.a.port, lk.b.device, lk.b.port, lk.rate) for lk in fabric.links]
    assert ends == [("leaf1", "73", "spine1", "1", "4xNDR"), ("leaf1", "1", "gpu0001", "mlx5_0", "4xNDR"),
                    ("gpu0001", "mlx5_1/2", "leaf1", "2", "")]
    assert fabric.links[1].b.is_switch is False and fabric.links[1].b.desc == "gpu0001 mlx5_0"


@pytest.mark.parametrize(("text", "needle"), [
    ("    P1 -> A b P1\n", "line 1: connection outside a system section"),
    ("A b c\n", "line 1 is not a topology-file system line"),
    ("A a\n    P1 -> A b P1\n\n    P2 -> A c P1\n", "line 4: connection outside a system section"),
    ("A a\n    P1 -> A b P1\n    P1 -> A c P1\n", "line 3: port P1 of 'a' is already cabled to 'b' P1 (line 2)"),
    ("A a\n    P1 -> B b P1\nC b\n", "line 3: system 'b' is of type 'C' here but 'B' on line 2"),
    ("A a\n    P1 -4x-33G-> A b P1\n", "line 2: link -4x-33G-> is not a width/speed"),
    ("A a\n    P1 => A b P1\n", "line 2 is not a topology-file connection"),
    ("DSCTL_SW16 a\n    P17 -> DSCTL_SW16 b P1\n", "port P17 of 'a' is outside P1..P16"),
    ("A a\n    P1 -> A a P1\n", "cabled to itself"),
    ("# only a comment\n\n", "has no system sections"),
    ("A a/b\n", "system line"),
])
def test_malformed_topology_files_name_the_line(text: str, needle: str) -> None:
    with pytest.raises(InputError, match=re.escape(needle)):
        parse_topology_file(text, "t.topo")


def test_names_the_format_cannot_carry_are_refused_at_plan_time() -> None:
    with pytest.raises(InputError, match="no '/'"):
        check_names(["p0/leaf01"], ["mlx5_0"])
    with pytest.raises(InputError, match="IBNL node name"):
        check_names(["node1"], ["0nic"])
    check_names(["node-1", "p0-leaf01"], ["mlx5_0", "HCA-1"])


LINKS = st.lists(st.tuples(st.sampled_from(["s1", "s2", "s3"]), st.integers(1, 8),
                           st.sampled_from(["n1", "n2", "n3", "s1", "s2", "s3"]), st.integers(1, 8)), max_size=20)


@settings(max_examples=50, deadline=None)
@given(LINKS, st.sampled_from(["4xNDR", "2xHDR", "1xSDR", "4xXDR"]))
def test_rendered_files_parse_back_to_the_same_cables(raw: list[tuple[str, int, str, int]], rate: str) -> None:
    used: set[tuple[str, str]] = set()
    links = []
    for a, ap, b, bp in raw:
        a_end = (a, str(ap))
        b_end = (b, str(bp) if b.startswith("s") else f"mlx5_{bp}")
        if a_end in used or b_end in used or a_end == b_end:
            continue
        used |= {a_end, b_end}
        links.append((*a_end, *b_end))
    text = render_topology_file(links, {"s1": 8, "s2": 8, "s3": 8}, "DSCTL_HOST_P0", rate, ["title"])
    if not links:
        with pytest.raises(InputError):
            parse_topology_file(text)
        return
    fabric = parse_topology_file(text)
    got = {frozenset({(lk.a.device, lk.a.port), (lk.b.device, lk.b.port)}) for lk in fabric.links}
    assert got == {frozenset({(a, ap), (b, bp)}) for a, ap, b, bp in links}
    assert len(fabric.links) == len(links) and {lk.rate for lk in fabric.links} == {rate}


TEXT = st.lists(st.one_of(
    st.sampled_from(["", "# c", "DSCTL_SW4 s1", "HCA_1 h1", "A b CFG: x=y", "    P1 -> DSCTL_SW4 s2 P1",
                     "    P9 -4x-100G-> DSCTL_SW4 s1 P2", "    h/P1 -4x-50G-> HCA_1 h1 mlx5_0/P1", "\t P2 -2x-> A b P3",
                     "    P1 -12x-14G-> A c P1", "A", "  ->", "A/B c"]),
    st.text(st.sampled_from(" \t-/>#PxG0123456789abAB_:."), max_size=30)), max_size=25)


@settings(max_examples=200, deadline=None)
@given(TEXT)
def test_parser_raises_only_input_errors(lines: list[str]) -> None:
    text = "\n".join(lines)
    try:
        fabric = parse_topology_file(text, "fuzz.topo")
    except InputError as exc:
        assert "fuzz.topo" in str(exc)
        return
    assert fabric.source_format == "ibdm-topo"
    assert all(link.line >= 1 for link in fabric.links)
