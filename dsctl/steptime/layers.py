"""Seconds of one transformer layer on one GPU for one micro-batch, split as the DualPipe overlap needs it.

A layer has two compute blocks, attention (norm, projections, attention core) and FFN (norm, router, experts or
dense FFN), each with forward (F), input-gradient (I) and weight-gradient (W) seconds, and for a MoE layer four
all-to-alls: dispatch and combine forward, and their gradients in the backward.

Costs per block (docs/steptime.md has the formulas):

- GEMMs through :func:`dsctl.steptime.gemm.linear_seconds`, in the model's training precision (FP8 for
  DeepSeek-V3) except the router and head (BF16: DeepSeek-V3 tech report 3.3.1 keeps gating, the head, embedding,
  norms and attention in higher precision);
- attention core: ``2 n (d_qk + d_v) T S_eff`` forward FLOPs (``S_eff = S/2`` causal: the kernel skips masked
  blocks) at the attention forward rate; backward 2.5x the forward FLOPs (FlashAttention recomputes the scores)
  at the backward rate, all in I;
- elementwise/norm work from HBM traffic (``elementwise_bytes``), backward 2x the forward;
- recompute, as the activation recipe says (``dsctl.model.recipes``; DeepSeek's, tech report 3.2.3 and 3.3.2:
  RMSNorms, MLA up-projections and the MoE SwiGLU): the recomputed parts run their forward again in the backward
  (I); ``selective`` reruns the attention core forward, ``full-recompute`` the whole layer forward including its
  dispatch and combine all-to-alls. ``LayerSeconds.recompute_s`` is that extra backward time;
- routed experts: grouped GEMMs with ``T k ep / E`` rows per expert, times ``imbalance`` (the busiest GPU).
- tensor parallelism ``tp`` with sequence parallelism (Megatron-LM): each GPU runs the column-parallel linears
  with ``N / tp`` outputs and the row-parallel ones with ``K / tp`` inputs over all ``T`` tokens (the shape-aware
  GEMM time prices the smaller shapes), ``num_heads / tp`` attention heads, the norms, residuals and every
  elementwise pass on ``1/tp`` of the values, and routed experts (expert-TP = 1) on its own ``T / tp`` tokens,
  whose all-to-alls carry ``T / tp`` tokens; per layer 2 all-gathers + 2 reduce-scatters of ``T x h`` forward and
  backward (:func:`dsctl.steptime.collectives.tp_collective_seconds`), exposed (``LayerSeconds.tp_f``/``tp_b``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

from dsctl.model.recipes import DEEPSEEK, ActivationRecipe
from dsctl.profiles.schema import ModelProfile
from dsctl.steptime.collectives import tp_collective_seconds
from dsctl.steptime.ep import EpCostModel
from dsctl.steptime.gemm import BF16_BYTES, FP8_BYTES, FP8_SCALED_BYTES, FP32_BYTES, linear_seconds
from dsctl.steptime.hardware import GpuRates
from dsctl.topology.sim.ep import token_bytes

#: attention backward kernel work relative to its forward (FlashAttention: 5 matmuls against 2)
ATTENTION_BACKWARD_WORK = 2.5
#: bytes per output-gradient element an FP8 backward casts: read BF16, write FP8 (with scales) in two tile layouts
FP8_BACKWARD_OUTPUT_GRAD_BYTES = BF16_BYTES + 2.0 * FP8_SCALED_BYTES
#: bytes per cached FP8 input element requantised transposed for Wgrad: read FP8, write FP8 (with scales)
FP8_BACKWARD_TRANSPOSE_BYTES = 2.0 * FP8_SCALED_BYTES


#: bytes per embedding-table entry of one micro-batch's dense weight gradient: zero-filled BF16 gradient written,
#: read again by the add into the FP32 main gradient, which is read and written (2 + 2 + 4 + 4)
EMBEDDING_GRAD_BYTES = BF16_BYTES + BF16_BYTES + 2.0 * FP32_BYTES

#: a recipe that recomputes nothing, the baseline :func:`layer_seconds` measures recompute seconds against
NO_RECOMPUTE_BASE = ActivationRecipe(name="no-recompute", title="", source="")


@dataclass(frozen=True)
class BlockSeconds:
    """Forward, input-gradient and weight-gradient seconds of one compute block."""

    f: float = 0.0
    i: float = 0.0
    w: float = 0.0

    @property
    def b(self) -> float:
        return self.i + self.w

    def __add__(self, other: BlockSeconds) -> BlockSeconds:
        return BlockSeconds(self.f + other.f, self.i + other.i, self.w + other.w)


@dataclass(frozen=True)
class LayerSeconds:
    """One layer: ``attention`` and ``ffn`` blocks; all-to-all seconds (0 for a dense layer).

    ``dispatch_f`` / ``combine_f``: forward all-to-alls (FP8 dispatch, BF16 combine); ``dispatch_b`` is the
    combine's gradient sent dispatch-wise and ``combine_b`` the dispatch's gradient sent back (both BF16).
    """

    attention: BlockSeconds
    ffn: BlockSeconds
    dispatch_f: float = 0.0
    combine_f: float = 0.0
    dispatch_b: float = 0.0
    combine_b: float = 0.0
    #: seconds of forward work the backward redoes (already inside the I seconds and dispatch_b/combine_b)
    recompute_s: float = 0.0
    #: tensor parallelism's NVLink all-gathers and reduce-scatters, forward and backward (exposed: not overlapped)
    tp_f: float = 0.0
    tp_b: float = 0.0

    @cached_property
    def compute(self) -> BlockSeconds:
        return self.attention + self.ffn

    @property
    def comm_f(self) -> float:
        return self.dispatch_f + self.combine_f

    @property
    def comm_b(self) -> float:
        return self.dispatch_b + self.combine_b

    # per-layer terms of a stage's sums (dsctl.steptime.stages.StageSeconds), each the same float expression the
    # sums used inline; cached, as a stage repeats one object per layer kind (cached_property writes the
    # instance's __dict__, which a frozen dataclass allows)

    @cached_property
    def forward_s(self) -> float:
        """Forward alone: compute + all-to-alls + TP collectives."""
        return self.attention.f + self.ffn.f + self.comm_f + self.tp_f

    @cached_property
    def input_grad_s(self) -> float:
        """Input-gradient backward alone: compute + backward all-to-alls + TP collectives."""
        return self.attention.i + self.ffn.i + self.comm_b + self.tp_b

    @cached_property
    def weight_grad_s(self) -> float:
        return self.attention.w + self.ffn.w

    @cached_property
    def tp_s(self) -> float:
        return self.tp_f + self.tp_b


def fp8_backward_casts(tokens: float, n_out: float, k_in: float, hbm: float) -> BlockSeconds:
    """HBM time of the casts an FP8 linear's backward needs besides its GEMMs (DeepSeek-V3 tech report 3.3, Fig. 6:
    Dgrad and Wgrad run in FP8; 3.5.2, "Support for Transposed GEMM Operations").

    - I: the output gradient (BF16, ``T x N``) is read once and written in FP8 twice, in 1x128 tiles for Dgrad
      and 128x1 tiles for Wgrad: ``(2 + 2 x 1.03125) N`` bytes per token;
    - W: the cached FP8 input (``T x K``, 1x128 tiles) is read, dequantised, transposed, requantised to 128x1
      tiles and written for Wgrad: ``2 x 1.03125 K`` bytes per token.
    Every FP8 tensor carries one FP32 scale per 128 values (``FP8_SCALED_BYTES`` = 1.03125 B per element).
    """
    return BlockSeconds(0.0, FP8_BACKWARD_OUTPUT_GRAD_BYTES * n_out * tokens / hbm,
                        FP8_BACKWARD_TRANSPOSE_BYTES * k_in * tokens / hbm)


def _linear(tokens: float, n_out: float, k_in: float, flops: float, rates: GpuRates,
            in_bytes: float | None = None, recompute: bool = False) -> BlockSeconds:
    """A linear layer ``k_in -> n_out`` at ceiling ``flops``: its three GEMMs (memory phase at the GEMM HBM rate),
    the recomputed forward in I when ``recompute``, and the FP8 backward casts when the inputs are FP8."""
    nb = rates.gemm_in_bytes if in_bytes is None else in_bytes
    f, dgrad, wgrad = linear_seconds(tokens, n_out, k_in, flops, rates.gemm_hbm, nb)
    block = BlockSeconds(f, dgrad + (f if recompute else 0.0), wgrad)
    if nb == FP8_BYTES:
        block += fp8_backward_casts(tokens, n_out, k_in, rates.hbm_bytes_per_s)
    return block


def swiglu_ffn_gemms(tokens: float, hidden: int, width: float, flops: float, rates: GpuRates) -> BlockSeconds:
    """The two linears of a SwiGLU FFN of ``width`` (gate and up fused ``h -> 2 width``, down ``width -> h``):
    a dense FFN, the shared experts and one routed expert all have this shape."""
    return _linear(tokens, 2 * width, hidden, flops, rates) + _linear(tokens, hidden, width, flops, rates)


def _elementwise(bytes_per_token: float, tokens: float, hbm: float, recompute: bool = False) -> BlockSeconds:
    f = bytes_per_token * tokens / hbm
    return BlockSeconds(f, 2.0 * f + (f if recompute else 0.0), 0.0)


def norm_bytes(width: int) -> float:
    """RMSNorm with FP8 output: read BF16, write BF16 (kept for the residual path) and FP8 + scales."""
    return width * (2.0 + 2.0 + FP8_SCALED_BYTES)


def attention_block(model: ModelProfile, tokens: float, seq_len: int, causal: bool, rates: GpuRates,
                    recipe: ActivationRecipe = DEEPSEEK, tp: int = 1) -> BlockSeconds:
    """Attention block of one layer over ``tokens`` tokens of sequences of ``seq_len`` (per-part recompute as
    ``recipe`` says; whole-layer recompute is added by :func:`layer_seconds`), on one of ``tp`` tensor-parallel
    GPUs (projections split column- then row-wise, ``num_heads / tp`` heads; MLA's down projections are counted
    split too)."""
    up = recipe.recompute_mla_up_proj
    a, h = model.attention, model.hidden_size
    fp8, hbm = rates.fp8_gemm_flops, rates.hbm_bytes_per_s
    if a.is_mla:
        d_qk, d_v = a.qk_nope_head_dim + a.qk_rope_head_dim, a.v_head_dim
        down = (a.q_lora_rank if a.q_lora_rank else a.num_heads * d_qk) + a.kv_lora_rank + a.qk_rope_head_dim
        block = _linear(tokens, down / tp, h, fp8, rates)
        if a.q_lora_rank:
            block += _linear(tokens, a.num_heads * d_qk / tp, a.q_lora_rank, fp8, rates, recompute=up)
        block += _linear(tokens, a.num_heads * (a.qk_nope_head_dim + d_v) / tp, a.kv_lora_rank, fp8, rates,
                         recompute=up)
        small_norms = norm_bytes(a.q_lora_rank) + norm_bytes(a.kv_lora_rank)
    else:
        d_qk = d_v = a.head_dim
        kv = a.num_kv_heads if a.kind == "gqa" else a.num_heads
        block = _linear(tokens, (a.num_heads + 2 * kv) * a.head_dim / tp, h, fp8, rates)
        small_norms = 0.0
    block += _linear(tokens, h, a.num_heads * d_v / tp, fp8, rates)
    attended = seq_len / 2 if causal else float(seq_len)
    core = 2.0 * a.num_heads / tp * (d_qk + d_v) * attended * tokens
    core_f = core / rates.attention_forward_flops
    block += BlockSeconds(core_f, ATTENTION_BACKWARD_WORK * core / rates.attention_backward_flops
                          + (core_f if recipe.recompute_attention_core else 0.0), 0.0)
    # norm before attention (recomputed), residual add (read 2, write 1, BF16), RoPE on q and k, output quantisation
    rope = 2.0 * 2.0 * 2.0 * (a.num_heads + 1) * (a.qk_rope_head_dim if a.is_mla else a.head_dim)
    shard = tokens / tp  # sequence-parallel norms and residuals; the rest on num_heads / tp heads
    block += _elementwise(norm_bytes(h) + small_norms, shard, hbm, recompute=recipe.recompute_norms)
    block += _elementwise(6.0 * h + rope + (BF16_BYTES + FP8_SCALED_BYTES) * a.num_heads * d_v, shard, hbm)
    return block


def swiglu_bytes(width: int) -> float:
    """SwiGLU of one expert or dense FFN: read gate and up (BF16), write the product in FP8 (+ scales) and a BF16
    copy."""
    return width * (2.0 * 2.0 + FP8_SCALED_BYTES + 2.0)


def dense_ffn_block(model: ModelProfile, tokens: float, rates: GpuRates,
                    recipe: ActivationRecipe = DEEPSEEK, tp: int = 1) -> BlockSeconds:
    h, i = model.hidden_size, model.dense_intermediate_size
    hbm = rates.hbm_bytes_per_s
    block = swiglu_ffn_gemms(tokens, h, i / tp, rates.fp8_gemm_flops, rates)
    block += _elementwise(norm_bytes(h), tokens / tp, hbm, recompute=recipe.recompute_norms)
    return block + _elementwise(6.0 * h + swiglu_bytes(i), tokens / tp, hbm)


def moe_ffn_block(model: ModelProfile, tokens: float, ep: int, rates: GpuRates, imbalance: float,
                  recipe: ActivationRecipe = DEEPSEEK, tp: int = 1) -> BlockSeconds:
    """Router, shared experts and this GPU's routed experts (grouped GEMMs) of one MoE layer; with ``tp`` the
    shared experts are tensor-parallel over all ``tokens`` and the rest runs on this GPU's ``tokens / tp``."""
    moe = model.moe
    if moe is None:
        return dense_ffn_block(model, tokens, rates, recipe, tp)
    h, i = model.hidden_size, moe.moe_intermediate_size
    hbm = rates.hbm_bytes_per_s
    block = BlockSeconds()
    if moe.num_shared_experts:
        block += swiglu_ffn_gemms(tokens, h, moe.num_shared_experts * i / tp, rates.fp8_gemm_flops, rates)
    tokens = tokens / tp  # sequence-parallel: router, routed experts and elementwise on this GPU's tokens
    block += _linear(tokens, moe.num_routed_experts, h, rates.bf16_gemm_flops, rates, BF16_BYTES)
    k = moe.num_experts_per_token
    local_experts = max(1, moe.num_routed_experts // max(ep, 1))
    rows = tokens * k * imbalance / local_experts  # rows per local expert on the busiest GPU
    expert = swiglu_ffn_gemms(rows, h, i, rates.moe_gemm_flops, rates)
    block += BlockSeconds(expert.f * local_experts, expert.i * local_experts, expert.w * local_experts)
    block += _elementwise(norm_bytes(h), tokens, hbm, recompute=recipe.recompute_norms)
    # residual add; per routed copy: received FP8 row written and read, SwiGLU, BF16 output; combine's weighted sum
    # SwiGLU outputs are recomputed in the backward from its cached inputs (tech report 3.3.2)
    swiglu = (moe.num_shared_experts + k * imbalance) * swiglu_bytes(i)
    block += _elementwise(swiglu, tokens, hbm, recompute=recipe.recompute_swiglu)
    per_copy = 2.0 * h + 2.0 * h + 2.0 * h
    block += _elementwise(6.0 * h + k * imbalance * per_copy + 2.0 * h, tokens, hbm)
    return block + permute_block(h, tokens * k * imbalance, hbm, rates.gemm_in_bytes)


def permute_block(hidden: int, rows: float, hbm: float, in_bytes: float) -> BlockSeconds:
    """Token permute and unpermute around the grouped GEMMs of ``rows`` routed copies on this GPU.

    DeepEP's dispatch leaves received tokens ordered by source rank; DeepGEMM's contiguous grouped GEMM takes
    each expert's rows contiguous (its README: "M-axis contiguous" layout, segments aligned to the block size).
    A permute kernel reads and writes each received row (``2 h in_bytes``, FP8 rows with their 1x128 scales) and
    an unpermute the BF16 expert output before the combine (``2 x 2 h``); the backward moves the BF16 gradients
    both ways (``2 x 2 x 2 h``).
    """
    row_bytes = FP8_SCALED_BYTES if in_bytes == FP8_BYTES else in_bytes
    forward = rows * hidden * (2.0 * row_bytes + 2.0 * BF16_BYTES) / hbm
    backward = rows * hidden * 4.0 * BF16_BYTES / hbm
    return BlockSeconds(forward, backward, 0.0)


def moe_comm(model: ModelProfile, tokens: float, ep_cost: EpCostModel,
             fp8: bool = True) -> tuple[float, float, float, float]:
    """(dispatch_f, combine_f, dispatch_b, combine_b) seconds of one MoE layer's all-to-alls.

    Bytes per token are DeepEP's wire bytes (:func:`dsctl.topology.sim.ep.token_bytes`): the forward dispatch in
    FP8 with its 1x128 scales (7,472 B for V3; BF16 values in the combine format when the recipe is BF16), the
    combine in BF16 (14,384 B); the backward sends BF16 gradients both ways (combine format, 14,384 B).
    """
    if model.moe is None:
        return 0.0, 0.0, 0.0, 0.0
    h, k = model.hidden_size, model.moe.num_experts_per_token
    bf16 = float(token_bytes(h, k, "ep-combine"))
    dispatch = float(token_bytes(h, k, "ep-dispatch")) if fp8 else bf16
    forward = ep_cost(tokens, dispatch, bf16)
    backward = ep_cost(tokens, bf16, bf16)
    return forward.dispatch_s, forward.combine_s, backward.dispatch_s, backward.combine_s


def tp_collectives_per_pass(model: ModelProfile, moe_layer: bool) -> int:
    """Sequence-parallel all-gathers + reduce-scatters one layer runs per forward (and again per backward): an
    all-gather before and a reduce-scatter after the attention block, and the same around the dense FFN or the
    shared experts (a MoE layer without shared experts dispatches its sequence-parallel tokens directly)."""
    moe = model.moe
    tp_ffn = not moe_layer or moe is None or moe.num_shared_experts > 0
    return 4 if tp_ffn else 2


def layer_seconds(model: ModelProfile, moe_layer: bool, tokens: float, seq_len: int, causal: bool, ep: int,
                  rates: GpuRates, ep_cost: EpCostModel | None, imbalance: float,
                  recipe: ActivationRecipe = DEEPSEEK, tp: int = 1) -> LayerSeconds:
    """One dense or MoE layer (``moe_layer``) over ``tokens`` tokens (one micro-batch of a ``tp``-GPU tensor-
    parallel group), recomputing what ``recipe`` says."""
    attention = attention_block(model, tokens, seq_len, causal, rates, recipe, tp)
    comm = (0.0, 0.0, 0.0, 0.0)
    if not moe_layer or model.moe is None:
        ffn = dense_ffn_block(model, tokens, rates, recipe, tp)
    else:
        ffn = moe_ffn_block(model, tokens, ep, rates, imbalance, recipe, tp)
        if ep_cost is not None and ep > 1:
            comm = moe_comm(model, tokens / tp, ep_cost, rates.gemm_in_bytes == 1.0)
    plain = NO_RECOMPUTE_BASE
    base = LayerSeconds(attention_block(model, tokens, seq_len, causal, rates, plain, tp),
                        dense_ffn_block(model, tokens, rates, plain, tp) if not moe_layer or model.moe is None
                        else moe_ffn_block(model, tokens, ep, rates, imbalance, plain, tp))
    recompute_s = (attention.i + ffn.i) - (base.attention.i + base.ffn.i)
    tp_f = tp_collectives_per_pass(model, moe_layer) * tp_collective_seconds(tokens, model.hidden_size, tp,
                                                                             rates.nvlink_bytes_per_s)
    tp_b = tp_f
    if recipe.recompute_layer:  # the whole forward again, its all-to-alls and TP collectives included
        attention += BlockSeconds(0.0, attention.f, 0.0)
        ffn += BlockSeconds(0.0, ffn.f, 0.0)
        recompute_s += attention.f + ffn.f + comm[0] + comm[1] + tp_f
        comm = (comm[0], comm[1], comm[2] + comm[0], comm[3] + comm[1])
        tp_b += tp_f
    return LayerSeconds(attention, ffn, *comm, recompute_s=recompute_s, tp_f=tp_f, tp_b=tp_b)


def _tp_pair(model: ModelProfile, tokens: float, rates: GpuRates, tp: int) -> BlockSeconds:
    """One sequence-parallel collective forward and its counterpart in the input gradient (a block outside the
    layers entering or leaving the tensor-parallel region); nothing at ``tp`` 1."""
    one = tp_collective_seconds(tokens, model.hidden_size, tp, rates.nvlink_bytes_per_s)
    return BlockSeconds(one, one, 0.0)


@lru_cache(maxsize=1024)  # a layout search asks per stage
def head_block(model: ModelProfile, tokens: float, rates: GpuRates, tp: int = 1) -> BlockSeconds:
    """Final norm, output head (BF16) and the cross-entropy over the vocabulary (fused: logits read once);
    with ``tp`` the head is vocabulary-parallel (``V / tp`` outputs, its input all-gathered)."""
    h, v, hbm = model.hidden_size, model.vocab_size, rates.hbm_bytes_per_s
    block = _linear(tokens, v / tp, h, rates.bf16_gemm_flops, rates, BF16_BYTES) + _tp_pair(model, tokens, rates, tp)
    return block + _elementwise(norm_bytes(h) / tp + 2.0 * v / tp, tokens, hbm)


@lru_cache(maxsize=1024)  # a layout search asks per stage
def embedding_block(model: ModelProfile, tokens: float, rates: GpuRates, tp: int = 1) -> BlockSeconds:
    """Embedding lookup (a row read and written per token) and its weight gradient (W): the rows scattered into a
    dense gradient of the table's shape, then added into the FP32 main gradient (``EMBEDDING_GRAD_BYTES`` per
    table entry per micro-batch: V3's 129,280 x 7,168 table moves 11.1 GB, 4.1 ms on an H800).

    Dense, because PyTorch's ``nn.Embedding`` gives a dense gradient unless built with ``sparse=True`` (its
    default is False) and Megatron-LM's DDP adds each parameter's gradient into its FP32 ``main_grad`` buffer
    after every backward; gradients accumulate over micro-batches in FP32 (DeepSeek-V3 tech report 3.3), as the
    wgrad GEMMs' ``GRAD_ACCUMULATE_BYTES`` charge for the other weights. With ``tp`` the table is
    vocabulary-parallel (``V / tp`` rows each) and its output reduce-scattered into the sequence-parallel region.
    """
    row = 2.0 * model.hidden_size
    f = 2.0 * row * tokens / rates.hbm_bytes_per_s
    table = EMBEDDING_GRAD_BYTES * model.vocab_size / tp * model.hidden_size / rates.hbm_bytes_per_s
    return BlockSeconds(f, 0.0, 2.0 * f + table) + _tp_pair(model, tokens, rates, tp)


@lru_cache(maxsize=1024)  # a layout search asks per stage
def mtp_projection_block(model: ModelProfile, tokens: float, rates: GpuRates, tp: int = 1) -> BlockSeconds:
    """An MTP module's two norms and ``eh_proj`` (2h -> h, FP8) before its transformer layer (column-parallel
    over ``tp``: its input all-gathered, its output reduce-scattered)."""
    h, hbm = model.hidden_size, rates.hbm_bytes_per_s
    pair = _tp_pair(model, tokens, rates, tp)
    return (_linear(tokens, h / tp, 2 * h, rates.fp8_gemm_flops, rates) + pair + pair
            + _elementwise(2 * norm_bytes(h), tokens / tp, hbm))

