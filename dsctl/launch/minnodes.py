"""The smallest node count whose plan fits in GPU memory (``launch layout --min-nodes``, and the hint of a
launch that does not fit).

Fit is not monotone in the node count: the pipeline degree must divide the world size and EP must divide the
ranks of a stage, so DeepSeek-V3 fits on 128 nodes of 8 H800s but not on 129-135. The search is therefore a scan
of every count in increasing order, exact by construction, made fast by a necessary condition per pipeline
degree ``pp`` that costs no plan:

    for each pipeline rank r:   A_r + B_r / dp  <=  hbm
    A_r = (weight + grad bytes) x (dense_r / tp + routed_r / ep_max) + chunks_r x act_r x seq_len / tp
          + CUDA/NCCL - slack
    B_r = optimizer bytes x (dense_r + routed_r) / tp

where ``dense_r`` / ``routed_r`` are the dense and all routed-expert parameters of the stages rank r holds,
``ep_max`` is the largest EP the plan could pick (``--ep``, else the largest divisor of the routed experts that
is at most ``gpus_per_node x expert groups``), ``chunks_r`` the schedule's fewest activation chunks, a micro-batch
at least one sequence, and ``slack`` 1 MiB for the plan's integer rounding. It is the memory model of
``dsctl.launch.memory`` with every quantity the node count could still change set to its most favourable value
(ZeRO-1 optimizer state of the routed experts is ``routed_r / (tp x dp)`` for any ep; tensor parallelism
splits at most the dense parameters and, with sequence parallelism, the activations by ``tp``:
``dsctl.launch.tensor_parallel``). So each ``pp`` needs
``dp >= dp_min(pp)``: the scan starts at the smallest count any ``pp`` allows, and at each count plans only the
degrees that pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from dsctl.launch import rules
from dsctl.launch.batch import batch_rules_pass
from dsctl.launch.candidates import PlanInputs, layout_fits
from dsctl.launch.memory import MemoryAssumptions, rank_parameters, stage_activation_bytes_per_token
from dsctl.launch.request import LaunchRequest
from dsctl.launch.stages import split_stages
from dsctl.model.params import ParameterCounts, count_parameters
from dsctl.model.recipes import resolve_recipe
from dsctl.profiles.schema import ModelProfile, NodeProfile

#: the largest node count the search tries (131,072 GPUs on 8-GPU nodes)
SEARCH_LIMIT_NODES = 16_384

#: bytes the bound gives away for the plan's integer rounding of each term (far above it, far below a GiB)
_SLACK_BYTES = 1 << 20


@dataclass(frozen=True)
class _Need:
    """What pipeline degree ``pp`` needs to fit: at least ``min_dp`` data-parallel ranks."""

    pp: int
    min_dp: int


def min_nodes(model: ModelProfile, node: NodeProfile, request: LaunchRequest,
              max_nodes: int = SEARCH_LIMIT_NODES,
              progress: Callable[[int, int], None] | None = None) -> int | None:
    """Smallest ``num_nodes`` (1..``max_nodes``) for which ``request`` plans a layout that fits, or None.

    Exact: every count below the answer was ruled out, by the bound of the module docstring or by planning it.
    The request's other constraints (pp, ep, tp, dp, schedule, batch) are kept; those that are wrong at any node
    count raise InputError. Cost: one stage split per pipeline degree; then, for each count from the first one the
    bound allows, ``O(degrees)`` arithmetic and batch rules, and only where a degree passes them a divisor list
    (``O(sqrt(world))``) and a memory estimate (``O(pp)``) per passing degree, never a rank map.
    ``progress(counts_done, counts_bound)`` follows the scan.
    """
    request = replace(request, num_nodes=1).checked(model)
    assumptions = MemoryAssumptions()
    counts = count_parameters(model)
    gpn = node.num_gpus
    tp = request.tp_or_default
    needs = {need.pp: need for need in _needs(model, node, request, counts, assumptions, tp)}
    starts = [_first_count(need, request.dp, tp, gpn) for need in needs.values()]
    first = min(starts, default=max_nodes + 1)
    total = max(0, max_nodes - first + 1)
    for done, num_nodes in enumerate(range(first, max_nodes + 1), 1):
        if progress is not None:
            progress(done, total)
        world = num_nodes * gpn

        def worth_trying(pp: int, world: int = world) -> bool:
            need = needs.get(pp)
            if need is None or world % (pp * tp):
                return False
            dp = request.dp if request.dp is not None else world // (pp * tp)
            if dp < need.min_dp or pp * tp * dp != world:
                return False
            return batch_rules_pass(request, pp, dp)  # the batch rules, without a plan

        if any(worth_trying(pp) for pp in needs) and layout_fits(
                PlanInputs(model, node, replace(request, num_nodes=num_nodes), counts, assumptions), worth_trying):
            return num_nodes
    return None


def _first_count(need: _Need, dp: int | None, tp: int, gpus_per_node: int) -> int:
    """The smallest node count at which ``need.pp`` can pass the bound."""
    if dp is not None and dp < need.min_dp:
        return 1 << 62  # never: the given dp is below what this pp needs
    return max(1, math.ceil(need.pp * tp * (dp if dp is not None else need.min_dp) / gpus_per_node))


def _needs(model: ModelProfile, node: NodeProfile, request: LaunchRequest, counts: ParameterCounts,
           a: MemoryAssumptions, tp: int) -> list[_Need]:
    """Every pipeline degree that could ever fit, with the dp it needs (the bound of the module docstring)."""
    schedule = request.schedule
    recipe = resolve_recipe(model, request.recipe)
    pps = [request.pp] if request.pp is not None else range(1, model.num_layers + 1)
    ep_max = request.ep or rules.default_ep(model, node.num_gpus, None)
    out = []
    for pp in pps:
        if not rules.pipeline_degree_allowed(schedule, pp, model.num_layers):
            continue
        stages = split_stages(model, counts, rules.num_stages(schedule, pp))
        min_dp = 1
        for r in range(pp):
            held = rules.stages_of_rank(schedule, pp, r)
            dense, routed = rank_parameters(stages, held)
            activations = (rules.activation_chunks(schedule, pp, r) * request.seq_len
                           * max(stage_activation_bytes_per_token(model, stages[s], recipe) for s in held)) / tp
            fixed = ((a.weight_bytes + a.grad_bytes) * (dense / tp + routed / ep_max) + activations
                     + a.runtime_bytes - _SLACK_BYTES)
            sharded = a.optimizer_bytes * (dense + routed) / tp
            room = node.usable_hbm_bytes - fixed
            if room < 0 or (room == 0 and sharded > 0):
                break
            min_dp = max(min_dp, math.ceil(sharded / room) if sharded > 0 else 1)
        else:
            out.append(_Need(pp, min_dp))
    return out
