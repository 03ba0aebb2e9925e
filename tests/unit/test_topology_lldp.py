"""LLDP (RoCE planes): lldpctl ``-f json0`` and ``-f json`` both read, from lldpd's own integration-test outputs
(tests/data/topology/real/README.md); port ids of subtype mac/local resolved through the port description, never
read as a port number; anything else refused with one line, never read as zero links (issue 29)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.topology.api import verify_texts
from dsctl.topology.lldp import MAX_INTERFACES, parse_lldp
from dsctl.topology.observed_format import parse_observed

REAL = Path(__file__).resolve().parents[1] / "data" / "topology" / "real"
JSON0 = REAL / "lldp_json0" / "ns-1.json"
JSON = REAL / "lldp_json" / "ns-1.json"


def _neighbour(path: Path) -> tuple[str, str, str, str]:
    """(local interface, system name, port id subtype, port description) read from either shape here."""
    doc = json.loads(path.read_text())
    lldp = doc["lldp"]
    if isinstance(lldp, list):
        entry = lldp[0]["interface"][0]
        port = entry["port"][0]
        return (entry["name"], entry["chassis"][0]["name"][0]["value"], port["id"][0]["type"],
                port["descr"][0]["value"])
    ifname, entry = next(iter(lldp["interface"].items()))
    name = next(iter(entry["chassis"]))
    return ifname, name, entry["port"]["id"]["type"], entry["port"]["descr"]


@pytest.mark.parametrize("path", [JSON0, JSON], ids=["json0", "json"])
def test_lldpd_outputs_of_both_shapes_read_the_same_neighbour(path: Path) -> None:
    ifname, switch, subtype, descr = _neighbour(path)
    assert subtype == "mac"  # the id is a MAC address: the port number comes from the description
    want_port = int(re.search(r"(\d+)$", descr).group(1))  # type: ignore[union-attr]
    fabric = parse_observed(path.read_text(), str(path))
    assert fabric.source_format == "lldp" and len(fabric.links) == 1
    link = fabric.links[0]
    assert (link.a.device, link.a.port) == ("ns-1", ifname)
    assert (link.b.device, link.b.port_num, link.b.port) == (switch, want_port, str(want_port))


def _doc(port: dict[str, object], shape: str = "json") -> str:
    if shape == "json0":
        return json.dumps({"lldp": [{"interface": [{"name": "eth0", "via": "LLDP", "chassis": [
            {"id": [{"type": "mac", "value": "0c:42:a1:00:00:01"}], "name": [{"value": "p0-leaf01"}]}],
            "port": [{k: [v] for k, v in port.items()}]}]}]})
    return json.dumps({"lldp": {"interface": {"eth0": {"via": "LLDP", "chassis": {
        "p0-leaf01": {"id": {"type": "mac", "value": "0c:42:a1:00:00:01"}}}, "port": port}}}})


@pytest.mark.parametrize("shape", ["json", "json0"])
def test_a_mac_subtype_port_id_never_becomes_a_port_number(shape: str) -> None:
    mac = {"type": "mac", "value": "00:00:00:00:00:17"}
    alone = parse_lldp(_doc({"id": mac}, shape), "node0001.json").links[0].b
    assert alone.port_num == 0 and alone.port == "mac 00:00:00:00:00:17"
    described = parse_lldp(_doc({"id": mac, "descr": {"value": "swp5"}}, shape), "node0001.json").links[0].b
    assert described.port_num == 5


def test_a_local_subtype_id_resolves_through_the_description_only() -> None:
    local = {"type": "local", "value": "1017"}  # an opaque index, not port 1017
    assert parse_lldp(_doc({"id": local}), "n.json").links[0].b.port_num == 0
    assert parse_lldp(_doc({"id": local, "descr": "Eth1/9"}), "n.json").links[0].b.port_num == 9
    named = {"type": "ifname", "value": "swp12"}
    assert parse_lldp(_doc({"id": named, "descr": "uplink 3"}), "n.json").links[0].b.port_num == 12


@pytest.mark.parametrize("text, words", [
    ('{"lldp": {}}', "no LLDP neighbour"),
    ('{"lldp": [{}]}', "no LLDP neighbour"),
    ('{"lldp": [{"interface": []}]}', "no LLDP neighbour"),
    ('{"lldp": {"interface": 3}}', "neither an object nor a list"),
    ('{"lldp": {"interface": {"eth0": {"chassis": {}}}}}', "has no neighbour \"port\""),
    ('{"lldp": "x"}', "no \"lldp\" object"),
    ('{"lldp": [{}, {}]}', "prints one"),
    ('{"lldp": {"interface": [1]}}', "entry is not an object"),
])
def test_anything_not_understood_is_refused_with_one_line(text: str, words: str) -> None:
    with pytest.raises(InputError) as info:
        parse_lldp(text, "node0001.json")
    assert words in str(info.value) and "\n" not in str(info.value) and "node0001.json" in str(info.value)


def test_too_many_interfaces_are_refused_before_the_work() -> None:
    doc = {"lldp": {"interface": [{f"eth{i}": {"port": {"descr": "swp1"}}} for i in range(MAX_INTERFACES + 1)]}}
    with pytest.raises(InputError, match="interface"):
        parse_lldp(json.dumps(doc), "n.json")


def _plan(nics: list[str]) -> str:
    """A one-node RoCE plan: node ns-1, NIC i on plane i, cabled to leaf p<i>-leaf (ns-2.example.com for 0)."""
    leaves = ["ns-2.example.com"] + [f"p{i}-leaf" for i in range(1, len(nics))]
    devices = [["ns-1", "node", -1, 0, len(nics)]] + [[leaf, "leaf", i, 0, 32] for i, leaf in enumerate(leaves)]
    cables = [[i, "node-leaf", "ns-1", nic, leaves[i], 1] for i, nic in enumerate(nics)]
    return json.dumps({"schema": "dsctl.topology.plan/1", "spec": {"kind": "roce", "port_gbps": 400},
                       "nics": nics, "nic_plane": list(range(len(nics))),
                       "device_columns": ["name", "tier", "plane", "pod", "ports"], "devices": devices,
                       "cable_columns": ["plane", "kind", "a_device", "a_port", "b_device", "b_port"],
                       "cables": cables})


def test_verify_reads_json0_and_hints_lldpctl_not_infiniband_on_an_ethernet_plane() -> None:
    result = verify_texts(_plan(["eth0", "eth1"]), [(str(JSON0), JSON0.read_text())], "plan.json")
    assert result.matched_cables == 1 and result.observed_format == "lldp"
    unseen = [f for f in result.findings if f.kind == "plane_not_seen"]
    assert [f.plane for f in unseen] == ["1"] and len(result.findings) == 1
    assert "lldpctl -f json0" in unseen[0].action and "ibnetdiscover" not in unseen[0].action


EXAMPLES = 150


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                        st.sampled_from(["lldp", "interface", "name", "chassis", "port", "id", "descr", "type",
                                         "value", "eth0", "swp1"]), inner, max_size=4), max_leaves=25))
def test_property_any_json_is_read_or_refused_in_one_line(doc: object) -> None:
    try:
        fabric = parse_lldp(json.dumps({"lldp": doc}), "node0001.json")
    except InputError as exc:
        assert "\n" not in str(exc).strip()
        return
    assert fabric.links  # never zero links
    for link in fabric.links:
        assert link.b.port_num == 0 or link.b.port == str(link.b.port_num)
