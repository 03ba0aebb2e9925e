"""Expert-parallel all-to-all time per MoE layer: the interface and a default analytic model.

The step-time model asks an :class:`EpCostModel` for the seconds of one dispatch and one combine of
``tokens_per_gpu`` tokens at given bytes per token. :class:`AnalyticEp` follows DeepEP's normal (training)
kernels: a token goes once over RDMA to each other node that holds one of its experts (to the GPU of the same
local index), then over NVLink to the GPUs there that hold its experts; the two legs are pipelined, so a call
takes the longer of the two. A fabric simulator on the planned rank map can replace it (same call signature).

Rates: RDMA at the NIC line rate x ``nic_efficiency`` (profile field; default 0.88: paper Fig. 7 at EP64 read with
DeepEP's "logical" bandwidth, which counts local-node traffic, implies 87-89% of the 50 GB/s line), NVLink at
``nvlink_achievable_bytes_per_s`` per direction (default 160 GB/s, the ISCA'25 paper's achievable H800 figure).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from dsctl.profiles.schema import ModelProfile, NodeProfile

#: default NIC efficiency (fraction of line rate DeepEP's RDMA path reaches); see the module docstring
DEFAULT_NIC_EFFICIENCY = 0.88
#: default achievable NVLink bandwidth per direction, bytes/s (ISCA'25 paper section 2.3.2: ~160 GB/s on H800)
DEFAULT_NVLINK_ACHIEVABLE_BYTES_PER_S = 160e9
#: FP8 dispatch carries one FP32 scale per 128 channels (1 x 128 tiles) and top-k ids and weights (4 + 4 bytes)
SCALE_BLOCK = 128


@dataclass(frozen=True)
class EpSeconds:
    """Seconds of one all-to-all pair of one MoE layer: ``dispatch_s`` (to the experts), ``combine_s`` (back)."""

    dispatch_s: float
    combine_s: float

    @property
    def total_s(self) -> float:
        return self.dispatch_s + self.combine_s


class EpCostModel(Protocol):
    """Seconds of one dispatch and one combine of ``tokens_per_gpu`` tokens, each carrying the given bytes."""

    def __call__(self, tokens_per_gpu: float, dispatch_bytes_per_token: float,
                 combine_bytes_per_token: float) -> EpSeconds: ...


def dispatch_bytes_fp8(hidden_size: int, top_k: int) -> float:
    """Bytes per token of an FP8 dispatch: hidden values, one FP32 scale per 128, top-k ids and weights."""
    return hidden_size + 4.0 * math.ceil(hidden_size / SCALE_BLOCK) + 8.0 * top_k


def expected_nodes_per_token(model: ModelProfile, ep: int, gpus_per_node: int) -> float:
    """Expected number of distinct nodes of an EP group holding a token's ``top_k`` routed experts.

    Experts are spread evenly over the group's nodes. With node-limited routing aligned to nodes (expert groups
    = nodes, DeepSeek-V3: 8 groups on 8 nodes, at most 4 per token) the token draws ``top_k`` experts among the
    experts of its ``num_limited_groups`` nodes; otherwise among all. Uniform choice ("absolutely balanced").
    """
    moe = model.moe
    if moe is None or ep <= 1:
        return 1.0
    nodes = max(1, ep // gpus_per_node)
    per_node = moe.num_routed_experts / nodes
    k = moe.num_experts_per_token
    reach = nodes
    if moe.num_expert_groups == nodes and moe.num_limited_groups < nodes:
        reach = moe.num_limited_groups
    pool = round(reach * per_node)
    outside = round((reach - 1) * per_node)
    return reach * (1.0 - math.comb(outside, k) / math.comb(pool, k)) if pool >= k else float(reach)


@dataclass(frozen=True)
class AnalyticEp:
    """Default EP model (module docstring). Rates in bytes/s per GPU; ``latency_s`` per call (Table 5)."""

    nodes_per_token: float
    gpus_per_node_used: float
    num_nodes: int
    gpus_per_node: int
    rdma_bytes_per_s: float
    nvlink_bytes_per_s: float
    latency_s: float = 3.7e-6
    imbalance: float = 1.0

    def __call__(self, tokens_per_gpu: float, dispatch_bytes_per_token: float,
                 combine_bytes_per_token: float) -> EpSeconds:
        return EpSeconds(self._one_way(tokens_per_gpu, dispatch_bytes_per_token),
                         self._one_way(tokens_per_gpu, combine_bytes_per_token))

    def _one_way(self, tokens: float, bytes_per_token: float) -> float:
        remote_nodes = self.nodes_per_token * (self.num_nodes - 1) / self.num_nodes
        rdma = tokens * remote_nodes * bytes_per_token / self.rdma_bytes_per_s if self.num_nodes > 1 else 0.0
        other_gpus = self.gpus_per_node_used * (1.0 - 1.0 / self.gpus_per_node)
        nvlink = tokens * self.nodes_per_token * other_gpus * bytes_per_token / self.nvlink_bytes_per_s
        return self.latency_s + self.imbalance * max(rdma, nvlink)


def analytic_ep(model: ModelProfile, node: NodeProfile, ep: int, imbalance: float = 1.0) -> AnalyticEp:
    """:class:`AnalyticEp` for EP degree ``ep`` on ``node`` (NIC and NVLink efficiency read from the profile)."""
    gpus = node.num_gpus
    nodes = max(1, ep // gpus) if ep > gpus else 1
    in_node = min(ep, gpus)
    per_token = expected_nodes_per_token(model, ep, gpus) if nodes > 1 else 1.0
    k = model.moe.num_experts_per_token if model.moe else 1
    experts_here = k / per_token
    used = in_node * (1.0 - (1.0 - 1.0 / in_node) ** experts_here) if in_node > 1 else 1.0
    nic_efficiency = float(getattr(node, "nic_efficiency", DEFAULT_NIC_EFFICIENCY))
    nvlink = float(getattr(node, "nvlink_achievable_bytes_per_s", DEFAULT_NVLINK_ACHIEVABLE_BYTES_PER_S))
    nics_per_gpu = node.num_compute_nics / gpus if gpus else 1.0
    rdma = node.compute_nic_gbps * 1e9 / 8 * nic_efficiency * max(nics_per_gpu, 1e-9)
    latency = 3.7e-6 if node.compute_link_layer == "infiniband" else 5.6e-6
    return AnalyticEp(per_token, used, nodes, in_node, rdma, nvlink, latency, imbalance)
