"""DeepEP traffic of one MoE layer (normal kernels): dispatch and combine, in expected values.

Per token: top-k routed experts on at most M nodes (node-limited routing). Dispatch sends a token once per
target node over RDMA, from GPU a to the GPU with a's local index on that node (same plane), which forwards
it over NVLink to every GPU of its node hosting a chosen expert; tokens for a's own node only use NVLink.
Combine is the reverse path with BF16 payloads.

Expected values, from each EP GPU's share ``q_g`` of the routed load (uniform, or EPLB statistics and a
placement): node shares ``w_v = sum q_g``; distinct nodes per token ``D = min(M, n (1 - (1 - 1/n)^k))``;
node v is chosen with probability ``p_v = min(1, c w_v)`` (c such that ``sum p_v = D``); given v,
GPU g of v receives the token with probability ``1 - (1 - q_g / w_v)^(k / D)``.

Bytes per token (DeepEP normal kernels, hidden H, top-k k): dispatch FP8 ``H + 4 H/128`` scales
+ 8 source + 4k indices + 4k weights; combine BF16 ``2H`` + 8 + 4k; both padded to 16 bytes
(7,472 and 14,384 B for DeepSeek-V3).

Calibration: network flows carry ``payload / nic_efficiency`` bytes on the wire (the NIC's achieved share of its
line rate), NVLink flows ``payload / DEEPEP_NVLINK_FRACTION`` (DeepEP's copies reach that share of the
achievable NVLink rate the graph holds). DeepEP's "logical" bandwidth counts every (token, node) pair, the
sender's own node included, at ``H (1 + 4/128)`` bytes (dispatch) or ``2H`` (combine), over the same time.
"""

from __future__ import annotations

import math

import numpy as np

from dsctl.errors import InputError
from dsctl.topology.sim.graph import SimGraph
from dsctl.topology.sim.traffic import Flows, Job, Traffic, empty_flows

DIRECTIONS = ("ep-dispatch", "ep-combine")
#: Share of the achievable NVLink rate DeepEP's SM-driven NVLink copies reach. DeepEP V1 intranode EP8 on H800
#: (docs/legacy.md: 153 GB/s dispatch, 158 GB/s combine, logical = bytes a rank receives including the 1/8 it
#: sends itself) moves 7/8 of that over NVLink: 133.9 and 138.3 GB/s of the ~160 GB/s achievable (paper §4.3).
#: The internode kernels forward over NVLink with the same warps, so their NVLink flows run at this share.
DEEPEP_NVLINK_FRACTION = {"ep-dispatch": 153 * 7 / 8 / 160, "ep-combine": 158 * 7 / 8 / 160}


def _pad16(n: float) -> int:
    return int(math.ceil(n / 16) * 16)


def token_bytes(hidden: int, topk: int, direction: str) -> int:
    """Bytes one token puts on the wire per target (see module docstring)."""
    if direction == "ep-dispatch":
        return _pad16(hidden + 4 * math.ceil(hidden / 128) + 8 + 8 * topk)
    return _pad16(2 * hidden + 8 + 4 * topk)


def logical_token_bytes(hidden: int, direction: str) -> float:
    """Bytes DeepEP's tests count per (token, node) pair: ``H (1 + 4/128)`` FP8 + scales, or ``2H`` BF16."""
    return hidden * (1 + 4 / 128) if direction == "ep-dispatch" else 2.0 * hidden


def node_probabilities(node_share: np.ndarray, topk: int, limit_nodes: int) -> np.ndarray:
    """``p_v`` float [n]: chance that a token goes to node v (sum = expected distinct nodes D)."""
    n = len(node_share)
    distinct = min(float(limit_nodes), n * (1 - (1 - 1 / n) ** topk))
    share = node_share / node_share.sum()
    p = np.zeros(n)
    free = np.ones(n, dtype=bool)
    left = distinct
    for _ in range(n):  # water-filling: nodes capped at 1, the rest scaled to make up D
        scale = left / share[free].sum() if share[free].sum() > 0 else 0.0
        p[free] = share[free] * scale
        over = free & (p > 1)
        if not over.any():
            break
        p[over] = 1.0
        free &= ~over
        left = distinct - (~free).sum()
    return p


def routing_odds(share_by_node: np.ndarray, topk: int, limit_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(p, hit)`` for GPU shares float [n nodes, g GPUs]: ``p`` [n] chance a token goes to node v (sum = expected
    distinct nodes D), ``hit`` [n, g] chance GPU g of a chosen node receives it, ``1 - (1 - q_g / w_v)^(k / D)``."""
    w = share_by_node.sum(axis=1)
    p = node_probabilities(w, topk, limit_nodes)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(w[:, None] > 0, share_by_node / w[:, None], 0.0)
    return p, 1 - (1 - q) ** (topk / p.sum())


def ep_traffic(graph: SimGraph, nodes: np.ndarray, gpu_share: np.ndarray, tokens_per_gpu: int, hidden: int,
               topk: int, limit_nodes: int, direction: str, job: int = 0, name: str = "",
               nic_efficiency: float = 1.0) -> Traffic:
    """Flows of one MoE layer's dispatch or combine over the GPUs of ``nodes`` (EP = all of them).

    ``gpu_share`` float [EP GPUs]: each GPU's share of the routed load (any positive scale). ``nic_efficiency``
    (0, 1]: network flows carry payload / efficiency on the wire. The job's ``logical_bytes`` are DeepEP's.
    """
    if direction not in DIRECTIONS:
        raise InputError(f"{direction!r}: use ep-dispatch or ep-combine", field="workload")
    nodes = np.asarray(nodes, dtype=np.int64)
    g = graph.gpus_per_node
    n = len(nodes)
    gpus = (nodes[:, None] * g + np.arange(g)).ravel()
    share = np.asarray(gpu_share, dtype=np.float64)
    if share.shape != (len(gpus),) or not np.all(np.isfinite(share)) or (share < 0).any() or share.sum() <= 0:
        raise InputError(f"expert load: need {len(gpus)} non-negative GPU shares (one per EP GPU), "
                         f"got {share.shape[0] if share.ndim else 0}")
    if tokens_per_gpu < 1 or topk < 1 or limit_nodes < 1 or hidden < 1:
        raise InputError(", top-k, node limit and hidden size must be at least 1", field="tokens_per_gpu")
    if not 0 < nic_efficiency <= 1:
        raise InputError(f"NIC efficiency must be in (0, 1], got {nic_efficiency}")
    per_token = token_bytes(hidden, topk, direction)
    p, hit = routing_odds(share.reshape(n, g), topk, limit_nodes)
    distinct = p.sum()
    tok = float(tokens_per_gpu)
    # RDMA: source (u, i) -> (v, i), v != u, carrying the tokens of (u, i) for node v: the same bytes whatever i,
    # so each plane's flows are built when that plane is solved (one plane at a time, never all 8 at once)
    u_idx = np.repeat(np.arange(n, dtype=np.int32), n - 1)  # every ordered pair u != v, in (u, v) order
    v_idx = np.tile(np.arange(n - 1, dtype=np.int32), n)
    v_idx += v_idx >= u_idx
    pair_bytes = tok * p[v_idx] * per_token
    sent = pair_bytes > 0
    if not sent.all():
        u_idx, v_idx, pair_bytes = u_idx[sent], v_idx[sent], pair_bytes[sent]
    del sent
    local_plane = graph.gpu_plane(np.arange(g))

    def net(plane: int) -> Flows:
        """The plane's RDMA flows, in (u, v) pair order and local index within a pair."""
        on = np.flatnonzero(local_plane == plane)
        if not len(on) or not len(u_idx):
            return empty_flows()
        src = (nodes[u_idx][:, None] * g + on[None, :]).ravel()
        dst = (nodes[v_idx][:, None] * g + on[None, :]).ravel()
        if direction == "ep-combine":  # reverse every path; the flow still counts for the token's GPU
            src, dst = dst, src
        owner = dst if direction == "ep-combine" else src
        count = len(src)
        return Flows(graph.gpu_nic(src), graph.gpu_nic(dst), np.broadcast_to(np.float64(1.0), (count,)),
                     np.repeat(pair_bytes / nic_efficiency, len(on)), owner,
                     np.broadcast_to(np.int64(job), (count,)))

    def mirrors(plane: int, ref: int, shift: int) -> bool:
        """The flows of ``plane`` are ``ref``'s moved ``shift`` local indices (bytes do not depend on the index)."""
        return graph.nics_per_node == g and np.array_equal(np.flatnonzero(local_plane == plane),
                                                           np.flatnonzero(local_plane == ref) + shift)

    # NVLink: forwarder (v, i) -> (v, k) for the tokens of all n nodes (its own node's via a local copy into its
    # RDMA buffer, as DeepEP does): one flow per GPU pair, owned by the forwarder (its kernel ends after forwarding)
    fi, fk = np.nonzero(~np.eye(g, dtype=bool))
    f_src = (nodes[:, None] * g + fi).ravel()
    f_dst = (nodes[:, None] * g + fk).ravel()
    fwd_bytes = (n * tok * p[:, None] * hit[:, fk] * per_token).ravel()
    if direction == "ep-combine":
        f_src, f_dst = f_dst, f_src
    fwd_owner = f_dst if direction == "ep-combine" else f_src
    live = fwd_bytes > 0
    nvl = Flows(f_src[live], f_dst[live], np.ones(int(live.sum())),
                fwd_bytes[live] / DEEPEP_NVLINK_FRACTION[direction], fwd_owner[live].astype(np.int64),
                np.full(int(live.sum()), job, dtype=np.int64))
    # bytes each GPU (u, i) sends to other nodes: its tokens for every other node of the group
    remote = np.repeat(tok * per_token * (p.sum() - p), g).astype(np.float64)
    note = (f"{tokens_per_gpu:,} tokens/GPU, top-{topk}, <= {limit_nodes} nodes/token "
            f"({distinct:.2f} expected), {per_token:,} B/token; DeepEP logical bytes = (token, node) pairs, the "
            f"sender's node included, x {logical_token_bytes(hidden, direction):,.0f} B")
    logical = np.full(len(gpus), tok * distinct * logical_token_bytes(hidden, direction))
    return Traffic([Job(name or direction, direction, gpus, remote, note, logical_bytes=logical)], nvl, [net],
                   [mirrors])
