"""What a measured path should deliver, from the node profile (docs/health.md, "Bandwidth reports").

perftest (one NIC port, one direction): ``line rate x nic_efficiency`` (x2 bidirectional, x2 dual-port).

nccl-tests bus bandwidth (nccl-tests doc/PERFORMANCE.md: busbw is the per-rank link bandwidth a ring-style
implementation needs), with N nodes of G GPUs, n = N G ranks, M compute NICs per node of B bytes/s each, e the
profile's ``nic_efficiency`` and V the achievable NVLink bytes/s per direction per GPU:

- one node: ``V`` (every collective moves each rank's data over its NVLinks);
- all_reduce, all_gather, reduce_scatter, broadcast, reduce on N > 1 nodes: NCCL runs one ring (channel set) per
  NIC, each crossing every node once through its own NIC, so busbw <= ``M' B e`` with M' the NICs of the G GPUs
  used (M G / GPUs of the profile); every GPU also forwards (G-1)/G of its ring traffic over NVLink:
  busbw <= ``V G / (G-1)``. Expected = the smaller.
- alltoall on N > 1 nodes: each GPU sends (n-G)/n of its buffer through its own NIC, busbw = (n-1)/n size / t, so
  busbw <= ``B_gpu e (n-1) / (n-G)`` (B_gpu = the NIC bandwidth per GPU); the maintainers' rule "N/(N-1) x the
  network bandwidth per GPU" (NVIDIA/nccl-tests#130) is the same for G -> infinity.
- sendrecv on N > 1 nodes: rank i sends to i+1; the pairs that cross nodes use one GPU's NIC: ``B_gpu e``.

With a plan (``--plan``, and always in ``health burn-in --from-perf``) the three multi-node models are simulated on
it instead (:func:`simulated_busbw`: the same traffic on the plan's routing, planes and oversubscription, on the
file's hosts when they are plan nodes).

NVLink SHARP (NVLS) all_reduce inside a node beats ``V`` (busbw ~480 GB/s on H100, NVIDIA/nccl-tests#212): a
result above the expectation is never a finding. gather, scatter, alltoallv and hypercube have no model here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from dsctl.profiles.schema import NodeProfile

if TYPE_CHECKING:
    from dsctl.topology.sim.graph import SimGraph
    from dsctl.topology.sim.routing import NextHops

RING_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")


@dataclass(frozen=True)
class Expectation:
    """Bytes/s the path should carry (0 = no model) and the formula with its numbers, for people."""

    bytes_per_s: float
    formula: str


def nic_bytes_per_s(profile: NodeProfile, storage: bool = False) -> float:
    """One NIC's line rate in bytes/s (compute NIC, or the storage NIC)."""
    return (profile.storage_nic_gbps if storage else profile.compute_nic_gbps) * 1e9 / 8


def perftest_expectation(profile: NodeProfile, bidirectional: bool, dual_port: bool,
                         storage: bool = False) -> Expectation:
    """perftest on one NIC: line rate x efficiency, x2 for each of bidirectional and dual-port."""
    factor = (2 if bidirectional else 1) * (2 if dual_port else 1)
    rate_gbps = profile.storage_nic_gbps if storage else profile.compute_nic_gbps
    line = nic_bytes_per_s(profile, storage)
    extra = (" x 2 directions" if bidirectional else "") + (" x 2 ports" if dual_port else "")
    return Expectation(line * profile.nic_efficiency * factor,
                       f"{rate_gbps:g} Gb/s line rate x {profile.nic_efficiency:g} efficiency{extra}")


def busbw_expectation(collective: str, num_nodes: int, gpus_per_node: int, num_ranks: int,
                      profile: NodeProfile) -> Expectation:
    """Expected nccl-tests busbw (bytes/s) of ``collective`` on ``num_nodes`` nodes of ``gpus_per_node`` GPUs."""
    nvlink = profile.nvlink_achievable_bytes_per_s
    nic = nic_bytes_per_s(profile) * profile.nic_efficiency
    nics_per_gpu = profile.num_compute_nics / max(profile.num_gpus, 1)
    g = gpus_per_node
    if num_nodes < 1 or g < 1 or num_ranks < 2:
        return Expectation(0.0, "one rank: nothing crosses a link")
    known = (*RING_COLLECTIVES, "alltoall", "sendrecv")
    if collective not in known:
        return Expectation(0.0, f"no model for {collective or 'an unnamed test'} (known: {', '.join(known)})")
    if num_nodes == 1:
        return Expectation(nvlink, f"one node: NVLink {nvlink / 1e9:g} GB/s per direction per GPU")
    if collective in RING_COLLECTIVES:
        nics = max(nics_per_gpu * g, 1.0)
        by_nic = nics * nic
        text = f"{nics:g} NICs x {nic / 1e9:g} GB/s ({profile.compute_nic_gbps:g} Gb/s x {profile.nic_efficiency:g})"
        if g == 1:
            return Expectation(by_nic, text)
        by_nvlink = nvlink * g / (g - 1)
        if by_nvlink < by_nic:
            return Expectation(by_nvlink, f"NVLink {nvlink / 1e9:g} GB/s x {g}/{g - 1} (below {text})")
        return Expectation(by_nic, text)
    per_gpu = nic * nics_per_gpu
    if collective == "sendrecv":
        return Expectation(per_gpu, f"one GPU's NIC share: {per_gpu / 1e9:g} GB/s")
    n = num_ranks
    return Expectation(per_gpu * (n - 1) / (n - g),
                       f"{per_gpu / 1e9:g} GB/s per GPU x ({n}-1)/({n}-{g}) (the share that crosses the network)")


@dataclass(frozen=True)
class PlanFabric:
    """A planned fabric for the simulator: plan.json text and its name; the simulator's graph is built once per
    NVLink rate and kept."""

    text: str
    name: str
    graphs: dict[float, SimGraph] = field(default_factory=dict, compare=False, repr=False)
    tables: dict[float, NextHops] = field(default_factory=dict, compare=False, repr=False)

    def graph(self, nvlink_bytes_per_s: float) -> SimGraph:
        if nvlink_bytes_per_s not in self.graphs:
            from dsctl.topology.sim.graph import build_graph

            self.graphs[nvlink_bytes_per_s] = build_graph(self.text, self.name, nvlink_bytes_per_s)
        return self.graphs[nvlink_bytes_per_s]

    def hops(self, nvlink_bytes_per_s: float) -> NextHops:
        """The next-hop table of the healthy fabric on every plane (built once; each report's run reuses it)."""
        if nvlink_bytes_per_s not in self.tables:
            from dsctl.topology.sim.routing import next_hops

            graph = self.graph(nvlink_bytes_per_s)
            self.tables[nvlink_bytes_per_s] = next_hops(graph, np.zeros(graph.num_links, dtype=bool))
        return self.tables[nvlink_bytes_per_s]


SIMULATED = (*RING_COLLECTIVES, "alltoall", "sendrecv")


def _placement(graph: SimGraph, num_nodes: int, hosts: tuple[str, ...]) -> tuple[np.ndarray, str]:
    """The plan nodes a job ran on: its hosts when every one is a plan node (host order), else the first N."""
    index = {name: i for i, name in reversed(list(enumerate(graph.device_names[:graph.num_nodes])))}
    found = [index.get(h, index.get(h.split(".", 1)[0], -1)) for h in hosts]
    if len(found) == num_nodes and min(found, default=-1) >= 0 and len(set(found)) == num_nodes:
        return np.array(found, dtype=np.int64), "the file's hosts"
    return np.arange(num_nodes, dtype=np.int64), f"the plan's first {num_nodes} nodes"


def simulated_busbw(fabric: PlanFabric, profile: NodeProfile, collective: str, num_nodes: int, gpus_per_node: int,
                    size_bytes: int, hosts: tuple[str, ...] = ()) -> Expectation:
    """nccl-tests busbw of ``collective`` on ``num_nodes`` nodes from the flow simulator on the plan (its routing,
    planes, PXN, oversubscription), on the file's ``hosts`` when they are plan nodes (else the plan's first
    ``num_nodes``); the closed form of :func:`busbw_expectation` for one node, a test with no model, or a plan the
    job does not fit. With S = the size, t = the simulated completion, e = ``nic_efficiency``, G GPUs per node,
    n = N G ranks:

    - ring collectives: NCCL's rings cross the nodes rail by rail (ring k leaves every node through GPU k's NIC),
      simulated as G rings of the N same-index GPUs in host order all-reducing S: one link's rate is
      ``r = 2 (N-1)/N S / t`` and ``busbw = min(G r e, V G/(G-1))`` (the NVLink term as in the closed form);
    - alltoall: every GPU sends S/n to each rank: ``busbw = S/t (n-1)/n e``;
    - sendrecv: rank i sends S to rank i+1 (ranks node by node in host order): ``busbw = S/t e``.
    """
    n = num_nodes * gpus_per_node
    closed = busbw_expectation(collective, num_nodes, gpus_per_node, n, profile)
    if collective not in SIMULATED or num_nodes < 2 or closed.bytes_per_s <= 0:
        return closed
    graph = fabric.graph(profile.nvlink_bytes_per_s / 2)
    if graph.gpus_per_node != gpus_per_node or graph.num_nodes < num_nodes:
        return Expectation(closed.bytes_per_s, f"{closed.formula}; not simulated: {fabric.name} has "
                           f"{graph.num_nodes} nodes of {graph.gpus_per_node} GPUs")
    from dsctl.topology.sim.solve import simulate
    from dsctl.topology.sim.traffic import Job, Traffic, alltoall, by_plane, ring, transfers

    nodes, where = _placement(graph, num_nodes, hosts)
    g, e = gpus_per_node, profile.nic_efficiency
    gpus = (nodes[:, None] * g + np.arange(g)).ravel()
    if collective == "alltoall":
        traffic = alltoall(graph, nodes, float(size_bytes))
    elif collective == "sendrecv":
        src, dst = gpus, np.roll(gpus, -1)
        net, nvl = transfers(graph, src, dst, float(size_bytes), 0)
        traffic = Traffic([Job("sendrecv", "sendrecv", gpus, np.full(n, float(size_bytes)))], nvl,
                          [by_plane(graph, net)])
    else:
        traffic = ring(graph, gpus, float(size_bytes), "allreduce", num_nodes, g)
    result = simulate(graph, traffic, "adaptive", 0, np.zeros(graph.num_links, dtype=bool), [], fabric.name,
                      hops=fabric.hops(profile.nvlink_bytes_per_s / 2))
    t = result.jobs[0].completion_s
    if not t > 0 or not np.isfinite(t):
        return Expectation(closed.bytes_per_s, f"{closed.formula}; not simulated: no route on {fabric.name}")
    text = f"simulated on {fabric.name} ({where}, adaptive routing)"
    if collective == "alltoall":
        busbw = size_bytes / t * (n - 1) / n
        return Expectation(busbw * e, f"{text}: {busbw / 1e9:g} GB/s at line rate x {e:g}")
    if collective == "sendrecv":
        busbw = size_bytes / t
        return Expectation(busbw * e, f"{text}: {busbw / 1e9:g} GB/s at line rate x {e:g}")
    per_link = 2 * (num_nodes - 1) / num_nodes * size_bytes / t
    by_net = g * per_link * e
    formula = f"{text}: {g} rails x {per_link / 1e9:g} GB/s x {e:g}"
    if g > 1:
        by_nvlink = profile.nvlink_achievable_bytes_per_s * g / (g - 1)
        if by_nvlink < by_net:
            return Expectation(by_nvlink, f"NVLink {profile.nvlink_achievable_bytes_per_s / 1e9:g} GB/s x "
                               f"{g}/{g - 1} (below {formula})")
    return Expectation(by_net, formula)
