"""verify with one dump per plane: seeded damage of 15 kinds on a small 8-plane plan, name maps, GUID records,
link rates, split ports, counters, -p reports and the real public dumps under tests/data/topology/real/."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.verify_damage import scenario, score
from dsctl.cluster import load_plan
from dsctl.errors import InputError
from dsctl.topology.api import verify_texts
from dsctl.topology.counters import parse_perfquery, parse_thresholds
from dsctl.topology.ibformats import parse_node_name_map, parse_ports_report, render_node_name_map
from dsctl.topology.observed import rename
from dsctl.topology.observed_format import parse_observed
from dsctl.topology.verify import verify
from dsctl.topology.verify_model import ACTION_KINDS, FINDING_KINDS

REAL = Path(__file__).resolve().parents[1] / "data" / "topology" / "real"
SC = scenario(128, 16)


def _run(**kw):  # type: ignore[no-untyped-def]
    args = {"name_map": ("map", SC.name_map), "guids": ("guids", SC.recorded_guids), "counters": SC.counters}
    args.update(kw)
    return verify_texts(SC.plan_json, SC.dumps, "plan.json", **args)


def test_seeded_damage_of_every_kind_is_found_and_nothing_else() -> None:
    result = _run()
    recall, missed, false = score(result, SC)
    assert (recall, missed, false) == (1.0, [], [])
    # 14 damages that must be findings, plus one that must not: hosts with default descriptions, named by the map
    assert len({kind for _, kind, _ in SC.expected}) >= 12 and len({d for d, _, _ in SC.expected}) == 14
    touched = {(f.a_device, f.a_port) for f in result.findings} | {(f.b_device, f.b_port) for f in result.findings}
    assert SC.resolved_by_map and not touched & set(SC.resolved_by_map)
    assert result.unmatched_devices == []
    assert [d.plane for d in result.dumps] == list(range(8)) and result.planes_checked == list(range(8))
    assert result.expected_link == "4xNDR"
    assert all(f.kind in FINDING_KINDS and f.action_kind in ACTION_KINDS and f.action for f in result.findings)


def test_actions_name_the_plan_ports() -> None:
    result = _run()
    swaps = [f for f in result.findings if f.kind == "swapped" and f.a_device.startswith("node")]
    assert any(f.action == "swap the two cables at p2-leaf03:7 and p2-leaf03:3" for f in swaps)
    cross = next(f for f in result.findings if f.kind == "cross_plane")
    assert cross.action_kind == "swap"
    assert cross.action == f"swap the cables of {cross.a_device} mlx5_4 and mlx5_5 at the node"
    rate = next(f for f in result.findings if f.kind == "degraded_speed")
    assert (rate.value, rate.expected_value) == ("4xHDR", "4xNDR") and rate.action.startswith("re-seat")
    gone = next(f for f in result.findings if f.kind == "impossible_port")
    assert gone.value == "100" and gone.expected_value == "1..16" and "split" in gone.action


def test_without_the_name_map_default_described_hcas_at_their_planned_ports_are_placed_by_position() -> None:
    result = _run(name_map=None, guids=None)  # as ibdiagnet -t does: the plan says which NIC sits at that port
    assert result.counts["unmatched_device"] == 0
    placed = sorted(entry.split(" (0x")[0] for entry in result.matched_by_position)
    assert placed == sorted(f"{node} {nic}" for node, nic in SC.resolved_by_map)
    assert result.counts["guid_changed"] == 0


def test_one_plane_left_out_is_reported_once_not_as_missing_cables() -> None:
    result = verify_texts(SC.plan_json, SC.dumps[1:], "plan.json")
    assert result.counts["plane_not_seen"] == 1 and 0 not in result.planes_checked
    assert not any(f.kind == "missing" and f.plane == "0" for f in result.findings)
    assert "ibnetdiscover -C mlx5_0 -P 1" in next(f for f in result.findings if f.kind == "plane_not_seen").action


def test_recorded_guids_round_trip_and_flag_a_replaced_hca() -> None:
    clean = _run(counters=())
    text = render_node_name_map(clean.guids)
    names = parse_node_name_map(text)
    assert len(names) == len(clean.guids) and "p0-leaf01" in names.values()
    again = verify_texts(SC.plan_json, SC.dumps, "plan.json", guids=("rec", text))
    assert again.counts["guid_changed"] == 0


def test_counters_need_their_plane_and_thresholds_are_stated() -> None:
    with pytest.raises(InputError, match="name each counters file like its plane's dump"):
        _run(counters=[("whatever.txt", SC.counters[0][1])])
    assert _run(thresholds=["symbol_errors=100000", "rcv_errors=1000"]).counts["error_counters"] == 0
    with pytest.raises(InputError, match="unknown counter"):
        parse_thresholds(["bogus=1"])


def test_real_perfquery_output_parses() -> None:
    rows = parse_perfquery((REAL / "infiniband_exporter_perfquery_0x7cfe9003009ce5b0.out").read_text(), "p")
    assert [(r.lid, r.port, r.symbol_errors, r.link_downed) for r in rows] == [(1719, 1, 0, 0), (1719, 2, 0, 0)]


def test_real_ports_report_parses() -> None:
    fabric = parse_ports_report((REAL / "infiniband_exporter_ports.out").read_text())
    assert len(fabric.links) == 4  # 3 CA links and 1 switch link, each printed twice; 2 open ports skipped
    first = fabric.links[0]
    assert (first.a.device, first.a.port, first.b.device, first.b.port, first.rate) == (
        "o0001", "HCA-1", "ib-i1l1s01", "10", "4xEDR")
    assert parse_observed((REAL / "infiniband_exporter_ports.out").read_text()).source_format == "ibnetdiscover-p"


def test_real_default_description_cluster_resolves_with_a_name_map() -> None:
    fabric = parse_observed((REAL / "hpc_toolset_X5.topofile").read_text(), "X5")
    hosts = {e.guid for link in fabric.links for e in (link.a, link.b) if e.is_switch is False}
    assert len(hosts) == 89
    assert {e.desc for link in fabric.links for e in (link.a, link.b) if e.is_switch is False} == {
        "MT25408 ConnectX Mellanox Technologies"}
    names = parse_node_name_map((REAL / "hpc_toolset_X5.node-name-map").read_text())
    named = rename(fabric, names)
    devices = {e.guid: e.device for link in named.links for e in (link.a, link.b) if e.is_switch is False}
    covered = {g for g in hosts if g in names}
    assert len(covered) >= 80  # the site's own map names 80+ of its 89 HCAs
    assert all(devices[g] == names[g] for g in covered)
    # an unnamed one is named by its GUID, its description never split into a device "MT25408", port "ConnectX"
    assert hosts - covered and all(devices[g] == f"H-{g}" for g in hosts - covered)
    ports = {e.port for link in named.links for e in (link.a, link.b) if e.is_switch is False and e.guid not in names}
    assert ports <= {"1", "2"}
    rates = {link.rate for link in fabric.links}
    assert rates == {"4xQDR", "4xDDR"}


def test_split_port_plan_accepts_128_ports_and_2xndr(tmp_path: Path) -> None:
    from dsctl.profiles.loader import ProfileStore
    from dsctl.topology.api import make_spec, plan_files
    from dsctl.topology.observed import render_ibnetdiscover
    from dsctl.topology.plan import build_plan
    from dsctl.topology.summary import summarize

    store = ProfileStore()
    sw = store.switch("ib-ndr-128-split")
    assert (sw.num_ports, sw.link) == (128, "2xNDR")
    plan = build_plan(make_spec("ft2", 128, store.node("h800-hgx"), sw))
    text = plan_files(plan, summarize(plan))["plan.json"]
    fab = load_plan(text)
    assert fab.link == "2xNDR" and max(fab.ports.values()) == 128
    links = [(a[0], a[1], b[0], b[1]) for _, _, a, b in fab.cables]
    radix = {n: 129 for n, t in fab.tier.items() if t != "node"}  # a split QM9700 prints 'Switch 129'
    dump = render_ibnetdiscover(links, radix, default_rate="2xNDR")
    assert verify(fab, parse_observed(dump)).findings == []
    slow = verify(fab, parse_observed(render_ibnetdiscover(links, radix, rates={0: "1xNDR"}, default_rate="2xNDR")))
    assert [f.kind for f in slow.findings] == ["degraded_width"]


def test_name_map_errors_name_the_line() -> None:
    with pytest.raises(InputError, match="line 2"):
        parse_node_name_map('0x1 "a"\nnot a guid line\n')
    with pytest.raises(InputError, match="already named on line 1"):
        parse_node_name_map('0x1 "a"\n0x0000000000000001 "b"\n')
    assert parse_node_name_map('# c\n0002c903000a0b0c "node0001 mlx5_0"  # x\n0x5 sw1\n') == {
        "0002c903000a0b0c": "node0001 mlx5_0", "0000000000000005": "sw1"}


def _small_plan_files(**names: str) -> dict[str, str]:
    from dsctl.profiles.loader import ProfileStore
    from dsctl.topology.api import make_spec, plan_files
    from dsctl.topology.plan import build_plan
    from dsctl.topology.summary import summarize

    store = ProfileStore()
    plan = build_plan(make_spec("mpft", 40, store.node("h800-hgx"), store.switch("ib-ndr-64"), radix=16,
                                names=dict(names)))
    return plan_files(plan, summarize(plan))


def test_exported_expected_dumps_round_trip_to_zero_findings() -> None:
    files = _small_plan_files()
    dumps = [(n, t) for n, t in files.items() if n.startswith("expected-plane") and n.endswith(".ibnet")]
    assert len(dumps) == 8
    result = verify_texts(files["plan.json"], dumps, "plan.json")
    assert result.findings == [] and result.matched_cables == result.expected_cables
    assert [d.plane for d in result.dumps] == list(range(8))


def test_topology_yaml_follows_the_documented_schema() -> None:
    from dsctl.profiles.textyaml import load_yaml

    doc = load_yaml(_small_plan_files()["topology.yaml"], "topology.yaml")
    assert isinstance(doc, list) and [t["topology"] for t in doc] == ["mpft-tree", "mpft-block"]
    tree, block = doc
    assert tree["cluster_default"] is True and set(tree) == {"topology", "cluster_default", "tree"}
    switches = tree["tree"]["switches"]
    assert all(set(s) in ({"switch", "nodes"}, {"switch", "children"}) for s in switches)
    assert switches[0] == {"switch": "p0-leaf01", "nodes": "node[0001-0008]"}
    assert {"switch": "p0-spine01", "children": "p0-leaf[01-05]"} in switches
    assert block["block"]["block_sizes"] == [8]
    assert [b["block"] for b in block["block"]["blocks"]] == [f"p0-leaf0{i}" for i in range(1, 6)]


def test_nic_names_can_count_from_one() -> None:
    files = _small_plan_files(nic="HCA-{nic1}", node="o{n:04d}")
    plan = load_plan(files["plan.json"])
    assert plan.nics == tuple(f"HCA-{i}" for i in range(1, 9))
    report = (REAL / "infiniband_exporter_ports.out").read_text().splitlines()[0]
    end = parse_ports_report(report).links[0].a  # 'o0001 HCA-1' as a site describes it
    from dsctl.topology.verify_model import Resolver

    assert Resolver(plan).resolve(end)[:2] == (("o0001", "HCA-1"), 0)


def _lldp(node_nics: dict[str, tuple[str, str]]) -> str:
    import json

    return json.dumps({"lldp": {"interface": [
        {nic: {"via": "LLDP", "rid": "1", "age": "0 day, 00:01:02",
               "chassis": {leaf: {"id": {"type": "mac", "value": "0c:42:a1:00:00:01"}, "descr": "Cumulus Linux"}},
               "port": {"id": {"type": "ifname", "value": f"swp{port}"}, "descr": f"swp{port}", "ttl": "120"}}}
        for nic, (leaf, port) in node_nics.items()]}})


def test_roce_lldp_neighbours_are_checked_against_the_plan() -> None:
    files = _small_plan_files()
    plan = load_plan(files["plan.json"])
    texts = []
    for node in plan.nodes:
        nics = {nic: (leaf, port) for (n, nic), (leaf, port) in plan.uplink.items() if n == node}
        texts.append((f"lldp/{node}.json", _lldp(nics)))
    ok = verify_texts(files["plan.json"], texts, "plan.json")
    assert ok.findings == [] and ok.matched_cables == ok.expected_cables == len(plan.uplink)
    assert ok.observed_format == "lldp"
    # node0002 mlx5_3 is in p3-leaf01 swp2 per plan; cable it to p2-leaf01 swp2 instead
    node = plan.nodes[1]
    nics = {nic: (leaf, port) for (n, nic), (leaf, port) in plan.uplink.items() if n == node}
    nics["mlx5_3"] = ("p2-leaf01", nics["mlx5_3"][1])
    texts[1] = (texts[1][0], _lldp(nics))
    bad = verify_texts(files["plan.json"], texts, "plan.json")
    cross = [f for f in bad.findings if f.kind == "cross_plane"]
    assert len(cross) == 1 and cross[0].a_device == node and cross[0].a_port == "mlx5_3"
    assert cross[0].action == f"move the cable of {node} mlx5_3 from p2-leaf01:{nics['mlx5_3'][1]} to " \
                              f"p3-leaf01:{nics['mlx5_3'][1]}"


def test_ibdiagnet_pm_info_counters_by_guid() -> None:
    from dsctl.topology.counters import parse_counters

    guid = next(g for g, n in parse_node_name_map(SC.recorded_guids).items() if n == "p2-leaf03")
    db = ("START_NODES\nNodeGUID,NodeType,NodeDesc\n0x1,2,x\nEND_NODES\nSTART_PM_INFO\n"
          "NodeGUID,PortGUID,PortNumber,LinkDownedCounterExt,SymbolErrorCounterExt,PortRcvErrorsExt,Eff_BER\n"
          f"0x{guid},0x{guid},1,0,0,0,1e-15\n0x{guid},0x{guid},2,4,0,0,N/A\n0x{guid},0x{guid},5,0,0,0,3e-10\n"
          "END_PM_INFO\n")
    rows = parse_counters(db, "ibdiagnet2.db_csv")
    assert [(r.port, r.link_downed, r.effective_ber) for r in rows] == [(1, 0, 1e-15), (2, 4, None), (5, 0, 3e-10)]
    result = verify_texts(SC.plan_json, SC.dumps, "plan.json", name_map=("map", SC.name_map),
                          guids=("guids", SC.recorded_guids), counters=[("ibdiagnet2.db_csv", db)])
    mine = [f for f in result.findings if f.source == "ibdiagnet2.db_csv"]
    assert sorted((f.kind, f.a_device if f.a_device.startswith("p") else f.b_device,
                   f.a_port if f.a_device.startswith("p") else f.b_port) for f in mine) == [
        ("error_counters", "p2-leaf03", "5"), ("link_downed", "p2-leaf03", "2")]
    assert "effective BER" in next(f for f in mine if f.kind == "error_counters").message


@pytest.mark.parametrize("kind", ["mrft", "ft2"])
def test_single_subnet_kinds_verify_with_one_dump(kind: str) -> None:
    from dsctl.profiles.loader import ProfileStore
    from dsctl.topology.api import make_spec, plan_files
    from dsctl.topology.plan import build_plan
    from dsctl.topology.summary import summarize

    store = ProfileStore()
    plan = build_plan(make_spec(kind, 16, store.node("h800-hgx"), store.switch("ib-ndr-64"), radix=16))
    files = plan_files(plan, summarize(plan))
    assert [n for n in files if n.startswith("expected-")] == ["expected-plane0.ibnet", "expected-plane0.topo"]
    result = verify_texts(files["plan.json"], files["expected-plane0.ibnet"], "plan.json", "fabric.ibnet")
    assert result.findings == [] and result.matched_cables == result.expected_cables == 256
    # the ibdiagnet topology file too: one host type with all 8 NICs, one CA each
    assert files["ibnl/DSCTL_HOST_P0.ibnl"].count("NODE CA 1 DSCTL_HCA mlx5_") == 8
    topo = verify_texts(files["plan.json"], files["expected-plane0.topo"], "plan.json", "fabric.topo")
    assert topo.findings == [] and topo.matched_cables == 256 and topo.observed_format == "ibdm-topo"
