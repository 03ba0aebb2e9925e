"""The whole burn-in: design the rounds, run each through a measuring function, judge, localise, follow up.

Pure: the caller supplies ``measure(round, index) -> Measured`` (the simulated fabric of
:mod:`dsctl.health.burnin.fabric`, or the Slurm runner for real hardware) and an optional ``on_round`` callback
for progress; nothing here prints or runs a process.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dsctl.errors import InputError
from dsctl.health.burnin.design import Round, RoundDesign, design
from dsctl.health.burnin.followup import follow_up_rounds
from dsctl.health.burnin.judge import Judgement, Measured, judge, statistics
from dsctl.health.burnin.locate import FaultFinding, locate, proven_links
from dsctl.health.burnin.request import BurninRequest
from dsctl.health.drain import DrainLimit, DrainPlan, NodeState, plan_drain, reason
from dsctl.thresholds import MAD_K, SLOW_FRACTION
from dsctl.topology.sim.graph import NIC_DOWN, NIC_UP, SimGraph
from dsctl.topology.sim.routing import NextHops

Measure = Callable[[Round, int], Measured]
#: most endpoints one burn-in tests: nodes x the larger of NICs and GPUs per node (32,768 nodes of 8 GPUs, 16 times
#: the 2,048 nodes documented); checked from plan.json's lists before the simulator's graph is built, so a plan
#: within the plan reader's own bounds (4M endpoints) cannot make a burn-in take gigabytes
MAX_BURNIN_ENDPOINTS = 1 << 18
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
    flow over each link (NaN where no flow ran); ``nic_send_gbps``/``nic_recv_gbps`` [N*K]: the
    median over the rounds of the bandwidth each NIC sent / received at (NaN where it ran in none)."""

    plan: str
    kind: str
    num_nodes: int
    num_planes: int
    design: RoundDesign
    rounds: tuple[RoundResult, ...]
    findings: tuple[FaultFinding, ...]
    fraction: float
    mad_k: float
    round_budget: int
    link_ratio: np.ndarray
    nic_send_gbps: np.ndarray
    nic_recv_gbps: np.ndarray
    source: str
    selected: tuple[str, ...] = ()
    injected: tuple[str, ...] = ()
    drain: DrainPlan | None = None
    #: plane -> SVG document of the plane, cables coloured by measured / expected (``BurninRequest.svg``)
    svgs: dict[int, str] = field(default_factory=dict, metadata={"output": False})
    nic_names: tuple[str, ...] = field(default=(), metadata={"output": False})
    node_names: tuple[str, ...] = field(default=(), metadata={"output": False})
    nic_plane: tuple[int, ...] = field(default=(), metadata={"output": False})
    #: what a reader must know beyond the rounds: reports not judged or not placed (``--from-perf``)
    notes: tuple[str, ...] = ()
    exit_code: int = field(default=0, metadata={"output": False})

    @property
    def rounds_run(self) -> int:
        return len(self.rounds)

    @property
    def fleet_size(self) -> int:
        """The nodes the run covered (the circuit breaker's percentage is of these)."""
        return len(self.selected) or self.num_nodes

    def drain_wanted(self) -> list[tuple[str, str]]:
        """(node, reason) for every node a finding blames (NIC, GPU or node findings; a cable drains nothing)."""
        wanted: dict[str, str] = {}
        for f in self.findings:
            if f.node and f.node not in wanted:
                wanted[f.node] = reason("burnin", f"{f.kind} {f.subject} at {f.ratio:.0%} of expected")
        return list(wanted.items())

    def to_data(self) -> dict[str, Any]:
        cov = self.design.coverage
        return {
            "plan": self.plan, "kind": self.kind, "num_nodes": self.num_nodes, "num_planes": self.num_planes,
            "source": self.source, "nodes_tested": self.fleet_size,
            "injected_faults": list(self.injected),
            "fraction": self.fraction, "mad_k": self.mad_k,
            "design": {"lower_bound_rounds": self.design.lower_bound, "covering_rounds": self.design.covering_rounds,
                       "design_rounds": len(self.design.rounds), "round_budget": self.round_budget,
                       "coverage": round(cov.fraction, 6),
                       "coverage_per_plane": [{"plane": p, "driven": a, "links": b}
                                              for p, (a, b) in cov.per_plane.items()],
                       "uncovered": list(cov.uncovered)},
            "rounds_run": self.rounds_run,
            "rounds": [{"name": r.name, "kind": r.kind, "num_flows": r.num_flows, "num_slow": r.num_slow,
                        "num_flaky": r.num_flaky, "median_ratio": round(r.median_ratio, 4),
                        "expected_gbps": round(r.expected_gbps, 3)} for r in self.rounds],
            "findings": [{"kind": f.kind, "subject": f.subject, "node": f.node, "ratio": round(f.ratio, 4),
                          "flapping": f.flapping, "note": f.note, "candidates": list(f.candidates),
                          "evidence": [{"round": e.round, "flow": e.flow, "measured_gbps": round(e.measured_gbps, 3),
                                        "min_gbps": round(e.min_gbps, 3), "expected_gbps": round(e.expected_gbps, 3),
                                        "flaky": e.flaky} for e in f.evidence]} for f in self.findings],
            "drain": self.drain.to_data() if self.drain is not None else None,
            "notes": list(self.notes),
        }


def round_budget(design_: RoundDesign, num_nodes: int) -> int:
    """Most rounds a run may take: covering rounds + ceil(log2 N) + 2, and at least the design rounds
    (follow-up rounds stop there)."""
    bound = design_.covering_rounds + math.ceil(math.log2(max(num_nodes, 2))) + 2
    return max(len(design_.rounds), bound)


def burn_in(graph: SimGraph, hops: NextHops, plan: str, measure: Measure, *, fraction: float = SLOW_FRACTION,
            mad_k: float = MAD_K, source: str = "simulated", on_round: Progress | None = None,
            nvlink: bool = True, planned: RoundDesign | None = None, selected: np.ndarray | None = None
            ) -> BurninResult:
    """Run every design round, judge it, localise; follow-up rounds while findings stay ambiguous.
    ``planned``: the design of this graph if already computed; ``selected`` bool [N]: the nodes to test."""
    plan_design = planned if planned is not None else design(graph, hops, selected, nvlink)
    todo = list(plan_design.rounds)
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
    num_ep = graph.num_nodes * graph.nics_per_node
    sends: list[np.ndarray] = []
    recvs: list[np.ndarray] = []
    for rnd, ver in zip(ran, verdicts, strict=True):
        valid = rnd.routes >= 0
        ratios = np.broadcast_to(ver.ratio[:, None], rnd.routes.shape)[valid]
        np.minimum.at(link_ratio, rnd.routes[valid], ratios)
        if rnd.kind != "nvlink":
            got = ver.ratio * rnd.expected_gbps
            for ends, out in ((rnd.src, sends), (rnd.dst, recvs)):
                row = np.full(num_ep, np.nan)
                row[ends] = got
                out.append(row)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NICs that ran in no round stay NaN
        send = np.nanmedian(np.array(sends), axis=0) if sends else np.full(num_ep, np.nan)
        recv = np.nanmedian(np.array(recvs), axis=0) if recvs else np.full(num_ep, np.nan)
    link_ratio[np.isinf(link_ratio)] = np.nan
    names = tuple(graph.device_names[i] for i in np.flatnonzero(selected)) if selected is not None else ()
    return BurninResult(plan, graph.kind, graph.num_nodes, graph.num_planes, plan_design, tuple(results),
                        tuple(findings), fraction, mad_k, budget, link_ratio, send, recv, source, names,
                        exit_code=1 if findings else 0)


def select(graph: SimGraph, names: tuple[str, ...]) -> np.ndarray | None:
    """bool [N] of the named nodes (None = all); InputError (field ``nodes``) for a name the plan does not have."""
    if not names:
        return None
    index = {n: i for i, n in enumerate(graph.device_names[:graph.num_nodes])}
    missing = [n for n in names if n not in index]
    if missing:
        raise InputError(f": {missing[0]!r} is not a node of the plan ({len(missing)} unknown)", field="nodes",
                         hint=f"the plan's nodes are {graph.device_names[0]} ... "
                         f"{graph.device_names[graph.num_nodes - 1]}")
    if len(names) < 2:
        raise InputError(": a burn-in needs at least 2 nodes", field="nodes")
    mask = np.zeros(graph.num_nodes, dtype=bool)
    mask[[index[n] for n in names]] = True
    return mask


def tested_nodes(graph: SimGraph, names: tuple[str, ...]) -> tuple[str, ...]:
    """The nodes a burn-in of ``graph`` tests: ``names`` (the request's nodes), or every node of the plan."""
    return names or tuple(graph.device_names[:graph.num_nodes])


def run(plan_text: str, source: str, request: BurninRequest, measure_factory: Callable[[SimGraph], Measure] | None
        = None, on_round: Progress | None = None) -> BurninResult:
    """The whole burn-in of a plan.json text: on the simulated fabric of ``request.fabric_doc``
    (``measure_factory`` None), or with the measuring function ``measure_factory(graph)`` builds (real runs)."""
    from dsctl.health.burnin.fabric import measure as simulated
    from dsctl.health.burnin.fabric import parse_fabric_model
    from dsctl.topology.sim.graph import build_graph
    from dsctl.topology.sim.routing import next_hops

    request.check()
    check_size(plan_text, source)
    graph = build_graph(plan_text, source, request.nvlink_bytes_per_s)
    selected = select(graph, request.nodes)
    hops = next_hops(graph, np.zeros(graph.num_links, dtype=bool))
    injected: tuple[str, ...] = ()
    if measure_factory is None:
        model = parse_fabric_model(request.fabric_doc if request.fabric_doc is not None else {}, graph,
                                   request.fabric_source)
        injected = model.faults

        def rehearsed(rnd: Round, index: int) -> Measured:
            return simulated(graph, model, rnd, index)
        measure: Measure = rehearsed
        label = "simulated fabric"
    else:
        measure = measure_factory(graph)
        label = "measured"
    result = burn_in(graph, hops, source, measure, fraction=request.fraction, mad_k=request.mad_k, source=label,
                     on_round=on_round, nvlink=request.nvlink_round, selected=selected)
    svgs = plane_pictures(graph, result) if request.svg else {}
    return replace(result, injected=injected, svgs=svgs, nic_names=tuple(graph.nic_names),
                   node_names=tuple(graph.device_names[:graph.num_nodes]),
                   nic_plane=tuple(int(p) for p in graph.nic_plane))


def check_size(plan_text: str, source: str) -> None:
    """InputError when the plan has more endpoints (nodes x max(NICs, GPUs) per node) than MAX_BURNIN_ENDPOINTS."""
    from dsctl.cluster import load_plan

    fabric = load_plan(plan_text, source)
    per_node = max(len(fabric.nics), fabric.num_gpus_per_node, 1)
    if len(fabric.nodes) * per_node > MAX_BURNIN_ENDPOINTS:
        raise InputError(f"{source}: {len(fabric.nodes):,} nodes x {per_node} NICs or GPUs = "
                         f"{len(fabric.nodes) * per_node:,} endpoints; a burn-in tests at most "
                         f"{MAX_BURNIN_ENDPOINTS:,}", hint="test a part of the fabric with --nodelist on a plan of "
                                                          "one pod, or split the plan")


def plane_pictures(graph: SimGraph, result: BurninResult) -> dict[int, str]:
    """Each plane drawn by the simulator's picture, cables coloured by the lowest measured / expected ratio of
    the flows over them (green = as expected, red = nothing went through; grey dashes = never driven)."""
    from dsctl.topology.sim.svg import plane_svg

    ratio = result.link_ratio
    untested = np.isnan(ratio)
    util = np.clip(1.0 - np.where(untested, 1.0, ratio), 0.0, 1.0)
    legend = ("cable colour = measured / expected bandwidth (green 100%, yellow 50%, red 0%), dashed = not driven; "
              "leaf fill = its worst NIC link")
    found = sum(1 for f in result.findings)
    return {p: plane_svg(graph, util, untested, p, f"burn-in, {found} finding(s)", legend,
                         "measured/expected {r:.0%}") for p in range(graph.num_planes)}


def nic_links(graph: SimGraph) -> np.ndarray:
    """Link ids of NIC links (both directions)."""
    return np.flatnonzero((graph.link_kind == NIC_UP) | (graph.link_kind == NIC_DOWN))


def with_drain_plan(result: BurninResult, limit: DrainLimit, states: dict[str, NodeState] | None = None
                    ) -> BurninResult:
    """The result with the drain plan of the nodes its findings blame (part of the report even when nothing is
    drained), against the nodes' current ``states`` where known; unchanged when no finding names a node."""
    wanted = result.drain_wanted()
    if not wanted:
        return result
    return replace(result, drain=plan_drain(wanted, states or {}, result.fleet_size, limit))
