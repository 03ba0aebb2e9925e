"""Wiring-plan invariants (hypothesis over sizes and kinds), counts across outputs, naming and limits."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.topology.api import make_spec, plan_files
from dsctl.topology.naming import NameTemplates
from dsctl.topology.plan import Plan, PlanSpec, build_plan, max_nodes
from dsctl.topology.summary import summarize


def spec(kind: str = "mpft", nodes: int = 100, radix: int = 64, nics: int = 8, planes: int | None = None,
         over: float = 1.0, **names: str) -> PlanSpec:
    from dsctl.topology.plan import default_planes, default_templates
    templates = dataclasses.replace(default_templates(kind), **names)
    return PlanSpec(kind, nodes, nics, nics, planes or default_planes(kind, nics), radix, 400.0, 82045.0, 544.0,
                    544.0, over, templates, "h800-hgx", "ib-ndr-64")


def switch_hops(plan: Plan) -> int:
    """Largest number of switches on a shortest path between two NICs of the same plane (BFS)."""
    adj: dict[int, set[int]] = {}
    sw = plan.cable_kind > 0
    for a, b in zip(plan.a_dev[sw].tolist(), plan.b_dev[sw].tolist(), strict=True):
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    leaves_by_plane: dict[int, set[int]] = {}
    node = plan.cable_kind == 0
    for p, leaf in zip(plan.cable_plane[node].tolist(), plan.b_dev[node].tolist(), strict=True):
        leaves_by_plane.setdefault(p, set()).add(leaf)
    worst = 0
    for leaves in leaves_by_plane.values():
        for start in leaves:
            dist = {start: 0}
            queue = deque([start])
            while queue:
                cur = queue.popleft()
                for nxt in adj.get(cur, ()):
                    if nxt not in dist:
                        dist[nxt] = dist[cur] + 1
                        queue.append(nxt)
            for other in leaves:
                assert other in dist, "plane is not connected"
                worst = max(worst, dist[other] + 1)
    return worst


def check_invariants(plan: Plan) -> None:
    s = plan.spec
    node = plan.cable_kind == 0
    # every NIC cabled exactly once
    nic_ids = plan.a_dev[node].astype(np.int64) * s.num_nics_per_node + plan.a_port[node]
    assert len(nic_ids) == s.num_nodes * s.num_nics_per_node
    assert len(np.unique(nic_ids)) == len(nic_ids)
    # no switch port used twice, ports within 1..radix
    sw_a = ~node
    ends = np.concatenate([plan.a_dev[sw_a].astype(np.int64) * 10_000 + plan.a_port[sw_a],
                           plan.b_dev.astype(np.int64) * 10_000 + plan.b_port])
    assert len(np.unique(ends)) == len(ends)
    assert plan.b_port.min() >= 1 and plan.b_port.max() <= s.radix
    # no cable joins two planes; a NIC lands in its own plane
    assert np.all(plan.device_plane[plan.b_dev] == plan.cable_plane)
    assert np.all(plan.device_plane[plan.a_dev[sw_a]] == plan.cable_plane[sw_a])
    assert np.all(plan.nic_plane[plan.a_port[node]] == plan.cable_plane[node])
    # non-blocking: every leaf has as many uplinks as used downlinks (unless the plane is one leaf)
    down, up = plan.ports_used()
    leaves = plan.device_tier == 1
    if s.oversubscription == 1.0 and plan.layout.num_leaves > 1:
        assert np.array_equal(down[leaves], up[leaves])
    # hop bound
    hops = switch_hops(plan)
    summary = summarize(plan)
    assert hops == summary.max_switch_hops
    assert hops <= (3 if s.tiers == 2 else 5)
    assert np.all(down + up <= plan.device_ports)


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(["mpft", "mrft", "ft2"]), radix=st.sampled_from([8, 12, 16]),
       frac=st.floats(0.001, 1.0))
def test_two_tier_invariants(kind: str, radix: int, frac: float) -> None:
    limit = max_nodes(kind, radix, 8, 8 if kind == "mpft" else 1)
    nodes = max(1, int(limit * frac))
    check_invariants(build_plan(spec(kind, nodes, radix)))


@settings(max_examples=15, deadline=None)
@given(radix=st.sampled_from([8, 12]), frac=st.floats(0.001, 1.0), planes=st.sampled_from([1, 2]))
def test_three_tier_invariants(radix: int, frac: float, planes: int) -> None:
    nodes = max(1, int(max_nodes("ft3", radix, 8, planes) * frac))
    check_invariants(build_plan(spec("ft3", nodes, radix, planes=planes)))


@settings(max_examples=15, deadline=None)
@given(over=st.sampled_from([1.5, 2.0, 3.0]), frac=st.floats(0.01, 1.0), planes=st.sampled_from([2, 4, 8]))
def test_oversubscribed_planes(over: float, frac: float, planes: int) -> None:
    nodes = max(1, int(max_nodes("mpft", 16, 8, planes, over) * frac))
    plan = build_plan(spec("mpft", nodes, 16, planes=planes, over=over))
    check_invariants(plan)
    down, up = plan.ports_used()
    leaves = plan.device_tier == 1
    if plan.layout.num_leaves > 1:
        assert np.all(up[leaves] == np.ceil(down[leaves] / over - 1e-9))


@settings(max_examples=12, deadline=None)
@given(kind=st.sampled_from(["mpft", "mrft", "ft2", "ft3"]), nodes=st.integers(1, 300))
def test_counts_agree_across_plan_json_cabling_csv_and_summary(kind: str, nodes: int) -> None:
    radix = 32 if kind != "ft3" else 16
    nodes = min(nodes, max_nodes(kind, radix, 8, 8 if kind == "mpft" else 1))
    plan = build_plan(spec(kind, nodes, radix))
    summary = summarize(plan)
    files = plan_files(plan, summary)
    doc = json.loads(files["plan.json"])
    rows = list(csv.DictReader(io.StringIO(files["cabling.csv"])))
    switches = list(csv.DictReader(io.StringIO(files["switches.csv"])))
    assert len(rows) == len(doc["cables"]) == summary.cables.total == plan.num_cables
    by_kind = {k: sum(1 for r in rows if r["kind"] == k) for k in ("node-leaf", "leaf-spine", "spine-core")}
    assert by_kind == {"node-leaf": summary.cables.node_leaf, "leaf-spine": summary.cables.leaf_spine,
                       "spine-core": summary.cables.spine_core}
    assert doc["summary"]["cables"]["total"] == summary.cables.total
    assert len(switches) == summary.num_switches == sum(1 for d in doc["devices"] if d[1] != "node")
    assert sum(int(r["free"]) for r in switches) == summary.unused_ports.total
    per_plane = summary.leaves_per_plane + summary.spines_per_plane + summary.cores_per_plane
    assert summary.num_switches == per_plane * summary.num_planes


def test_deepseek_cluster_matches_the_paper() -> None:
    plan = build_plan(spec("mpft", 2048))
    s = summarize(plan)
    assert (s.leaves_per_plane, s.spines_per_plane, s.num_switches) == (64, 32, 768)
    assert (s.cables.node_leaf, s.cables.leaf_spine) == (16384, 16384)
    assert s.max_switch_hops == 3 and s.max_nodes == 2048
    assert s.unused_ports.total == 0
    assert s.bisection_gbps_per_plane == 1024 * 400
    # fabric cost excluding NIC cables equals Table 3's MPFT column
    assert s.cost.switches_usd + s.cost.inter_switch_links_usd == 768 * 82045 + 16384 * 544


def test_full_ft3_matches_table_3() -> None:
    plan = build_plan(spec("ft3", 8192, 64))
    s = summarize(plan)
    assert s.num_switches == 5120
    assert s.cables.leaf_spine + s.cables.spine_core == 131072
    assert (s.pods_per_plane, s.cores_per_plane, s.max_switch_hops) == (64, 1024, 5)


def test_partial_plan_places_nodes_contiguously_and_reports_unused_ports() -> None:
    plan = build_plan(spec("mpft", 100))
    s = summarize(plan)
    assert (s.leaves_per_plane, s.spines_per_plane) == (4, 2)
    files = plan_files(plan, s)
    rows = [r.split(",") for r in files["cabling.csv"].splitlines()[1:101]]
    assert rows[0][3:7] == ["node0001", "mlx5_0", "p0-leaf01", "1"]
    assert rows[99][3:7] == ["node0100", "mlx5_0", "p0-leaf04", "4"]
    assert s.unused_ports.leaf_down == 8 * 28 and s.unused_ports.leaf_up == 8 * 28
    assert "SwitchName=p0-leaf04 Nodes=node[0097-0100]" in files["topology.conf"]
    assert "SwitchName=p0-spine01 Switches=p0-leaf[01-04]" in files["topology.conf"]


def test_single_leaf_plane_needs_no_spines() -> None:
    s = summarize(build_plan(spec("mpft", 20)))
    assert (s.leaves_per_plane, s.spines_per_plane, s.max_switch_hops) == (1, 0, 1)
    assert s.notes and "no spine" in s.notes[0]


def test_mrft_is_one_rail_optimized_fabric() -> None:
    plan = build_plan(spec("mrft", 256))
    s = summarize(plan)
    assert (s.num_planes, s.leaves_per_plane, s.spines_per_plane) == (1, 64, 32)
    node = plan.cable_kind == 0
    leaf_rails: dict[int, set[int]] = {}
    for leaf, nic in zip(plan.b_dev[node].tolist(), plan.a_port[node].tolist(), strict=True):
        leaf_rails.setdefault(leaf, set()).add(nic)
    assert all(len(r) == 1 for r in leaf_rails.values())


def test_too_many_nodes_names_the_limit_and_a_kind_that_fits() -> None:
    with pytest.raises(InputError) as err:
        build_plan(spec("mpft", 2049))
    assert "at most 2,048 nodes" in err.value.message
    assert err.value.hint is not None and "ft3" in err.value.hint
    with pytest.raises(InputError, match="at most 256") as err2:
        build_plan(spec("mrft", 300))
    assert "mpft" in (err2.value.hint or "")


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"nodes": 0}, "^nodes must be at least 1, got 0$"),
    ({"radix": 63}, "odd"),
    ({"radix": 4}, "too small"),
    ({"planes": 3}, "^planes 3 must divide the 8 compute NICs per node; use 1, 2, 4 or 8$"),
    ({"over": 0.5}, r"^oversubscription 0\.5 must be between 1 \(non-blocking\) and 16$"),
    ({"kind": "ft3", "over": 2.0}, r"^oversubscription is supported for two-tier kinds \(mpft, mrft, ft2\) only"),
    ({"leaf": "leaf{leaf}"}, "same name"),
    ({"leaf": "p{plane}-{bogus}"}, "leaf_name"),
    ({"node": "node {n}"}, "node_name"),
    ({"kind": "torus"}, "^kind 'torus' is not a topology kind; use mpft, mrft, ft2 or ft3$"),
])
def test_bad_specs_are_input_errors(kwargs: dict, match: str) -> None:
    with pytest.raises(InputError, match=match):
        build_plan(spec(**kwargs))


def test_templates_can_be_overridden() -> None:
    plan = build_plan(spec("mpft", 40, node="gpu{n:03d}", leaf="L{plane}.{leaf}", spine="S{plane}.{spine}"))
    assert plan.device_names[0] == "gpu001"
    assert "L7.2" in plan.device_names and "S0.1" in plan.device_names


def test_make_spec_reads_profiles() -> None:
    from dsctl.profiles.loader import ProfileStore
    store = ProfileStore()
    s = make_spec("MPFT", 8, store.node("h800-hgx"), store.switch("ib-ndr-64"))
    assert (s.kind, s.num_planes, s.radix, s.port_gbps, s.switch_usd) == ("mpft", 8, 64, 400.0, 82045.0)
    assert make_spec("ft3", 8, store.node("h800-hgx"), store.switch("ib-ndr-64")).num_planes == 1


def test_default_templates_are_valid() -> None:
    from dsctl.topology.naming import check_templates
    assert check_templates(NameTemplates()) == NameTemplates()


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"node": "{n:>1000000}"}, r"node_name '\{n:>1000000\}': field width 1,000,000 is above the 64-byte"),
    ({"node": "{n:>99999999999999}"}, "field width"),
    ({"node": "x" * 1_000_000 + "{n}"}, r"node_name 'x{40}'\.\.\. \(1,000,003 characters\) is too long"),
    ({"leaf": "p{plane}-leaf{leaf:{leaf}}"}, "leaf_name .* may not contain another field"),
    ({"spine": "s{plane}-" + "y" * 60 + "{spine}"}, "spine_name gives a 6[0-9]-byte name"),
    ({"node": "n{n:,}"}, "node_name 'n{n:,}' gives a name with ','"),
    ({"node": "h" * 58 + "{n}"}, "^node_name/nic_name give a 6[0-9]-byte host description"),
    ({"node": "{" + "q" * 100_000 + "}"}, "too long"),
])
def test_name_templates_are_limited_and_never_echoed_whole(kwargs: dict, match: str) -> None:
    with pytest.raises(InputError, match=match) as err:
        build_plan(spec("mpft", 1200, **kwargs))
    assert len(str(err.value)) < 300 and len(err.value.hint or "") < 200


def test_names_of_64_bytes_are_accepted() -> None:
    plan = build_plan(spec("mpft", 16, node="h" * 53 + "{n:04d}", leaf="L" * 60 + "{plane}-{leaf:02d}"))
    assert max(len(n) for n in plan.device_names) == 64  # "<node> mlx5_7" is 57 + 1 + 6 = 64 bytes
