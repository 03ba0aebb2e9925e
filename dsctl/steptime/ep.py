"""Expert-parallel all-to-all seconds per MoE layer for the step-time model: the interface and its one default.

The step-time model asks an :class:`EpCostModel` for the seconds of one dispatch and one combine of
``tokens_per_gpu`` tokens at given bytes per token. The default, :class:`FabricEp`, is the calibrated fabric
model :func:`dsctl.topology.sim.ep_time.ep_exchange_seconds` (DeepEP's normal kernels: RDMA at line rate x
``nic_efficiency``, NVLink at the achievable rate; the closed form on the node profile, or the max-min fabric
simulator on a planned fabric), its seconds multiplied by ``imbalance`` = 1 / balancedness (the busiest GPU
receives that much more). Any callable with the same signature can replace it (``predict_step(ep_cost=...)``).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import Protocol

from dsctl.profiles.schema import ModelProfile, NodeProfile
from dsctl.topology.sim.ep_time import ep_exchange_seconds


@dataclass(frozen=True)
class EpSeconds:
    """Seconds of one all-to-all pair of one MoE layer: ``dispatch_s`` (to the experts), ``combine_s`` (back)."""

    dispatch_s: float
    combine_s: float

    @property
    def total_s(self) -> float:
        return self.dispatch_s + self.combine_s


class EpCostModel(Protocol):
    """Seconds of one dispatch and one combine of ``tokens_per_gpu`` tokens, each carrying the given bytes."""

    def __call__(self, tokens_per_gpu: float, dispatch_bytes_per_token: float,
                 combine_bytes_per_token: float) -> EpSeconds: ...


def max_nodes_per_token(model: ModelProfile, num_nodes: int) -> int:
    """Most nodes of an EP group of ``num_nodes`` nodes one token's experts can sit on.

    Node-limited routing (``num_expert_groups`` > 1): a token uses at most ``num_limited_groups`` groups, and a
    group of experts spreads over ``ceil(num_nodes / num_expert_groups)`` nodes (V3 at EP64: 8 groups on 8 nodes,
    4 nodes per token). Without groups a token reaches at most ``top_k`` nodes.
    """
    moe = model.moe
    if moe is None:
        return 1
    if moe.num_expert_groups > 1:
        reach = moe.num_limited_groups * math.ceil(num_nodes / moe.num_expert_groups)
    else:
        reach = moe.num_experts_per_token
    return max(1, min(num_nodes, reach))


@dataclass(frozen=True)
class FabricEp:
    """Default EP model (module docstring): one EP group of ``ep`` GPUs of ``node``; ``plan`` a plan.json text to
    simulate on (None: the node profile's closed form), ``routing`` as ``topology simulate``."""

    node: NodeProfile
    ep: int
    hidden_size: int
    top_k: int
    max_nodes_per_token: int
    imbalance: float = 1.0
    plan: str | None = None
    routing: str = "adaptive"

    def __call__(self, tokens_per_gpu: float, dispatch_bytes_per_token: float,
                 combine_bytes_per_token: float) -> EpSeconds:
        x = ep_exchange_seconds(self.node, self.ep, max(1, round(tokens_per_gpu)), self.hidden_size, self.top_k,
                                self.max_nodes_per_token, self.routing, self.plan,
                                (dispatch_bytes_per_token, combine_bytes_per_token))
        return EpSeconds(self.imbalance * x.dispatch_s, self.imbalance * x.combine_s)


def fabric_ep(model: ModelProfile, node: NodeProfile, ep: int, imbalance: float = 1.0, plan: str | None = None,
              routing: str = "adaptive") -> FabricEp:
    """:class:`FabricEp` for ``model``'s MoE layers at EP degree ``ep`` on ``node`` (or on the fabric ``plan``)."""
    moe = model.moe
    top_k = moe.num_experts_per_token if moe is not None else 1
    nodes = max(1, ep // node.num_gpus)
    return FabricEp(node, ep, model.hidden_size, top_k, max_nodes_per_token(model, nodes), imbalance, plan, routing)


#: what ``fabric_name`` says when the EP model runs on the node profile (no plan)
NO_PLAN = "node profile (closed form)"


@functools.lru_cache(maxsize=16)  # keyed by the plan text, as the simulator's cache
def fabric_name(plan: str | None) -> str:
    """The fabric the EP all-to-alls ran on: the plan's kind, nodes and oversubscription (``"mpft, 256 nodes,
    1:1"``), or :data:`NO_PLAN`. A plan the simulator accepted is JSON with a ``spec``; anything else says so."""
    if plan is None:
        return NO_PLAN
    try:
        spec = json.loads(plan).get("spec", {})
        return f"{spec['kind']}, {int(spec['num_nodes'])} nodes, {float(spec.get('oversubscription', 1.0)):g}:1 (plan)"
    except (ValueError, KeyError, TypeError, AttributeError):
        return "plan"
