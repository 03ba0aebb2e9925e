"""The whole burn-in: design the rounds, run each through a measuring function, judge, localise, follow up.

Pure: the caller supplies ``measure(round, index) -> Measured`` (the simulated fabric of
:mod:`dsctl.health.burnin.fabric`, or the Slurm runner for real hardware) and an optional ``on_round`` callback
for progress; nothing here prints or runs a process.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dsctl.health.burnin.design import Design, Round, design
from dsctl.health.burnin.followup import follow_up_rounds
from dsctl.health.burnin.judge import DEFAULT_FRACTION, DEFAULT_MAD_K, Judgement, Measured, judge, statistics
from dsctl.health.burnin.locate import Finding, locate, proven_links
from dsctl.topology.sim.graph import NIC_DOWN, NIC_UP, SimGraph
from dsctl.topology.sim.routing import NextHops

Measure = Callable[[Round, int], Measured]
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class RoundResult:
    """One round as run: flows, slow and flaky counts, the round's median measured/expected ratio."""

    name: str
    kind: str
    num_flows: int
    num_slow: int
    num_flaky: int
    median_ratio: float
    expected_gbps: float


@dataclass(frozen=True)
class BurninResult:
    """Result of ``dsctl health burn-in``. ``link_ratio`` float64 [L]: the lowest measured/expected ratio of a
    flow over each link (NaN where no flow ran); ``nic_send_gbps``/``nic_recv_gbps`` [N*K]: the lowest median
    bandwidth each NIC sent / received at in any round (NaN where none)."""

    plan: str
    kind: str
    num_nodes: int
    num_planes: int
    design: Design
    rounds: tuple[RoundResult, ...]
    findings: tuple[Finding, ...]
    fraction: float
    mad_k: float
    round_budget: int
    link_ratio: np.ndarray
    nic_send_gbps: np.ndarray
    nic_recv_gbps: np.ndarray
    source: str

    @property
    def rounds_run(self) -> int:
        return len(self.rounds)


def round_budget(design_: Design, num_nodes: int) -> int:
    """Most rounds a run may take: covering rounds + ceil(log2 N) + 2, and at least the design rounds
    (follow-up rounds stop there)."""
    bound = design_.covering_rounds + math.ceil(math.log2(max(num_nodes, 2))) + 2
    return max(len(design_.rounds), bound)


def burn_in(graph: SimGraph, hops: NextHops, plan: str, measure: Measure, *, fraction: float = DEFAULT_FRACTION,
            mad_k: float = DEFAULT_MAD_K, source: str = "simulated", on_round: Progress | None = None,
            nvlink: bool = True, planned: Design | None = None) -> BurninResult:
    """Run every design round, judge it, localise; follow-up rounds while findings stay ambiguous.
    ``planned``: the design of this graph if already computed."""
    plan_design = planned if planned is not None else design(graph, hops)
    todo = [r for r in plan_design.rounds if nvlink or r.kind != "nvlink"]
    budget = round_budget(plan_design, graph.num_nodes)
    ran: list[Round] = []
    verdicts: list[Judgement] = []
    results: list[RoundResult] = []
    total = len(todo)

    def run_one(rnd: Round, reference: tuple[float, float, float, float] | None) -> None:
        if on_round is not None:
            on_round(len(ran), total, rnd.name)
        got = measure(rnd, len(ran))
        ver = judge(rnd.expected_gbps, got, fraction, mad_k, reference)
        ran.append(rnd)
        verdicts.append(ver)
        results.append(RoundResult(rnd.name, rnd.kind, rnd.num_flows, int(ver.slow.sum()), int(ver.flaky.sum()),
                                   ver.median, float(np.median(rnd.expected_gbps)) if rnd.num_flows else 0.0))

    for rnd in todo:
        run_one(rnd, None)
    reference = statistics(verdicts)
    findings, groups = locate(graph, ran, verdicts)
    while groups and len(ran) < budget:
        extra = follow_up_rounds(graph, hops, proven_links(graph, ran, verdicts), groups, len(ran))
        extra = extra[:budget - len(ran)]
        if not extra:
            break
        total += len(extra)
        for rnd in extra:
            run_one(rnd, reference)
        findings, groups = locate(graph, ran, verdicts)
    if on_round is not None:
        on_round(len(ran), total, "done")
    link_ratio = np.full(graph.num_links, np.inf)
    send = np.full(graph.num_nodes * graph.nics_per_node, np.nan)
    recv = send.copy()
    for rnd, ver in zip(ran, verdicts, strict=True):
        valid = rnd.routes >= 0
        ratios = np.broadcast_to(ver.ratio[:, None], rnd.routes.shape)[valid]
        links = rnd.routes[valid]
        np.minimum.at(link_ratio, links, ratios)
        if rnd.kind != "nvlink":
            got = ver.ratio * rnd.expected_gbps
            np.fmin.at(send, rnd.src, got)
            np.fmin.at(recv, rnd.dst, got)
    link_ratio[np.isinf(link_ratio)] = np.nan
    return BurninResult(plan, graph.kind, graph.num_nodes, graph.num_planes, plan_design, tuple(results),
                        tuple(findings), fraction, mad_k, budget, link_ratio, send, recv, source)


def nic_links(graph: SimGraph) -> np.ndarray:
    """Link ids of NIC links (both directions)."""
    return np.flatnonzero((graph.link_kind == NIC_UP) | (graph.link_kind == NIC_DOWN))
