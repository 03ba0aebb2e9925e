"""burn-in round design: every cable direction at line rate under the simulator's static routing, bound, order."""

from __future__ import annotations

import numpy as np
import pytest

from dsctl.health.burnin.design import coverage, design, design_flows, lower_bound
from dsctl.topology.sim.graph import NIC_DOWN, NIC_UP, NVL_IN, NVL_OUT, SW_DOWN, SW_UP
from dsctl.topology.sim.maxmin import route_loads
from tests.unit.burnin_plans import graph_and_hops

CASES = [("mpft", 16), ("mpft", 128), ("mpft", 2048), ("ft2", 128), ("mrft", 128)]


@pytest.mark.parametrize(("kind", "nodes"), CASES, ids=[f"{k}{n}" for k, n in CASES])
def test_every_cable_direction_is_driven_at_line_rate(kind: str, nodes: int) -> None:
    graph, hops = graph_and_hops(kind, nodes)
    planned = design(graph, hops)
    net = [r for r in planned.rounds if r.kind != "nvlink"]
    # independent of design.coverage: load every link from the routed flows and their max-min rates
    driven = np.zeros(graph.num_links, dtype=bool)
    for rnd in planned.rounds:
        load = route_loads(rnd.routes, rnd.expected_gbps * 1e9 / 8, graph.num_links, np.zeros(1, dtype=np.int64),
                           np.zeros(0, dtype=np.int64), np.zeros(0))
        assert np.all(load <= graph.link_cap * (1 + 1e-9))
        driven |= np.isclose(load, graph.link_cap, rtol=1e-6)
    for kinds in ((NIC_UP, NIC_DOWN), (SW_UP, SW_DOWN), (NVL_OUT, NVL_IN)):
        links = np.isin(graph.link_kind, kinds)
        assert driven[links].all(), f"{np.count_nonzero(~driven[links])} links of kind {kinds} never at line rate"
    assert planned.coverage.fraction == 1.0
    assert not planned.coverage.uncovered
    # every flow of every network round runs at line rate: pairs are spine-port-perfect
    for rnd in net:
        assert np.allclose(rnd.expected_gbps, 400.0), rnd.name
    # the first round alone covers every cable: as many covering rounds as the lower bound
    assert planned.lower_bound == 1
    assert planned.covering_rounds == 1
    first = coverage(graph, [net[0]])
    cables = np.isin(graph.link_kind, (NIC_UP, NIC_DOWN, SW_UP, SW_DOWN))
    assert first.driven[cables].all()


def test_a_single_leaf_plane_has_no_cross_rounds() -> None:
    graph, _ = graph_and_hops("mpft", 16)
    assert [name for name, *_ in design_flows(graph)] == ["intra-a", "intra-b", "nvlink"]


@pytest.mark.parametrize(("kind", "nodes"), [("mpft", 128), ("ft2", 128), ("mrft", 128)])
def test_rounds_are_matchings_between_different_nodes(kind: str, nodes: int) -> None:
    graph, _ = graph_and_hops(kind, nodes)
    for name, rkind, src, dst in design_flows(graph):
        assert len(np.unique(src)) == len(src) and len(np.unique(dst)) == len(dst), name
        pair = dict(zip(src.tolist(), dst.tolist(), strict=True))
        assert all(pair[b] == a for a, b in pair.items()), f"{name} is not symmetric"
        if rkind != "nvlink":
            assert np.all(src // graph.nics_per_node != dst // graph.nics_per_node), name
            assert np.all(graph.nic_plane[src % 8] == graph.nic_plane[dst % 8]), name


def test_partners_change_between_rounds() -> None:
    """A NIC meets a different partner in every network round, and feeds a different uplink in each cross round."""
    graph, hops = graph_and_hops("mpft", 128)
    partners: dict[int, set[int]] = {}
    rounds = [r for r in design(graph, hops).rounds if r.kind != "nvlink"]
    for rnd in rounds:
        for a, b in zip(rnd.src.tolist(), rnd.dst.tolist(), strict=True):
            partners.setdefault(a, set()).add(b)
    assert all(len(p) == len(rounds) for p in partners.values())
    cross = [r for r in rounds if r.kind == "cross"]
    up_of = [dict(zip(r.src.tolist(), r.routes[:, 1].tolist(), strict=True)) for r in cross]
    assert all(up_of[0][e] != up_of[1][e] for e in up_of[0])


def test_lower_bound_counts_uplinks_per_nic() -> None:
    graph, _ = graph_and_hops("mpft", 128)
    assert lower_bound(graph) == 1
