"""Seconds of one MoE layer's expert-parallel exchange (DeepEP normal kernels), for the step-time model.

One EP group of ``ep_size`` GPUs on ``n = ep_size / G`` whole nodes (G GPUs each), uniform expert load,
``T`` tokens per GPU, top-k routing on at most M nodes per token (``D`` expected distinct nodes, ``p_v = D / n``,
``h`` the chance a GPU of a chosen node receives the token: see ``ep.routing_odds``). Per GPU and direction:

- RDMA: ``T * D * (1 - 1/n) * B`` bytes leave (and enter) each NIC, at ``line rate * nic_efficiency``;
- NVLink: the forwarder pushes each of the ``T * D`` tokens that reach its node (from all n nodes, its own
  included) to the ``(G - 1) * h`` other GPUs expected to hold a chosen expert: ``T * D * (G - 1) * h * B``
  bytes per direction, at ``nvlink_achievable * DEEPEP_NVLINK_FRACTION``;
- both pipelines stream at once, so ``t = max(t_rdma, t_nvlink)`` (the busier one is the ``bound``).

B = DeepEP's wire bytes per token (7,472 dispatch, 14,384 combine for V3). DeepEP's "logical" bandwidth is
``T * D * L / t`` with L = ``H (1 + 4/128)`` (dispatch) or ``2H`` (combine): the sender's own node counts.
With a plan, the same traffic runs through the max-min fabric simulator on every EP group of the plan at once
(``routing`` as ``topology simulate``) and ``t`` is the job's completion. Results are cached per arguments
(node profile, EP shape, model shape, routing, plan text): a step-time search reuses them.

``bytes_per_token`` = (dispatch, combine) replaces B for a payload other than DeepEP's forward one (the step-time
model's backward all-to-alls carry BF16 gradients both ways). Every flow's bytes scale by the same factor, so the
closed form and the max-min completion both scale linearly: the cached exchange at DeepEP's bytes is reused and
its seconds multiplied by ``bytes / B``; the bandwidths do not change. An EP group inside one node (``ep_size``
below G, as DeepEP allows) is NVLink only and uses the closed form with ``G = ep_size``, plan or not.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from dataclasses import dataclass

import numpy as np

from dsctl.errors import InputError, one_of
from dsctl.profiles.schema import NodeProfile
from dsctl.topology.sim.api import EpModel, SimRequest, Workload, run
from dsctl.topology.sim.ep import DEEPEP_NVLINK_FRACTION, DIRECTIONS, logical_token_bytes, routing_odds, token_bytes
from dsctl.topology.sim.routing import ROUTINGS

#: most EP GPUs the closed form accepts (a 16,384-GPU fabric); bounds the work before it starts
MAX_EP_GPUS = 16_384
#: most tokens per GPU (a 128K-token sequence per GPU)
MAX_TOKENS_PER_GPU = 1 << 17


@dataclass(frozen=True)
class EpExchange:
    """One MoE layer's dispatch and combine on one EP group: seconds, and per-GPU bandwidths in bytes/s.

    ``*_physical_bytes_per_s``: bytes a GPU sends to other nodes / time (what its NIC carries).
    ``*_logical_bytes_per_s``: DeepEP's figure, every (token, node) pair including the sender's own node, at
    ``H (1 + 4/128)`` B (dispatch) or ``2H`` B (combine) per pair, / time. ``*_bound``: ``rdma`` or ``nvlink``
    (closed form), ``fabric`` (simulated on a plan). ``nodes_per_token``: expected distinct nodes D.
    """

    ep_size: int
    num_nodes: int
    tokens_per_gpu: int
    nodes_per_token: float
    dispatch_s: float
    combine_s: float
    dispatch_logical_bytes_per_s: float
    combine_logical_bytes_per_s: float
    dispatch_physical_bytes_per_s: float
    combine_physical_bytes_per_s: float
    dispatch_bound: str
    combine_bound: str


def ep_exchange_seconds(node: NodeProfile, ep_size: int, tokens_per_gpu: int, hidden: int, topk: int,
                        max_nodes_per_token: int, routing: str = "adaptive", plan: str | None = None,
                        bytes_per_token: tuple[float, float] | None = None) -> EpExchange:
    """Dispatch and combine seconds of one MoE layer for an EP group of ``ep_size`` GPUs (whole nodes of
    ``node``), ``tokens_per_gpu`` tokens of ``hidden`` values per GPU, top-``topk`` routing on at most
    ``max_nodes_per_token`` nodes. ``plan``: a plan.json text (``dsctl topology plan --out-dir``) to simulate every
    EP group of it at once under ``routing`` (static, ecmp, adaptive); None = the closed form on a non-blocking
    fabric (``routing`` then plays no part). Seconds per MoE layer and direction, bytes/s per GPU. Cached: the
    same arguments return the same object without recomputing (the plan form keeps the 16 latest plans).
    ``bytes_per_token``: (dispatch, combine) bytes each token carries per target instead of DeepEP's forward wire
    bytes (module docstring). InputError on a shape that does not fit (EP size neither whole nodes nor inside one
    node, or not dividing the plan's GPUs) or non-positive bytes."""
    g = node.num_gpus
    ep_size, tokens_per_gpu, hidden, topk, max_nodes_per_token = (
        _whole(value, what, top) for value, what, top in (
            (ep_size, "EP size", MAX_EP_GPUS), (tokens_per_gpu, "tokens per GPU", MAX_TOKENS_PER_GPU),
            (hidden, "hidden size", 1 << 20), (topk, "top-k", 1024),
            (max_nodes_per_token, "nodes per token", MAX_EP_GPUS)))
    if ep_size % g and ep_size > g:
        raise InputError(f"EP size {ep_size} must be a multiple of the {g} GPUs per {node.name} node "
                         f"(or fewer than {g}, inside one node)")
    if ep_size > g and not node.num_compute_nics:
        raise InputError(f"EP size {ep_size} spans nodes, but node profile {node.name} has no compute NICs")
    if routing not in ROUTINGS:
        raise InputError(f"routing {routing!r} is not valid; use {one_of(ROUTINGS)}")
    exchange = _exchange(node, ep_size, tokens_per_gpu, hidden, topk, max_nodes_per_token, routing,
                         plan if ep_size >= g else None)
    if bytes_per_token is None:
        return exchange
    scale = [_payload(value) / token_bytes(hidden, topk, d) for value, d in zip(bytes_per_token, DIRECTIONS,
                                                                                strict=True)]
    return dataclasses.replace(exchange, dispatch_s=exchange.dispatch_s * scale[0],
                               combine_s=exchange.combine_s * scale[1])


def _payload(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise InputError(f"bytes per token must be a positive finite number, got {value!r}")
    return float(value)


def _whole(value: object, what: str, top: int) -> int:
    """``value`` as an int in 1..top (numpy integers too, so a cache key is the same for 64 and np.int64(64))."""
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        number = None
    if isinstance(value, bool) or number is None or not 1 <= number <= top:
        raise InputError(f"{what} must be a whole number from 1 to {top:,}, got {value!r}")
    return int(number)


def clear_cache() -> None:
    """Forget every cached result (benchmarks time the cold path with it)."""
    _on_profile.cache_clear()
    _on_plan.cache_clear()


def _exchange(node: NodeProfile, ep_size: int, tokens: int, hidden: int, topk: int, limit: int, routing: str,
              plan: str | None) -> EpExchange:
    if plan is None:
        return _on_profile(node, ep_size, tokens, hidden, topk, limit)
    return _on_plan(node, ep_size, tokens, hidden, topk, limit, routing, plan)


@functools.lru_cache(maxsize=4096)  # a few hundred bytes each
def _on_profile(node: NodeProfile, ep_size: int, tokens: int, hidden: int, topk: int, limit: int) -> EpExchange:
    n = max(1, ep_size // node.num_gpus)
    return _result(ep_size, n, tokens, hidden, topk, limit,
                   [_closed_form(node, min(ep_size, node.num_gpus), n, tokens, hidden, topk, limit, d)
                    for d in DIRECTIONS])


@functools.lru_cache(maxsize=16)  # keyed by the plan text (megabytes at 16,384 GPUs): few plans are kept
def _on_plan(node: NodeProfile, ep_size: int, tokens: int, hidden: int, topk: int, limit: int, routing: str,
             plan: str) -> EpExchange:
    return _result(ep_size, ep_size // node.num_gpus, tokens, hidden, topk, limit,
                   [_simulated(node, ep_size, tokens, hidden, topk, limit, routing, plan, d) for d in DIRECTIONS])


def _result(ep_size: int, n: int, tokens: int, hidden: int, topk: int, limit: int,
            sides: list[tuple[float, float, str]]) -> EpExchange:
    p, _ = routing_odds(np.ones((n, 1)), topk, limit)
    distinct = float(p.sum())
    rates = [(tokens * distinct * logical_token_bytes(hidden, d) / t if t > 0 else 0.0) for d, (t, _, _) in
             zip(DIRECTIONS, sides, strict=True)]
    (t_d, phys_d, bound_d), (t_c, phys_c, bound_c) = sides
    return EpExchange(ep_size, n, tokens, distinct, t_d, t_c, rates[0], rates[1], phys_d, phys_c, bound_d, bound_c)


def _closed_form(node: NodeProfile, g: int, n: int, tokens: int, hidden: int, topk: int, limit: int,
                 direction: str) -> tuple[float, float, str]:
    """(seconds, physical bytes/s per GPU, bound) from the per-GPU link bytes (uniform load, every GPU alike); an
    EP group of one node uses ``n`` = 1 and ``g`` GPUs (fewer than the node's when the group holds fewer)."""
    p, hit = routing_odds(np.ones((n, g)), topk, limit)
    per_token = token_bytes(hidden, topk, direction)
    rdma = tokens * per_token * float(p.sum() - p[0])  # GPU (0, i) to the other nodes; as much comes in
    nvlink = n * tokens * float(p[0]) * per_token * float(hit[0].sum() - hit[0, 0])  # forwarder (0, 0)
    nic_rate = node.compute_nic_gbps * 1e9 / 8 * node.num_compute_nics / node.num_gpus * node.nic_efficiency
    nvl_rate = node.nvlink_achievable_bytes_per_s * DEEPEP_NVLINK_FRACTION[direction]
    t_rdma = rdma / nic_rate if rdma > 0 else 0.0  # one node: no RDMA (and maybe no NIC)
    t_nvl = nvlink / nvl_rate
    seconds = max(t_rdma, t_nvl)
    return seconds, (rdma / seconds if seconds > 0 else 0.0), ("rdma" if t_rdma >= t_nvl else "nvlink")


def _simulated(node: NodeProfile, ep_size: int, tokens: int, hidden: int, topk: int, limit: int, routing: str,
               plan: str, direction: str) -> tuple[float, float, str]:
    work = Workload("ep", direction, tokens_per_gpu=tokens, ep_gpus=ep_size)
    request = SimRequest(work, routing, model=EpModel(hidden, topk, limit), nic_efficiency=node.nic_efficiency)
    job = run(plan, "plan", node.nvlink_achievable_bytes_per_s, request).jobs[0]
    return job.completion_s, job.gpu_bytes_per_s.median, "fabric"
