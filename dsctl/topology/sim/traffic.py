"""Traffic of a workload as aggregated flows: network flows between NIC endpoints and NVLink flows inside nodes.

A transfer from GPU a to GPU b (bytes) takes one of three paths:

- same node: NVLink ``a -> b``;
- other node, same plane: the network from a's NIC to b's NIC;
- other node, other plane (MPFT): PXN-style relay, NVLink ``a -> a'`` (the GPU of a's node with b's local
  index, whose NIC is on b's plane), then the network from a''s NIC to b's NIC.

Flows with identical links are merged: ``members`` transfers of ``bytes`` each share one flow (one QP / one
ECMP hash). A flow's ``owner`` says whose completion it counts for: a GPU id (>= 0), -1 for nobody, or
``-2 - node`` for every GPU of a node (an all-to-all connection carrying one transfer of each of them).

Network flows are produced plane by plane (``Traffic.net(plane)``) so a 16,384-GPU all-to-all never holds
all 268M transfers at once: the network of each plane is solved on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dsctl.errors import InputError
from dsctl.topology.sim.graph import SimGraph

NOBODY = -1
#: most network flows in one plane (a 16,384-GPU MPFT all-to-all has 4.2M): bounds memory at a few GB
MAX_FLOWS_PER_PLANE = 8_000_000


def check_flow_count(count: int, what: str) -> None:
    if count > MAX_FLOWS_PER_PLANE:
        raise InputError(f"{what} needs {count:,} network flows in one plane; the simulator's limit is "
                         f"{MAX_FLOWS_PER_PLANE:,}", hint="simulate fewer nodes (--nodes N) or an MPFT plan, whose "
                         "planes split the flows")


@dataclass(frozen=True)
class Flows:
    """Aggregated flows; ``src``/``dst`` are NIC endpoints (network) or GPUs (NVLink). Arrays [F]."""

    src: np.ndarray
    dst: np.ndarray
    members: np.ndarray
    bytes: np.ndarray
    owner: np.ndarray
    job: np.ndarray

    def __len__(self) -> int:
        return len(self.src)

    def select(self, mask: np.ndarray) -> Flows:
        return Flows(self.src[mask], self.dst[mask], self.members[mask], self.bytes[mask], self.owner[mask],
                     self.job[mask])


def empty_flows() -> Flows:
    z = np.zeros(0, dtype=np.int64)
    return Flows(z, z, np.zeros(0), np.zeros(0), z, z)


def concat(parts: list[Flows]) -> Flows:
    parts = [p for p in parts if len(p)]
    if not parts:
        return empty_flows()
    if len(parts) == 1:
        return parts[0]
    return Flows(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                   ("src", "dst", "members", "bytes", "owner", "job")))


@dataclass(frozen=True)
class Job:
    """One workload of a run: its name, GPUs (global ids), bytes each GPU sends to other nodes, and a note."""

    name: str
    workload: str
    gpus: np.ndarray
    net_bytes: np.ndarray
    note: str = ""
    #: bytes each GPU sends in total (NCCL message size), for algorithm bandwidth
    size_bytes: float = 0.0
    #: DeepEP's "logical" bytes per GPU (EP jobs: every (token, node) pair, own node included), else None
    logical_bytes: np.ndarray | None = None


#: ``mirrors(plane, ref, shift)``: whether a part's flows on ``plane`` are its flows on ``ref`` with every GPU and
#: NIC local index moved by ``shift`` (then the simulator need not build them)
Mirror = Callable[[int, int, int], bool]


@dataclass(frozen=True)
class Traffic:
    """Every job's NVLink flows and a per-plane generator of its network flows. ``mirrors[i]`` (None when part
    ``i`` cannot tell) answers :data:`Mirror` for ``net_parts[i]``."""

    jobs: list[Job]
    nvl: Flows
    net_parts: list[Callable[[int], Flows]] = field(default_factory=list)
    mirrors: list[Mirror | None] = field(default_factory=list)

    def net(self, plane: int) -> Flows:
        return concat([part(plane) for part in self.net_parts])

    def mirrored(self, plane: int, ref: int, shift: int) -> bool:
        """Whether every part's flows on ``plane`` are its ``ref`` flows moved by ``shift`` local indices."""
        return len(self.mirrors) == len(self.net_parts) and all(
            m is not None and m(plane, ref, shift) for m in self.mirrors)


def _owner_arrays(n: int, owner: np.ndarray | int, job: int) -> tuple[np.ndarray, np.ndarray]:
    return np.broadcast_to(np.asarray(owner, dtype=np.int64), (n,)).copy(), np.full(n, job, dtype=np.int64)


def transfers(graph: SimGraph, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray | float, job: int,
              owner: np.ndarray | None = None) -> tuple[Flows, Flows]:
    """(network, NVLink) flows for individual GPU-to-GPU transfers (one flow each, PXN relay across planes)."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    nbytes = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), src.shape)
    owner = src if owner is None else np.asarray(owner, dtype=np.int64)
    g = graph.gpus_per_node
    same_node = src // g == dst // g
    relay = ~same_node & (graph.gpu_plane(src) != graph.gpu_plane(dst))
    via = np.where(relay, (src // g) * g + dst % g, src)
    net = ~same_node
    ones = np.ones(int(net.sum()))
    net_flows = Flows(graph.gpu_nic(via[net]), graph.gpu_nic(dst[net]), ones, nbytes[net].copy(), owner[net],
                      np.full(len(ones), job, dtype=np.int64))
    hop = same_node | relay
    nvl_dst = np.where(same_node, dst, via)
    nvl_flows = Flows(src[hop], nvl_dst[hop], np.ones(int(hop.sum())), nbytes[hop].copy(), owner[hop],
                      np.full(int(hop.sum()), job, dtype=np.int64))
    return net_flows, nvl_flows


def by_plane(graph: SimGraph, flows: Flows) -> Callable[[int], Flows]:
    plane = graph.nic_plane[flows.src % graph.nics_per_node]
    return lambda p: flows.select(plane == p)


def check_gpus(graph: SimGraph, gpus: np.ndarray, what: str) -> np.ndarray:
    gpus = np.asarray(gpus, dtype=np.int64)
    if len(gpus) < 2:
        raise InputError(f"{what}: needs at least 2 GPUs, got {len(gpus)}")
    return gpus


def alltoall(graph: SimGraph, nodes: np.ndarray, size_bytes: float, job: int = 0, name: str = "alltoall") -> Traffic:
    """Uniform all-to-all over every GPU of ``nodes``: each GPU sends ``size_bytes / n`` to each of the n GPUs
    (itself included, as NCCL does; that part stays in the GPU). Cross-plane transfers are relayed through the
    same-index GPU, so the connection NIC(u, j) -> NIC(v, j) carries one transfer of every GPU of node u."""
    nodes = np.asarray(nodes, dtype=np.int64)
    g = graph.gpus_per_node
    gpus = check_gpus(graph, (nodes[:, None] * g + np.arange(g)).ravel(), name)
    n = len(gpus)
    chunk = size_bytes / n
    local_plane = graph.gpu_plane(np.arange(g))
    same = local_plane[:, None] == local_plane[None, :]
    di, dj = np.nonzero(same)
    per_plane = np.bincount(local_plane[di], minlength=graph.num_planes).max(initial=0)
    # both counts before any per-flow array (the NVLink arrays alone are nodes x G x (G - 1) long)
    check_flow_count(len(nodes) * (len(nodes) - 1) * int(per_plane), name)
    check_flow_count(len(nodes) * g * (g - 1), f"{name} (NVLink)")
    relayed_into = (~same).sum(axis=0)  # per destination local index j: sources relayed through GPU j
    # NVLink: i -> j carries the local transfer plus the relayed ones (one per other node) when planes differ
    i_idx, j_idx = np.nonzero(~np.eye(g, dtype=bool))
    members = 1.0 + np.where(same[i_idx, j_idx], 0, len(nodes) - 1)
    nvl_src = (nodes[:, None] * g + i_idx).ravel()
    nvl_dst = (nodes[:, None] * g + j_idx).ravel()
    owner, jobs = _owner_arrays(len(nvl_src), nvl_src, job)
    nvl = Flows(nvl_src, nvl_dst, np.tile(members, len(nodes)), np.full(len(nvl_src), chunk), owner, jobs)
    d_members = 1.0 + np.where(di == dj, relayed_into[dj], 0)
    d_nodewide = (di == dj) & (relayed_into[dj] > 0)
    d_plane = local_plane[di]

    def net(plane: int) -> Flows:
        sel = d_plane == plane
        pi, pj, pm, pw = di[sel], dj[sel], d_members[sel], d_nodewide[sel]
        if not len(pi) or len(nodes) < 2:
            return empty_flows()
        n = len(nodes)
        # int32 ids while they fit: 4.2M flows a plane at 16,384 GPUs (50 MB less held while the plane is solved)
        ids = np.int32 if graph.num_gpus < 1 << 30 else np.int64
        node_ids = nodes.astype(ids)
        # (u, v, k) for v the n - 1 other nodes after u in ring order, k the pairs of this plane: built as
        # [u, v, k] blocks so no flow-long temporary but the results (constant columns are broadcast views)
        v_pos = np.arange(n, dtype=ids)[:, None] + np.arange(1, n, dtype=ids)[None, :]
        v_pos[v_pos >= n] -= n
        src_gpu = (node_ids[:, None, None] * ids(g) + pi.astype(ids)[None, None, :]).repeat(n - 1, axis=1)
        dst_gpu = node_ids[v_pos][:, :, None] * ids(g) + pj.astype(ids)[None, None, :]
        del v_pos
        owner = np.where(pw[None, None, :], -2 - node_ids[:, None, None], src_gpu).ravel()
        src, dst = src_gpu.ravel(), dst_gpu.ravel()
        del src_gpu, dst_gpu
        if graph.nics_per_node != g:  # GPU i uses NIC i when the counts match
            src, dst = graph.gpu_nic(src).astype(ids), graph.gpu_nic(dst).astype(ids)
        count = len(src)
        members = (np.broadcast_to(pm[0], (count,)) if (pm == pm[0]).all()
                   else np.broadcast_to(pm, (n * (n - 1), len(pm))).ravel())
        return Flows(src, dst, members, np.broadcast_to(np.float64(chunk), (count,)), owner,
                     np.broadcast_to(np.int64(job), (count,)))

    def mirrors(plane: int, ref: int, shift: int) -> bool:
        if graph.nics_per_node != g:
            return False
        a, b = d_plane == plane, d_plane == ref
        return (np.array_equal(di[a], di[b] + shift) and np.array_equal(dj[a], dj[b] + shift)
                and np.array_equal(d_members[a], d_members[b]) and np.array_equal(d_nodewide[a], d_nodewide[b]))

    remote = chunk * (n - g)
    return Traffic([Job(name, "alltoall", gpus, np.full(n, remote), size_bytes=size_bytes)], nvl, [net],
                   [mirrors])


def permutation(graph: SimGraph, gpus: np.ndarray, size_bytes: float, seed: int, job: int = 0,
                name: str = "permutation") -> Traffic:
    """Each GPU sends ``size_bytes`` to one other GPU of ``gpus``: a seeded random permutation without fixed
    points (each GPU also receives exactly once)."""
    gpus = check_gpus(graph, gpus, name)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(gpus))
    dst = np.empty(len(gpus), dtype=np.int64)
    dst[order] = gpus[np.roll(order, -1)]  # one random cycle: no GPU sends to itself
    net, nvl = transfers(graph, gpus, dst, size_bytes, job)
    remote = np.where(gpus // graph.gpus_per_node != dst // graph.gpus_per_node, size_bytes, 0.0)
    return Traffic([Job(name, "permutation", gpus, remote, size_bytes=size_bytes)], nvl, [by_plane(graph, net)])


RING_FACTOR = {"allgather": 1.0, "reducescatter": 1.0, "allreduce": 2.0}


def ring_groups(num: int, group_size: int, stride: int) -> np.ndarray:
    """Groups [num / group_size, group_size] of positions 0..num-1: ``group_size`` members ``stride`` apart."""
    if group_size < 2 or stride < 1 or num % (group_size * stride):
        raise InputError(f"{group_size} x {{group_stride}} {stride} must divide the {num} GPUs "
                         "(group size at least 2)", field="group_size", mentions=("group_stride",))
    block = np.arange(num).reshape(num // (group_size * stride), group_size, stride)
    return block.transpose(0, 2, 1).reshape(-1, group_size)


def ring(graph: SimGraph, gpus: np.ndarray, size_bytes: float, collective: str, group_size: int, stride: int,
         job: int = 0, name: str = "") -> Traffic:
    """Ring AllGather / ReduceScatter / AllReduce in every group at once: member i sends to member i+1.

    Over the whole collective each GPU sends ``f (T-1)/T * size_bytes`` to its successor (f = 2 for AllReduce,
    1 otherwise; T = group size); the steps are identical, so the steady rates give the completion time."""
    gpus = check_gpus(graph, gpus, collective)
    groups = gpus[ring_groups(len(gpus), group_size, stride)]
    src = groups.ravel()
    dst = np.roll(groups, -1, axis=1).ravel()
    nbytes = RING_FACTOR[collective] * (group_size - 1) / group_size * size_bytes
    net, nvl = transfers(graph, src, dst, nbytes, job)
    order = np.argsort(src)
    remote = np.where(src // graph.gpus_per_node != dst // graph.gpus_per_node, nbytes, 0.0)[order]
    note = f"{len(groups)} ring(s) of {group_size}, members {stride} GPU(s) apart"
    return Traffic([Job(name or collective, collective, src[order], remote, note, size_bytes)], nvl,
                   [by_plane(graph, net)])


def merge(parts: list[Traffic]) -> Traffic:
    """Several jobs at once (their flows compete for the same links)."""
    return Traffic([j for p in parts for j in p.jobs], concat([p.nvl for p in parts]),
                   [f for p in parts for f in p.net_parts],
                   [m for p in parts for m in (p.mirrors if len(p.mirrors) == len(p.net_parts)
                                               else [None] * len(p.net_parts))])
