"""Activation recipes: what a training run keeps between a layer's forward and its backward, and what it
recomputes instead (issue 28; docs/launch.md, "Activation recipes").

A recipe is a :class:`ActivationRecipe`: which parts of a layer the backward recomputes, the number format of
the GEMM inputs it caches, the format of the attention output, and whether it keeps FP8 copies of the weights.
:func:`saved_tensors` lists what one layer keeps per token under a recipe, one named tensor per line;
:func:`layer_activations` sums them into values, FP8 tile scales and the attention log-sum-exp; and
:func:`recompute_flops_per_token` is the forward work the backward redoes.

The layer is the DeepSeek-V3 reference structure (``inference/model.py`` of deepseek-ai/DeepSeek-V3): RMSNorm,
MLA (``wq_a`` -> ``q_norm`` -> ``wq_b``; ``wkv_a`` -> ``kv_norm`` -> ``wkv_b``; RoPE; attention; ``wo``), residual,
RMSNorm, a sigmoid router with top-k, routed and shared SwiGLU experts, residual. A GQA/MHA layer has one QKV
projection instead of the MLA projections; a dense layer one SwiGLU FFN instead of the MoE. The attention core is
FlashAttention's: it keeps its inputs, its output and one FP32 log-sum-exp per head and token (FlashAttention-2
paper, Dao 2023, algorithm 1: "save O and L").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from dsctl.errors import InputError, one_of
from dsctl.profiles.schema import ModelProfile

#: bytes per value of the formats a recipe stores
FORMAT_BYTES: dict[str, float] = {"fp32": 4.0, "bf16": 2.0, "e5m6": 1.5, "fp8": 1.0, "int64": 8.0}
#: formats stored with one FP32 scale per 1x128 tile (DeepSeek-V3 tech report 3.3.1: fine-grained quantization)
TILE_SCALED = frozenset({"fp8", "e5m6"})
#: values per tile scale, and the scale's bytes
TILE_VALUES = 128
SCALE_BYTES = 4.0


@dataclass(frozen=True)
class ActivationRecipe:
    """How one training run stores activations.

    - ``recompute_norms``: RMSNorm outputs are recomputed from their inputs (only the inputs are kept);
    - ``recompute_mla_up_proj``: MLA's query and key/value up-projections (and so q, k, v) are recomputed from the
      compressed latents;
    - ``recompute_swiglu``: the SwiGLU product of each expert is recomputed from its two inputs;
    - ``recompute_attention_core``: the attention core (scores, softmax, output) runs again in the backward, so
      neither its log-sum-exp nor its own saved tensors are kept (its inputs and the output projection's input are);
    - ``recompute_layer``: only each layer's input is kept and the whole layer runs again (all-to-alls included);
    - ``gemm_input_format``: format of cached GEMM inputs (``fp8`` with 1x128 tile scales, or ``bf16``);
    - ``attention_output_format``: format of the attention output kept for the output projection;
    - ``probs_on_swiglu``: routing weights multiply the SwiGLU output before the down projection (Megatron's
      ``activation_func_with_probs``) instead of the expert output after it, so no expert output is kept;
    - ``fp8_weight_copies``: an FP8 copy of every GEMM weight (128x128 block scales) lives through the step.
    """

    name: str
    title: str
    source: str
    recompute_norms: bool = False
    recompute_mla_up_proj: bool = False
    recompute_swiglu: bool = False
    recompute_attention_core: bool = False
    recompute_layer: bool = False
    gemm_input_format: str = "bf16"
    attention_output_format: str = "bf16"
    probs_on_swiglu: bool = False
    fp8_weight_copies: bool = False


DEEPSEEK = ActivationRecipe(
    name="deepseek",
    title="DeepSeek-V3's: recompute RMSNorm and MLA up-projections, FP8 caching, E5M6 attention output",
    source="DeepSeek-V3 tech report 3.2.3 (recompute RMSNorm and MLA up-projection) and 3.3.2 (FP8 caching of "
           "Linear inputs; E5M6 input of the attention output projection; SwiGLU recomputed from its cached FP8 "
           "inputs)",
    recompute_norms=True, recompute_mla_up_proj=True, recompute_swiglu=True, gemm_input_format="fp8",
    attention_output_format="e5m6", probs_on_swiglu=True, fp8_weight_copies=True,
)
NONE = ActivationRecipe(
    name="none", title="plain BF16: every tensor autograd saves is kept, nothing recomputed",
    source="PyTorch autograd on the reference layer (deepseek-ai/DeepSeek-V3 inference/model.py structure)",
)
SELECTIVE = ActivationRecipe(
    name="selective", title="Megatron's selective recompute: the attention core is recomputed",
    source="Megatron-LM --recompute-granularity selective (default --recompute-modules core_attn); Korthikanti "
           "et al. 2022, 'Reducing Activation Recomputation in Large Transformer Models'",
    recompute_attention_core=True,
)
FULL_RECOMPUTE = ActivationRecipe(
    name="full-recompute", title="full recompute: only each layer's input is kept, the whole layer runs again",
    source="Megatron-LM --recompute-granularity full --recompute-method uniform --recompute-num-layers 1; "
           "Chen et al. 2016, 'Training Deep Nets with Sublinear Memory Cost'",
    recompute_layer=True,
)

#: every recipe by name, in the order the docs and help list them
RECIPES: dict[str, ActivationRecipe] = {r.name: r for r in (DEEPSEEK, SELECTIVE, FULL_RECOMPUTE, NONE)}


def recipe_named(name: str, field: str = "recipe") -> ActivationRecipe:
    """The recipe called ``name`` (case-insensitive); ``InputError`` naming ``field`` if unknown."""
    key = name.strip().lower()
    if key not in RECIPES:
        raise InputError(f"{name!r} is not a known recipe; valid: {one_of(list(RECIPES))}", field=field,
                         hint="'dsctl launch --help' describes each recipe")
    return RECIPES[key]


#: the recipe switches the step-time model reads (the backward pays for what they recompute)
RECOMPUTE_SWITCHES = ("recompute_norms", "recompute_mla_up_proj", "recompute_swiglu", "recompute_attention_core")


def recomputes_at_least(a: ActivationRecipe, b: ActivationRecipe) -> bool:
    """Whether ``a`` recomputes everything ``b`` does (a whole-layer recompute covers every part), so that a
    layout's step under ``a`` is never shorter than under ``b``: the step-time model reads only these switches."""
    if a.recompute_layer:
        return True
    return not b.recompute_layer and all(getattr(a, name) or not getattr(b, name) for name in RECOMPUTE_SWITCHES)


def searchable_recipes(model: ModelProfile) -> tuple[ActivationRecipe, ...]:
    """The recipes a layout search tries for ``model`` when the user fixes none: the profile's own first, then the
    others in :data:`RECIPES` order; a recipe that caches FP8 GEMM inputs only for a model trained in FP8
    (``training_precision: fp8``), since it needs FP8 GEMMs in the training code."""
    own = default_recipe(model)
    others = (r for r in RECIPES.values() if r is not own
              and (r.gemm_input_format != "fp8" or model.training_precision == "fp8"))
    return (own, *others)


def default_recipe(model: ModelProfile) -> ActivationRecipe:
    """The model profile's recipe (``activation_recipe:``)."""
    return recipe_named(model.activation_recipe, "activation_recipe")


def resolve_recipe(model: ModelProfile, name: str | None) -> ActivationRecipe:
    """``name`` if given, else the model profile's default."""
    return default_recipe(model) if name is None else recipe_named(name)


@dataclass(frozen=True)
class SavedTensor:
    """One tensor a layer keeps per token for its backward: ``values`` numbers in ``fmt``."""

    name: str
    values: float
    fmt: str

    @property
    def value_bytes(self) -> float:
        return self.values * FORMAT_BYTES[self.fmt]

    @property
    def scale_bytes(self) -> float:
        """FP32 tile scales of an FP8/E5M6 tensor (one per :data:`TILE_VALUES` values)."""
        return self.values / TILE_VALUES * SCALE_BYTES if self.fmt in TILE_SCALED else 0.0


@dataclass(frozen=True)
class ActivationBytes:
    """Bytes per token kept for the backward: ``values`` (activations), ``scales`` (their FP8/E5M6 tile scales)
    and ``lse`` (FlashAttention's FP32 log-sum-exp, one per head)."""

    values: float = 0.0
    scales: float = 0.0
    lse: float = 0.0

    @property
    def total(self) -> float:
        return self.values + self.scales + self.lse

    def __add__(self, other: ActivationBytes) -> ActivationBytes:
        return ActivationBytes(self.values + other.values, self.scales + other.scales, self.lse + other.lse)

    def __mul__(self, factor: float) -> ActivationBytes:
        return ActivationBytes(self.values * factor, self.scales * factor, self.lse * factor)


LSE_NAME = "attention log-sum-exp"


def _attention(model: ModelProfile, r: ActivationRecipe) -> list[SavedTensor]:
    a, h = model.attention, model.hidden_size
    gemm = r.gemm_input_format
    out = [SavedTensor("layer input (attention norm input)", h, "bf16")]
    if r.recompute_layer:
        return out
    if not r.recompute_norms:
        out += [SavedTensor("attention norm rstd", 1, "fp32"),
                SavedTensor("attention norm output (input of the q/kv down projections)", h, gemm)]
    if a.is_mla:
        d_qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        if a.q_lora_rank:
            out.append(SavedTensor("compressed query (q_norm input)", a.q_lora_rank, "bf16"))
            if not r.recompute_norms:
                out += [SavedTensor("q_norm rstd", 1, "fp32"),
                        SavedTensor("q_norm output (wq_b input)", a.q_lora_rank, gemm)]
        out.append(SavedTensor("compressed kv + RoPE key (kv_norm input)", a.kv_lora_rank + a.qk_rope_head_dim,
                               "bf16"))
        if not r.recompute_norms:
            out += [SavedTensor("kv_norm rstd", 1, "fp32"),
                    SavedTensor("kv_norm output (wkv_b input)", a.kv_lora_rank, gemm)]
        if not r.recompute_mla_up_proj:
            out += [SavedTensor("query (attention input)", a.num_heads * d_qk, "bf16"),
                    SavedTensor("key (attention input)", a.num_heads * d_qk, "bf16"),
                    SavedTensor("value (attention input)", a.num_heads * a.v_head_dim, "bf16")]
        d_v = a.v_head_dim
    else:
        num_kv = a.num_kv_heads if a.kind == "gqa" else a.num_heads
        out += [SavedTensor("query (attention input)", a.num_heads * a.head_dim, "bf16"),
                SavedTensor("key (attention input)", num_kv * a.head_dim, "bf16"),
                SavedTensor("value (attention input)", num_kv * a.head_dim, "bf16")]
        d_v = a.head_dim
    if not r.recompute_attention_core:
        out.append(SavedTensor(LSE_NAME, a.num_heads, "fp32"))
    out.append(SavedTensor("attention output (wo input)", a.num_heads * d_v, r.attention_output_format))
    return out


def _swiglu(prefix: str, copies: float, width: int, hidden: int, r: ActivationRecipe, *, routed: bool,
            input_kept: bool) -> list[SavedTensor]:
    """One SwiGLU FFN of ``width`` applied to ``copies`` rows per token."""
    gemm = r.gemm_input_format
    out = []
    if input_kept:
        out.append(SavedTensor(f"{prefix} input", copies * hidden, gemm))
    out.append(SavedTensor(f"{prefix} gate and up outputs (SwiGLU inputs)", copies * 2 * width, gemm))
    if not r.recompute_swiglu:
        out += [SavedTensor(f"{prefix} SiLU(gate)", copies * width, "bf16"),
                SavedTensor(f"{prefix} SwiGLU output (down projection input)", copies * width, "bf16")]
    if routed and r.probs_on_swiglu and not r.recompute_swiglu:
        out.append(SavedTensor(f"{prefix} weighted SwiGLU output (down projection input)", copies * width, "bf16"))
    if routed and not r.probs_on_swiglu:
        out.append(SavedTensor(f"{prefix} output (routing-weight gradient)", copies * hidden, "bf16"))
    return out


def _ffn(model: ModelProfile, r: ActivationRecipe, moe_layer: bool) -> list[SavedTensor]:
    h = model.hidden_size
    if r.recompute_layer:
        return []
    out = [SavedTensor("FFN norm input (residual)", h, "bf16")]
    if not r.recompute_norms:
        out += [SavedTensor("FFN norm rstd", 1, "fp32"), SavedTensor("FFN norm output", h, "bf16")]
    # the dense/shared FFN reads the norm output: kept above in BF16, recomputed with the norm, or cached in FP8
    shared_input = not r.recompute_norms and r.gemm_input_format != "bf16"
    moe = model.moe
    if moe is None or not moe_layer:
        return out + _swiglu("FFN", 1, model.dense_intermediate_size, h, r, routed=False, input_kept=shared_input)
    k = moe.num_experts_per_token
    out += [SavedTensor("router scores (sigmoid output)", moe.num_routed_experts, "fp32"),
            SavedTensor("top-k expert indices", k, "int64"),
            SavedTensor("routing map (token of each routed copy)", k, "int64"),
            SavedTensor("routing weights", k, "fp32")]
    out += _swiglu("routed experts", k, moe.moe_intermediate_size, h, r, routed=True, input_kept=True)
    if moe.num_shared_experts:
        out += _swiglu("shared experts", moe.num_shared_experts, moe.moe_intermediate_size, h, r, routed=False,
                       input_kept=shared_input)
    return out


@lru_cache(maxsize=256)
def saved_tensors(model: ModelProfile, recipe: ActivationRecipe, moe_layer: bool = True) -> tuple[SavedTensor, ...]:
    """What one layer (MoE when ``moe_layer`` and the model has experts, else dense) keeps per token."""
    return tuple(_attention(model, recipe) + _ffn(model, recipe, moe_layer))


def sum_saved(tensors: tuple[SavedTensor, ...]) -> ActivationBytes:
    values = sum(t.value_bytes for t in tensors if t.name != LSE_NAME)
    lse = sum(t.value_bytes for t in tensors if t.name == LSE_NAME)
    return ActivationBytes(values, sum(t.scale_bytes for t in tensors), lse)


@lru_cache(maxsize=256)
def layer_activations(model: ModelProfile, recipe: ActivationRecipe, moe_layer: bool = True) -> ActivationBytes:
    """Bytes per token one layer keeps for its backward under ``recipe``."""
    return sum_saved(saved_tensors(model, recipe, moe_layer))


def mtp_extra_activations(model: ModelProfile) -> ActivationBytes:
    """An MTP module's own inputs besides its transformer layer: the concatenated ``eh_proj`` input, BF16 (2h)."""
    return ActivationBytes(values=2.0 * 2 * model.hidden_size)


def head_activations(model: ModelProfile) -> ActivationBytes:
    """The final norm's input (BF16); the logits are not kept (fused/chunked cross-entropy)."""
    return ActivationBytes(values=2.0 * model.hidden_size)


@lru_cache(maxsize=64)
def backward_working_bytes_per_token(model: ModelProfile) -> float:
    """Transient bytes per token while one layer runs its backward, for every recipe: the layer's tensors in BF16
    (recomputed, dequantised or already kept) and the gradients produced from them, estimated as the layer's
    plain-BF16 saved set (the ``none`` recipe), of the larger layer kind. One layer at a time."""
    kinds = (True, False) if model.moe is not None else (False,)
    return max(layer_activations(model, NONE, moe).total for moe in kinds)


def _attention_core_flops(model: ModelProfile, seq_len: int, causal: bool) -> float:
    a = model.attention
    d_qk = a.qk_nope_head_dim + a.qk_rope_head_dim if a.is_mla else a.head_dim
    d_v = a.v_head_dim if a.is_mla else a.head_dim
    attended = seq_len / 2 if causal else float(seq_len)
    return 2.0 * a.num_heads * (d_qk + d_v) * attended


def _layer_forward_flops(model: ModelProfile, moe_layer: bool, seq_len: int, causal: bool) -> float:
    """Forward FLOPs per token of one layer: 2 x active GEMM parameters + the attention core."""
    from dsctl.model.params import attention_parameters, ffn_parameters

    h = model.hidden_size
    gemm = attention_parameters(model.attention, h)
    moe = model.moe
    if moe is not None and moe_layer:
        experts = moe.num_experts_per_token + moe.num_shared_experts
        gemm += moe.num_routed_experts * h + experts * ffn_parameters(h, moe.moe_intermediate_size)
    else:
        gemm += ffn_parameters(h, model.dense_intermediate_size)
    return 2.0 * gemm + _attention_core_flops(model, seq_len, causal)


def recompute_flops_per_token(model: ModelProfile, recipe: ActivationRecipe, moe_layer: bool = True,
                              seq_len: int = 4096, causal: bool = True) -> float:
    """Forward FLOPs per token one layer redoes in its backward under ``recipe`` (norms and SwiGLU count as
    memory traffic, not FLOPs: the step-time model charges their HBM time)."""
    if recipe.recompute_layer:
        return _layer_forward_flops(model, moe_layer, seq_len, causal)
    flops = 0.0
    a = model.attention
    if recipe.recompute_mla_up_proj and a.is_mla:
        d_qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        if a.q_lora_rank:
            flops += 2.0 * a.q_lora_rank * a.num_heads * d_qk
        flops += 2.0 * a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + a.v_head_dim)
    if recipe.recompute_attention_core:
        flops += _attention_core_flops(model, seq_len, causal)
    return flops
