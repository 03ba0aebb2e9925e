"""Pipeline p2p, ZeRO-1/2 collectives and the optimizer step, in seconds.

- PP send/receive of one chunk boundary: ``latency + T h 2 / (nic x efficiency)`` (BF16 activations or
  gradients; latency from the paper's Table 5: IB 3.7 us across leaves, RoCE 5.6 us).
- ZeRO-1 (ring): gradient reduce-scatter ``(n-1)/n x P x 4 / bw`` in FP32 (gradients are kept in FP32, DeepSeek-V3
  tech report 3.3) and parameter all-gather ``(n-1)/n x P x 2 / bw`` in BF16, over the data-parallel group (dense
  parameters, ``n = dp``) and the expert-data-parallel group (routed experts, ``n = expert_dp``); each GPU's ring
  runs on its own NIC (its plane), at line rate x efficiency.
- Overlap (:func:`exposed_tail`): a stage's gradient reduce-scatter starts when the rank has run that stage's last
  weight-gradient work, while the pipeline goes on (Megatron-LM's ``--overlap-grad-reduce``); the all-gather of a
  stage's updated parameters only has to finish before the next step's first forward of that stage (Megatron-LM's
  ``--overlap-param-gather``). What runs past the pipeline, plus AdamW, is the step's optimizer tail.
- ZeRO-2 (gradients sharded too): a pipeline accumulates gradients over the step's micro-batches, so a sharded
  gradient means one reduce-scatter of the stage's gradients after *every* micro-batch's backward (M x the
  ZeRO-1 volume; DeepSpeed refuses ZeRO-2 with pipeline parallelism for this reason). Each is counted exposed,
  added to the stage's weight-gradient work (an upper bound: the model has no sharing of one NIC between it and
  the EP all-to-all that DualPipe hides under compute); the tail keeps the all-gather and AdamW.
- ZeRO-3 (parameters sharded too): every layer's parameters are gathered before its forward and again before its
  backward, every micro-batch, on the NIC the EP all-to-all uses (``dsctl.steptime.zero3``: the gather's seconds
  join the all-to-all's in the same op); gradients are reduce-scattered per micro-batch as under ZeRO-2, and
  the tail keeps AdamW only (no end-of-step all-gather: the next step gathers layer by layer).
- Tensor parallelism with sequence parallelism (Megatron-LM; Korthikanti et al. 2022, section 4.2.2): per layer
  the attention block and the FFN block (dense FFN or shared experts) each all-gather their sequence-parallel input
  and reduce-scatter their output, forward, and the same backward: one such collective moves the micro-batch's
  ``T x h`` BF16 activation, ``(t-1)/t x T h 2 / nvlink`` seconds per GPU on a ring over NVLink at the node
  profile's achievable bandwidth per direction (``nvlink.achievable_per_direction``: ~160 GB/s on H800, the
  DeepSeek-V3 paper). Counted exposed: nothing overlaps them with compute (Megatron-LM's TP communication overlap
  is an option this model does not assume).
- Optimizer: AdamW over this GPU's ZeRO-1 shard from HBM traffic, 22 bytes per parameter (read FP32 master and
  gradient, BF16 moments; write master, moments and the BF16 weight: DeepSeek-V3 tech report 3.3 keeps master
  weights in FP32 and the AdamW moments in BF16).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: bytes of HBM traffic per parameter of an AdamW step (see module docstring)
ADAM_BYTES_PER_PARAM = 22.0
GRADIENT_BYTES = 4.0
PARAMETER_BYTES = 2.0
#: ZeRO stages the step-time model predicts (module docstring)
PREDICTED_ZERO_STAGES: tuple[int, ...] = (1, 2, 3)
#: the paper's Table 5, 64-byte transfer across leaves, seconds
IB_LATENCY_S = 3.7e-6
ROCE_LATENCY_S = 5.6e-6


@dataclass(frozen=True)
class StageShard:
    """One stage a pipeline rank holds, for its ZeRO-1 tail: collective seconds and when the schedule lets them
    run. ``grads_ready_s``: end of the rank's last backward work on the stage; ``first_forward_s``: start of the
    rank's first forward of the stage (seconds from the step's start)."""

    reduce_scatter_s: float
    all_gather_s: float
    grads_ready_s: float
    first_forward_s: float


@dataclass(frozen=True)
class OptimizerSeconds:
    """One rank's optimizer work: whole collective durations (reduce-scatter, all-gather), AdamW, and
    ``exposed_s``, the part the step waits for after the pipeline (the optimizer tail)."""

    reduce_scatter_s: float
    all_gather_s: float
    adam_s: float
    exposed_s: float


def p2p_seconds(tokens: float, hidden_size: int, bytes_per_s: float, latency_s: float) -> float:
    """One pipeline boundary's activation (or gradient) transfer of ``tokens`` tokens in BF16."""
    return latency_s + tokens * hidden_size * 2.0 / bytes_per_s


def tp_collective_seconds(tokens: float, hidden_size: int, tp: int, nvlink_bytes_per_s: float) -> float:
    """One sequence-parallel all-gather or reduce-scatter of ``tokens x hidden_size`` BF16 values over ``tp``
    GPUs of a node (ring over NVLink: each GPU sends and receives ``(tp-1)/tp`` of the bytes)."""
    if tp <= 1:
        return 0.0
    return (tp - 1) / tp * tokens * hidden_size * PARAMETER_BYTES / nvlink_bytes_per_s


def ring_seconds(params: float, bytes_per_param: float, group: int, bytes_per_s: float, latency_s: float) -> float:
    """Ring reduce-scatter or all-gather of ``params`` parameters over ``group`` GPUs, one NIC each."""
    if group <= 1 or params <= 0:
        return 0.0
    return (group - 1) / group * params * bytes_per_param / bytes_per_s + (group - 1) * latency_s


def stage_collectives(dense_params: float, expert_params: float, dp: int, expert_dp: int, bytes_per_s: float,
                      latency_s: float) -> tuple[float, float]:
    """(reduce-scatter, all-gather) seconds of one stage's ``dense_params`` (over ``dp``) and this GPU's
    ``expert_params`` (over ``expert_dp``)."""
    rs = ring_seconds(dense_params, GRADIENT_BYTES, dp, bytes_per_s, latency_s)
    rs += ring_seconds(expert_params, GRADIENT_BYTES, expert_dp, bytes_per_s, latency_s)
    ag = ring_seconds(dense_params, PARAMETER_BYTES, dp, bytes_per_s, latency_s)
    ag += ring_seconds(expert_params, PARAMETER_BYTES, expert_dp, bytes_per_s, latency_s)
    return rs, ag


def adam_seconds(shard_params: float, hbm_bytes_per_s: float) -> float:
    """AdamW over ``shard_params`` parameters (this GPU's ZeRO-1 shard) at ``ADAM_BYTES_PER_PARAM``."""
    return shard_params * ADAM_BYTES_PER_PARAM / hbm_bytes_per_s


def exposed_tail(stages: Sequence[StageShard], pipeline_s: float, adam_s: float) -> OptimizerSeconds:
    """Optimizer tail of one rank after a pipeline of ``pipeline_s`` seconds.

    Reduce-scatters run one after another on the rank's NIC, each from its stage's ``grads_ready_s``; AdamW runs
    when the last has finished (or the pipeline has, if later); the all-gathers then run in the order the next step
    needs the stages, and the tail is the largest delay of a stage's gather past its ``first_forward_s`` in the
    next step (which starts at ``pipeline_s``). A single stage whose gradients complete at the pipeline's end and
    which the next step needs at once is not overlapped at all: tail = reduce-scatter + AdamW + all-gather.
    """
    clock = 0.0
    for s in sorted(stages, key=lambda x: x.grads_ready_s):
        clock = max(clock, s.grads_ready_s) + s.reduce_scatter_s
    clock = max(clock, pipeline_s) + adam_s
    delay = clock - pipeline_s
    for s in sorted(stages, key=lambda x: x.first_forward_s):
        clock += s.all_gather_s
        delay = max(delay, clock - pipeline_s - s.first_forward_s)
    return OptimizerSeconds(sum(s.reduce_scatter_s for s in stages), sum(s.all_gather_s for s in stages), adam_s,
                            max(0.0, delay))
