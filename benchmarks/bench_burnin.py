"""dsctl health burn-in at 2,048 nodes (16,384 NICs, 8 planes of 64 leaves and 32 spines).

- design + judging: the five design rounds (16,384 flows each, routed by the simulator's static routing and
  solved max-min for their expectations), then judging and localisation of measurements with one fault; the
  plan's graph and next-hop table (``topology simulate``'s, built once per plan) are set up untimed.
- simulated run: the whole ``dsctl health burn-in --fabric-model`` from the plan.json text (graph, next hops,
  design, five measured rounds of 5 repeats with noise, judging, localisation).

What dominates: building the simulator's next-hop table for the plan (``routing.next_hops``, ~4 s of the run at
2,048 nodes on the reference machine); the burn-in's own work is routing and solving 5 x 16,384 flows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.case import Case
from dsctl.health.burnin.api import run
from dsctl.health.burnin.design import design
from dsctl.health.burnin.fabric import measure, parse_fabric_model
from dsctl.health.burnin.judge import judge
from dsctl.health.burnin.locate import locate
from dsctl.health.burnin.request import BurninRequest
from dsctl.profiles.loader import ProfileStore
from dsctl.topology.api import make_spec, plan_files
from dsctl.topology.plan import build_plan
from dsctl.topology.sim.graph import build_graph
from dsctl.topology.sim.routing import next_hops
from dsctl.topology.summary import summarize

FAULTS = {"noise": 0.03, "faults": [{"nic": "node1500:mlx5_6", "rate": 0.5}]}


def _plan_json(nodes: int) -> str:
    store = ProfileStore()
    plan = build_plan(make_spec("mpft", nodes, store.node("h800-hgx"), store.switch("ib-ndr-64")))
    return plan_files(plan, summarize(plan))["plan.json"]


def _design_setup() -> Any:
    text = _plan_json(2048)
    graph = build_graph(text, "plan.json", 200.0)
    hops = next_hops(graph, np.zeros(graph.num_links, dtype=bool))
    model = parse_fabric_model(FAULTS, graph, "bench")
    measured = [measure(graph, model, r, i) for i, r in enumerate(design(graph, hops).rounds)]
    return graph, hops, measured


def _design_and_judge(inputs: Any) -> int:
    graph, hops, measured = inputs
    rounds = list(design(graph, hops).rounds)
    verdicts = [judge(r.expected_gbps, m) for r, m in zip(rounds, measured, strict=True)]
    findings, _ = locate(graph, rounds, verdicts)
    if [f.subject for f in findings] != ["node1500:mlx5_6"]:
        raise RuntimeError(f"burn-in benchmark localised {findings!r}")
    return len(findings)


def _simulated(text: str) -> int:
    result = run(text, "plan.json", BurninRequest(fabric_doc=FAULTS, nvlink_bytes_per_s=200e9))
    return result.rounds_run


CASES = [
    Case("health burn-in: design + judging, mpft 2,048 nodes", _design_setup, _design_and_judge, target_s=5.0),
    Case("health burn-in: simulated run, mpft 2,048 nodes, one fault", lambda: _plan_json(2048), _simulated,
         target_s=60.0),
]
