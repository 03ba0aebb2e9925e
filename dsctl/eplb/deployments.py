"""Which model a statistics table belongs to, and the published EPLB deployments of a model (the defaults of
``dsctl eplb rebalance STATS`` when no layout is given).

DeepSeek-V3 (arXiv 2412.19437, section 3.4 "Inference and Deployment"): prefill runs on 4 nodes x 8 GPUs (EP32)
with 32 redundant experts (288 slots per MoE layer, 9 per GPU); decode on 40 nodes x 8 GPUs (EP320) with one
expert per GPU and 64 redundant experts (320 slots). Models without a published deployment need --replicas,
--gpus and -N/--nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dsctl.errors import InputError
from dsctl.profiles.schema import ModelProfile

DEPLOYMENT_KINDS = ("prefill", "decode")


@dataclass(frozen=True)
class Deployment:
    """An expert-parallel deployment: ``num_gpus`` on ``num_nodes`` nodes, ``num_redundant_experts`` extra slots."""

    kind: str
    num_gpus: int
    num_nodes: int
    num_redundant_experts: int
    source: str


#: published deployments per model profile name
DEPLOYMENTS: dict[str, dict[str, Deployment]] = {
    "deepseek-v3": {
        "prefill": Deployment("prefill", 32, 4, 32, "DeepSeek-V3 tech report (arXiv 2412.19437) section 3.4.1"),
        "decode": Deployment("decode", 320, 40, 64, "DeepSeek-V3 tech report (arXiv 2412.19437) section 3.4.2"),
    },
}


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
    """The model's published ``kind`` deployment; InputError when it has none."""
    if kind not in DEPLOYMENT_KINDS:
        raise InputError(f"--deployment {kind!r} is not valid: choose {' or '.join(DEPLOYMENT_KINDS)}")
    known = DEPLOYMENTS.get(model.name, {})
    if kind not in known:
        raise InputError(f"model {model.name} has no published {kind} deployment",
                         hint="give the layout with --replicas, --gpus and -N/--nodes")
    return known[kind]
