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

NVLink SHARP (NVLS) all_reduce inside a node beats ``V`` (busbw ~480 GB/s on H100, NVIDIA/nccl-tests#212): a
result above the expectation is never a finding. gather, scatter, alltoallv and hypercube have no model here.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsctl.profiles.schema import NodeProfile

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
    """A planned fabric for the simulator: plan.json text and its name."""

    text: str
    name: str


def simulated_alltoall(fabric: PlanFabric, profile: NodeProfile, num_nodes: int, gpus_per_node: int,
                       size_bytes: int) -> Expectation:
    """alltoall busbw on the plan's first ``num_nodes`` nodes from the flow simulator (its routing, planes, PXN
    and oversubscription): ``algbw x (n-1)/n x nic_efficiency``; the closed form when the plan does not fit."""
    from dsctl.topology.sim.api import SimRequest, Workload, run
    from dsctl.topology.sim.graph import build_graph

    graph = build_graph(fabric.text, fabric.name, profile.nvlink_bytes_per_s / 2)
    n = num_nodes * gpus_per_node
    if graph.gpus_per_node != gpus_per_node or graph.num_nodes < num_nodes:
        closed = busbw_expectation("alltoall", num_nodes, gpus_per_node, n, profile)
        return Expectation(closed.bytes_per_s, f"{closed.formula}; not simulated: {fabric.name} has "
                           f"{graph.num_nodes} nodes of {graph.gpus_per_node} GPUs")
    work = Workload("alltoall", "alltoall", size_bytes=float(size_bytes), nodes=tuple(range(num_nodes)))
    job = run(fabric.text, fabric.name, profile.nvlink_bytes_per_s / 2, SimRequest(work)).jobs[0]
    busbw = job.algbw_bytes_per_s * (n - 1) / n
    return Expectation(busbw * profile.nic_efficiency,
                       f"simulated on {fabric.name} (first {num_nodes} nodes, adaptive routing): "
                       f"{busbw / 1e9:g} GB/s at line rate x {profile.nic_efficiency:g}")
