"""Pipeline p2p, ZeRO-1 collectives and the optimizer step, in seconds.

- PP send/receive of one chunk boundary: ``latency + T h 2 / (nic x efficiency)`` (BF16 activations or
  gradients; latency from the paper's Table 5: IB 3.7 us across leaves, RoCE 5.6 us).
- ZeRO-1 (ring): gradient reduce-scatter ``(n-1)/n x P x 4 / bw`` in FP32 (gradients are kept in FP32, DeepSeek-V3
  tech report 3.3) and parameter all-gather ``(n-1)/n x P x 2 / bw`` in BF16, over the data-parallel group (dense
  parameters, ``n = dp``) and the expert-data-parallel group (routed experts, ``n = expert_dp``); each GPU's ring
  runs on its own NIC (its plane), at line rate x efficiency. Not overlapped with the pipeline (an upper bound).
- Optimizer: AdamW over this GPU's ZeRO-1 shard from HBM traffic, 22 bytes per parameter (read FP32 master and
  gradient, BF16 moments; write master, moments and the BF16 weight).
"""

from __future__ import annotations

from dataclasses import dataclass

#: bytes of HBM traffic per parameter of an AdamW step (see module docstring)
ADAM_BYTES_PER_PARAM = 22.0
GRADIENT_BYTES = 4.0
PARAMETER_BYTES = 2.0
#: the paper's Table 5, 64-byte transfer across leaves, seconds
IB_LATENCY_S = 3.7e-6
ROCE_LATENCY_S = 5.6e-6


@dataclass(frozen=True)
class OptimizerSeconds:
    """The step's tail after the pipeline: ZeRO-1 reduce-scatter, all-gather and the AdamW update."""

    reduce_scatter_s: float
    all_gather_s: float
    adam_s: float

    @property
    def total_s(self) -> float:
        return self.reduce_scatter_s + self.all_gather_s + self.adam_s


def p2p_seconds(tokens: float, hidden_size: int, bytes_per_s: float, latency_s: float) -> float:
    """One pipeline boundary's activation (or gradient) transfer of ``tokens`` tokens in BF16."""
    return latency_s + tokens * hidden_size * 2.0 / bytes_per_s


def _ring(params: float, bytes_per_param: float, group: int, bytes_per_s: float, latency_s: float) -> float:
    if group <= 1 or params <= 0:
        return 0.0
    return (group - 1) / group * params * bytes_per_param / bytes_per_s + (group - 1) * latency_s


def optimizer_seconds(dense_params: float, expert_params: float, dp: int, expert_dp: int, bytes_per_s: float,
                      hbm_bytes_per_s: float, latency_s: float) -> OptimizerSeconds:
    """ZeRO-1 tail of one GPU holding ``dense_params`` (replicated over ``dp``) and ``expert_params`` (over
    ``expert_dp``)."""
    rs = _ring(dense_params, GRADIENT_BYTES, dp, bytes_per_s, latency_s)
    rs += _ring(expert_params, GRADIENT_BYTES, expert_dp, bytes_per_s, latency_s)
    ag = _ring(dense_params, PARAMETER_BYTES, dp, bytes_per_s, latency_s)
    ag += _ring(expert_params, PARAMETER_BYTES, expert_dp, bytes_per_s, latency_s)
    shard = dense_params / max(dp, 1) + expert_params / max(expert_dp, 1)
    return OptimizerSeconds(rs, ag, shard * ADAM_BYTES_PER_PARAM / hbm_bytes_per_s)
