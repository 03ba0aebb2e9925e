"""Flow-level simulation of a workload on a planned fabric: max-min fair rates, completion times, hot links.

Two stages (see docs/topology.md): NVLink flows are solved over the NVLink links of every GPU, the network
flows of each plane over that plane's links (planes share no link, so each plane is solved on its own and
memory stays bounded by one plane's flows). A relayed transfer (PXN) runs at the smaller of its two rates,
so a GPU's completion time is the largest ``bytes / rate`` over the flows it owns in either stage.
Link utilisation is the steady max-min load over capacity on network links; on NVLink links, which the
first stage alone would fill, it is the bytes carried over capacity x completion time (the average need).

Per-GPU bandwidth = bytes the GPU sends to other nodes / its completion time (bytes/s), compared with the NIC
line rate. Completion time of a job = the largest ``bytes / rate`` over its flows (rates held at the steady
max-min allocation, an upper bound: flows that finish early release capacity), or with ``reflow`` the fluid
event simulation of ``finish_times``. The lower bound is the busiest link's bytes over its capacity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from dsctl.topology.sim import compiled
from dsctl.topology.sim.graph import LINK_KINDS, NIC_DOWN, NVL_IN, NVL_OUT, SW_UP, SimGraph
from dsctl.topology.sim.maxmin import finish_times, max_min, route_loads
from dsctl.topology.sim.routing import NextHops, next_hops, route_flows
from dsctl.topology.sim.symmetry import move_link_values, plane_maps, same_flows
from dsctl.topology.sim.traffic import Flows, Traffic, check_flow_count, empty_flows

HOT_LINKS = 10


@dataclass(frozen=True)
class RateSpread:
    """min / median / max / mean of a per-GPU value (bytes/s); zeros when no GPU sent across nodes."""

    min: float
    median: float
    max: float
    mean: float

    @staticmethod
    def of(values: np.ndarray) -> RateSpread:
        if not len(values):
            return RateSpread(0.0, 0.0, 0.0, 0.0)
        return RateSpread(float(values.min()), float(np.median(values)), float(values.max()), float(values.mean()))


@dataclass(frozen=True)
class JobResult:
    """One job: per-GPU bandwidth (bytes to other nodes / GPU completion time), completion time, and the
    algorithm bandwidth ``size_bytes / completion`` (NCCL's algbw) when the job has a message size. EP jobs add
    DeepEP's logical per-GPU bandwidth (every (token, node) pair, the sender's own node included, / time); zeros
    for other jobs."""

    name: str
    workload: str
    num_gpus: int
    note: str
    size_bytes: float
    completion_s: float
    gpu_bytes_per_s: RateSpread
    algbw_bytes_per_s: float
    unroutable_transfers: int
    logical_bytes_per_s: RateSpread = RateSpread(0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class LinkUse:
    name: str
    kind: str
    plane: int
    utilisation: float
    bytes_per_s: float


@dataclass(frozen=True)
class PlaneResult:
    """One plane: network flows, progressive-filling rounds, busiest link, mean switch-uplink use, and the
    per-GPU bandwidth of the GPUs whose NIC is on it."""

    plane: int
    flows: int
    rounds: int
    max_utilisation: float
    mean_uplink_utilisation: float
    gpu_bytes_per_s: RateSpread


@dataclass(frozen=True)
class SimResult:
    """What ``dsctl topology simulate`` prints."""

    plan: str
    kind: str
    routing: str
    reflow: bool
    seed: int
    num_nodes: int
    num_gpus: int
    num_planes: int
    nic_bytes_per_s: float
    nvlink_bytes_per_s: float
    bisection_bytes_per_s: float
    failed: list[str]
    completion_s: float
    lower_bound_s: float
    gpu_bytes_per_s: RateSpread
    jobs: list[JobResult]
    hottest_links: list[LinkUse]
    planes: list[PlaneResult]
    nvlink_max_utilisation: float
    unroutable_flows: int
    #: share of the NIC line rate EP payload was given (1.0 when the run has no EP job)
    nic_efficiency: float = 1.0
    #: planes not solved but mapped from an identical lower plane (same wiring and flows; see symmetry.py)
    mirrored_planes: list[int] = field(default_factory=list)
    svg: str | None = field(default=None, metadata={"output": False})
    link_utilisation: np.ndarray = field(default_factory=lambda: np.zeros(0), metadata={"output": False})


def _times(flows: Flows, rate: np.ndarray) -> np.ndarray:
    """``bytes / rate`` per flow [F] (s), inf where the rate is 0; one flow-long array besides a mask."""
    times = np.maximum(rate, 1e-300)
    with np.errstate(divide="ignore", over="ignore"):  # a rate near 0 is an infinite time, as rate == 0 is
        np.divide(flows.bytes, times, out=times)
    times[rate <= 0] = np.inf
    return times


def _max_at(out: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """``np.maximum.at(out, index, values)``; one reduction where ``index`` is one value broadcast (a job's flows)."""
    if index.ndim == 1 and len(index) > 1 and index.strides[0] == 0:
        out[index[0]] = max(out[index[0]], values.max())
    else:
        np.maximum.at(out, index, values)


def _owner_max(flows: Flows, times: np.ndarray, t_gpu: np.ndarray, t_node: np.ndarray) -> None:
    """Largest flow time per owning GPU (owner >= 0) into ``t_gpu`` and per node-wide owner (owner <= -2, node
    ``-2 - owner``) into ``t_node``; no flow-long copies where every flow has one kind of owner."""
    owner = flows.owner
    gpu = owner >= 0
    if gpu.all():
        np.maximum.at(t_gpu, owner, times)
        return
    if gpu.any():
        np.maximum.at(t_gpu, owner[gpu], times[gpu])
    node = owner <= -2
    if node.all():
        np.maximum.at(t_node, -2 - owner, times)
    elif node.any():
        np.maximum.at(t_node, -2 - owner[node], times[node])


@dataclass(frozen=True)
class _PlaneSolution:
    """One plane's network flows solved: per-flow times [F] (s) and routability, per-link steady load (bytes/s)
    and bytes carried [L], progressive-filling rounds."""

    net: Flows
    times: np.ndarray
    routable: np.ndarray
    link_load: np.ndarray
    link_bytes: np.ndarray
    rounds: int


@dataclass(frozen=True)
class _PlaneTimes:
    """What one plane's flows add to the run, reduced over its flows: the largest flow time (s) per owning GPU
    [G], per node-wide owner [N] and per job [J]; transfers without a live path per job [J] and in all; flows
    and rounds. A plane mapped onto it (``symmetry.py``) adds the same with its GPU owners moved along their node.
    ``solution``: the flows themselves, kept only while a mapped plane must compare its flows with them."""

    gpu_s: np.ndarray
    node_s: np.ndarray
    job_s: np.ndarray
    unroutable_job: np.ndarray
    unroutable: int
    flows: int
    rounds: int
    solution: _PlaneSolution | None = None

    def moved(self, shift: int) -> np.ndarray:
        """``gpu_s`` with every owning GPU moved ``shift`` local indices (owners stay inside their node)."""
        out = np.zeros_like(self.gpu_s)
        owners = np.flatnonzero(self.gpu_s > 0)
        out[owners + shift] = self.gpu_s[owners]
        return out


def _plane_times(graph: SimGraph, num_jobs: int, net: Flows, times: np.ndarray, routable: np.ndarray,
                 rounds: int) -> _PlaneTimes:
    gpu_s, node_s, job_s = np.zeros(graph.num_gpus), np.zeros(graph.num_nodes), np.zeros(num_jobs)
    unroutable_job = np.zeros(num_jobs, dtype=np.int64)
    bad = ~routable
    np.add.at(unroutable_job, net.job[bad], (net.members[bad]).astype(np.int64))
    good = net if routable.all() else net.select(routable)
    good_times = times if routable.all() else times[routable]
    _owner_max(good, good_times, gpu_s, node_s)
    _max_at(job_s, good.job, good_times)
    return _PlaneTimes(gpu_s, node_s, job_s, unroutable_job, int(bad.sum()), len(net), rounds)


def _solve_plane(graph: SimGraph, hops: NextHops, dead: np.ndarray, net: Flows, routing: str, seed: int,
                 reflow: bool, scratch: compiled.Scratch) -> _PlaneSolution:
    routes = route_flows(graph, hops, dead, net.src, net.dst, routing, seed, scratch)
    if compiled.chosen(routing, len(net)):
        sol, carried = compiled.compiled_max_min(routes.flow_routes, net.members, graph.link_cap, net.bytes, scratch)
    else:
        sol = max_min(routes.flow_routes, net.members, graph.link_cap, routes.bundle_ptr, routes.bundle_link,
                      routes.bundle_frac)
        carried = route_loads(routes.flow_routes, net.members * net.bytes, graph.num_links, routes.bundle_ptr,
                              routes.bundle_link, routes.bundle_frac)
    times = (finish_times(routes.flow_routes, net.members, net.bytes, graph.link_cap, routes.bundle_ptr,
                          routes.bundle_link, routes.bundle_frac, first=sol) if reflow else _times(net, sol.rate))
    return _PlaneSolution(net, times, routes.routable, sol.link_load, carried, sol.rounds)


def simulate(graph: SimGraph, traffic: Traffic, routing: str, seed: int, dead: np.ndarray,
             failed: list[str], plan_name: str = "plan.json", bisection_bytes_per_s: float = 0.0,
             reflow: bool = False, report: Callable[[float, float], None] | None = None,
             hops: NextHops | None = None) -> SimResult:
    """Solve both stages and summarise; ``dead`` bool [L] marks failed links. ``reflow``: completion times from
    re-solving as flows finish (``finish_times``) instead of the steady rates. ``report(planes_done,
    num_planes)`` is called as each network plane starts and once at the end (progress). ``hops``: the next-hop
    table of ``graph`` and ``dead`` on every plane, when the caller keeps one (many small runs on one plan)."""
    num_jobs = len(traffic.jobs)
    t_gpu = np.zeros(graph.num_gpus)
    t_node = np.zeros(graph.num_nodes)
    t_job = np.zeros(num_jobs)
    unroutable_job = np.zeros(num_jobs, dtype=np.int64)
    link_load = np.zeros(graph.num_links)
    link_bytes = np.zeros(graph.num_links)
    none = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    # stage 1: NVLink
    nvl = traffic.nvl
    if len(nvl):
        nvl_routes = np.stack([graph.gpu_out[nvl.src], graph.gpu_in[nvl.dst]], axis=1)
        sol = max_min(nvl_routes, nvl.members, graph.link_cap, *none)
        times = (finish_times(nvl_routes, nvl.members, nvl.bytes, graph.link_cap, *none, first=sol) if reflow
                 else _times(nvl, sol.rate))
        _owner_max(nvl, times, t_gpu, t_node)
        _max_at(t_job, nvl.job, times)
        link_bytes += route_loads(nvl_routes, nvl.members * nvl.bytes, graph.num_links, *none)
    # stage 2: the network, plane by plane
    maps = plane_maps(graph, routing, dead)
    mirrored_traffic = {p for p, m in maps.items() if traffic.mirrored(p, m.ref, m.nic_shift)}
    if hops is None:
        hops = next_hops(graph, dead, [p for p in range(graph.num_planes) if p not in mirrored_traffic])
    # a solved plane keeps its flows only while a mapped plane whose traffic cannot vouch for itself compares
    compared = {m.ref for p, m in maps.items() if p not in mirrored_traffic}
    plane_rows: list[tuple[int, int, int]] = []
    unroutable = 0
    solved: dict[int, tuple[_PlaneTimes, np.ndarray, np.ndarray]] = {}
    mirrored: list[int] = []
    scratch = compiled.Scratch()  # the compiled planes' flow-long buffers, reused plane after plane
    for plane in range(graph.num_planes):
        if report is not None:
            report(plane, graph.num_planes)
        plane_map = maps.get(plane)
        ref = solved.get(plane_map.ref) if plane_map is not None else None
        here: _PlaneTimes | None = None
        if plane_map is not None and ref is not None and plane in mirrored_traffic:
            here = ref[0]  # the ref plane's flows moved along every node: nothing to build
            gpu_s = here.moved(plane_map.nic_shift)
        else:
            net = traffic.net(plane)
            check_flow_count(len(net), f"plane {plane}")
            if not len(net):
                plane_rows.append((plane, 0, 0))
                continue
            ref_sol = ref[0].solution if ref is not None else None
            if plane_map is not None and ref_sol is not None and same_flows(ref_sol.net, net, plane_map.nic_shift):
                here = _plane_times(graph, num_jobs, net, ref_sol.times, ref_sol.routable, ref_sol.rounds)
                gpu_s = here.gpu_s
        if here is not None and plane_map is not None and ref is not None:
            mirrored.append(plane)
            move_link_values(ref[1], plane_map, link_load)
            move_link_values(ref[2], plane_map, link_bytes)
        else:
            solved_plane = _solve_plane(graph, hops, dead, net, routing, seed + 7919 * plane, reflow, scratch)
            here = _plane_times(graph, num_jobs, net, solved_plane.times, solved_plane.routable, solved_plane.rounds)
            if plane in compared:
                here = replace(here, solution=solved_plane)
            if plane in {m.ref for m in maps.values()}:
                solved[plane] = (here, solved_plane.link_load, solved_plane.link_bytes)
            gpu_s = here.gpu_s
            link_load += solved_plane.link_load
            link_bytes += solved_plane.link_bytes
            del solved_plane
        np.maximum(t_gpu, gpu_s, out=t_gpu)
        np.maximum(t_node, here.node_s, out=t_node)
        np.maximum(t_job, here.job_s, out=t_job)
        unroutable_job += here.unroutable_job
        unroutable += here.unroutable
        plane_rows.append((plane, here.flows, here.rounds))
        net = empty_flows()  # this plane's flows go before the next plane's are built
    t_all = np.maximum(t_gpu, np.repeat(t_node, graph.gpus_per_node))
    finite = t_job[np.isfinite(t_job)]
    completion = float(finite.max(initial=0.0))
    nvl_links = (graph.link_kind == NVL_OUT) | (graph.link_kind == NVL_IN)
    if completion > 0:  # NVLink alone would run at its own max-min rates; show what the run needs on average
        link_load[nvl_links] = link_bytes[nvl_links] / completion
    util = np.where(graph.link_cap > 0, link_load / graph.link_cap, 0.0)
    job_results = []
    gpu_bw = np.full(graph.num_gpus, np.nan)
    for j, job in enumerate(traffic.jobs):
        sends = job.net_bytes > 0
        t = t_all[job.gpus[sends]]
        with np.errstate(divide="ignore", invalid="ignore"):
            bw = np.where(t > 0, job.net_bytes[sends] / np.where(t > 0, t, 1), 0.0)
        gpu_bw[job.gpus[sends]] = bw
        done = float(t_job[j])
        algbw = job.size_bytes / done if job.size_bytes and done > 0 and np.isfinite(done) else 0.0
        logical = RateSpread(0.0, 0.0, 0.0, 0.0)
        if job.logical_bytes is not None:
            t_own = t_all[job.gpus]
            timed = (t_own > 0) & np.isfinite(t_own)
            logical = RateSpread.of(job.logical_bytes[timed] / t_own[timed])
        job_results.append(JobResult(job.name, job.workload, len(job.gpus), job.note, job.size_bytes, done,
                                     RateSpread.of(bw), algbw, int(unroutable_job[j]), logical))
    sent = np.isfinite(gpu_bw)
    with np.errstate(divide="ignore", invalid="ignore"):
        lower = float(np.max(np.where(graph.link_cap > 0, link_bytes / graph.link_cap, 0.0), initial=0.0))
    # ties (many links exactly full) list switch-to-switch links first: they are the ones routing can change
    hot = np.lexsort((graph.link_kind <= NIC_DOWN, -np.round(util, 9)))[:HOT_LINKS]
    hottest = [LinkUse(graph.link_name(int(i)), LINK_KINDS[int(graph.link_kind[i])], int(graph.link_plane[i]),
                       float(util[i]), float(link_load[i])) for i in hot.tolist() if util[i] > 0]
    gpu_plane = graph.gpu_plane(np.arange(graph.num_gpus))
    if report is not None:
        report(graph.num_planes, graph.num_planes)
    planes = []
    for plane, flows, rounds in plane_rows:
        on = graph.link_plane == plane
        up = on & (graph.link_kind == SW_UP)
        planes.append(PlaneResult(plane, flows, rounds, float(util[on].max(initial=0.0)),
                                  float(util[up].mean()) if up.any() else 0.0,
                                  RateSpread.of(gpu_bw[sent & (gpu_plane == plane)])))
    return SimResult(
        plan=plan_name, kind=graph.kind, routing=routing, reflow=reflow, seed=seed, num_nodes=graph.num_nodes,
        num_gpus=graph.num_gpus, num_planes=graph.num_planes, nic_bytes_per_s=graph.nic_bytes_per_s,
        nvlink_bytes_per_s=graph.nvlink_bytes_per_s, bisection_bytes_per_s=bisection_bytes_per_s, failed=failed,
        completion_s=completion, lower_bound_s=lower, gpu_bytes_per_s=RateSpread.of(gpu_bw[sent]),
        jobs=job_results, hottest_links=hottest, planes=planes,
        nvlink_max_utilisation=float(util[nvl_links].max(initial=0.0)), unroutable_flows=unroutable,
        mirrored_planes=mirrored, link_utilisation=util)
