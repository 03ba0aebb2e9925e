"""ibnetdiscover / links-CSV parsing and plan-vs-fabric verification on seeded-miswiring fixtures."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.topology.api import plan_files, verify_texts
from dsctl.topology.observed import parse_ibnetdiscover, parse_links_csv, parse_observed, render_ibnetdiscover
from dsctl.topology.summary import summarize
from dsctl.topology.verify import load_plan_json, verify

DATA = Path(__file__).resolve().parents[1] / "data" / "topology"


def _fixtures_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("make_fixtures", DATA / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


FIX = _fixtures_module()
PLAN = FIX.small_plan()
PLAN_JSON = plan_files(PLAN, summarize(PLAN))["plan.json"]


def run(name: str):  # type: ignore[no-untyped-def]
    return verify_texts(PLAN_JSON, (DATA / name).read_text(), "plan.json", name)


def kinds(result) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return {k: v for k, v in result.counts.items() if v}


def ends(finding) -> set[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return {(finding.a_device, finding.a_port), (finding.b_device, finding.b_port)}


def test_fixtures_are_up_to_date() -> None:
    radix = {n: PLAN.spec.radix for n, t in zip(PLAN.device_names, PLAN.device_tier, strict=True) if t > 0}
    assert render_ibnetdiscover(FIX.planned_links(PLAN), radix) == (DATA / "perfect.ibnet").read_text()


@pytest.mark.parametrize("name", ["perfect.ibnet", "perfect.csv"])
def test_perfect_fabric_has_no_findings(name: str) -> None:
    result = run(name)
    assert result.exit_code == 0 and result.findings == []
    assert result.matched_cables == result.expected_cables == 160
    assert result.plan_devices_not_seen == 0


def test_plan_verifies_against_its_own_cabling_csv() -> None:
    cabling = plan_files(PLAN, summarize(PLAN))["cabling.csv"]
    result = verify_texts(PLAN_JSON, cabling, "plan.json", "cabling.csv")
    assert result.exit_code == 0 and result.observed_format == "csv"


def test_swapped_ports_are_named_with_both_ends() -> None:
    result = run("swapped.ibnet")
    assert kinds(result) == {"swapped": 2} and result.exit_code == 1
    got = [ends(f) for f in result.findings]
    assert {("node0001", "mlx5_2"), ("p2-leaf01", "2")} in got
    assert {("node0002", "mlx5_2"), ("p2-leaf01", "1")} in got
    assert all("p2-leaf01 port" in f.expected for f in result.findings)


def test_missing_cables() -> None:
    result = run("missing.ibnet")
    assert kinds(result) == {"missing": 2}
    got = [ends(f) for f in result.findings]
    assert {("node0005", "mlx5_1"), ("p1-leaf02", "1")} in got
    assert any(("p6-leaf03", "5") in e for e in got)
    assert all(f.line is None for f in result.findings)


def test_cross_plane_cables() -> None:
    result = run("cross_plane.ibnet")
    assert kinds(result) == {"cross_plane": 2}
    planes = sorted(f.plane for f in result.findings)
    assert planes == ["3/4", "4/3"]
    assert all(f.a_device == "node0007" or f.b_device == "node0007" for f in result.findings)
    assert all(f.line is not None for f in result.findings)


def test_extra_cable() -> None:
    result = run("extra.ibnet")
    assert kinds(result) == {"extra": 1}
    assert ends(result.findings[0]) == {("p0-leaf03", "3"), ("p0-spine02", "8")}
    assert "unused" in result.findings[0].expected


def test_unmatched_device() -> None:
    result = run("unmatched.ibnet")
    assert kinds(result) == {"unmatched_device": 1}
    assert result.unmatched_devices == ["node0099 mlx5_0"]
    assert ("p5-leaf03", "4") in ends(result.findings[0])


@pytest.mark.parametrize("name", ["miswired.ibnet", "miswired.csv"])
def test_every_seeded_fault_is_found_together(name: str) -> None:
    result = run(name)
    assert kinds(result) == {"swapped": 2, "missing": 2, "cross_plane": 2, "extra": 1, "unmatched_device": 1}
    assert result.matched_cables == 154


def test_malformed_file_names_the_line() -> None:
    with pytest.raises(InputError, match=r"line 41"):
        run("malformed.ibnet")


@pytest.mark.parametrize(("text", "match"), [
    ("", "no 'Switch' or 'Ca'"),
    ('[1]\t"S-0001"[2]\t# "x" lid 1 4xNDR\n', "line 1: port line before"),
    ('Switch 8 "S-01" # "sw" base port 0 lid 1 lmc 0\n[1] "H-02"[1](2)\t# "n1 mlx5_0" lid 2\nbogus\n', "line 3"),
])
def test_ibnetdiscover_errors(text: str, match: str) -> None:
    with pytest.raises(InputError, match=match):
        parse_ibnetdiscover(text, "OBSERVED")


@pytest.mark.parametrize(("text", "match"), [
    ("a_device,a_port,b_device\n", "lacks b_port"),
    ("a_device,a_port,b_device,b_port\nn1,mlx5_0,sw\n", "line 2 has 3 fields"),
    ("a_device,a_port,b_device,b_port\n\nn1,,sw,1\n", "line 3"),
])
def test_links_csv_errors(text: str, match: str) -> None:
    with pytest.raises(InputError, match=match):
        parse_links_csv(text, "OBSERVED")


def test_real_ibnetdiscover_quirks_parse() -> None:
    text = """#
# Topology file: generated on Tue Jun  5 14:15:10 2007
#
# Initiated from node 0008f10403960558 port 0008f10403960559

Non-Chassis Nodes

vendid=0x2c9
devid=0xd2f0
sysimgguid=0xfc6a1c0300e1a2b0
switchguid=0xfc6a1c0300e1a2b0(fc6a1c0300e1a2b0)
Switch\t64 "S-fc6a1c0300e1a2b0"\t\t# "MF0;p0-leaf01:MQM9700/U1" enhanced port 0 lid 7 lmc 0
[1]\t"H-a088c20300aa0001"[1](a088c20300aa0001) \t\t# "node0001 mlx5_0" lid 21 4xNDR
[33]\t"S-fc6a1c0300e1b000"[1]\t\t# "MF0;p0-spine01:MQM9700/U1" lid 9 4xNDR

vendid=0x2c9
devid=0x1021
sysimgguid=0xa088c20300aa0001
caguid=0xa088c20300aa0001
Ca\t1 "H-a088c20300aa0001"\t\t# "node0001 mlx5_0"
[1](a088c20300aa0001) \t"S-fc6a1c0300e1a2b0"[1]\t\t# lid 21 lmc 0 "MF0;p0-leaf01:MQM9700/U1" lid 7 4xNDR
"""
    fabric = parse_observed(text)
    assert fabric.source_format == "ibnetdiscover"
    assert len(fabric.links) == 2  # the CA's view of its cable is the same link
    link = fabric.links[0]
    assert (link.a.desc, link.a.port, link.b.device, link.b.port) == ("MF0;p0-leaf01:MQM9700/U1", "1", "node0001",
                                                                      "mlx5_0")
    # switch descriptions are matched by the plan name they contain
    result = verify(load_plan_json(PLAN_JSON), fabric)
    assert result.counts["unmatched_device"] == 0
    assert result.matched_cables == 1


def test_plan_json_errors() -> None:
    with pytest.raises(InputError, match="not valid JSON"):
        load_plan_json("{", "x/plan.json")
    with pytest.raises(InputError, match="not a dsctl topology plan"):
        load_plan_json('{"schema": "other"}', "x/plan.json")


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_any_single_removed_or_moved_cable_is_reported(data: st.DataObject) -> None:
    links = FIX.planned_links(PLAN)
    radix = {n: PLAN.spec.radix for n, t in zip(PLAN.device_names, PLAN.device_tier, strict=True) if t > 0}
    i = data.draw(st.integers(0, len(links) - 1))
    if data.draw(st.booleans()):
        removed = links.pop(i)
        result = verify(load_plan_json(PLAN_JSON), parse_ibnetdiscover(render_ibnetdiscover(links, radix)))
        assert kinds(result) == {"missing": 1}
        assert ends(result.findings[0]) == {(removed[0], removed[1]), (removed[2], removed[3])}
    else:
        a_dev, a_port, b_dev, _ = links[i]
        used = {int(e[1]) for link in links for e in ((link[0], link[1]), (link[2], link[3])) if e[0] == b_dev}
        free = sorted(set(range(1, PLAN.spec.radix + 1)) - used)
        if not free:
            return  # nowhere to move the cable on this switch
        links[i] = (a_dev, a_port, b_dev, str(data.draw(st.sampled_from(free))))
        result = verify(load_plan_json(PLAN_JSON), parse_ibnetdiscover(render_ibnetdiscover(links, radix)))
        assert kinds(result) == {"swapped": 1}
        assert ends(result.findings[0]) == {(a_dev, a_port), (b_dev, links[i][3])}


def test_findings_dataclass_is_serialisable() -> None:
    result = run("miswired.ibnet")
    assert dataclasses.asdict(result)["counts"]["swapped"] == 2
