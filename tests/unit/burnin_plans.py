"""Plans and graphs shared by the burn-in tests (cached: building a 2,048-node graph takes seconds)."""

from __future__ import annotations

import functools

import numpy as np

from dsctl.topology.api import plan_files
from dsctl.topology.plan import PlanSpec, build_plan, default_planes, default_templates
from dsctl.topology.sim.graph import SimGraph, build_graph
from dsctl.topology.sim.routing import NextHops, next_hops
from dsctl.topology.summary import summarize

NVLINK_BYTES_PER_S = 200e9


@functools.cache
def plan_text(kind: str, nodes: int) -> str:
    spec = PlanSpec(kind, nodes, 8, 8, default_planes(kind, 8), 64, 400.0, 82045.0, 544.0, 544.0, 1.0,
                    default_templates(kind), "h800-hgx", "ib-ndr-64")
    plan = build_plan(spec)
    return plan_files(plan, summarize(plan))["plan.json"]


@functools.cache
def graph_and_hops(kind: str, nodes: int) -> tuple[SimGraph, NextHops]:
    graph = build_graph(plan_text(kind, nodes), "plan.json", NVLINK_BYTES_PER_S)
    return graph, next_hops(graph, np.zeros(graph.num_links, dtype=bool))
