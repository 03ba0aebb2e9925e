"""verify on real public fabric dumps (tests/data/topology/real/README.md): a DGX H100 SuperPOD subnet from NVIDIA
topograph's test data, checked against a plan derived from its naming pattern (tests/real_fabric.py), and
``ibnetdiscover -p`` reports of infiniband_exporter's fixtures. Every expected number is computed from the dump
text by tests/real_fabric.py, which uses no dsctl code (issue 29)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.topology.api import verify_texts
from dsctl.topology.ibformats import parse_ports_report
from dsctl.topology.observed_format import parse_observed
from tests import real_fabric

REAL = Path(__file__).resolve().parents[1] / "data" / "topology" / "real"
TEXT = real_fabric.DUMP.read_text()
DEV = real_fabric.deviations(TEXT)
SPINE_OR_LEAF = ("IBLEAF", "IBSPINE")


def _short(device: str) -> str:
    return real_fabric.desc_short(device) if ";" in device else device


@pytest.fixture(scope="module")
def result():  # type: ignore[no-untyped-def]
    return verify_texts(real_fabric.plan_json(TEXT), TEXT, "plan.json", "superpod.ibnet",
                        name_map=("kernel-names.map", real_fabric.kernel_name_map(TEXT)))


def _switch_ports(finding) -> set[tuple[str, int]]:  # type: ignore[no-untyped-def]
    out = set()
    for device, port in ((finding.a_device, finding.a_port), (finding.b_device, finding.b_port)):
        name = _short(device)
        if any(word in name for word in SPINE_OR_LEAF) and port.isdigit():
            out.add((name, int(port)))
    return out


def test_the_pattern_holds_for_most_of_the_dump() -> None:
    """The derived plan is the dump's pattern, not a guess: 32 rail leaves x 18 hosts, most of them where it says."""
    planned_hosts = 8 * 4 * real_fabric.NODES_PER_UNIT
    deviating = sum(len(DEV[k]) for k in ("nic_wrong", "default_ambiguous", "empty", "foreign"))
    assert planned_hosts == 576 and deviating < 0.15 * planned_hosts
    assert len(DEV["internal"]) == 40  # one SHARP aggregation node per switch: 31 leaves + 9 spines


def test_switch_internal_ports_give_no_finding(result) -> None:  # type: ignore[no-untyped-def]
    assert result.switch_internal_links == len(DEV["internal"])
    assert not any("Aggregation" in f.message or "Aggregation" in f.a_device + f.b_device for f in result.findings)
    assert not any(p in DEV["internal"] for f in result.findings for p in _switch_ports(f))


def test_default_described_hcas_at_their_planned_port_are_matched_by_position(result) -> None:  # type: ignore
    assert len(result.matched_by_position) == len(DEV["default_ok"]) == 66
    _, prefix, _ = real_fabric.names(TEXT)
    ports = real_fabric.switch_ports(TEXT)
    want = set()
    for leaf, port in DEV["default_ok"]:
        rail, unit = int(leaf[-4]), int(leaf[-1])
        guid = ports[leaf][port][1]
        want.add(f"{real_fabric.node_name(unit, port, prefix)} {real_fabric.RAILS[rail - 1]} (0x{guid})")
    assert set(result.matched_by_position) == want
    # the three whose planned HCA sits elsewhere by name stay unmatched, their description whole, never split
    ambiguous = [f for f in result.findings if f.kind == "unmatched_device" and "default description" in f.message]
    assert {p for f in ambiguous for p in _switch_ports(f)} == DEV["default_ambiguous"]
    assert all(f.b_device.startswith("H-") and f.b_port == "1" for f in ambiguous)
    assert not any(f.a_device.startswith("MT4129") or f.b_device.startswith("MT4129") for f in result.findings)


def test_every_real_deviation_is_named_and_nothing_else(result) -> None:  # type: ignore[no-untyped-def]
    counts = result.counts
    assert counts["swapped"] + counts["port_offset"] == len(DEV["nic_wrong"]) + len(DEV["uplink_wrong"]) == 13
    assert counts["unmatched_device"] == len(DEV["foreign"]) + len(DEV["default_ambiguous"]) == 10
    planned_foreign = {p for p in DEV["foreign"] if p[1] <= real_fabric.NODES_PER_UNIT}
    assert counts["missing"] == len(DEV["empty"]) + len(DEV["uplink_empty"]) + len(planned_foreign) == 85
    assert sum(counts.values()) == 108  # before issue 29: 280 (40 SHARP nodes and 69 default HCAs unmatched)
    named = {p for f in result.findings for p in _switch_ports(f)}
    deviations = set().union(*(DEV[k] for k in ("nic_wrong", "default_ambiguous", "empty", "foreign",
                                                 "uplink_wrong", "uplink_empty")))
    assert deviations <= named
    assert all(_switch_ports(f) & deviations for f in result.findings)


def test_the_swaps_have_the_right_actions(result) -> None:  # type: ignore[no-untyped-def]
    by_port = {p: f for f in result.findings for p in _switch_ports(f)}
    node_swap = by_port[("B09-P1-IBLEAF-04-08", 1)]  # HCA-5 and HCA-6 of b08-p1-dgx-08-c01 exchanged
    assert node_swap.action == "swap the cables of b08-p1-dgx-08-c01 HCA-5 and HCA-6 at the node"
    spine_swap = by_port[("A09-P1-IBLEAF-04-04", 35)]
    assert spine_swap.action_kind == "swap" and "A10-P1-IBSPINE-02:31" in spine_swap.action


def test_without_the_plan_position_every_default_hca_is_its_guid_not_split() -> None:
    fabric = parse_observed(TEXT, "superpod.ibnet")
    defaults = [e for link in fabric.links for e in (link.a, link.b) if e.default_desc]
    assert len(defaults) == len(DEV["default_ok"]) + len(DEV["default_ambiguous"])
    assert all(e.device == f"H-{e.guid}" and e.port == str(e.port_num) for e in defaults)
    assert sum(1 for link in fabric.links if link.a.internal or link.b.internal) == len(DEV["internal"])


# ------------------------------------------------------------------ ibnetdiscover -p (infiniband_exporter)

def _lines(name: str) -> list[str]:
    return [line for line in (REAL / name).read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("name", ["infiniband_exporter_ports.out", "infiniband_exporter_test2.ports",
                                  "infiniband_exporter_test3.ports"])
def test_ports_reports_read_connected_and_unconnected_lines(name: str) -> None:
    lines = _lines(name)
    connected = {frozenset(((ln.split()[3], ln.split()[2]), (ln.split()[10], ln.split()[9])))
                 for ln in lines if " - " in ln and "(" in ln}
    fabric = parse_observed((REAL / name).read_text(), name)
    assert fabric.source_format == "ibnetdiscover-p"
    assert len(fabric.links) == len(connected)


def test_unquoted_unconnected_port_line_is_read() -> None:
    """Before: the one unquoted line of test3 made the whole file exit 2."""
    assert _lines("infiniband_exporter_test3.ports")[0].split()[-1] == "Technologies"  # no quote
    assert parse_ports_report((REAL / "infiniband_exporter_test3.ports").read_text()).links == []


def test_ports_report_aggregation_node_is_switch_internal() -> None:
    fabric = parse_ports_report((REAL / "infiniband_exporter_test2.ports").read_text())
    internal = [link for link in fabric.links if link.a.internal or link.b.internal]
    want = sum(1 for ln in _lines("infiniband_exporter_test2.ports") if "Aggregation Node" in ln)
    assert want == 2 and len(internal) == 2  # two lines, two different peers: two links
    assert all("Aggregation" not in e.device for link in fabric.links for e in (link.a, link.b))


def test_a_broken_connected_line_is_not_taken_for_an_unconnected_one() -> None:
    line = "CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 'o0001 HCA-1' - 'x'"
    with pytest.raises(InputError, match="line 1 is not an 'ibnetdiscover -p' line"):
        parse_ports_report(line)


# ------------------------------------------------------------------ what findings on placed HCAs and hints say

def test_a_finding_on_a_placed_hca_says_it_was_identified_by_position() -> None:
    """The real dump with one default-described HCA's link trained at 2x: the finding names the plan's NIC and
    says how it was identified."""
    leaf, port = sorted(DEV["default_ok"])[0]
    ports = real_fabric.switch_ports(TEXT)
    guid = ports[leaf][port][1]
    lines = TEXT.splitlines()
    hit = [i for i, ln in enumerate(lines) if f'"H-{guid}"' in ln and ln.startswith(f"[{port}]")]
    assert len(hit) == 1
    lines[hit[0]] = lines[hit[0]].replace("4xNDR", "2xNDR")
    result = verify_texts(real_fabric.plan_json(TEXT), "\n".join(lines), "plan.json", "superpod.ibnet",
                          name_map=("kernel-names.map", real_fabric.kernel_name_map(TEXT)))
    width = [f for f in result.findings if f.kind == "degraded_width"]
    assert len(width) == 1 and (leaf, port) in _switch_ports(width[0])
    assert f"HCA 0x{guid}" in width[0].message and "identified by its planned leaf port" in width[0].message


def test_plane_not_seen_names_a_ca_from_ibstat_not_a_description() -> None:
    """The plan's NICs are HCA-1..: descriptions, not CA names, so the hint is 'ibstat -l', not '-C HCA-1'."""
    plan = real_fabric.plan_json(TEXT).replace('"nic_plane": [0, 0, 0, 0]', '"nic_plane": [0, 0, 0, 1]')
    result = verify_texts(plan, TEXT, "plan.json", "superpod.ibnet")
    unseen = [f for f in result.findings if f.kind == "plane_not_seen"]
    assert [f.plane for f in unseen] == ["1"]
    assert "ibstat -l" in unseen[0].action and "-C HCA-" not in unseen[0].action
    assert "HCA-6" in unseen[0].action and "ibnetdiscover -C <CA> -P 1 > plane1.ibnet" in unseen[0].action


def test_a_ca_in_a_switch_system_image_is_switch_internal() -> None:
    """A management HCA (any description) that shares its switch's sysimgguid gives no cable."""
    text = "\n".join([
        "sysimgguid=0xb83fd20300000001", "switchguid=0xb83fd20300000001(b83fd20300000001)",
        'Switch\t65 "S-b83fd20300000001"\t\t# "MF0;leaf01:MQM9700/U1" enhanced port 0 lid 1 lmc 0',
        '[1]\t"H-0002c90300000002"[1](2c90300000002) \t\t# "node0001 mlx5_0" lid 2 4xNDR',
        '[64]\t"H-b83fd20300000009"[1](b83fd20300000009) \t\t# "switch management" lid 3 4xNDR', "",
        "sysimgguid=0xb83fd20300000001", "caguid=0xb83fd20300000009",
        'Ca\t1 "H-b83fd20300000009"\t\t# "switch management"',
        '[1](b83fd20300000009) \t"S-b83fd20300000001"[64]\t\t# lid 3 lmc 0 "MF0;leaf01:MQM9700/U1" lid 1 4xNDR', ""])
    fabric = parse_observed(text, "x.ibnet")
    assert len(fabric.links) == 2
    internal = [link for link in fabric.links if link.a.internal or link.b.internal]
    assert len(internal) == 1 and {internal[0].a.port_num, internal[0].b.port_num} == {64, 1}


PORT_LINE = st.builds(
    lambda kind, lid, port, guid, width, speed, desc, quote: (
        f"{kind} {lid:5d} {port:2d} 0x{guid:016x} {width} {speed}" + " " * 36
        + (f"'{desc}'" if quote else desc)),
    st.sampled_from(["CA", "SW", "RT"]), st.integers(0, 99999), st.integers(0, 999), st.integers(0, 2**64 - 1),
    st.sampled_from(["4x", "1x", "??"]), st.sampled_from(["NDR", "EDR", "???"]),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40), st.booleans())


@settings(max_examples=80, deadline=None)
@given(st.lists(PORT_LINE | st.text(max_size=60), min_size=1, max_size=6))
def test_property_ports_report_lines_read_or_refused_in_one_line(lines: list[str]) -> None:
    try:
        fabric = parse_ports_report("\n".join(lines), "p.txt")
    except InputError as exc:
        assert "\n" not in str(exc).strip() and "p.txt line" in str(exc)
        return
    assert fabric.links == []  # open ports only (and blank or comment lines): read, no links
