"""burn-in rehearsal on simulated fabrics: >= 20 injected faults at 256 nodes localised exactly, healthy fabrics
with +-3% noise give no finding, and one fault takes at most covering rounds + ceil(log2 N) + 2 rounds."""

from __future__ import annotations

import functools
import math
from typing import Any

import pytest

from dsctl.cluster import load_plan
from dsctl.health.burnin.api import BurninResult, burn_in
from dsctl.health.burnin.design import RoundDesign, design
from dsctl.health.burnin.fabric import measure, parse_fabric_model
from dsctl.health.burnin.judge import Judgement, Measured, judge
from tests.unit.burnin_plans import graph_and_hops, plan_text

NODES = 256


@functools.cache
def planned() -> RoundDesign:
    return design(*graph_and_hops("mpft", NODES))


def cable(end: str) -> str:
    """The finding subject of the leaf-spine cable with end ``DEVICE:PORT``, read from plan.json itself."""
    fabric = load_plan(plan_text("mpft", NODES), "plan.json")
    for _, kind, a, b in fabric.cables:
        if kind == "leaf-spine" and end in (f"{a[0]}:{a[1]}", f"{b[0]}:{b[1]}"):
            return f"{a[0]}:{a[1]} <-> {b[0]}:{b[1]}"
    raise AssertionError(end)


def rehearse(doc: dict[str, Any], kind: str = "mpft", nodes: int = NODES, plan: RoundDesign | None = None
             ) -> BurninResult:
    graph, hops = graph_and_hops(kind, nodes)
    model = parse_fabric_model(doc, graph, "model.yaml")
    return burn_in(graph, hops, "plan.json", lambda rnd, i: measure(graph, model, rnd, i),
                   planned=plan if plan is not None else planned())


# (faults, expected findings as (kind, subject))
MATRIX: list[tuple[str, list[dict[str, Any]], list[tuple[str, str]]]] = [
    ("nic half rate", [{"nic": "node0147:mlx5_3", "rate": 0.5}], [("nic", "node0147:mlx5_3")]),
    ("nic on the naive reference node", [{"nic": "node0001:mlx5_0", "rate": 0.5}], [("nic", "node0001:mlx5_0")]),
    ("nic at 80%", [{"nic": "node0100:mlx5_2", "rate": 0.8}], [("nic", "node0100:mlx5_2")]),
    ("nic at 30%", [{"nic": "node0256:mlx5_7", "rate": 0.3}], [("nic", "node0256:mlx5_7")]),
    ("nic send only", [{"nic": "node0033:mlx5_4", "rate": 0.5, "direction": "send"}], [("nic", "node0033:mlx5_4")]),
    ("nic receive only", [{"nic": "node0064:mlx5_5", "rate": 0.5, "direction": "recv"}],
     [("nic", "node0064:mlx5_5")]),
    ("nic-leaf cable by its leaf end", [{"cable": "p1-leaf03:7", "rate": 0.5}], [("nic", "node0071:mlx5_1")]),
    ("leaf-spine cable", [{"cable": "p2-leaf02:40", "rate": 0.5}], [("cable", cable("p2-leaf02:40"))]),
    ("leaf-spine cable up only", [{"cable": "p4-leaf05:33", "rate": 0.5, "direction": "up"}],
     [("cable", cable("p4-leaf05:33"))]),
    ("leaf-spine cable down only", [{"cable": "p6-leaf08:64", "rate": 0.6, "direction": "down"}],
     [("cable", cable("p6-leaf08:64"))]),
    ("slow spine port", [{"cable": "p3-spine02:5", "rate": 0.4}], [("cable", cable("p3-spine02:5"))]),
    ("slow spine port on the last spine", [{"cable": "p7-spine04:64", "rate": 0.5}],
     [("cable", cable("p7-spine04:64"))]),
    ("slow node", [{"node": "node0042", "rate": 0.6}], [("node", "node0042")]),
    ("slow reference node", [{"node": "node0001", "rate": 0.5}], [("node", "node0001")]),
    ("flapping leaf-spine cable", [{"cable": "p5-leaf04:50", "rate": 0.4, "flap": 0.5}],
     [("cable", cable("p5-leaf04:50"))]),
    ("flapping nic", [{"nic": "node0200:mlx5_6", "rate": 0.4, "flap": 0.4}], [("nic", "node0200:mlx5_6")]),
    ("two faults in different planes", [{"nic": "node0010:mlx5_1", "rate": 0.5},
                                        {"cable": "p6-leaf03:40", "rate": 0.5}],
     [("nic", "node0010:mlx5_1"), ("cable", cable("p6-leaf03:40"))]),
    ("two cables in one plane", [{"cable": "p0-leaf01:33", "rate": 0.5}, {"cable": "p0-leaf07:60", "rate": 0.5}],
     [("cable", cable("p0-leaf01:33")), ("cable", cable("p0-leaf07:60"))]),
    ("nic and its intra partner", [{"nic": "node0002:mlx5_0", "rate": 0.5}], [("nic", "node0002:mlx5_0")]),
    ("three nics on one leaf", [{"nic": f"node00{n}:mlx5_0", "rate": 0.5} for n in ("01", "04", "07")],
     [("nic", f"node00{n}:mlx5_0") for n in ("01", "04", "07")]),
    ("gpu nvlink", [{"gpu": "node0077:gpu5", "rate": 0.5}], [("gpu", "node0077:gpu5")]),
    ("gpu nvlink on node 1", [{"gpu": "node0001:gpu0", "rate": 0.5}], [("gpu", "node0001:gpu0")]),
    ("nic and a cable of another plane on one node",
     [{"nic": "node0123:mlx5_2", "rate": 0.5}, {"cable": "p7-leaf04:45", "rate": 0.5}],
     [("nic", "node0123:mlx5_2"), ("cable", cable("p7-leaf04:45"))]),
]


@pytest.mark.parametrize(("faults", "expected"), [(f, e) for _, f, e in MATRIX], ids=[m[0] for m in MATRIX])
def test_every_injected_fault_is_localised_exactly(faults: list[dict[str, Any]], expected: list[tuple[str, str]]
                                                  ) -> None:
    result = rehearse({"noise": 0.03, "seed": 7, "faults": faults})
    assert sorted((f.kind, f.subject) for f in result.findings) == sorted(expected)
    assert result.rounds_run <= planned().covering_rounds + math.ceil(math.log2(NODES)) + 2
    for finding in result.findings:
        assert finding.evidence and all(e.measured_gbps < 0.9 * e.expected_gbps or e.flaky
                                        for e in finding.evidence)


def test_the_matrix_is_large_enough() -> None:
    assert len(MATRIX) >= 20


@pytest.mark.parametrize("seed", range(5))
def test_healthy_fabrics_with_noise_give_no_finding(seed: int) -> None:
    result = rehearse({"noise": 0.03, "seed": seed, "faults": []})
    assert result.findings == ()
    assert result.rounds_run == len(planned().rounds)


def test_finding_evidence_names_rounds_flows_and_rates() -> None:
    result = rehearse({"noise": 0.0, "faults": [{"nic": "node0147:mlx5_3", "rate": 0.5}]})
    (finding,) = result.findings
    assert finding.node == "node0147" and abs(finding.ratio - 0.5) < 1e-9
    rounds = {e.round for e in finding.evidence}
    assert rounds == {"cross-1", "intra-a", "intra-b", "cross-2"}
    assert all("node0147:mlx5_3" in e.flow and e.expected_gbps == 400.0 for e in finding.evidence)
    assert "p3-leaf" in finding.note


def test_judging_needs_both_the_fraction_and_the_outlier() -> None:
    import numpy as np

    expected = np.full(100, 400.0)
    ones = np.ones(100, dtype=bool)
    # a whole round at 85% of its expectation is no outlier: nothing is slow
    got = Measured(np.full(100, 340.0), np.full(100, 340.0), ones)
    assert not judge(expected, got).slow.any()
    # one flow at 95% is an outlier of a noiseless round but above the fraction: not slow
    med = np.full(100, 400.0)
    med[3] = 380.0
    verdict: Judgement = judge(expected, Measured(med, med, ones))
    assert not verdict.slow.any()
    med[3] = 300.0
    verdict = judge(expected, Measured(med, med, ones))
    assert np.flatnonzero(verdict.slow).tolist() == [3]


@pytest.mark.parametrize("kind", ["ft2", "mrft"])
def test_single_plane_kinds_localise_a_nic_and_a_cable(kind: str) -> None:
    graph, hops = graph_and_hops(kind, 128)
    doc = {"noise": 0.03, "faults": [{"nic": "node0050:mlx5_4", "rate": 0.5}, {"cable": "p0-leaf09:40", "rate": 0.5}]}
    result = rehearse(doc, kind, 128, design(graph, hops))
    kinds = sorted((f.kind, f.subject.split(" <-> ")[0]) for f in result.findings)
    assert kinds == [("cable", "p0-leaf09:40"), ("nic", "node0050:mlx5_4")]


def test_one_fault_at_2048_nodes_within_the_round_budget() -> None:
    graph, hops = graph_and_hops("mpft", 2048)
    plan = design(graph, hops)
    for fault, want in (({"nic": "node1500:mlx5_6", "rate": 0.5}, ("nic", "node1500:mlx5_6")),
                        ({"gpu": "node0900:gpu1", "rate": 0.5}, ("gpu", "node0900:gpu1"))):
        result = rehearse({"noise": 0.03, "faults": [fault]}, "mpft", 2048, plan)
        assert [(f.kind, f.subject) for f in result.findings] == [want]
        assert result.rounds_run <= plan.covering_rounds + math.ceil(math.log2(2048)) + 2


def test_a_flow_between_slow_and_fine_proves_nothing() -> None:
    import numpy as np

    expected = np.full(8, 1.0)
    ones = np.ones(8, dtype=bool)
    # CPU-bound gloo: every flow far below the plan's rate, one 9 scaled MADs below, one 2.5 (neither)
    med = np.array([0.50, 0.52, 0.48, 0.51, 0.49, 0.50, 0.30, 0.44])
    verdict = judge(expected, Measured(med, med, ones))
    assert verdict.slow.tolist() == [False] * 6 + [True, False]
    assert verdict.good.tolist() == [True] * 6 + [False, False]
