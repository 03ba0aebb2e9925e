"""Tensor parallelism (Megatron-LM's, with sequence parallelism) inside one node: which degrees are allowed and
what each TP rank holds.

- ``tp`` divides the GPUs of a node (TP's collectives stay on NVLink), the attention heads (each rank computes
  ``num_heads / tp`` heads) and, for grouped-query attention, the KV heads (Megatron-LM asserts
  ``num_query_groups % tp == 0``). Searched: :data:`TP_DEGREES` that satisfy all three.
- Split over the ``tp`` ranks (column-parallel then row-parallel linears, vocabulary-parallel embedding and head):
  every dense GEMM weight (attention projections, dense FFN, shared experts, MTP projection), the embedding table
  and the output head. Replicated on every TP rank: RMSNorm weights (sequence parallelism splits their
  activations, not their weights) and the MoE router (:func:`replicated_params`).
- Routed experts are not tensor-parallel (expert-TP = 1, DeepSeek-V3's; Megatron-LM needs
  ``--expert-tensor-parallel-size 1``, its default being the dense ``tp``): the EP group is carved out of a
  stage's ``tp x dp`` ranks, each GPU holds ``routed / ep`` expert parameters and runs its own ``1/tp`` of the
  sequence's tokens through them.
- Activations: with sequence parallelism every saved tensor of a layer is split over the ``tp`` ranks (norm and
  residual tensors along the sequence, GEMM inputs and outputs along the hidden dimension), so a layer's
  activation memory per GPU is its ``tp = 1`` figure over ``tp``: Korthikanti et al. 2022, "Reducing Activation
  Recomputation in Large Transformer Models", eq. 4-5: ``s b h (34 + 5 a s / h)`` bytes per layer without
  parallelism, ``s b h (34 / t + 5 a s / (h t))`` with tensor and sequence parallelism (BF16, no recompute).
"""

from __future__ import annotations

from dsctl.errors import InputError, one_of
from dsctl.launch.layout import check_tp_in_node, tp_in_node
from dsctl.launch.rules import divisors
from dsctl.launch.stages import Stage
from dsctl.profiles.schema import ModelProfile

#: tensor-parallel degrees the layout search tries (those that divide a node and the heads)
TP_DEGREES: tuple[int, ...] = (1, 2, 4, 8)


def _kv_heads(model: ModelProfile) -> int:
    a = model.attention
    return a.num_kv_heads if a.kind == "gqa" and a.num_kv_heads else a.num_heads


def tp_allowed(model: ModelProfile, gpus_per_node: int, tp: int) -> bool:
    """Whether ``tp`` divides the node's GPUs, the attention heads and (GQA) the KV heads."""
    return tp_in_node(tp, gpus_per_node) and model.attention.num_heads % tp == 0 and _kv_heads(model) % tp == 0


def check_tp(model: ModelProfile, gpus_per_node: int, tp: int) -> None:
    """A given ``tp`` (>= 1) held to :func:`tp_allowed`'s rules; InputError naming the rule it breaks."""
    check_tp_in_node(tp, gpus_per_node)
    for heads, what in ((model.attention.num_heads, "attention heads"), (_kv_heads(model), "KV heads")):
        if heads % tp:
            valid = [str(t) for t in divisors(gpus_per_node) if tp_allowed(model, gpus_per_node, t)]
            raise InputError(f"{tp} does not divide the {heads} {what} of {model.name} (each tensor-parallel "
                             "rank computes whole heads)", field="tp",
                             hint=f"valid tp for {model.name} on {gpus_per_node}-GPU nodes: {one_of(valid)}")


def searched_tps(model: ModelProfile, gpus_per_node: int) -> tuple[int, ...]:
    """:data:`TP_DEGREES` that ``model`` on nodes of ``gpus_per_node`` GPUs allows."""
    return tuple(t for t in TP_DEGREES if tp_allowed(model, gpus_per_node, t))


def _norm_params_per_layer(model: ModelProfile) -> int:
    a = model.attention
    small = (a.q_lora_rank or 0) + (a.kv_lora_rank or 0) if a.is_mla else 0
    return 2 * model.hidden_size + small


def layer_replicated_params(model: ModelProfile, moe: bool) -> int:
    """Parameters of one transformer layer every TP rank holds whole: its RMSNorm weights and, for a MoE layer
    (``moe``), its router (``experts x h`` and its bias)."""
    experts = model.moe.num_routed_experts if moe and model.moe is not None else 0
    return _norm_params_per_layer(model) + experts * (model.hidden_size + 1)


def replicated_params(model: ModelProfile, stage: Stage) -> int:
    """Parameters of ``stage`` every TP rank holds whole: RMSNorm weights (two per layer, MLA's q/kv norms, two per
    MTP module and the final norm) and each MoE layer's router (``experts x h`` and its bias)."""
    h = model.hidden_size
    layers = stage.num_dense_layers + stage.num_moe_layers + stage.num_mtp_modules
    norms = layers * _norm_params_per_layer(model) + stage.num_mtp_modules * 3 * h + (h if stage.has_head else 0)
    moe = model.moe
    routers = (stage.num_moe_layers + stage.num_mtp_modules) * moe.num_routed_experts * (h + 1) if moe else 0
    return min(stage.dense_params, norms + routers)


def dense_per_tp_rank(dense_params: float, replicated: float, tp: int) -> float:
    """Dense (non-routed) parameters one TP rank holds: the replicated ones whole, the rest over ``tp``."""
    return replicated + (dense_params - replicated) / tp
