"""``predict_step``: a layout's training step in seconds, from the model and node profiles alone.

Per stage op seconds (``stages.py`` from ``layers.py``, each op with its blocking pipeline sends), the schedule
simulated with them and a p2p latency (:func:`dsctl.launch.schedule.simulate_stage_costs`: the bubble comes from
the schedule), then the ZeRO-1 and
optimizer tail (``collectives.py``). docs/steptime.md gives every formula and the validation against DeepSeek-V3.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from dsctl.errors import InputError
from dsctl.launch.layout import ParallelLayout
from dsctl.launch.rules import DUAL_SCHEDULES, stages_of_rank
from dsctl.launch.schedule import simulate_stage_costs
from dsctl.launch.schedule.timed import TimedSchedule, prepared_schedule
from dsctl.launch.stages import Stage, split_stages
from dsctl.launch.tensor_parallel import dense_per_tp_rank, replicated_params
from dsctl.model.flops import training_flops
from dsctl.model.params import ParameterCounts, count_parameters
from dsctl.model.recipes import DEEPSEEK, ActivationRecipe
from dsctl.profiles.schema import ModelProfile, NodeProfile
from dsctl.steptime.collectives import (
    IB_LATENCY_S,
    PREDICTED_ZERO_STAGES,
    ROCE_LATENCY_S,
    OptimizerSeconds,
    StageShard,
    adam_seconds,
    exposed_tail,
    p2p_seconds,
    stage_collectives,
)
from dsctl.steptime.ep import EpCostModel, fabric_ep, fabric_name
from dsctl.steptime.hardware import GpuRates, gpu_rates
from dsctl.steptime.layers import (
    BlockSeconds,
    LayerSeconds,
    embedding_block,
    head_block,
    layer_seconds,
    mtp_projection_block,
)
from dsctl.steptime.result import LayerCost, PhaseBreakdown, StageCost, StepTime
from dsctl.steptime.stages import OpSecondsTable, StageSeconds, overlapped_seconds
from dsctl.steptime.zero3 import ShardGroups, outside_gather_block, zero3_layer_kinds


def _stage_seconds(model: ModelProfile, stage: Stage, tokens: float, rates: GpuRates,
                   kinds: dict[bool, LayerSeconds], tp: int = 1) -> StageSeconds:
    """Stage ``stage`` from the two layer kinds (``kinds[True]`` MoE, ``kinds[False]`` dense)."""
    layers = [kinds[model.moe is not None and index >= model.num_dense_layers]
              for index in range(stage.first_layer, stage.last_layer + 1)]
    outside = BlockSeconds()
    if stage.has_embedding:
        outside += embedding_block(model, tokens, rates, tp)
    for _ in range(stage.num_mtp_modules):  # its own lookup of the shared embedding, projection, layer, head
        outside += embedding_block(model, tokens, rates, tp) + mtp_projection_block(model, tokens, rates, tp)
        outside += head_block(model, tokens, rates, tp)
        layers.append(kinds[model.moe is not None])
    if stage.has_head:
        outside += head_block(model, tokens, rates, tp)
    return StageSeconds(stage.index, tuple(layers), outside)


def _tp_dense(model: ModelProfile, stage: Stage, tp: int) -> float:
    """Dense parameters one GPU of ``stage`` holds under tensor parallelism ``tp`` (what its ZeRO collectives
    and AdamW move)."""
    if tp == 1:
        return float(stage.dense_params)
    return dense_per_tp_rank(stage.dense_params, replicated_params(model, stage), tp)


def _link(node: NodeProfile) -> tuple[float, float]:
    """(bytes/s per GPU over its NIC at the profile's efficiency, latency s)."""
    nics_per_gpu = node.num_compute_nics / node.num_gpus if node.num_gpus else 1.0
    rate = node.compute_nic_gbps * 1e9 / 8 * node.nic_efficiency * nics_per_gpu
    return rate, IB_LATENCY_S if node.compute_link_layer == "infiniband" else ROCE_LATENCY_S


@functools.lru_cache(maxsize=32)
def _stage_op_indices(schedule: str, num_stages: int,
                      num_micro_batches: int) -> tuple[dict[int, tuple[int, int]], ...]:
    """Per rank and stage it runs: (index of its last backward op on the stage, index of its first forward of it),
    -1 for none; they depend on the schedule's shape only, so a layout search finds them once per shape."""
    out = []
    for row in prepared_schedule(schedule, num_stages, num_micro_batches)[1]:
        last_b: dict[int, int] = {}
        first_f: dict[int, int] = {}
        for index, (kind, fwd, bwd) in enumerate(row):
            if bwd is not None and kind in ("B", "W", "FB"):
                last_b[bwd] = index
            if fwd is not None and fwd not in first_f:
                first_f[fwd] = index
        out.append({s: (last_b.get(s, -1), first_f.get(s, -1)) for s in set(last_b) | set(first_f)})
    return tuple(out)


def _stage_times(timed: TimedSchedule | None, rank: int, pipeline_s: float) -> dict[int, tuple[float, float]]:
    """Per stage the rank runs: (end of its last backward work on the stage, start of its first forward of it),
    seconds."""
    if timed is None:
        return {}
    indices = _stage_op_indices(timed.schedule, timed.num_stages, timed.num_micro_batches)[rank]
    starts, ends = timed.starts[rank], timed.ends[rank]
    return {s: (ends[b] if b >= 0 else 0.0, starts[f] if f >= 0 else pipeline_s) for s, (b, f) in indices.items()}


def _rank_tail(model: ModelProfile, layout: ParallelLayout, stages: tuple[Stage, ...], rank: int,
               link_rate: float, hbm: float, latency: float, timed: TimedSchedule | None,
               pipeline_s: float) -> OptimizerSeconds:
    """ZeRO-1 tail of pipeline rank ``rank`` (its stages' dense parameters and its share of their experts), with
    the overlap its op order allows (:func:`dsctl.steptime.collectives.exposed_tail`)."""
    shards, shard_params = [], 0.0
    times = _stage_times(timed, rank, pipeline_s)
    unknown = (pipeline_s, 0.0) if timed is None else (0.0, pipeline_s)  # no schedule: nothing overlaps
    for s in stages_of_rank(layout.schedule, layout.pp, rank):
        dense, experts = _tp_dense(model, stages[s], layout.tp), stages[s].routed_expert_params / layout.ep
        rs, ag = stage_collectives(dense, experts, layout.dp, layout.expert_dp, link_rate, latency)
        rs = 0.0 if layout.zero_stage >= 2 else rs  # ZeRO-2/3: reduce-scattered in the pipeline, per micro-batch
        ag = 0.0 if layout.zero_stage == 3 else ag  # ZeRO-3: gathered layer by layer inside the next step
        shards.append(StageShard(rs, ag, *times.get(s, unknown)))
        shard_params += dense / max(layout.dp, 1) + experts / max(layout.expert_dp, 1)
    return exposed_tail(shards, pipeline_s, adam_seconds(shard_params, hbm))


def _zero_stage_costs(model: ModelProfile, counts: ParameterCounts, stages: tuple[Stage, ...], tokens: float,
                      rates: GpuRates, kinds: dict[bool, LayerSeconds], zero_stage: int, groups: ShardGroups,
                      dual: bool, link_rate: float, latency: float) -> tuple[StageSeconds, ...]:
    """Every stage's seconds from the two layer kinds (under ``groups.tp``); under ZeRO-3 with its parameter
    gathers (``dsctl.steptime.zero3``: per layer on the all-to-all's NIC time, outside the layers exposed; this TP
    rank's share of the dense parameters)."""
    tp = groups.tp
    if zero_stage != 3:
        return tuple(_stage_seconds(model, s, tokens, rates, kinds, tp) for s in stages)
    gathered = zero3_layer_kinds(model, counts, kinds, groups, link_rate, latency, dual)
    return tuple(replace(c, outside=c.outside + outside_gather_block(model, counts, s, groups, link_rate, latency))
                 for c, s in zip((_stage_seconds(model, s, tokens, rates, gathered, tp) for s in stages), stages,
                                 strict=True))


@dataclass(frozen=True)
class _Groups:
    """:class:`dsctl.steptime.zero3.ShardGroups` from plain degrees (the lower bound's cache key has no layout)."""

    dp: int
    expert_dp: int
    ep: int
    tp: int


def overlapped_pair_seconds(model: ModelProfile, node: NodeProfile, ep: int, num_moe_layers: int = 4,
                            tokens: int = 4096, seq_len: int = 4096,
                            ep_cost: EpCostModel | None = None) -> float:
    """One DualPipe F&B op of two stages of ``num_moe_layers`` MoE layers each (no PP communication): the unit
    DeepSeek's profile-data ``train.json`` traces (4 layers, EP64, 4K tokens, balanced routing)."""
    rates = gpu_rates(node, model.training_precision)
    ep_cost = ep_cost or fabric_ep(model, node, ep)
    layer = layer_seconds(model, True, float(tokens), seq_len, True, ep, rates, ep_cost, 1.0)
    stage = StageSeconds(0, (layer,) * num_moe_layers, BlockSeconds())
    return overlapped_seconds(stage, stage, rates.comm_slowdown)


def predict_step(model: ModelProfile, node: NodeProfile, layout: ParallelLayout, num_micro_batches: int,
                 micro_batch_size: int = 1, seq_len: int = 4096, balancedness: float = 1.0,
                 ep_cost: EpCostModel | None = None, fabric_plan: str | None = None,
                 recipe: ActivationRecipe = DEEPSEEK) -> StepTime:
    """Predict one training step of ``layout`` (seconds).

    ``num_micro_batches``: micro-batches per pipeline per step (DualPipe: both directions together);
    ``micro_batch_size`` sequences of ``seq_len`` tokens each. ``balancedness`` in (0, 1]: mean over max expert
    load (1.0 = absolutely balanced routing); the busiest GPU's expert work and all-to-all scale by its
    inverse. ``recipe``: the activation recipe, whose recompute the backward pays.
    ``ep_cost``: the EP all-to-all model (default :func:`dsctl.steptime.ep.fabric_ep`: the calibrated
    fabric on ``fabric_plan``, a plan.json text, or on the node profile when None).
    Raises ``InputError`` on impossible values.
    """
    if not (0.0 < balancedness <= 1.0) or math.isnan(balancedness):
        raise InputError(f"{balancedness}: expected a fraction in (0, 1] (mean / max expert load)",
                         field="balancedness")
    if model.moe is not None and layout.ep > 1 and balancedness * layout.ep < 1.0:
        raise InputError(f"{balancedness:g}: below 1/ep = {1 / layout.ep:g}, the value when every "
                         "token goes to one GPU's experts", field="balancedness")
    if num_micro_batches < 1 or micro_batch_size < 1 or seq_len < 1:
        raise InputError("micro-batches, micro-batch size and sequence length must be at least 1")
    if layout.zero_stage not in PREDICTED_ZERO_STAGES:
        raise InputError(f"ZeRO-{layout.zero_stage}: the step-time model covers ZeRO-1, 2 and 3 only")
    imbalance = 1.0 / balancedness
    explicit_ep = ep_cost
    rates = gpu_rates(node, model.training_precision)
    tokens = float(micro_batch_size * seq_len)
    counts = count_parameters(model)
    stages = split_stages(model, counts, layout.num_stages)
    if ep_cost is None and layout.ep > 1 and model.moe is not None:
        ep_cost = fabric_ep(model, node, layout.ep, imbalance, fabric_plan)
    tp = layout.tp
    layer_kinds = {moe: layer_seconds(model, moe, tokens, seq_len, True, layout.ep, rates, ep_cost, imbalance, recipe,
                                      tp) for moe in (False, True)}
    link_rate, latency = _link(node)
    costs = _zero_stage_costs(model, counts, stages, tokens, rates, layer_kinds, layout.zero_stage, layout,
                              layout.schedule in DUAL_SCHEDULES, link_rate, latency)
    if layout.zero_stage >= 2:  # every micro-batch's backward reduce-scatters the stage's gradients
        costs = tuple(replace(c, grad_sync=stage_collectives(_tp_dense(model, s, tp),
                                                             s.routed_expert_params / layout.ep,
                                                             layout.dp, layout.expert_dp, link_rate, latency)[0])
                      for c, s in zip(costs, stages, strict=True))
    # sequence parallelism: each TP rank sends its 1/tp of the boundary activation over its own NIC
    p2p = p2p_seconds(tokens / tp, model.hidden_size, link_rate, latency) if layout.pp > 1 else 0.0
    # the sender waits for its sends (stages.py): their bytes in the op, one latency on the dependency
    table = OpSecondsTable(costs, layout.schedule in DUAL_SCHEDULES, rates.comm_slowdown, layout.schedule,
                           p2p - latency if layout.pp > 1 else 0.0)
    if layout.num_stages > 1:
        timed = simulate_stage_costs(layout.schedule, layout.num_stages, num_micro_batches, table,
                                     latency if layout.pp > 1 else 0.0)
        pipeline, kinds, counts_by_kind = timed.makespan, timed.seconds_by_kind(0), timed.count_by_kind(0)
        idle = timed.idle_per_rank
    else:
        timed = None
        one = costs[0]
        pipeline = num_micro_batches * (one.f + one.b)
        kinds = {"F": num_micro_batches * one.f, "B": num_micro_batches * one.b, "I": 0.0, "W": 0.0, "FB": 0.0}
        counts_by_kind = {"F": num_micro_batches, "B": num_micro_batches, "I": 0, "W": 0, "FB": 0}
        idle = (0.0,)
    tail = max((_rank_tail(model, layout, stages, r, link_rate, rates.hbm_bytes_per_s, latency, timed, pipeline)
                for r in range(layout.pp)), key=lambda t: t.exposed_s)
    breakdown = PhaseBreakdown(
        rank=0, one_f_s=kinds["F"], one_b_s=kinds["B"] + kinds["I"], one_w_s=kinds["W"],
        overlapped_fb_s=kinds["FB"], bubble_s=idle[0], optimizer_s=tail.exposed_s, num_f=counts_by_kind["F"],
        num_b=counts_by_kind["B"] + counts_by_kind["I"], num_w=counts_by_kind["W"], num_fb=counts_by_kind["FB"])
    moe_layer = layer_kinds[True] if layer_kinds[True].comm_f > 0 else None  # the all-to-all alone (no ZeRO-3 gather)
    return StepTime(
        step_s=pipeline + tail.exposed_s, pipeline_s=pipeline, optimizer_s=tail.exposed_s, breakdown=breakdown,
        max_bubble_s=max(idle), tokens_per_step=tokens * num_micro_batches * layout.dp,
        world_size=layout.world_size,
        flops_per_token_noncausal=training_flops(model, seq_len, causal=False).flops_per_token,
        flops_per_token_causal=training_flops(model, seq_len, causal=True).flops_per_token,
        bf16_peak_flops=node.bf16_tflops * 1e12, reduce_scatter_s=tail.reduce_scatter_s,
        all_gather_s=tail.all_gather_s, adam_s=tail.adam_s, p2p_s=p2p,
        ep_dispatch_s=moe_layer.dispatch_f if moe_layer else 0.0,
        ep_combine_s=moe_layer.combine_f if moe_layer else 0.0,
        stages=tuple(StageCost(c.index, c.f, c.i, c.w, c.comm_f, c.comm_b) for c in costs),
        layers=tuple(_layer_cost("moe" if moe else "dense", layer_kinds[moe]) for moe in (False, True)
                     if moe == (model.moe is not None) or (moe is False and model.num_dense_layers)),
        fabric=fabric_name(fabric_plan) if explicit_ep is None else "given EP model",
    )


def step_lower_bound(model: ModelProfile, node: NodeProfile, layout: ParallelLayout, num_micro_batches: int,
                     micro_batch_size: int = 1, seq_len: int = 4096, balancedness: float = 1.0,
                     recipe: ActivationRecipe = DEEPSEEK, ep_cost: EpCostModel | None = None) -> float:
    """Seconds no schedule of ``layout`` can beat (:func:`predict_step` is never below it): every stage runs
    every micro-batch's forward and backward once, on one of the ranks holding it (DualPipe: two, each taking
    half of the micro-batches), so the step is at least the busiest rank's ``M x sum over its stages of
    w_s / holders_s``, where ``w_s`` is the stage's work per micro-batch: compute (recompute
    included, tensor parallelism's collectives) + ZeRO-2/3's reduce-scatter + its all-to-alls (with ZeRO-3's
    gathers) under 1F1B/ZB1P/interleaved (nothing overlaps there), and under DualPipe/DualPipeV the larger of
    compute + reduce-scatter and the all-to-alls (an overlapped slot takes the longer of its two sides). No
    bubble and no optimizer tail: cheap enough to skip the simulation of a layout that cannot win. ``ep_cost``
    as :func:`predict_step` (None: no all-to-all counted, still a bound)."""
    sharded = layout.zero_stage >= 2  # only ZeRO-2/3's per-micro-batch collectives depend on dp
    cost: Any = ep_cost
    bound_work: Callable[..., tuple[float, ...]] = _bound_work
    try:
        hash(cost)
    except TypeError:  # a caller's EP model that cannot be a cache key
        bound_work = _stage_work
    work = bound_work(model, node, layout.num_stages, layout.schedule in DUAL_SCHEDULES, layout.zero_stage,
                       layout.dp if sharded else 0, layout.expert_dp if sharded else 0, layout.ep, layout.tp,
                       float(micro_batch_size * seq_len), seq_len, balancedness, recipe, cost)
    return num_micro_batches * max(sum(work[s] / holders for s, holders in rank)
                                   for rank in _rank_shares(layout.schedule, layout.pp))


@functools.lru_cache(maxsize=128)
def _split(model: ModelProfile, num_stages: int) -> tuple[Stage, ...]:
    """``model``'s stage split into ``num_stages`` (cached for the bound: one split per stage count)."""
    return split_stages(model, count_parameters(model), num_stages)


@functools.lru_cache(maxsize=256)
def _rank_shares(schedule: str, pp: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Per pipeline rank: (stage, number of ranks holding it) for each stage it holds; a stage's micro-batches
    split evenly over its holders (DualPipe: two, one per direction)."""
    held = [stages_of_rank(schedule, pp, r) for r in range(pp)]
    holders: dict[int, int] = {}
    for stages in held:
        for s in stages:
            holders[s] = holders.get(s, 0) + 1
    return tuple(tuple((s, holders[s]) for s in stages) for stages in held)


@functools.lru_cache(maxsize=4096)
def _bound_work(model: ModelProfile, node: NodeProfile, num_stages: int, dual: bool, zero_stage: int, dp: int,
                expert_dp: int, ep: int, tp: int, tokens: float, seq_len: int, balancedness: float,
                recipe: ActivationRecipe, ep_cost: Any) -> tuple[float, ...]:
    """Each stage's work for one micro-batch, as :func:`step_lower_bound` sums it per rank; cached (a layout
    search asks for the same stage split, degrees and batch under many schedules and batch counts), and so are
    the stage and layer seconds under it."""
    return _stage_work(model, node, num_stages, dual, zero_stage, dp, expert_dp, ep, tp, tokens, seq_len,
                       balancedness, recipe, ep_cost, cached=True)


def _stage_work(model: ModelProfile, node: NodeProfile, num_stages: int, dual: bool, zero_stage: int, dp: int,
                expert_dp: int, ep: int, tp: int, tokens: float, seq_len: int, balancedness: float,
                recipe: ActivationRecipe, ep_cost: Any, cached: bool = False) -> tuple[float, ...]:
    """:func:`_bound_work` itself; ``cached`` shares the stage seconds through :func:`_bound_costs` (not for an
    ``ep_cost`` that cannot be a cache key)."""
    link_rate, latency = _link(node)
    stages = _split(model, num_stages)
    # only ZeRO-3's stage seconds depend on the dp groups and the overlap (its gathers): ZeRO-1 and 2 share theirs
    zero3 = zero_stage == 3
    costs = (_bound_costs if cached else _stage_costs)(
        model, node, num_stages, dual if zero3 else False, 3 if zero3 else 1, dp if zero3 else 0,
        expert_dp if zero3 else 0, ep, tp, tokens, seq_len, balancedness, recipe, ep_cost,
        _bound_kinds if cached else _layer_kinds)
    work = []
    for stage, cost in zip(stages, costs, strict=True):
        sync = stage_collectives(_tp_dense(model, stage, tp), stage.routed_expert_params / ep, dp, expert_dp,
                                 link_rate, latency)[0] if zero_stage >= 2 else 0.0
        busy, comm = cost.compute_f + cost.compute_b + cost.tp_comm + sync, cost.comm_f + cost.comm_b
        work.append(max(busy, comm) if dual else busy + comm)
    return tuple(work)


def _stage_costs(model: ModelProfile, node: NodeProfile, num_stages: int, dual: bool, zero_stage: int, dp: int,
                 expert_dp: int, ep: int, tp: int, tokens: float, seq_len: int, balancedness: float,
                 recipe: ActivationRecipe, ep_cost: Any,
                 kinds_of: Callable[..., tuple[LayerSeconds, LayerSeconds]]) -> tuple[StageSeconds, ...]:
    """Every stage's seconds for the bound (:func:`_zero_stage_costs`, ZeRO-2 as ZeRO-1: its reduce-scatter is
    added by :func:`_stage_work`), the layer seconds from ``kinds_of`` (:func:`_layer_kinds`)."""
    rates = gpu_rates(node, model.training_precision)
    kinds = kinds_of(model, node, ep, tokens, seq_len, balancedness, recipe, tp, ep_cost)
    link_rate, latency = _link(node)
    return _zero_stage_costs(model, count_parameters(model), _split(model, num_stages), tokens, rates,
                             {False: kinds[0], True: kinds[1]}, zero_stage, _Groups(dp, expert_dp, ep, tp), dual,
                             link_rate, latency)


def _layer_kinds(model: ModelProfile, node: NodeProfile, ep: int, tokens: float, seq_len: int, balancedness: float,
                 recipe: ActivationRecipe, tp: int, ep_cost: Any) -> tuple[LayerSeconds, LayerSeconds]:
    """The dense and the MoE layer's seconds of the bound."""
    rates = gpu_rates(node, model.training_precision)
    return (layer_seconds(model, False, tokens, seq_len, True, ep, rates, ep_cost, 1.0 / balancedness, recipe, tp),
            layer_seconds(model, True, tokens, seq_len, True, ep, rates, ep_cost, 1.0 / balancedness, recipe, tp))


#: :func:`_stage_costs` and :func:`_layer_kinds` cached (a search's ZeRO-1/2 layouts, and its ZeRO stages and
#: stage counts, share them)
_bound_costs = functools.lru_cache(maxsize=1024)(_stage_costs)
_bound_kinds = functools.lru_cache(maxsize=512)(_layer_kinds)


def _layer_cost(kind: str, x: LayerSeconds) -> LayerCost:
    return LayerCost(kind, x.attention.f, x.attention.i, x.attention.w, x.ffn.f, x.ffn.i, x.ffn.w, x.dispatch_f,
                     x.combine_f, x.dispatch_b, x.combine_b, x.recompute_s, x.tp_f, x.tp_b)
