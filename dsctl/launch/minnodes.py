"""The smallest node count whose layout fits in GPU memory (``launch layout --min-nodes``, and the hint of a
launch that does not fit).

Two questions, one scan. With the layout search's options (what ``dsctl launch`` and ``launch layout`` run): the
smallest count at which the search's space (tp, ep, pp, schedules, micro-batch sizes, ZeRO stages 1-3, recipes,
each narrowed by what the request fixes; ``dsctl.launch.search``) holds a layout that fits, judged by the same
memory check (``search.attach_memory``) without predicting any step. Without (the memory rule of
``dsctl.launch.plan``): the smallest count whose memory-rule plan fits (ZeRO-1, tp 1 unless given).

Fit is not monotone in the node count: the pipeline degree must divide the world size and EP must divide the
ranks of a stage, so DeepSeek-V3 under the memory rule fits on 128 nodes of 8 H800s but not on 129-135. The scan
therefore tries every count in increasing order, exact by construction, made fast by a necessary condition per
schedule, pipeline degree ``pp`` and tensor-parallel degree ``tp`` that costs no plan:

    for each pipeline rank r:   A_r + B_r / dp  <=  hbm
    A_r = unsharded bytes x (dense_r / tp + routed_r / ep_max) + chunks_r x act_r x seq_len / tp
          + 2 x bucket bytes x (unit_dense_r / tp + unit_routed_r / ep_max)
          + temporaries x seq_len / tp + CUDA/NCCL - slack
    B_r = sharded bytes x (dense_r + routed_r) / tp

where ``dense_r`` / ``routed_r`` are the dense and all routed-expert parameters of the stages rank r holds,
``ep_max`` the largest EP a layout could have (``--ep``; else the memory rule's largest divisor of the routed
experts at most ``gpus_per_node x expert groups``, the search's all routed experts), ``chunks_r`` the schedule's
fewest activation chunks, ``act_r`` the lightest recipe's bytes per token of the heaviest stage rank r holds, a
micro-batch at least one sequence, ``temporaries`` the backward's working bytes per token
(``backward_working_bytes_per_token``), ``unit_dense_r`` / ``unit_routed_r`` the smallest per-layer dense and
routed parameters of the stages rank r holds (MTP modules count as layers), and ``slack`` 1 MiB for integer
rounding. ZeRO-1 shards the optimizer state (unsharded: weights + gradients; no buckets), ZeRO-2 also the gradients
(bucket bytes: a gradient's, for the layer being reduce-scattered and the one filling), ZeRO-3 also the weights
(bucket bytes: a gradient's and a weight's, the gathered layer and the one prefetched; FP8 copies and DeepEP
buffers are left out: more favourable still); the bound of a ``(schedule, pp, tp)`` is the smallest over the ZeRO
stages tried. It is the memory model of ``dsctl.launch.memory`` with every
quantity the node count could still change set to its most favourable value (a shard over expert-dp ``tp x dp /
ep`` is at least one over ``tp x dp``; tensor parallelism splits at most the dense parameters and, with sequence
parallelism, the activations: ``dsctl.launch.tensor_parallel``). So each ``(schedule, pp, tp)`` needs
``dp >= dp_min``: the scan starts at the smallest count any allows, and at each count evaluates only those that
pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from dsctl.launch import rules
from dsctl.launch.batch import batch_rules_pass
from dsctl.launch.candidates import PlanInputs, first_fitting
from dsctl.launch.memory import MemoryAssumptions, all_stage_activations
from dsctl.launch.rank_params import rank_parameters, stage_layers
from dsctl.launch.request import LaunchRequest
from dsctl.launch.search import (
    SearchOptions,
    enumerate_trials,
    screened_memory,
    search_request,
    search_space,
)
from dsctl.launch.stages import Stage, split_stages
from dsctl.launch.tensor_parallel import searched_tps
from dsctl.launch.trials import Trial
from dsctl.model.params import count_parameters
from dsctl.model.recipes import ActivationRecipe, backward_working_bytes_per_token, searchable_recipes
from dsctl.profiles.schema import ModelProfile, NodeProfile
from dsctl.steptime import PREDICTED_ZERO_STAGES

#: the largest node count the search tries (131,072 GPUs on 8-GPU nodes)
SEARCH_LIMIT_NODES = 16_384

#: bytes the bound gives away for the plan's integer rounding of each term (far above it, far below a GiB)
_SLACK_BYTES = 1 << 20

#: a dp no count reaches (the given dp is below what a degree needs)
_NEVER = 1 << 62


@dataclass(frozen=True)
class SmallestFit:
    """The answer: ``num_nodes`` and the first layout found to fit there (``label``: a search trial's
    ``PP50 EP16 TP2 dualpipe 1920x1 deepseek``, or the memory rule's ``PP16 EP64 TP1 DP64``)."""

    num_nodes: int
    label: str


@dataclass(frozen=True)
class _Space:
    """What the bound ranges over: schedules, tps, recipes, ZeRO stages and the largest EP."""

    schedules: tuple[str, ...]
    tps: tuple[int, ...]
    recipes: tuple[ActivationRecipe, ...]
    zero_stages: tuple[int, ...]
    ep_max: int


def min_nodes(model: ModelProfile, node: NodeProfile, request: LaunchRequest,
              max_nodes: int = SEARCH_LIMIT_NODES, progress: Callable[[int, int], None] | None = None,
              search: SearchOptions | None = None) -> int | None:
    """:func:`smallest_fit`'s node count (None: no count up to ``max_nodes`` fits)."""
    found = smallest_fit(model, node, request, max_nodes, progress, search)
    return found.num_nodes if found is not None else None


def smallest_fit(model: ModelProfile, node: NodeProfile, request: LaunchRequest,
                 max_nodes: int = SEARCH_LIMIT_NODES, progress: Callable[[int, int], None] | None = None,
                 search: SearchOptions | None = None) -> SmallestFit | None:
    """Smallest ``num_nodes`` (1..``max_nodes``) at which ``request`` has a layout that fits, or None: one of the
    layout search's space with ``search`` (its memory check, no step predicted), else the memory rule's plan.

    Exact: every count below the answer was ruled out, by the bound of the module docstring or by evaluating it.
    The request's other constraints (pp, ep, tp, dp, schedule, batch, recipe) are kept; those that are wrong at any
    node count raise InputError. Cost: one stage split per stage count and a bound per ``(schedule, pp, tp)``;
    then per count ``O(degrees)`` arithmetic, and only for the degrees that pass the bound their layouts'
    structure and memory (no step time, no rank map), stopping at the first that fits.
    ``progress(counts_done, counts_bound)`` follows the scan.
    """
    inputs = _inputs(model, node, request, search)
    request = inputs.request
    needs = _dp_needs(inputs, _bound_space(inputs, search))
    gpn = node.num_gpus
    dp_given = request.dp
    first = min((_first_count(pp, tp, need, dp_given, gpn) for (_, pp, tp), need in needs.items()),
                default=max_nodes + 1)
    by_degree: dict[tuple[int, int], int] = {}
    for (_, pp, tp), need in needs.items():
        by_degree[pp, tp] = min(need, by_degree.get((pp, tp), _NEVER))
    total = max(0, max_nodes - first + 1)
    splits: dict[int, tuple[Stage, ...]] = {}
    for done, num_nodes in enumerate(range(first, max_nodes + 1), 1):
        if progress is not None:
            progress(done, total)
        world = num_nodes * gpn

        def dp_of(pp: int, tp: int, world: int = world) -> int | None:
            """dp of ``(pp, tp)`` at this count when it passes the bound (None when it cannot fit)."""
            if world % (pp * tp):
                return None
            dp = dp_given if dp_given is not None else world // (pp * tp)
            return dp if pp * tp * dp == world and dp >= by_degree[pp, tp] else None

        passing = [(pp, tp) for pp, tp in by_degree if dp_of(pp, tp) is not None]
        if not passing:
            continue
        counted = PlanInputs(model, node, replace(request, num_nodes=num_nodes), inputs.counts, inputs.assumptions)
        if search is None:
            def worth_trying(pp: int, tp: int = inputs.tp) -> bool:
                dp = dp_of(pp, tp) if (pp, tp) in by_degree else None
                return dp is not None and batch_rules_pass(request, pp, dp)  # the batch rules, without a plan

            candidate = first_fitting(counted, worth_trying)
            if candidate is not None:
                return SmallestFit(num_nodes, candidate.label)
            continue
        trial = _first_fitting_trial(counted, search, needs, set(passing), splits)
        if trial is not None:
            return SmallestFit(num_nodes, trial.label(with_recipe=True))
    return None


def _first_fitting_trial(inputs: PlanInputs, search: SearchOptions, needs: dict[tuple[str, int, int], int],
                         passing: set[tuple[int, int]], splits: dict[int, tuple[Stage, ...]]) -> Trial | None:
    """The first layout of the search's space at ``inputs.request.num_nodes`` that fits (the memory check of
    ``dsctl.launch.search.attach_memory``), trying only the ``(schedule, pp, tp)`` that pass the bound."""
    request = inputs.request
    world = request.num_nodes * inputs.node.num_gpus
    space = search_space(inputs, search)
    for schedule in space.schedules:
        pairs = tuple((pp, tp) for pp, tp in space.pp_tps if (pp, tp) in passing and (
            request.dp if request.dp is not None else world // (pp * tp)) >= needs.get((schedule, pp, tp), _NEVER))
        if not pairs:
            continue
        trials, _ = enumerate_trials(inputs, replace(space, schedules=(schedule,), pp_tps=pairs))
        for bare in trials:
            trial, _ = screened_memory(inputs, bare, splits, search.min_headroom_bytes)
            if trial is not None:
                return trial
    return None


def _first_count(pp: int, tp: int, min_dp: int, dp: int | None, gpus_per_node: int) -> int:
    """The smallest node count at which ``(pp, tp)`` can pass the bound."""
    if dp is not None and dp < min_dp:
        return _NEVER  # never: the given dp is below what this degree needs
    return max(1, math.ceil(pp * tp * (dp if dp is not None else min_dp) / gpus_per_node))


def _bound_space(inputs: PlanInputs, search: SearchOptions | None) -> _Space:
    """What a layout of the memory rule (``search`` None) or of the search could have."""
    request, model, gpn = inputs.request, inputs.model, inputs.node.num_gpus
    if search is None:
        return _Space((request.schedule,), (inputs.tp,), (inputs.recipe,), (1,),
                      request.ep or rules.default_ep(model, gpn, None))
    tps = (inputs.tp,) if request.tp is not None else searched_tps(model, gpn) or (1,)
    recipes = ((inputs.recipe,) if request.recipe is not None else
               tuple(r for r in searchable_recipes(model) if r.name not in search.skip_recipes))
    experts = model.moe.num_routed_experts if model.moe is not None else 1
    return _Space(search.schedules, tps, recipes, PREDICTED_ZERO_STAGES, request.ep or experts)


def dp_needs(model: ModelProfile, node: NodeProfile, request: LaunchRequest,
             search: SearchOptions | None = None) -> dict[tuple[str, int, int], int]:
    """The bound of the module docstring: the least dp each ``(schedule, pp, tp)`` of the search's space (or of
    the memory rule, ``search`` None) needs; one missing can never fit."""
    inputs = _inputs(model, node, request, search)
    return _dp_needs(inputs, _bound_space(inputs, search))


def _inputs(model: ModelProfile, node: NodeProfile, request: LaunchRequest,
            search: SearchOptions | None) -> PlanInputs:
    """The request the scan starts from (one node; the search's schedule rule), checked against ``model``."""
    request = replace(request, num_nodes=1)
    if search is not None:
        request = search_request(request, search)
    return PlanInputs(model, node, request.checked(model, node.num_gpus), count_parameters(model), MemoryAssumptions())


def _dp_needs(inputs: PlanInputs, space: _Space) -> dict[tuple[str, int, int], int]:
    """Every ``(schedule, pp, tp)`` that could ever fit, with the dp it needs (the bound of the module
    docstring)."""
    model, request, a = inputs.model, inputs.request, inputs.assumptions
    pps = [request.pp] if request.pp is not None else range(1, model.num_layers + 1)
    hbm = inputs.node.usable_hbm_bytes
    temporaries = backward_working_bytes_per_token(model) * request.seq_len  # one sequence, at tp 1
    splits: dict[int, tuple[tuple[Stage, ...], list[tuple[float, ...]]]] = {}  # per stage count, with its bytes
    out: dict[tuple[str, int, int], int] = {}
    for schedule in space.schedules:
        for pp in pps:
            if not rules.pipeline_degree_allowed(schedule, pp, model.num_layers):
                continue
            n = rules.num_stages(schedule, pp)
            split = splits.get(n)
            if split is None:
                stages = split_stages(model, inputs.counts, n)
                split = splits[n] = (stages, [tuple(x.total for x in all_stage_activations(model, stages, recipe))
                                              for recipe in space.recipes])
            stages, stage_bytes = split
            ranks = [_rank_figures(request, stages, stage_bytes, schedule, pp, r) for r in range(pp)]
            for tp in space.tps:
                need = min(_min_dp(ranks, a, tp, z, space.ep_max, hbm - temporaries / tp)
                           for z in space.zero_stages)
                if need < _NEVER:
                    out[schedule, pp, tp] = need
    return out


def _rank_figures(request: LaunchRequest, stages: tuple[Stage, ...], stage_bytes: list[tuple[float, ...]],
                  schedule: str, pp: int, r: int) -> tuple[int, int, float, float, float]:
    """``(dense, routed, activation bytes at tp 1, one layer's dense, routed parameters)`` of pipeline rank
    ``r``: its parameters, its fewest activation chunks of one sequence under the lightest recipe, and the
    smallest per-layer share of its stages (a lower bound of the layer ZeRO-2/3 reduce-scatter and gather).
    ``stage_bytes``: per recipe of the bound's space, every stage's activation bytes per token."""
    held = rules.stages_of_rank(schedule, pp, r)
    dense, routed = rank_parameters(stages, held)
    per_token = min(max(totals[s] for s in held) for totals in stage_bytes)
    layers = [stages[s] for s in held]
    unit_dense = min(s.dense_params / max(1, stage_layers(s)) for s in layers)
    unit_routed = min(s.routed_expert_params / max(1, stage_layers(s)) for s in layers)
    return dense, routed, rules.activation_chunks(schedule, pp, r) * request.seq_len * per_token, unit_dense, \
        unit_routed


def _min_dp(ranks: list[tuple[int, int, float, float, float]], a: MemoryAssumptions, tp: int, zero: int, ep_max: int,
            hbm: float) -> int:
    """The dp ZeRO stage ``zero`` needs at ``tp`` for every rank to pass the bound (:data:`_NEVER`: none)."""
    unsharded = a.weight_bytes * (zero < 3) + a.grad_bytes * (zero < 2)
    sharded_bytes = a.optimizer_bytes + a.grad_bytes * (zero >= 2) + a.weight_bytes * (zero >= 3)
    min_dp = 1
    buckets = 2 * (a.grad_bytes * (zero >= 2) + a.weight_bytes * (zero >= 3))  # two layers in flight
    for dense, routed, activations, unit_dense, unit_routed in ranks:
        fixed = (unsharded * (dense / tp + routed / ep_max) + buckets * (unit_dense / tp + unit_routed / ep_max)
                  + activations / tp + a.runtime_bytes - _SLACK_BYTES)
        sharded = sharded_bytes * (dense + routed) / tp
        room = hbm - fixed
        if room < 0 or (room == 0 and sharded > 0):
            return _NEVER
        min_dp = max(min_dp, math.ceil(sharded / room) if sharded > 0 else 1)
    return min_dp
