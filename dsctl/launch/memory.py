"""Per-GPU training memory of a launch layout against the node's HBM.

For pipeline rank ``r`` (every dp/ep/tp rank of one pipeline rank holds the same amount)::

    params(r)      = sum over the stages rank r holds of  dense_params + routed_expert_params / ep
                     (DualPipe: stages r and pp-1-r, i.e. 2 copies of the weights; DualPipeV: r and 2pp-1-r;
                     1F1B/ZB1P: stage r; an embedding copy is counted once if the rank holds both ends)
    weights        = params x weight_bytes                    (BF16 working copy, 2 B)
    gradients      = params x grad_bytes                      (FP32 accumulation, 4 B; ZeRO-1 does not shard them)
    optimizer      = dense x opt_bytes / dp + routed x opt_bytes / expert_dp
                     (ZeRO-1; opt_bytes = FP32 master 4 B + AdamW moments 2 x BF16 = 8 B; each DualPipe copy
                     keeps its own shard, the conservative reading)
    activations    = chunks(r) x max over held stages of (tokens per micro-batch x activation bytes per token)
                     chunks = pp_stages + 1 for DualPipe/DualPipeV (README table), pp - r for 1F1B/ZB1P,
                     never more than the micro-batches of a step
    total          = weights + gradients + optimizer + activations + reserve (CUDA context, NCCL/DeepEP buffers,
                     allocator fragmentation: 4 GiB by default)

Activation bytes per token and layer follow DeepSeek-V3's recipe (tech report section 3.3): RMSNorms and the MLA
up-projections are recomputed, the SwiGLU output is recomputed from its cached FP8 inputs, the inputs of the
FP8 GEMMs are cached in FP8 and the attention output fed to the output projection in E5M6 (1.5 B):

- MLA attention: ``2h`` (layer input) + ``2 (q_lora + kv_lora + rope)`` (compressed q and kv) + ``1.5 n d_v``
- GQA/MHA attention: ``2h`` + ``2 (n d + 2 n_kv d)`` (q, k, v) + ``2 n d`` (output), all BF16
- dense FFN: ``2h`` (norm input) + ``h`` (FP8 GEMM input) + ``2 i`` (FP8 SwiGLU inputs)
- MoE FFN: ``2h`` + ``(top_k + shared) (h + 2 i_moe)`` (FP8 dispatched tokens, FP8 SwiGLU inputs)
  + ``4 E`` (FP32 router scores)
- MTP module: one MoE layer + ``4h`` (its concatenated projection input, BF16)

The output logits are assumed not kept (fused/chunked cross-entropy). These are estimates for planning,
within perhaps +-20% of a real framework; the reserve absorbs part of the difference.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsctl.launch import rules
from dsctl.launch.layout import ParallelLayout
from dsctl.launch.stages import Stage
from dsctl.profiles.schema import ModelProfile
from dsctl.units import GIB


@dataclass(frozen=True)
class MemoryAssumptions:
    """Bytes per value of each kind of training state, and the fixed reserve per GPU."""

    weight_bytes: float = 2.0
    grad_bytes: float = 4.0
    master_bytes: float = 4.0
    moment_bytes: float = 4.0  # two AdamW moments in BF16
    reserve_bytes: int = 4 * GIB

    @property
    def optimizer_bytes(self) -> float:
        """Optimizer state per parameter before ZeRO-1 sharding (master weights + moments)."""
        return self.master_bytes + self.moment_bytes


@dataclass(frozen=True)
class RankMemory:
    """Memory of one pipeline rank's GPUs, in bytes (parameters in counts)."""

    pp_rank: int
    stages: tuple[int, ...]
    params: int
    dense_params: int
    routed_params: int
    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activation_chunks: int
    activation_chunk_bytes: int
    activations_bytes: int
    reserve_bytes: int
    total_bytes: int
    headroom_bytes: int


@dataclass(frozen=True)
class MemoryEstimate:
    """Per-rank memory and the verdict.

    ``fits`` is True when every rank's ``total_bytes <= hbm_bytes``; ``headroom_bytes`` is the smallest
    ``hbm_bytes - total_bytes`` over ranks (negative = short by that much), on ``worst_pp_rank``.
    """

    hbm_bytes: int
    tokens_per_micro_batch: int
    activation_bytes_per_token_layer: int
    fits: bool
    worst_pp_rank: int
    max_total_bytes: int
    headroom_bytes: int
    per_rank: tuple[RankMemory, ...]

    @property
    def worst(self) -> RankMemory:
        return self.per_rank[self.worst_pp_rank]


def attention_activation_bytes(model: ModelProfile) -> float:
    """Activation bytes per token kept for the backward of one attention block (see module docstring)."""
    a, h = model.attention, model.hidden_size
    if a.is_mla:
        return 2 * h + 2 * (a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim) + 1.5 * a.num_heads * a.v_head_dim
    num_kv = a.num_kv_heads if a.kind == "gqa" else a.num_heads
    return 2 * h + 2 * (a.num_heads * a.head_dim + 2 * num_kv * a.head_dim) + 2 * a.num_heads * a.head_dim


def dense_layer_activation_bytes(model: ModelProfile) -> float:
    """Per token, one layer with a dense FFN."""
    h = model.hidden_size
    return attention_activation_bytes(model) + 3 * h + 2 * model.dense_intermediate_size


def moe_layer_activation_bytes(model: ModelProfile) -> float:
    """Per token, one MoE layer (falls back to the dense layer for a dense model)."""
    moe = model.moe
    if moe is None:
        return dense_layer_activation_bytes(model)
    h = model.hidden_size
    experts = moe.num_experts_per_token + moe.num_shared_experts
    return (attention_activation_bytes(model) + 2 * h + experts * (h + 2 * moe.moe_intermediate_size)
            + 4 * moe.num_routed_experts)


def stage_activation_bytes_per_token(model: ModelProfile, stage: Stage) -> float:
    """Activation bytes per token of one micro-batch held by ``stage`` between its forward and backward."""
    per_mtp = moe_layer_activation_bytes(model) + 4 * model.hidden_size
    total = (stage.num_dense_layers * dense_layer_activation_bytes(model)
             + stage.num_moe_layers * moe_layer_activation_bytes(model)
             + stage.num_mtp_modules * per_mtp)
    if stage.has_head:
        total += 2 * model.hidden_size  # final norm input
    return total


def rank_parameters(stages: tuple[Stage, ...], held: tuple[int, ...]) -> tuple[int, int]:
    """``(dense, routed)`` parameters of the stages a pipeline rank holds (``routed``: all routed experts, before
    the EP split). One rank holding both ends counts the MTP embedding copy once: it is the same tensor as the
    stage-0 table."""
    dense = sum(stages[s].dense_params for s in held)
    routed = sum(stages[s].routed_expert_params for s in held)
    if len(held) == 2 and stages[held[0]].embedding_params and stages[held[1]].embedding_params:
        dense -= min(stages[held[0]].embedding_params, stages[held[1]].embedding_params)
    return dense, routed


def activation_chunks(layout: ParallelLayout, pp_rank: int, num_micro_batches: int) -> int:
    """Peak micro-batch stage-chunks in flight on ``pp_rank`` (README table; 1F1B: ``pp - r``)."""
    return rules.activation_chunks(layout.schedule, layout.pp, pp_rank, num_micro_batches)


def estimate_memory(model: ModelProfile, layout: ParallelLayout, stages: tuple[Stage, ...], hbm_bytes: int,
                    tokens_per_micro_batch: int, num_micro_batches: int,
                    assumptions: MemoryAssumptions | None = None) -> MemoryEstimate:
    """Memory of every pipeline rank of ``layout`` (``stages`` from :func:`~dsctl.launch.stages.split_stages`)."""
    a = assumptions or MemoryAssumptions()
    rows = []
    for r in range(layout.pp):
        held = rules.stages_of_rank(layout.schedule, layout.pp, r)
        dense, routed_full = rank_parameters(stages, held)
        routed = routed_full // layout.ep
        params = dense + routed
        weights = int(params * a.weight_bytes)
        grads = int(params * a.grad_bytes)
        optim = int(dense * a.optimizer_bytes / layout.dp + routed * a.optimizer_bytes / layout.expert_dp)
        chunk = int(max(stage_activation_bytes_per_token(model, stages[s]) for s in held) * tokens_per_micro_batch)
        chunks = activation_chunks(layout, r, num_micro_batches)
        acts = chunks * chunk
        total = weights + grads + optim + acts + a.reserve_bytes
        rows.append(RankMemory(
            pp_rank=r, stages=held, params=params, dense_params=dense, routed_params=routed,
            weights_bytes=weights, gradients_bytes=grads, optimizer_bytes=optim,
            activation_chunks=chunks, activation_chunk_bytes=chunk, activations_bytes=acts,
            reserve_bytes=a.reserve_bytes, total_bytes=total, headroom_bytes=hbm_bytes - total,
        ))
    worst = max(rows, key=lambda row: row.total_bytes)
    return MemoryEstimate(
        hbm_bytes=hbm_bytes,
        tokens_per_micro_batch=tokens_per_micro_batch,
        activation_bytes_per_token_layer=int(moe_layer_activation_bytes(model)),
        fits=worst.total_bytes <= hbm_bytes,
        worst_pp_rank=worst.pp_rank,
        max_total_bytes=worst.total_bytes,
        headroom_bytes=hbm_bytes - worst.total_bytes,
        per_rank=tuple(rows),
    )
