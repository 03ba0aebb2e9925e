"""A burn-in judged from saved perftest and nccl-tests reports instead of the probe (``health burn-in --from-perf``).

What a report can tell (docs/burn-in.md, "From perftest and nccl-tests reports"):

- an nccl-tests report is one bus bandwidth for a whole job; its rank lines name the hosts and CUDA devices. It is
  *placed* on the plan when every rank line is there (none elided) and every host is a node of the plan (its name,
  or its name up to the first dot). Its *footprint* is the links its traffic crosses: the NVLink out/in links of
  its GPUs (a node with two or more of them), the NIC links of the NICs those GPUs use (``SimGraph.gpu_nic``) and
  the switch cables on the simulator's static routes ``NIC(u, k) -> NIC(v, k)`` of every rail ``k`` it uses, for
  ``v`` the next node in host order and back (ring collectives and sendrecv) or every other node (alltoall).
  A job that uses fewer GPUs of a node than the plan's node has is placed for suspicion only (footprint: every NIC
  and NVLink link of its nodes): which NIC a renumbered CUDA device used is not certain, so it proves nothing.
- a perftest report names an RDMA device and LIDs/GIDs, never the host: it is judged and listed, never placed,
  never drained.

Judging, per report: ``r = measured / expected`` (the expectation of ``dsctl health perf`` for the same report,
simulated on the plan); a report with wrong elements counts as r = 0. With at least ``MIN_FLOWS_FOR_STATS`` judged
reports, slow = ``r < fraction`` and a MAD outlier among them (the probe's rule, :mod:`dsctl.health.burnin.judge`);
with fewer (too few for statistics) slow = ``r < fraction``.

Localisation (the probe's, at a report's grain): a good placed report proves every link of its footprint; a slow
one's *suspects* are the links of its footprint no good report proved. Objects: a node (its NIC and NVLink links:
a report cannot tell a node's NICs, GPUs and host apart) and a switch cable. Findings are a greedy minimum hitting
set over the slow reports; one object explaining them is a ``node`` finding (drained) or a ``cable`` finding
(nothing drained); objects tied on the same reports are one ``ambiguous`` finding (nothing drained); a slow report
that is not placed is an ``unplaced`` finding (nothing drained).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from dsctl.errors import InputError
from dsctl.health.burnin.api import BurninResult, RoundResult, check_size, plane_pictures
from dsctl.health.burnin.design import RoundDesign, coverage_of, lower_bound, plain_routes
from dsctl.health.burnin.judge import MIN_FLOWS_FOR_STATS, Judgement, Measured, judge
from dsctl.health.burnin.locate import Evidence, FaultFinding, owner
from dsctl.health.burnin.request import BurninRequest
from dsctl.health.perf.expect import PlanFabric
from dsctl.health.perf.judge import PerfResult
from dsctl.health.perf.nccltests import NcclTestsRun
from dsctl.health.perf.perftest import PerftestRun
from dsctl.names import shown
from dsctl.profiles.schema import NodeProfile
from dsctl.topology.sim.graph import SimGraph
from dsctl.topology.sim.routing import NextHops

#: ``BurninResult.source`` of a burn-in judged from reports
REPORTS_SOURCE = "perftest/nccl-tests reports"
#: most NIC-to-NIC routes one report's footprint may take (an alltoall routes every node pair on every rail)
MAX_ROUTED_FLOWS = 1 << 16
#: most footprint link entries over all reports (bounds memory: a 1,024-node job's footprint is ~50k links)
MAX_FOOTPRINT_LINKS = 1 << 25
#: nodes named in a finding's evidence before "+N more"
SHOWN_HOSTS = 4


@dataclass(frozen=True)
class PlacedReport:
    """One judged report: ``label`` (file, ``#k`` for the k-th report of a file), ``nodes`` int64 plan node indices
    (empty when not placed, ``unplaced`` says why), ``links`` int64 its footprint, ``proves`` int64 the links a
    good result proves (the footprint, or nothing when the job used part of its nodes)."""

    result: PerfResult
    label: str
    nodes: np.ndarray
    links: np.ndarray
    proves: np.ndarray
    unplaced: str = ""


def node_index(graph: SimGraph) -> dict[str, int]:
    """Plan node name -> index."""
    return {name: i for i, name in reversed(list(enumerate(graph.device_names[:graph.num_nodes])))}


def _plan_node(index: dict[str, int], host: str) -> int | None:
    found = index.get(host)
    return found if found is not None else index.get(host.split(".", 1)[0])


def footprint(graph: SimGraph, hops: NextHops, nodes: np.ndarray, rails: np.ndarray, collective: str) -> np.ndarray:
    """int64 links a job on ``nodes`` (plan indices, host order) using NICs ``rails`` crosses (module docstring)."""
    g, k = graph.gpus_per_node, graph.nics_per_node
    parts = []
    if g >= 2:
        gpus = (nodes[:, None] * g + np.arange(g)).ravel()
        parts += [graph.gpu_out[gpus], graph.gpu_in[gpus]]
    n = len(nodes)
    if n > 1:
        eps = (nodes[:, None] * k + rails).ravel()
        eps = eps[graph.ep_leaf[eps] >= 0]
        parts += [graph.ep_up[eps], graph.ep_down[eps]]
        if collective == "alltoall":
            u, v = np.nonzero(~np.eye(n, dtype=bool))
        else:
            u = np.arange(n) if n > 2 else np.array([0])
            v = (u + 1) % n
            u, v = np.r_[u, v], np.r_[v, u]
        src = (nodes[u][:, None] * k + rails).ravel()
        dst = (nodes[v][:, None] * k + rails).ravel()
        cabled = (graph.ep_leaf[src] >= 0) & (graph.ep_leaf[dst] >= 0)
        routes = plain_routes(graph, hops, src[cabled], dst[cabled], "ib")
        parts.append(routes[routes >= 0])
    return np.unique(np.concatenate(parts).astype(np.int64)) if parts else np.zeros(0, dtype=np.int64)


def place(graph: SimGraph, hops: NextHops, index: dict[str, int], run: NcclTestsRun
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """(nodes, footprint, proved links, why not placed) of one nccl-tests report."""
    none = np.zeros(0, dtype=np.int64)
    if not run.ranks:
        return none, none, none, "the report names no hosts (no '# Rank' lines)"
    if run.ranks_elided or len(run.ranks) != run.num_ranks:
        return none, none, none, "rank lines are missing or elided: the job's other hosts are unknown"
    order: dict[int, set[int]] = {}
    for r in run.ranks:
        node = _plan_node(index, r.host)
        if node is None:
            return none, none, none, f"host {shown(r.host)} is not a node of the plan"
        if r.device >= graph.gpus_per_node:
            return none, none, none, (f"{shown(r.host)} device {r.device}: the plan's nodes have {graph.gpus_per_node} "
                                      "GPUs")
        order.setdefault(node, set()).add(r.device)
    nodes = np.array(list(order), dtype=np.int64)
    whole = all(len(devices) == graph.gpus_per_node for devices in order.values())
    rails = np.unique(graph.gpu_nic(np.arange(graph.gpus_per_node)) % graph.nics_per_node)
    pairs = len(nodes) * (len(nodes) - 1) if run.collective == "alltoall" else 2 * len(nodes)
    if pairs * len(rails) > MAX_ROUTED_FLOWS:
        return none, none, none, (f"{len(nodes)} nodes x {len(rails)} rails: more than {MAX_ROUTED_FLOWS:,} NIC "
                                  f"pairs to route for its {run.collective or 'test'}")
    links = footprint(graph, hops, nodes, rails, run.collective)
    return nodes, links, links if whole else none, ""


def judge_reports(expected_gbps: np.ndarray, measured_gbps: np.ndarray, answered: np.ndarray, fraction: float,
                  mad_k: float) -> Judgement:
    """The burn-in judge over reports (float64/bool [R]; module docstring): the probe's rule with enough
    reports, the fraction alone with fewer than MIN_FLOWS_FOR_STATS."""
    measured = Measured(measured_gbps, measured_gbps, answered)
    if len(expected_gbps) >= MIN_FLOWS_FOR_STATS:
        return judge(expected_gbps, measured, fraction, mad_k)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(answered & (expected_gbps > 0), measured_gbps / expected_gbps, 0.0)
    slow = ratio < fraction
    median = float(np.median(ratio)) if len(ratio) else 1.0
    return Judgement(ratio, ratio, slow, np.zeros(len(ratio), dtype=bool), ~slow, median, 0.0)


def _hosts(graph: SimGraph, nodes: np.ndarray, result: PerfResult) -> str:
    # plan names are validated where the plan is read; a report's own host or device text is shown quoted
    names = ([graph.device_names[int(i)] for i in nodes] if len(nodes) else
             [shown(n) for n in (result.nodes or result.devices)[:SHOWN_HOSTS + 1]])
    total = len(nodes) if len(nodes) else len(result.nodes or result.devices)
    more = f" +{total - SHOWN_HOSTS} more" if total > SHOWN_HOSTS else ""
    return ", ".join(names[:SHOWN_HOSTS]) + more if names else "an unnamed host"


def _evidence(graph: SimGraph, report: PlacedReport, ratio: float) -> Evidence:
    r = report.result
    expected = (r.expected_bytes_per_s or 0.0) * 8 / 1e9
    measured = ratio * expected
    return Evidence(report.label, f"{r.test} on {_hosts(graph, report.nodes, r)}", measured, measured, expected,
                    False)


def _object(graph: SimGraph, link: int) -> tuple[str, int]:
    """The report-grain owner of a link: ("node", node) for NIC and NVLink links, ("cable", cable) otherwise."""
    obj = owner(graph, link)
    if obj.kind == "nic":
        return "node", obj.key // graph.nics_per_node
    if obj.kind == "gpu":
        return "node", obj.key // graph.gpus_per_node
    return obj.kind, obj.key


def _name(graph: SimGraph, obj: tuple[str, int]) -> str:
    kind, key = obj
    return graph.device_names[key] if kind == "node" else graph.link_name(key).replace(" -> ", " <-> ")


def locate_reports(graph: SimGraph, reports: list[PlacedReport], verdict: Judgement) -> list[FaultFinding]:
    """Findings that explain every slow report (module docstring)."""
    proven = np.zeros(graph.num_links, dtype=bool)
    for rep, good in zip(reports, verdict.good, strict=True):
        if good:
            proven[rep.proves] = True
    slow = np.flatnonzero(verdict.slow).tolist()
    findings: list[FaultFinding] = []
    unplaced: list[FaultFinding] = []
    explains: dict[tuple[str, int], set[int]] = {}
    todo: set[int] = set()
    unexplained = []
    for i in slow:
        rep = reports[i]
        if rep.unplaced:
            evidence: tuple[Evidence, ...] = (_evidence(graph, rep, float(verdict.ratio[i])),)
            unplaced.append(FaultFinding("unplaced", f"{rep.label}: {rep.result.test}", "", float(verdict.ratio[i]),
                                         False, f"not placed on the plan: {rep.unplaced}; never drained", evidence))
            continue
        suspects = {_object(graph, int(x)) for x in rep.links[~proven[rep.links]]}
        for obj in suspects:
            explains.setdefault(obj, set()).add(i)
        if suspects:
            todo.add(i)
        else:
            unexplained.append(i)
    while todo:
        score = {obj: len(s & todo) for obj, s in explains.items()}
        best = max(score.values(), default=0)
        if best == 0:
            break
        top = sorted((o for o, v in score.items() if v == best), key=lambda o: (o[0] != "node", o))
        mine = explains[top[0]] & todo
        top = [o for o in top if explains[o] & todo == mine]
        evidence = tuple(_evidence(graph, reports[i], float(verdict.ratio[i])) for i in sorted(mine))
        ratio = float(np.median([verdict.ratio[i] for i in mine]))
        names = tuple(_name(graph, o) for o in top)
        if len(top) > 1:
            findings.append(FaultFinding("ambiguous", " | ".join(names), "", ratio, False,
                                         f"{len(top)} objects explain the same slow reports: a report cannot tell "
                                         "them apart; run the probe on these nodes or more pairwise tests",
                                         evidence, names))
        elif top[0][0] == "node":
            findings.append(FaultFinding("node", names[0], names[0], ratio, False,
                                         "the slow reports' other links were proven in good reports; a report "
                                         "cannot tell the node's NICs, NVLink and host apart (the probe can)",
                                         evidence, names))
        else:
            findings.append(FaultFinding("cable", names[0], "", ratio, False,
                                         "the slow reports' nodes were proven in good reports; the cable is on "
                                         "the simulator's static route between them", evidence, names))
        todo -= mine
    if unexplained:
        evidence = tuple(_evidence(graph, reports[i], float(verdict.ratio[i])) for i in unexplained)
        findings.append(FaultFinding("ambiguous", "unexplained slow reports", "",
                                     float(np.median([verdict.ratio[i] for i in unexplained])), False,
                                     "every link of these reports was proven good in another report: a flapping "
                                     "link, routing other than the simulator's, or noise", evidence))
    return findings + unplaced


def from_reports(fabric: PlanFabric, judged: Iterable[tuple[PerfResult, PerftestRun | NcclTestsRun]],
                 fraction: float, mad_k: float, nvlink_bytes_per_s: float, svg: bool = False) -> BurninResult:
    """The burn-in of a planned fabric judged from ``judged`` reports (:func:`dsctl.health.perf.judge.judged_runs`
    on the same ``fabric``) instead of the probe."""
    source = fabric.name
    graph, hops = fabric.graph(nvlink_bytes_per_s), fabric.hops(nvlink_bytes_per_s)
    index = node_index(graph)
    reports: list[PlacedReport] = []
    notes: list[str] = []
    per_file: dict[str, int] = {}
    entries = 0
    none = np.zeros(0, dtype=np.int64)
    for result, run in judged:
        per_file[result.file] = per_file.get(result.file, 0) + 1
        label = f"{result.file} #{per_file[result.file]}" if per_file[result.file] > 1 else result.file
        if result.verdict == "not_judged":
            notes.append(f"{label}: {result.test} not judged: {result.reason}")
            continue
        if isinstance(run, NcclTestsRun):
            nodes, links, proves, why = place(graph, hops, index, run)
        else:
            nodes, links, proves, why = none, none, none, "a perftest report names no host"
        entries += len(links)
        if entries > MAX_FOOTPRINT_LINKS:
            raise InputError(f": the reports cross more than {MAX_FOOTPRINT_LINKS:,} links in all", field="reports",
                             hint="give fewer or smaller jobs' reports per run")
        reports.append(PlacedReport(result, label, nodes, links, proves, why))
    if not reports:
        raise InputError(": no report could be judged" + (f" ({notes[0]})" if notes else ""), field="reports",
                         hint="give nccl-tests output of at least 1 GiB messages or perftest output")
    expected = np.array([(r.result.expected_bytes_per_s or 0.0) * 8 / 1e9 for r in reports])
    measured = np.array([r.result.measured_bytes_per_s * 8 / 1e9 for r in reports])
    answered = np.array([r.result.verdict != "wrong" for r in reports])
    verdict = judge_reports(expected, measured, answered, fraction, mad_k)
    findings = locate_reports(graph, reports, verdict)
    covered = sorted({int(i) for r in reports for i in r.nodes})
    names = tuple(graph.device_names[i] for i in covered)
    selected = None
    if covered:
        selected = np.zeros(graph.num_nodes, dtype=bool)
        selected[covered] = True
    link_ratio = np.full(graph.num_links, np.inf)
    for rep, ratio in zip(reports, verdict.ratio, strict=True):
        np.minimum.at(link_ratio, rep.links, ratio)
    driven = np.isfinite(link_ratio)
    link_ratio[~driven] = np.nan
    for rep in reports:
        if rep.unplaced:
            notes.append(f"{rep.label}: not placed on the plan: {rep.unplaced}")
    rounds = tuple(RoundResult(rep.label, rep.result.tool, 1, int(s), 0, float(ratio),
                               float(expected[k])) for k, (rep, s, ratio)
                   in enumerate(zip(reports, verdict.slow, verdict.ratio, strict=True)))
    design = RoundDesign((), 0, lower_bound(graph), coverage_of(graph, driven, selected))
    num_ep = graph.num_nodes * graph.nics_per_node
    burnin = BurninResult(source, graph.kind, graph.num_nodes, graph.num_planes, design, rounds, tuple(findings),
                          fraction, mad_k, 0, link_ratio, np.full(num_ep, np.nan), np.full(num_ep, np.nan),
                          REPORTS_SOURCE, names, notes=tuple(notes), exit_code=1 if findings else 0)
    if svg:
        from dataclasses import replace

        burnin = replace(burnin, svgs=plane_pictures(graph, burnin))
    return burnin


def run_reports(plan_text: str, source: str, request: BurninRequest, texts: Iterable[tuple[str, str]],
                profile: NodeProfile) -> BurninResult:
    """The burn-in of a plan.json text judged from saved reports ((name, text) pairs), each against what
    ``dsctl health perf --plan`` expects of it on ``profile``'s nodes."""
    from dsctl.health.perf.judge import judged_runs

    request.check()
    check_size(plan_text, source)
    fabric = PlanFabric(plan_text, source)
    judged = judged_runs(texts, profile, lambda _: profile, request.fraction, fabric)
    return from_reports(fabric, judged, request.fraction, request.mad_k, profile.nvlink_bytes_per_s / 2,
                        request.svg)
