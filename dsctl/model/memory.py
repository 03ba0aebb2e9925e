"""Parameter totals and weight bytes of a model (launch memory, EPLB migration, checkpoint size).

weight bytes = parameters * bytes per value of the dtype (``dsctl.model.dtypes``). FP8 figures exclude the
block-scale tensors (one FP32 scale per 128x128 block, +0.02%) and assume every weight is FP8, whereas
DeepSeek-V3's released FP8 checkpoint keeps embedding, head and norms in BF16.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dsctl.model.dtypes import dtype_bytes
from dsctl.model.params import count_parameters
from dsctl.model.recipes import RECIPES, SavedTensor, layer_activations, resolve_recipe, saved_tensors
from dsctl.profiles.schema import ModelProfile


@dataclass(frozen=True)
class MemoryReport:
    """Parameters and their bytes.

    ``active_params`` counts one embedding row per token (``dsctl.model.params``);
    ``active_params_with_embedding_table`` counts the whole table, as Mixtral-style figures do.

    ``weight_bytes``, ``weight_bytes_with_mtp``, ``active_weight_bytes`` and ``bytes_per_routed_expert`` map
    a dtype name to bytes. ``*_vs_published_pct`` compare with the profile's published figures (None if none).

    ``recipe``: the activation recipe (``dsctl.model.recipes``); ``activation_tensors`` what one layer (MoE when the
    model has experts) keeps per token under it, one tensor each; ``activation_bytes_per_token_layer`` that layer's
    kept bytes per token (values + tile scales + log-sum-exp) under every recipe.
    """

    model: str
    total_params: int
    active_params: int
    active_params_with_embedding_table: int
    mtp_params: int
    total_params_with_mtp: int
    embedding_params: int
    head_params: int
    attention_params_per_layer: int
    routed_expert_params: int
    num_routed_experts_total: int
    routed_experts_params: int
    published_total_params: float
    published_active_params: float
    total_vs_published_pct: float | None
    active_vs_published_pct: float | None
    weight_bytes: dict[str, int]
    weight_bytes_with_mtp: dict[str, int]
    active_weight_bytes: dict[str, int]
    bytes_per_routed_expert: dict[str, int]
    recipe: str = ""
    activation_tensors: tuple[SavedTensor, ...] = ()
    activation_bytes_per_token_layer: dict[str, float] | None = None


def _pct(ours: float, published: float) -> float | None:
    return (ours / published - 1.0) * 100.0 if published > 0 else None


def memory_report(model: ModelProfile, dtypes: Sequence[str] = ("fp32", "bf16", "fp8"),
                  recipe: str | None = None) -> MemoryReport:
    """Parameter counts of ``model`` and their bytes in each of ``dtypes`` (names, validated), and the activations
    of one layer under ``recipe`` (None: the profile's)."""
    chosen = resolve_recipe(model, recipe)
    moe = model.moe is not None
    counts = count_parameters(model)
    sizes = {name.lower(): dtype_bytes(name) for name in dtypes}

    def in_bytes(params: int) -> dict[str, int]:
        return {name: round(params * size) for name, size in sizes.items()}

    return MemoryReport(
        model=model.name,
        total_params=counts.total,
        active_params=counts.active,
        active_params_with_embedding_table=counts.active_with_embedding_table,
        mtp_params=counts.mtp,
        total_params_with_mtp=counts.total_with_mtp,
        embedding_params=counts.embedding,
        head_params=counts.head,
        attention_params_per_layer=counts.attention,
        routed_expert_params=counts.routed_expert,
        num_routed_experts_total=counts.num_routed_experts_total,
        routed_experts_params=counts.routed_experts,
        published_total_params=model.published.total_params,
        published_active_params=model.published.active_params,
        total_vs_published_pct=_pct(counts.total, model.published.total_params),
        active_vs_published_pct=_pct(counts.active, model.published.active_params),
        weight_bytes=in_bytes(counts.total),
        weight_bytes_with_mtp=in_bytes(counts.total_with_mtp),
        active_weight_bytes=in_bytes(counts.active),
        bytes_per_routed_expert=in_bytes(counts.routed_expert),
        recipe=chosen.name,
        activation_tensors=saved_tensors(model, chosen, moe),
        activation_bytes_per_token_layer={name: layer_activations(model, r, moe).total for name, r in RECIPES.items()},
    )
