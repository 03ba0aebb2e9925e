"""ibnetdiscover / links-CSV parsing and plan-vs-fabric verification on seeded-miswiring fixtures."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.cluster import load_plan
from dsctl.errors import InputError
from dsctl.topology.api import plan_files, verify_texts
from dsctl.topology.observed import parse_ibnetdiscover, parse_links_csv, render_ibnetdiscover
from dsctl.topology.observed_format import parse_observed
from dsctl.topology.summary import summarize
from dsctl.topology.verify import verify

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
    result = verify(load_plan(PLAN_JSON), fabric)
    assert result.counts["unmatched_device"] == 0
    assert result.matched_cables == 1


def test_plan_json_errors() -> None:
    with pytest.raises(InputError, match="not valid JSON"):
        load_plan("{", "x/plan.json")
    with pytest.raises(InputError, match="not a dsctl topology plan"):
        load_plan('{"schema": "other"}', "x/plan.json")


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_any_single_removed_or_moved_cable_is_reported(data: st.DataObject) -> None:
    links = FIX.planned_links(PLAN)
    radix = {n: PLAN.spec.radix for n, t in zip(PLAN.device_names, PLAN.device_tier, strict=True) if t > 0}
    i = data.draw(st.integers(0, len(links) - 1))
    if data.draw(st.booleans()):
        removed = links.pop(i)
        result = verify(load_plan(PLAN_JSON), parse_ibnetdiscover(render_ibnetdiscover(links, radix)))
        assert kinds(result) == {"missing": 1}
        assert ends(result.findings[0]) == {(removed[0], removed[1]), (removed[2], removed[3])}
    else:
        a_dev, a_port, b_dev, old_port = links[i]
        used = {int(e[1]) for link in links for e in ((link[0], link[1]), (link[2], link[3])) if e[0] == b_dev}
        free = sorted(set(range(1, PLAN.spec.radix + 1)) - used)
        if not free:
            return  # nowhere to move the cable on this switch
        links[i] = (a_dev, a_port, b_dev, str(data.draw(st.sampled_from(free))))
        result = verify(load_plan(PLAN_JSON), parse_ibnetdiscover(render_ibnetdiscover(links, radix)))
        # one port away on the planned switch is a slipped cable (port_offset), further away a moved one
        kind = "port_offset" if abs(int(links[i][3]) - int(old_port)) == 1 else "swapped"
        assert kinds(result) == {kind: 1}
        assert ends(result.findings[0]) == {(a_dev, a_port), (b_dev, links[i][3])}
        node = a_dev.startswith("node")
        here = f"of {a_dev} {a_port}" if node else f"at {a_dev}:{a_port}"
        assert result.findings[0].action == f"move the cable {here} from {b_dev}:{links[i][3]} to {b_dev}:{old_port}"


def test_findings_dataclass_is_serialisable() -> None:
    result = run("miswired.ibnet")
    assert dataclasses.asdict(result)["counts"]["swapped"] == 2


PERFECT_CSV = (DATA / "perfect.csv").read_text()


def _csv_with(line3: str | None = None, extra: str = "") -> str:
    """perfect.csv (header on line 2, first cable on line 3) with line 3 replaced and/or a row appended."""
    lines = PERFECT_CSV.splitlines()
    if line3 is not None:
        lines[2] = line3
    return "\n".join(lines) + "\n" + extra


@pytest.mark.parametrize(("line3", "match"), [
    ("node0001,mlx5_0,p0-leaf01,abc",
     r"OBSERVED line 3: b_port 'abc' of switch 'p0-leaf01' is not a port number 1\.\.8"),
    ("node0001,mlx5_0,p0-leaf01,-1", r"line 3: b_port '-1' .* 1\.\.8"),
    ("node0001,mlx5_0,p0-leaf01,0", r"line 3: b_port '0' .* 1\.\.8"),
    ("node0001,mlx5_0,p0-leaf01,9", r"line 3: b_port '9' .* 1\.\.8"),
    ("node0001,mlx5_0,p0-leaf01,1.0", r"line 3: b_port '1\.0'"),
    ("p0-leaf01,x,node0001,mlx5_0", r"line 3: a_port 'x' of switch 'p0-leaf01'"),
    ("node0001,-1,p0-leaf01,1", r"line 3: a_port '-1' is not a port: ports are numbered from 1"),
    ("node0099,mlx5_0,sw99,-3", r"line 3: b_port '-3' is not a port"),
])
def test_links_csv_bad_switch_port_is_malformed_input(line3: str, match: str) -> None:
    with pytest.raises(InputError, match=match) as err:
        verify_texts(PLAN_JSON, _csv_with(line3), "plan.json", "OBSERVED")
    assert "1..radix" in (err.value.hint or "") or "from 1" in str(err.value)


def test_links_csv_unknown_text_port_of_unknown_device_is_still_a_finding() -> None:
    result = verify_texts(PLAN_JSON, _csv_with("node0001,mlx5_0,sw99,abc"), "plan.json", "OBSERVED")
    assert result.counts["unmatched_device"] == 1 and result.exit_code == 1


@pytest.mark.parametrize(("extra", "match"), [
    ("node0001,mlx5_0,p0-leaf01,1\n", r"line 163 repeats the cable of line 3 \(node0001 mlx5_0 <-> p0-leaf01 port 1\)"),
    ("p0-leaf01,1,node0001,mlx5_0\n", r"line \d+ repeats the cable of line 3"),
    ("node0099,mlx5_0,p0-leaf01,1\n", r"line \d+: p0-leaf01 port 1 already has the cable of line 3"),
])
def test_links_csv_duplicate_cable_or_port_is_malformed_input(extra: str, match: str) -> None:
    with pytest.raises(InputError, match=match):
        parse_links_csv(_csv_with(extra=extra), "OBSERVED")


def _plan_doc_with(path: tuple[str | int, ...], value: object) -> str:
    import json
    doc = json.loads(PLAN_JSON)
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(doc)


@pytest.mark.parametrize(("path", "value", "match"), [
    (("cables", 0, 5), None, r"cables\[0\]\[5\] \(b_port\) must be a whole number 1\.\.8 \(a port of p0-leaf01\), "
                             r"got null"),
    (("cables", 0, 5), "1", r"cables\[0\]\[5\] \(b_port\) .* got '1'"),
    (("cables", 0, 5), 9, r"cables\[0\]\[5\] \(b_port\) .* 1\.\.8 .* got 9"),
    (("cables", 0, 5), True, r"got true"),
    (("cables", 0, 3), None, r"cables\[0\]\[3\] \(a_port\) must be a NIC name listed in nics"),
    (("cables", 0, 2), "node9999", r"cables\[0\]\[2\] \(a_device\) must be a device listed in devices"),
    (("cables", 0, 2), None, r"cables\[0\]\[2\] \(a_device\) must be a non-empty name, got null"),
    (("cables", 0, 0), -1, r"cables\[0\]\[0\] \(plane\)"),
    (("cables", 0, 1), "node-core", r"cables\[0\]\[1\] \(kind\) must be one of"),
    (("cables", 0), [0, "node-leaf"], r"cables\[0\] must be an array of 6 values"),
    (("cables",), None, r"cables must be an array, got null"),
    (("devices", 0, 0), None, r"devices\[0\]\[0\] \(name\) must be a non-empty name"),
    (("devices", 1, 0), "node0001", r"devices\[1\]\[0\] \(name\) must be a name not used by an earlier device"),
    (("devices", 0, 1), "router", r"devices\[0\]\[1\] \(tier\)"),
    (("devices", 0, 4), 0, r"devices\[0\]\[4\] \(ports\)"),
    (("nics", 0), None, r"nics\[0\] must be a non-empty name"),
    (("nic_plane",), [0, 1], r"nic_plane must be an array of 8 planes"),
    (("nic_plane", 2), "2", r"nic_plane\[2\] must be a whole number"),
    (("cable_columns",), ["a"], r"cable_columns must be"),
])
def test_plan_json_fields_are_validated_by_key(path: tuple, value: object, match: str) -> None:
    with pytest.raises(InputError, match=match) as err:
        load_plan(_plan_doc_with(path, value), "x/plan.json")
    assert str(err.value).startswith("x/plan.json: ") and len(str(err.value)) < 200


def test_plan_json_error_never_echoes_a_huge_value() -> None:
    with pytest.raises(InputError, match=r"\(1,000,000 characters\)") as err:
        load_plan(_plan_doc_with(("cables", 0, 3), "m" * 1_000_000), "plan.json")
    assert len(str(err.value)) < 200


def test_ibnetdiscover_port_outside_the_header_count_is_malformed() -> None:
    text = ('Switch 8 "S-01" # "sw" enhanced port 0 lid 1 lmc 0\n'
            '[9] "H-02"[1](2)\t# "n1 mlx5_0" lid 2 4xNDR\n'
            'Ca 1 "H-02" # "n1 mlx5_0"\n')
    with pytest.raises(InputError, match=r"line 2: port 9 of 'sw' is outside 1\.\.8"):
        parse_ibnetdiscover(text, "OBSERVED")
    with pytest.raises(InputError, match=r"line 2: port 2 of 'n1 mlx5_0' is outside 1\.\.1"):
        parse_ibnetdiscover(text.replace("[9]", "[1]").replace('"H-02"[1]', '"H-02"[2]'), "OBSERVED")
