"""Entry point of ``dsctl topology simulate``: options and jobs in, ``SimResult`` out (pure; no file I/O)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dsctl.cluster.plan_file import MAX_ENDPOINTS
from dsctl.errors import InputError, one_of
from dsctl.topology.sim.ep import DIRECTIONS, ep_traffic
from dsctl.topology.sim.graph import SimGraph, build_graph, failed_links
from dsctl.topology.sim.routing import ROUTINGS
from dsctl.topology.sim.solve import SimResult, simulate
from dsctl.topology.sim.svg import plane_svg
from dsctl.topology.sim.traffic import (
    RING_FACTOR,
    Job,
    Traffic,
    alltoall,
    by_plane,
    merge,
    permutation,
    ring,
    transfers,
)
from dsctl.units import QuantityError, parse_bytes

WORKLOADS = ("alltoall", "permutation", "allreduce", "allgather", "reducescatter", *DIRECTIONS)
#: most jobs in one --jobs-file file
MAX_JOBS = 256
#: the keys of a --jobs-file job; those that are request fields have the fields' names
JOB_KEYS = ("name", "workload", "nodes", "node_range", "size", "group_size", "group_stride", "tokens_per_gpu", "ep")


@dataclass(frozen=True)
class EpModel:
    """What EP traffic needs from a model profile: hidden size, top-k, node limit (groups per token)."""

    hidden: int
    topk: int
    limit_nodes: int


@dataclass(frozen=True)
class Workload:
    """One workload on a set of nodes (None = every node of the plan)."""

    name: str
    workload: str
    size_bytes: float = 1 << 30
    nodes: tuple[int, ...] | None = None
    group_size: int = 8
    group_stride: int | None = None
    tokens_per_gpu: int = 4096
    gpu_share: tuple[float, ...] | None = None
    #: GPUs per EP group (whole nodes, consecutive); None = one group over every GPU of the workload
    ep_gpus: int | None = None


def check_options(workload: str, model_name: str, has_moe: bool, nodes: int | None, ep_gpus: int | None,
                  eplb_plan_given: bool, stats_given: bool) -> None:
    """The option rules of ``topology simulate``, naming fields: a placement (``eplb_plan``) and its routing
    ``stats`` come together; an ``ep-*`` workload needs a MoE ``model``; ``nodes`` and ``ep`` (GPUs per EP
    group) at least 1, ``nodes`` at most a plan's largest node count."""
    if eplb_plan_given != stats_given:
        raise InputError("and {stats} go together (a placement and the statistics it was made from)",
                         field="eplb_plan", mentions=("stats",))
    if not has_moe and workload.startswith("ep-"):
        raise InputError(f"{model_name} has no MoE layers; ep-dispatch/ep-combine need one", field="model")
    if nodes is not None and nodes < 1:
        raise InputError(f"must be at least 1, got {nodes}", field="nodes")
    if nodes is not None and nodes > MAX_ENDPOINTS:  # checked before the command lists the node ids
        raise InputError(f"must be at most {MAX_ENDPOINTS:,} (a plan's largest), got {nodes}", field="nodes")
    if ep_gpus is not None and ep_gpus < 1:
        raise InputError(f"must be at least 1 GPU, got {ep_gpus}", field="ep")


def _nodes(graph: SimGraph, nodes: tuple[int, ...] | None) -> np.ndarray:
    if nodes is None:
        return np.arange(graph.num_nodes)
    picked = np.asarray(nodes, dtype=np.int64)
    if not len(picked) or picked.min() < 0 or picked.max() >= graph.num_nodes:
        raise InputError(f": the plan has {graph.num_nodes} nodes; use 1..{graph.num_nodes}", field="nodes")
    return picked


def build_traffic(graph: SimGraph, work: Workload, seed: int, job: int, model: EpModel | None,
                  nic_efficiency: float = 1.0) -> Traffic:
    """The traffic of one workload (InputError naming the option on a bad value)."""
    if work.workload not in WORKLOADS:
        raise InputError(f"{work.workload!r} is not valid; use {one_of(WORKLOADS)}", field="workload")
    if not (math.isfinite(work.size_bytes) and 0 < work.size_bytes <= 1 << 50):
        raise InputError(f"must be between 1 B and 1 PiB, got {work.size_bytes}", field="size")
    nodes = _nodes(graph, work.nodes)
    gpus = (nodes[:, None] * graph.gpus_per_node + np.arange(graph.gpus_per_node)).ravel()
    if work.workload == "alltoall":
        return alltoall(graph, nodes, work.size_bytes, job, work.name)
    if work.workload == "permutation":
        return permutation(graph, gpus, work.size_bytes, seed, job, work.name)
    if work.workload in RING_FACTOR:
        stride = work.group_stride if work.group_stride is not None else graph.gpus_per_node
        return ring(graph, gpus, work.size_bytes, work.workload, work.group_size, stride, job, work.name)
    if model is None:
        raise InputError(f"{work.workload} needs a model profile ({{model}})", field="workload", mentions=("model",))
    return ep_groups(graph, nodes, work, model, job, nic_efficiency)


def ep_groups(graph: SimGraph, nodes: np.ndarray, work: Workload, model: EpModel, job: int,
              nic_efficiency: float = 1.0) -> Traffic:
    """EP dispatch/combine in every EP group at once (groups of ``work.ep_gpus`` GPUs on consecutive nodes, as
    a launch layout's EP groups), reported as one job; an EPLB share applies to every group alike. Network flows
    carry payload / ``nic_efficiency`` on the wire (see ``ep.py``)."""
    g = graph.gpus_per_node
    size = len(nodes) * g if work.ep_gpus is None else work.ep_gpus
    if size < 1 or size % g or len(nodes) * g % size:
        raise InputError(f"{size} must be a multiple of the {g} GPUs per node and divide the "
                         f"{len(nodes) * g} GPUs simulated", field="ep")
    share = np.ones(size) if work.gpu_share is None else np.asarray(work.gpu_share, dtype=np.float64)
    per = size // g
    parts = [ep_traffic(graph, nodes[k:k + per], share, work.tokens_per_gpu, model.hidden, model.topk,
                        model.limit_nodes, work.workload, job, work.name, nic_efficiency)
             for k in range(0, len(nodes), per)]
    merged = merge(parts)
    first = merged.jobs[0]
    groups = len(parts)
    note = first.note + (f"; {groups} EP groups of {size} GPUs" if groups > 1 else "")
    joined = replace(first, gpus=np.concatenate([j.gpus for j in merged.jobs]),
                     net_bytes=np.concatenate([j.net_bytes for j in merged.jobs]), note=note,
                     logical_bytes=np.concatenate([j.logical_bytes for j in merged.jobs
                                                   if j.logical_bytes is not None]))
    return replace(merged, jobs=[joined])


def _size(value: object, where: str) -> float:
    if isinstance(value, bool):
        raise InputError(f"{where} must be a byte count such as '128 MiB', got {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(parse_bytes(str(value)))
    except QuantityError as exc:
        raise InputError(f"{where}: {exc}") from None


def _int(value: object, where: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InputError(f"{where} must be a whole number >= {low}, got {value!r}")
    return value


def parse_jobs(doc: object, graph: SimGraph, source: str, default: Workload) -> list[Workload]:
    """Jobs from a parsed --jobs-file document: ``{"jobs": [{"name", "workload", "nodes" | "node_range", ...}]}``
    or a bare list. ``nodes`` lists node names; ``node_range`` is ``[first, last]`` (1-based, inclusive).
    Other keys: ``size``, ``group_size``, ``group_stride``, ``tokens_per_gpu``. Nodes may not be shared."""
    items = doc.get("jobs") if isinstance(doc, dict) else doc
    if not isinstance(items, list) or not items:
        raise InputError(f"{source}: expected a non-empty list of jobs (or an object with a \"jobs\" list)")
    if len(items) > MAX_JOBS:
        raise InputError(f"{source}: {len(items)} jobs; at most {MAX_JOBS}")
    index = {n: i for i, n in enumerate(graph.device_names[:graph.num_nodes])}
    used: dict[int, str] = {}
    out = []
    known = set(JOB_KEYS)
    for j, item in enumerate(items):
        where = f"{source}: jobs[{j}]"
        if not isinstance(item, dict):
            raise InputError(f"{where} must be an object")
        extra = sorted(set(map(str, item)) - known)
        if extra:
            raise InputError(f"{where}: unknown key(s) {', '.join(extra)}; use {one_of(sorted(known))}")
        name = str(item.get("name", f"job{j + 1}"))[:64]
        if "nodes" in item:
            names = item["nodes"]
            if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
                raise InputError(f"{where}.nodes must be a list of node names")
            missing = [n for n in names if n not in index]
            if missing:
                raise InputError(f"{where}.nodes: {missing[0]!r} is not a node of the plan")
            nodes = [index[n] for n in names]
        elif "node_range" in item:
            rng = item["node_range"]
            if not (isinstance(rng, list) and len(rng) == 2):
                raise InputError(f"{where}.node_range must be [first, last] (1-based node numbers)")
            first, last = _int(rng[0], f"{where}.node_range[0]"), _int(rng[1], f"{where}.node_range[1]")
            if first > last or last > graph.num_nodes:
                raise InputError(f"{where}.node_range [{first}, {last}] must lie within 1..{graph.num_nodes}")
            nodes = list(range(first - 1, last))
        else:
            raise InputError(f"{where} needs \"nodes\" (names) or \"node_range\" [first, last]")
        if len(set(nodes)) != len(nodes):
            raise InputError(f"{where}: a node is listed twice")
        for node in nodes:
            if node in used:
                raise InputError(f"{where}: node {graph.device_names[node]} is already used by job {used[node]!r}")
            used[node] = name
        workload = item.get("workload", default.workload)
        if workload not in WORKLOADS:
            raise InputError(f"{where}.workload {workload!r} is not valid; use {one_of(WORKLOADS)}")
        out.append(replace(
            default, name=name, workload=str(workload), nodes=tuple(sorted(nodes)),
            size_bytes=_size(item["size"], f"{where}.size") if "size" in item else default.size_bytes,
            group_size=_int(item.get("group_size", default.group_size), f"{where}.group_size", 2),
            group_stride=(_int(item["group_stride"], f"{where}.group_stride") if "group_stride" in item
                          else default.group_stride),
            tokens_per_gpu=_int(item.get("tokens_per_gpu", default.tokens_per_gpu), f"{where}.tokens_per_gpu"),
            ep_gpus=_int(item["ep"], f"{where}.ep") if "ep" in item else None,
            gpu_share=None))
    return out


@dataclass(frozen=True)
class SimRequest:
    """Everything ``simulate`` needs besides the plan text."""

    workload: Workload
    routing: str = "adaptive"
    seed: int = 0
    fail: tuple[str, ...] = ()
    fail_random: int = 0
    jobs_doc: Any = None
    jobs_source: str = "--jobs-file"
    model: EpModel | None = None
    svg_plane: int | None = None
    reflow: bool = False
    #: fraction of the NIC line rate EP (DeepEP) payload reaches: the node profile's ``nic_efficiency``
    nic_efficiency: float = 1.0


def run(plan_text: str, plan_name: str, nvlink_bytes_per_s: float, request: SimRequest,
        bisection_bytes_per_s: float = 0.0, report: Callable[[float, float], None] | None = None) -> SimResult:
    """Build the graph, the traffic (one workload or the jobs of a --jobs-file document), fail links, solve;
    ``report(planes_done, num_planes)`` follows the network planes (progress)."""
    if request.routing not in ROUTINGS:
        raise InputError(f"{request.routing!r} is not valid; use {one_of(ROUTINGS)}", field="routing")
    if not 0 <= request.seed < 1 << 62:
        raise InputError(f"{request.seed} must be a whole number from 0 to 2^62", field="seed")
    graph = build_graph(plan_text, plan_name, nvlink_bytes_per_s)
    if request.jobs_doc is not None:
        works = parse_jobs(request.jobs_doc, graph, request.jobs_source, request.workload)
    else:
        works = [request.workload]
    parts = []
    for j, work in enumerate(works):
        try:
            parts.append(build_traffic(graph, work, request.seed + j, j, request.model, request.nic_efficiency))
        except InputError as exc:
            if request.jobs_doc is None:
                raise
            # a field that is a job key reads as the key (workload, size, ep ...); others (model) as the options
            in_job = tuple(m for m in exc.mentions if m in JOB_KEYS)
            keyed = InputError(exc.text, field=exc.field, mentions=in_job).message
            raise InputError(f"{request.jobs_source}: job {work.name!r}: {keyed}", hint=exc.hint,
                             mentions=tuple(m for m in exc.mentions if m not in JOB_KEYS)) from None
    traffic = merge(parts)
    dead, failed = failed_links(graph, list(request.fail), request.fail_random, request.seed)
    result = simulate(graph, traffic, request.routing, request.seed, dead, failed, plan_name, bisection_bytes_per_s,
                      request.reflow, report)
    if any(w.workload in DIRECTIONS for w in works):
        result = replace(result, nic_efficiency=request.nic_efficiency)
    if request.svg_plane is not None:
        if not 0 <= request.svg_plane < graph.num_planes:
            raise InputError(f"{request.svg_plane} must be 0..{graph.num_planes - 1}", field="svg_plane")
        result = replace(result, svg=plane_svg(graph, result.link_utilisation, dead, request.svg_plane,
                                               f"{request.workload.workload}, {request.routing} routing"))
    return result


def transfer_time(plan_text: str, plan_name: str, nvlink_bytes_per_s: float, src_gpus: np.ndarray,
                  dst_gpus: np.ndarray, nbytes: np.ndarray, routing: str = "adaptive", seed: int = 0,
                  reflow: bool = False, name: str = "transfers") -> SimResult:
    """Point-to-point GPU-to-GPU transfers on a planned fabric, all at once: one flow per (src, dst) row.

    ``src_gpus``/``dst_gpus`` int [T] global GPU ids (node * GPUs per node + local), ``nbytes`` float [T] bytes of
    each transfer (rows with the same pair are best merged by the caller: one flow each). Paths as every workload
    (NVLink inside a node, the network across nodes, PXN relay across planes); ``completion_s`` of the result is
    when the last transfer ends (steady max-min rates, an upper bound; ``reflow``: the fluid event simulation).
    InputError for a GPU id outside the plan, a negative size or an unknown routing.
    """
    if routing not in ROUTINGS:
        raise InputError(f"{routing!r} is not valid; use {one_of(ROUTINGS)}", field="routing")
    graph = build_graph(plan_text, plan_name, nvlink_bytes_per_s)
    src = np.asarray(src_gpus, dtype=np.int64).ravel()
    dst = np.asarray(dst_gpus, dtype=np.int64).ravel()
    size = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), src.shape).copy()
    if src.shape != dst.shape:
        raise InputError(f"{name}: {len(src)} sources but {len(dst)} destinations")
    for what, ids in (("source", src), ("destination", dst)):
        if len(ids) and (ids.min() < 0 or ids.max() >= graph.num_gpus):
            raise InputError(f"{name}: {what} GPU {int(ids.max())} is outside {plan_name}, which has "
                             f"{graph.num_gpus} GPUs ({graph.num_nodes} nodes x {graph.gpus_per_node})")
    if not np.isfinite(size).all() or (size < 0).any():
        raise InputError(f"{name}: transfer sizes must be finite bytes >= 0")
    keep = (size > 0) & (src != dst)
    src, dst, size = src[keep], dst[keep], size[keep]
    net, nvl = transfers(graph, src, dst, size, 0)
    g = graph.gpus_per_node
    gpus = np.unique(src)
    remote = np.zeros(graph.num_gpus)
    np.add.at(remote, src, np.where(src // g != dst // g, size, 0.0))
    traffic = Traffic([Job(name, "transfers", gpus, remote[gpus], f"{len(src)} transfers")], nvl,
                      [by_plane(graph, net)])
    dead = np.zeros(graph.num_links, dtype=bool)
    return simulate(graph, traffic, routing, seed, dead, [], plan_name, 0.0, reflow)


def plan_facts(plan_text: str, source: str) -> tuple[str, float]:
    """(node profile name, total bisection in bytes/s) recorded in a plan.json; ("", 0) where absent."""
    from dsctl.textjson import load_json

    doc = load_json(plan_text, source)
    spec = doc.get("spec") if isinstance(doc, dict) else None
    summary = doc.get("summary") if isinstance(doc, dict) else None
    name = spec.get("node_profile") if isinstance(spec, dict) else ""
    bisection = summary.get("bisection_gbps_total") if isinstance(summary, dict) else 0.0
    if isinstance(bisection, bool) or not isinstance(bisection, (int, float)) or not math.isfinite(bisection):
        bisection = 0.0
    return (name if isinstance(name, str) else ""), float(bisection) * 1e9 / 8
