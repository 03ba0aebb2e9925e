"""Which model a statistics table belongs to, and the published EPLB deployment of a model (the defaults of
``dsctl eplb rebalance STATS`` when no layout is given).

The deployments are data of the model profile (``deployments:`` in profiles/models/<name>.yaml, validated by
dsctl.profiles.build): DeepSeek-V3 (arXiv 2412.19437, section 3.4 "Inference and Deployment") prefills on 4 nodes x
8 GPUs (EP32) with 32 redundant experts (288 slots per MoE layer, 9 per GPU) and decodes on 40 nodes x 8 GPUs
(EP320) with one expert per GPU and 64 redundant experts (320 slots). Models without a published deployment need
--replicas, --gpus and -N/--nodes.
"""

from __future__ import annotations

from collections.abc import Sequence

from dsctl.errors import InputError
from dsctl.profiles.schema import DEPLOYMENT_KINDS, Deployment, ModelProfile

__all__ = ["DEPLOYMENT_KINDS", "Deployment", "deployment_for", "infer_model"]


def infer_model(num_layers: int, num_experts: int, models: Sequence[ModelProfile]) -> ModelProfile:
    """The one MoE model whose routed-expert count is ``num_experts`` and whose MoE (or total) layer count is
    ``num_layers``; InputError listing the candidates when none or several match."""
    moe_models = [m for m in models if m.moe is not None]
    fits = [m for m in moe_models if m.moe is not None and m.moe.num_routed_experts == num_experts
            and num_layers in (m.num_moe_layers, m.num_layers)]
    if len(fits) == 1:
        return fits[0]
    shapes = ", ".join(f"{m.name} ({m.num_moe_layers} MoE layers x {m.moe.num_routed_experts} experts)"
                       for m in moe_models if m.moe is not None)
    if not fits:
        raise InputError(f"statistics are {num_layers} layers x {num_experts} experts, which matches no model "
                         f"profile: {shapes}", hint="give -m/--model, or the layout with --replicas, --gpus and -N")
    raise InputError(f"statistics of {num_layers} layers x {num_experts} experts match several models: "
                     f"{', '.join(m.name for m in fits)}", hint="choose one with -m/--model")


def deployment_for(model: ModelProfile, kind: str) -> Deployment:
    """The model profile's published ``kind`` deployment; InputError when it has none."""
    if kind not in DEPLOYMENT_KINDS:
        raise InputError(f"{kind!r} is not valid: choose {' or '.join(DEPLOYMENT_KINDS)}", field="deployment")
    found = model.deployment(kind)
    if found is None:
        raise InputError(f"model {model.name} has no published {kind} deployment",
                         hint="give the layout with --replicas, --gpus and -N/--nodes")
    return found
