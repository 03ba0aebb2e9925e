"""verify on real public fabric dumps (tests/data/topology/real/README.md): a DGX H100 SuperPOD subnet from NVIDIA
topograph's test data, checked against a plan derived from its naming pattern (tests/real_fabric.py), and
``ibnetdiscover -p`` reports of infiniband_exporter's fixtures. Every expected number is computed from the dump
text by tests/real_fabric.py, which uses no dsctl code (issue 29)."""

from __future__ import annotations

from pathlib import Path

import pytest

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
