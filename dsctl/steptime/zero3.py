"""ZeRO-3's parameter all-gathers in the step: what each layer's forward and backward wait for on the NIC.

Under ZeRO-3 a GPU keeps only its shard of every parameter (dense parameters over the ``dp`` group, its experts
over ``expert_dp``). Before the forward of a layer, and again before its backward, the layer's parameters are
all-gathered over those groups (ring, BF16: :func:`dsctl.steptime.collectives.ring_seconds`, each GPU's ring on
its own NIC, as ZeRO-1's collectives), every micro-batch; FSDP and DeepSpeed prefetch the next layer's gather
while the current layer computes. The gradients are reduce-scattered after every micro-batch's backward, as
under ZeRO-2 (``StageSeconds.grad_sync``, counted exposed), and the step's tail keeps AdamW only: there is no
end-of-step parameter all-gather, the next step gathers layer by layer.

The gathers share the GPU's NIC with the EP all-to-all. The model adds a layer's gather seconds to the NIC time
of the all-to-all in the same op (the forward gather to the forward dispatch, the backward gather to the
backward's first all-to-all, the combine gradient):

- DualPipe, DualPipeV (overlapped F&B ops): the gather joins the all-to-all's side of its slot, so it is hidden
  while the other chunk's compute is longer and exposed by the excess. An upper bound: a real gather may also use
  the NIC in slots where the all-to-all leaves it idle;
- 1F1B, ZB1P, interleaved 1F1B (no overlapped op; the all-to-all is on the critical path): the prefetch runs
  under the layer's compute, the NIC being free then, and only ``max(0, gather - compute)`` is exposed, added to
  the all-to-all's seconds (all of it for a dense layer, which has no all-to-all).

Parameters outside the layers (embedding, output head, final norm, MTP projections) are gathered exposed, before
the stage's forward and its backward.

Under tensor parallelism ``tp`` each GPU gathers its TP rank's share of the dense parameters over its ``dp``
group (:func:`dsctl.launch.tensor_parallel.dense_per_tp_rank`: norms and router whole, the rest over ``tp``), as
ZeRO-1's collectives move it; routed experts are not tensor-parallel.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Protocol

from dsctl.launch.stages import Stage
from dsctl.launch.tensor_parallel import dense_per_tp_rank, layer_replicated_params, replicated_params
from dsctl.model.params import ParameterCounts
from dsctl.profiles.schema import ModelProfile
from dsctl.steptime.collectives import PARAMETER_BYTES, ring_seconds
from dsctl.steptime.layers import BlockSeconds, LayerSeconds


class ShardGroups(Protocol):
    """The degrees the gathers depend on (a :class:`dsctl.launch.layout.ParallelLayout` has them)."""

    @property
    def dp(self) -> int: ...

    @property
    def expert_dp(self) -> int: ...

    @property
    def ep(self) -> int: ...

    @property
    def tp(self) -> int: ...


def layer_parameters(model: ModelProfile, counts: ParameterCounts, moe: bool, tp: int = 1) -> tuple[float, float]:
    """``(dense, routed)`` parameters of one transformer layer: a MoE layer's (``moe``) or a dense one's;
    ``dense`` is one TP rank's share under tensor parallelism ``tp``; ``routed`` counts every routed expert of
    the layer (before the EP split)."""
    if moe and model.moe is not None:
        index = model.num_dense_layers
        routed = float(model.moe.num_routed_experts * counts.routed_expert)
        dense = float(counts.per_layer[index]) - routed
        return dense_per_tp_rank(dense, layer_replicated_params(model, True), tp), routed
    return dense_per_tp_rank(float(counts.per_layer[0]), layer_replicated_params(model, False), tp), 0.0


def gather_seconds(dense: float, routed_per_gpu: float, layout: ShardGroups, bytes_per_s: float,
                   latency_s: float) -> float:
    """All-gather (BF16) of ``dense`` parameters over ``dp`` and this GPU's ``routed_per_gpu`` expert parameters
    over ``expert_dp``, one after the other on the GPU's NIC (seconds)."""
    return (ring_seconds(dense, PARAMETER_BYTES, layout.dp, bytes_per_s, latency_s)
            + ring_seconds(routed_per_gpu, PARAMETER_BYTES, layout.expert_dp, bytes_per_s, latency_s))


def with_gathers(layer: LayerSeconds, gather_s: float, overlapped: bool) -> LayerSeconds:
    """``layer`` with its forward and its backward gather on the all-to-all's NIC time (module docstring):
    the whole gather under an overlapping schedule, else the part its compute does not hide."""
    forward = gather_s if overlapped else max(0.0, gather_s - layer.compute.f)
    backward = gather_s if overlapped else max(0.0, gather_s - layer.compute.b)
    return replace(layer, dispatch_f=layer.dispatch_f + forward, combine_b=layer.combine_b + backward)


def zero3_layer_kinds(model: ModelProfile, counts: ParameterCounts, kinds: dict[bool, LayerSeconds],
                      layout: ShardGroups, bytes_per_s: float, latency_s: float,
                      overlapped: bool) -> dict[bool, LayerSeconds]:
    """Both layer kinds (``True`` MoE, ``False`` dense) with their ZeRO-3 gathers."""
    out = {}
    for moe, layer in kinds.items():
        dense, routed = layer_parameters(model, counts, moe, layout.tp)
        out[moe] = with_gathers(layer, gather_seconds(dense, routed / layout.ep, layout, bytes_per_s, latency_s),
                                overlapped)
    return out


def outside_parameters(model: ModelProfile, counts: ParameterCounts, stage: Stage) -> float:
    """Dense parameters of ``stage`` outside its transformer layers and its MTP modules' layers (embedding,
    head, final norm, MTP projections and norms)."""
    dense_layer, _ = layer_parameters(model, counts, False)
    moe_dense, _ = layer_parameters(model, counts, True)
    in_layers = stage.num_dense_layers * dense_layer + (stage.num_moe_layers + stage.num_mtp_modules) * moe_dense
    if model.moe is None:
        in_layers = (stage.num_dense_layers + stage.num_moe_layers + stage.num_mtp_modules) * dense_layer
    return max(0.0, stage.dense_params - in_layers)


@lru_cache(maxsize=1024)  # a layout search asks per stage and layout
def outside_per_tp_rank(model: ModelProfile, counts: ParameterCounts, stage: Stage, tp: int) -> float:
    """:func:`outside_parameters` one TP rank holds: the final norm and MTP norms whole, embedding, head and MTP
    projections over ``tp``."""
    outside = outside_parameters(model, counts, stage)
    if tp == 1:
        return outside
    in_layers = (stage.num_dense_layers * layer_replicated_params(model, False)
                 + (stage.num_moe_layers + stage.num_mtp_modules) * layer_replicated_params(model, True))
    replicated = min(outside, max(0.0, float(replicated_params(model, stage) - in_layers)))
    return dense_per_tp_rank(outside, replicated, tp)


def outside_gather_block(model: ModelProfile, counts: ParameterCounts, stage: Stage, layout: ShardGroups,
                         bytes_per_s: float, latency_s: float) -> BlockSeconds:
    """The exposed gathers of the stage's parameters outside its layers (this TP rank's share): once before its
    forward (F) and once before its backward (I)."""
    gather = gather_seconds(outside_per_tp_rank(model, counts, stage, layout.tp), 0.0, layout, bytes_per_s,
                            latency_s)
    return BlockSeconds(gather, gather, 0.0)
