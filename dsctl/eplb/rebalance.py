"""``dsctl eplb rebalance`` as one domain call: check the input, run the chosen algorithm, measure the result.

Algorithms: ``reference`` (DeepSeek's EPLB, exact; dsctl.eplb.reference), ``balanced`` (dsctl.eplb.balanced),
and migration-aware planning from a previous placement (dsctl.eplb.migration).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsctl.eplb.balanced import rebalance_balanced
from dsctl.eplb.checks import EplbLayout, check_layout, check_planning_work, check_weight, planning_work
from dsctl.eplb.deployments import deployment_for, infer_model
from dsctl.eplb.exact import MAX_PROVE_NODES, MAX_PROVE_SLOTS, ExactResult, solve
from dsctl.eplb.metrics import placement_metrics
from dsctl.eplb.pareto import DEFAULT_MIN_GAIN, TOLERANCES, trade_off
from dsctl.eplb.placement import Placement, gpu_loads, placement_from_phy2log
from dsctl.eplb.placement_file import LoadedPlacement, placement_warnings
from dsctl.eplb.prove_milp import choose_method, finish_with_milp, prove_with_milp
from dsctl.eplb.reference import rebalance_layout
from dsctl.eplb.request import RebalanceRequest
from dsctl.eplb.result import MigrationSummary, RebalanceResult
from dsctl.errors import InputError
from dsctl.model.params import bytes_per_routed_expert
from dsctl.profiles.schema import ModelProfile


def expert_size_bytes(model: ModelProfile, bytes_per_param: float = 1.0) -> int | None:
    """Bytes of one routed expert's weights, or None for a dense model.

    ``bytes_per_param`` 1.0 = FP8 (DeepSeek-V3 as served; block scales add < 0.1%), 2.0 = BF16.
    """
    if model.moe is None:
        return None
    return bytes_per_routed_expert(model, bytes_per_param)


def _run_algorithm(weight: np.ndarray, layout: EplbLayout, algorithm: str,
                   progress: Callable[[int, int], None] | None = None) -> Placement:
    if algorithm == "reference":
        return rebalance_layout(weight, layout)
    return rebalance_balanced(weight, layout.num_replicas, layout.num_groups, layout.num_nodes,
                              layout.num_gpus, layout.policy, progress)


def _check_previous(previous: Placement, layout: EplbLayout) -> None:
    expected = (layout.num_layers, layout.num_replicas)
    if tuple(previous.phy2log.shape) != expected:
        raise InputError(f"placement is {previous.phy2log.shape[0]} MoE layers x {previous.phy2log.shape[1]} slots, "
                         f"but the statistics and the replica count give {expected[0]} layers x {expected[1]} "
                         "slots", field="previous")
    if previous.num_experts != layout.num_experts:
        raise InputError(f"placement has {previous.num_experts} experts, the statistics have {layout.num_experts}",
                         field="previous")


def zero_rows_warning(weight: np.ndarray, model: ModelProfile | None) -> str | None:
    """A warning for statistics rows that are all zero (no token was routed: usually dense layers given as rows)."""
    zero = [int(i) for i in np.flatnonzero(weight.sum(axis=1) == 0)]
    if not zero:
        return None
    rows = ", ".join(map(str, zero[:8])) + (", ..." if len(zero) > 8 else "")
    text = f"statistics rows {rows} are all zero ({len(zero)} of {weight.shape[0]}): their placement is arbitrary"
    if model is not None and model.num_dense_layers and weight.shape[0] == model.num_layers:
        return (f"{text}; {model.name} has {model.num_layers} layers of which the first "
                f"{model.num_dense_layers} are dense: give only its {model.num_moe_layers} MoE layers' rows "
                f"(model layers {model.num_dense_layers}-{model.num_layers - 1})")
    return text + "; were dense layers (no experts) included?"


@dataclass(frozen=True)
class LayoutRequest:
    """What the user gave for the layout (None = not given): filled from the model's deployment when missing."""

    num_replicas: int | None = None
    num_gpus: int | None = None
    num_nodes: int | None = None
    num_groups: int | None = None
    deployment: str = "prefill"


def resolve_model(weight_shape: tuple[int, int], model: ModelProfile | None,
                  candidates: Sequence[ModelProfile], needed: bool) -> ModelProfile | None:
    """The model the statistics belong to: ``model`` (its expert count checked), else inferred from the shape
    among ``candidates`` when ``needed`` (InputError listing the choices), else inferred only if unambiguous."""
    num_layers, num_experts = weight_shape
    if model is not None:
        if model.moe is None:
            raise InputError(f"{model.name} has no MoE layers; EPLB needs a mixture-of-experts model", field="model")
        if num_experts != model.moe.num_routed_experts:
            raise InputError(f"statistics have {num_experts} experts per layer but {{model}} {model.name} has "
                             f"{model.moe.num_routed_experts} routed experts", mentions=("model",))
        return model
    if needed:
        return infer_model(num_layers, num_experts, candidates)
    try:
        return infer_model(num_layers, num_experts, candidates)
    except InputError:
        return None


def resolve_layout(request: LayoutRequest, model: ModelProfile | None) -> tuple[int, int, int, int, str | None]:
    """(replicas, GPUs, nodes, groups, deployment note or None): the request, gaps filled from the deployment."""
    given = (request.num_replicas, request.num_gpus, request.num_nodes)
    groups = request.num_groups
    if groups is None:
        groups = model.moe.num_expert_groups if model is not None and model.moe is not None else 1
    if None not in given:
        return int(request.num_replicas or 0), int(request.num_gpus or 0), int(request.num_nodes or 0), groups, None
    if model is None or model.moe is None:
        raise InputError("give the layout with {replicas}, {gpus} and {nodes}, or {model} for a model with a "
                         "published deployment", mentions=("replicas", "gpus", "nodes", "model"))
    dep = deployment_for(model, request.deployment)
    replicas = request.num_replicas or model.moe.num_routed_experts + dep.num_redundant_experts
    gpus = request.num_gpus or dep.num_gpus
    nodes = request.num_nodes or dep.num_nodes
    note = (f"layout from {model.name}'s {dep.kind} deployment ({dep.source}): {gpus} GPUs on {nodes} nodes, "
            f"{replicas} slots per layer ({replicas - model.moe.num_routed_experts} redundant)")
    return replicas, gpus, nodes, groups, note


def rebalance(
    weight: np.ndarray,
    request: RebalanceRequest,
    *,
    candidate_models: Sequence[ModelProfile] = (),
    progress: Callable[[int, int], None] | None = None,
) -> RebalanceResult:
    """Plan a placement for ``weight`` [L, E] (summed routing statistics) as ``request`` asks; measure it
    before/after.

    Layout: the numbers given; missing ones come from the request model's published deployment (no model: the
    one of ``candidate_models`` matching the statistics' shape, else an InputError listing them). With a model,
    the expert count is checked, the expert size defaults to the model's at ``bytes_per_param``, and the
    dense-layer offset (model layers before the first MoE layer) is set when the rows are its MoE layers.
    ``request.previous`` is the current placement (read by ``placement_file.read_placement``): the plan is then
    the choice of the balance-versus-migration trade-off (``dsctl.eplb.pareto``: candidate tolerances plus the
    request's, budgets ``max_moves``/``max_move_bytes``, ``min_gain`` below which the previous placement is kept).
    ``prove``: run the exact search (dsctl.eplb.exact) per layer from the plan, or the MILP
    (``prove_with``/``prove_time_s``: dsctl.eplb.prove_milp); a better plan found replaces the layer; layers are
    marked proved where the search ended. ``fabric`` (with ``previous``): each candidate's moves
    timed on that planned fabric, against the gain per step (``step_time_s``; dsctl.eplb.move_time).
    ``progress(steps_done, num_steps)`` is called as the balanced algorithm's refinement steps finish.
    Raises InputError naming the field for any bad input (rules V1-V12, a mismatching previous placement).
    """
    raw = np.asarray(weight)
    algorithm = request.algorithm
    layout_request = LayoutRequest(request.replicas, request.gpus, request.nodes, request.groups, request.deployment)
    shape = (int(raw.shape[0]), int(raw.shape[1])) if raw.ndim == 2 else (0, 0)
    model = request.model
    if raw.ndim == 2:
        model = resolve_model(shape, model, candidate_models, request.layout_missing)
    replicas, gpus, nodes, groups, note = resolve_layout(layout_request, model)
    extra_warnings = request.warnings
    tolerance = request.accepted_tolerance
    previous = request.previous
    if isinstance(previous, LoadedPlacement):
        extra_warnings += placement_warnings(previous)
        previous = previous.placement
    checked, weight_warnings = check_weight(weight, "statistics")
    layout = check_layout(checked.shape[0], checked.shape[1], replicas, groups, nodes, gpus, request.policy)
    plans = 1 if previous is None else 1 + len({*TOLERANCES, tolerance})
    check_planning_work(plans * planning_work(layout.num_layers, layout.num_replicas, algorithm),
                        f"{algorithm}" + (f" with a previous placement ({plans} plans)" if plans > 1 else ""),
                        field="algorithm")
    num_dense_layers = request.num_dense_layers
    if num_dense_layers is None:
        num_dense_layers = 0
        if model is not None and checked.shape[0] == model.num_moe_layers:
            num_dense_layers = model.num_dense_layers
    expert_bytes = request.expert_bytes
    if expert_bytes is None and model is not None:
        expert_bytes = expert_size_bytes(model, request.bytes_per_param)
    zero = zero_rows_warning(checked, model)
    notes = (note,) if note else ()
    migration = None
    trade = None
    if previous is None:
        placement = _run_algorithm(checked, layout, algorithm, progress)
    else:
        _check_previous(previous, layout)
        tolerances = tuple(sorted({*TOLERANCES, tolerance}))
        trade, placement, result = trade_off(checked, previous, layout, algorithm, expert_bytes,
                                             max_moves=request.max_moves, max_move_bytes=request.max_move_bytes,
                                             min_gain=DEFAULT_MIN_GAIN if request.min_gain is None
                                             else request.min_gain,
                                             tolerances=tolerances, accept=tolerance, progress=progress,
                                             fabric=request.fabric, step_time_s=request.step_time_s)
        moved = 0 if result is None else int(result.replicas_moved)
        details: dict[str, Any] = {} if result is None else {
            f.name: getattr(result, f.name) for f in dataclasses.fields(result)
            if f.name not in ("placement", "replicas_moved")}
        chosen_tolerance = trade.points[trade.chosen].tolerance
        migration = MigrationSummary(moved, None if expert_bytes is None else moved * expert_bytes, expert_bytes,
                                     tolerance if chosen_tolerance is None else chosen_tolerance, details)
    proof = None
    if request.prove:
        placement, proof = prove_placement(checked, placement, layout, request.prove_with, request.prove_time_s)
    metrics = placement_metrics(checked, placement, layout, proof)
    return RebalanceResult(placement, metrics, layout, algorithm, request.sources,
                           weight_warnings + layout.warnings + extra_warnings + ((zero,) if zero else ()),
                           migration, num_dense_layers, model.name if model is not None else None,
                           model.num_layers if model is not None else None, notes, trade)


def prove_placement(weight: np.ndarray, placement: Placement, layout: EplbLayout, prove_with: str = "search",
                    prove_time_s: float | None = None) -> tuple[Placement, ExactResult]:
    """Run the exact search (or the MILP: dsctl.eplb.prove_milp) on every layer from ``placement``; take any
    better plan it finds (checked layout)."""
    method = choose_method(prove_with, prove_time_s)
    if method == "milp" or (method == "auto" and layout.slots_per_node > MAX_PROVE_SLOTS):
        return prove_with_milp(weight, placement, layout, prove_time_s)
    if layout.slots_per_node > MAX_PROVE_SLOTS:
        raise InputError(f"solves small instances only: {layout.slots_per_node} slots per "
                         f"{'node' if layout.policy == 'hierarchical' else 'layer'} exceeds {MAX_PROVE_SLOTS}",
                         field="prove",
                         hint="the gap to the lower bound is reported without --prove")
    current = gpu_loads(weight, placement.phy2log, placement.logcnt, layout.num_gpus).max(axis=1)
    exact = solve(weight, layout.num_replicas, layout.num_gpus, layout.num_groups_eff, layout.num_nodes_eff,
                  start=current, total_budget=MAX_PROVE_NODES)
    if exact.improved.any():
        phy2log = np.where(exact.improved[:, None], exact.phy2log, placement.phy2log)
        placement = placement_from_phy2log(phy2log, layout.num_experts)
    if method == "auto":
        return finish_with_milp(weight, placement, layout, exact, prove_time_s)
    return placement, exact
