"""The launch plan: layout choice (or check), stage split, memory fit, rank map and schedule figures in one result.

A pipeline, one module per step: request (``request.py``: checks) -> candidates (``candidates.py``: each pipeline
degree evaluated once) -> batch (``batch.py``) -> memory (``memory.py``) -> explanation (``explanation.py``) ->
plan (here). The pp/schedule/EP rules live in ``rules.py``, shared with the smallest-node-count search
(``minnodes.py``), which a plan that does not fit runs to name the node count that would.

Choice of a default layout (each step is explained in ``LaunchPlan.choices``):

1. ``tp`` = 1 unless given: DeepSeek-V3 trains without tensor parallelism.
2. ``ep`` unless given: one expert group per node, ``gpus_per_node x num_expert_groups`` (64 for DeepSeek-V3:
   8 groups x 8 GPUs, so node-limited routing "at most 4 groups per token" is "at most 4 nodes"); lowered to
   the largest value that divides the routed experts and the ranks of a stage and keeps EP groups node-aligned.
   Dense models: 1.
3. ``pp`` unless given: the smallest valid ``pp`` (even for DualPipe; stages <= layers; ``dp`` whole) whose
   worst rank fits in HBM. If none fits, the one with the most headroom (the plan then reports "does not fit").
4. ``dp`` = world / (pp x tp); ``expert_dp`` = tp x dp / ep; ZeRO-1.
5. Batch: ``--global-batch`` sequences per step (default 15,360, DeepSeek-V3's), ``--micro-batches`` per pipeline
   per step (default: one sequence per micro-batch, i.e. global / dp, made even for DualPipe).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from dsctl.errors import InputError
from dsctl.launch import minnodes
from dsctl.launch.batch import DEFAULT_GLOBAL_BATCH, BatchPlan
from dsctl.launch.candidates import PlanInputs, search
from dsctl.launch.explanation import (
    does_not_fit_note,
    explain_choices,
    min_nodes_note,
    missed_fit_notes,
    no_layout_error,
)
from dsctl.launch.layout import ParallelLayout
from dsctl.launch.memory import MemoryAssumptions, MemoryEstimate
from dsctl.launch.rankmap import GROUP_KINDS, GROUP_MEANING, RankMap, RankMapSummary, build_rank_map, stages_of_rank
from dsctl.launch.request import MAX_COUNT, MAX_NODES, LaunchRequest, check_node_count, check_request
from dsctl.launch.rules import DUAL_SCHEDULES
from dsctl.launch.schedule import OpCosts, simulate
from dsctl.launch.stages import Stage
from dsctl.model.params import count_parameters
from dsctl.profiles.schema import ModelProfile, NodeProfile
from dsctl.steptime import DEFAULT_GPU_HOUR_USD, StepTime, TokenBudget, predict_step, token_budget

__all__ = ["DEFAULT_GLOBAL_BATCH", "MAX_COUNT", "MAX_NODES", "BatchPlan", "LaunchPlan", "LaunchRequest",
           "LayoutReport", "ScheduleFigures", "StageRow", "plan_launch", "plan_layout"]

#: progress callback of the smallest-node-count search: ``(counts_done, counts_bound)``
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class ScheduleFigures:
    """Simulated pipeline figures at unit costs F=1, B=2, W=1, F&B=F+B (time in units of one forward chunk)."""

    schedule: str
    num_stages: int
    num_ranks: int
    micro_batches: int
    makespan: float
    bubble: float
    bubble_fraction: float
    bubble_formula: float | None
    peak_activations: int
    params_per_rank: str


@dataclass(frozen=True)
class StageRow:
    """One model stage of the plan: its layers (0-based, inclusive), the pipeline ranks holding it (two under
    DualPipe: the rank and its mirror) and its parameters per GPU (dense + routed experts / ep)."""

    stage: int
    contents: str
    first_layer: int
    last_layer: int
    num_layers: int
    num_mtp_modules: int
    pp_ranks: tuple[int, ...]
    params_per_gpu: int
    dense_params: int
    routed_expert_params_per_gpu: int

    def to_data(self) -> dict[str, Any]:
        return {"stage": self.stage, "contents": self.contents, "first_layer": self.first_layer,
                "last_layer": self.last_layer, "num_layers": self.num_layers,
                "num_mtp_modules": self.num_mtp_modules, "pp_ranks": list(self.pp_ranks),
                "params_per_gpu": self.params_per_gpu, "dense_params": self.dense_params,
                "routed_expert_params_per_gpu": self.routed_expert_params_per_gpu}


@dataclass(frozen=True)
class LaunchPlan:
    """Everything ``dsctl launch --dry-run`` prints. ``exit_code`` is 1 when the plan does not fit in memory."""

    model: str
    node_profile: str
    num_nodes: int
    gpus_per_node: int
    world_size: int
    layout: ParallelLayout
    expert_dp: int
    zero_stage: int
    schedule: str
    num_stages: int
    batch: BatchPlan
    stages: tuple[StageRow, ...]
    memory: MemoryEstimate
    rank_map: RankMapSummary
    schedule_figures: ScheduleFigures | None
    choices: tuple[str, ...]
    notes: tuple[str, ...]
    backend: str | None
    job_name: str | None
    train_command: tuple[str, ...]
    exit_code: int
    ranks: RankMap = field(repr=False, metadata={"output": False})
    #: predicted step (dsctl.steptime) and, with ``--tokens``, what that many tokens cost; None when not predicted
    step_time: StepTime | None = None
    token_budget: TokenBudget | None = None

    def layout_file(self) -> dict[str, Any]:
        """Content of ``layout.json`` (``--out-dir``)."""
        return {
            "model": self.model, "node_profile": self.node_profile, "num_nodes": self.num_nodes,
            "gpus_per_node": self.gpus_per_node, "world_size": self.world_size,
            "layout": self.layout.degrees(), "expert_dp": self.expert_dp, "zero_stage": self.zero_stage,
            "schedule": self.schedule, "num_stages": self.num_stages, "batch": self.batch.to_data(),
            "stages": [row.to_data() for row in self.stages], "rank_order": self.rank_map.order,
            "groups": self.rank_map.to_data()["groups"], "train_command": list(self.train_command),
        }


# --------------------------------------------------------------------------------------------- the plan


def plan_launch(model: ModelProfile, node: NodeProfile, request: LaunchRequest,
                assumptions: MemoryAssumptions | None = None, simulate_schedule: bool = True,
                suggest_min_nodes: bool = False, progress: Progress | None = None, tokens: float | None = None,
                gpu_hour_usd: float = DEFAULT_GPU_HOUR_USD, balancedness: float = 1.0,
                fabric_plan: str | None = None) -> LaunchPlan:
    """Choose (or check) the layout for ``request`` and build the full plan; raises InputError on bad input.

    With ``simulate_schedule`` the plan also predicts the step in seconds (:func:`dsctl.steptime.predict_step`);
    ``tokens`` (trained tokens) adds their GPU hours, days and cost at ``gpu_hour_usd``; ``balancedness`` (mean over
    max expert load, 1.0 = absolutely balanced) scales the busiest GPU's expert work; ``fabric_plan`` (a plan.json
    text of ``dsctl topology plan``) runs the prediction's EP all-to-alls through the fabric simulator on that
    fabric instead of the node profile's closed form.

    ``suggest_min_nodes``: a plan that does not fit gets a note naming the smallest node count that does
    (:func:`dsctl.launch.minnodes.min_nodes`, which reports to ``progress``).
    """
    check_node_count(request.num_nodes)
    request = check_request(model, request)
    inputs = PlanInputs(model, node, request, count_parameters(model), assumptions or MemoryAssumptions())
    chosen, considered = search(inputs)
    if chosen is None:
        raise no_layout_error(considered, request.num_nodes, request.schedule, request.global_batch,
                              request.micro_batches)
    layout, batch, memory = chosen.layout, chosen.batch, chosen.memory
    notes = list(chosen.notes)
    notes.extend(missed_fit_notes(considered, memory.fits, request.schedule, request.global_batch,
                                  request.micro_batches))
    rank_map = build_rank_map(layout)
    figures = _schedule_figures(layout, batch) if simulate_schedule else None
    if figures is None and simulate_schedule:
        notes.append(f"no schedule figures: {layout.schedule} needs at least 2 pipeline stages")
    step = None
    if simulate_schedule:
        try:
            step = predict_step(model, node, layout, batch.micro_batches, batch.micro_batch_size, batch.seq_len,
                                balancedness=balancedness, fabric_plan=fabric_plan, recipe=inputs.recipe)
        except InputError as exc:
            if "balancedness" in exc.message or fabric_plan is not None:
                raise
            notes.append(f"no step-time prediction: {exc.message}")
    budget = token_budget(step, tokens, gpu_hour_usd) if step is not None and tokens else None
    if not memory.fits:
        notes.append(does_not_fit_note(memory))
    if not request.train_command:
        notes.append("no training command given (put it after '--'); the plan is still complete")
    if suggest_min_nodes and not memory.fits:
        smallest = minnodes.min_nodes(model, node, request, progress=progress)
        notes.append(min_nodes_note(smallest, minnodes.SEARCH_LIMIT_NODES))
    return LaunchPlan(
        model=model.name, node_profile=node.name, num_nodes=request.num_nodes, gpus_per_node=node.num_gpus,
        world_size=layout.world_size, layout=layout, expert_dp=layout.expert_dp, zero_stage=layout.zero_stage,
        schedule=layout.schedule, num_stages=layout.num_stages, batch=batch,
        stages=tuple(_stage_rows(layout, chosen.stages)), memory=memory, rank_map=rank_map.summary(),
        schedule_figures=figures, choices=tuple(explain_choices(request, model, layout, memory, considered)),
        notes=tuple(notes), backend=request.backend, job_name=request.job_name,
        train_command=request.train_command, exit_code=0 if memory.fits else 1, ranks=rank_map,
        step_time=step, token_budget=budget,
    )


def _stage_rows(layout: ParallelLayout, stages: tuple[Stage, ...]) -> list[StageRow]:
    holders: dict[int, list[int]] = {s.index: [] for s in stages}
    for r in range(layout.pp):
        for s in stages_of_rank(layout, r):
            holders[s].append(r)
    return [StageRow(
        stage=s.index, contents=s.describe(), first_layer=s.first_layer, last_layer=s.last_layer,
        num_layers=s.num_layers, num_mtp_modules=s.num_mtp_modules, pp_ranks=tuple(holders[s.index]),
        params_per_gpu=s.dense_params + s.routed_expert_params // layout.ep,
        dense_params=s.dense_params, routed_expert_params_per_gpu=s.routed_expert_params // layout.ep,
    ) for s in stages]


#: micro-batches beyond which the plan simulates this many and extrapolates (the bubble no longer changes)
MAX_SIMULATED_MICRO_BATCHES = 256


def _schedule_figures(layout: ParallelLayout, batch: BatchPlan) -> ScheduleFigures | None:
    """Run the schedule simulator (another package) if it is present; None otherwise.

    Costs F=1, B=2, W=1, F&B=F+B, so every rank does the same work: ``makespan = busy + bubble`` with
    ``busy = micro-batches x chunks per micro-batch per rank x (F+B)``. Beyond
    :data:`MAX_SIMULATED_MICRO_BATCHES` the bubble and the activation peak no longer depend on the count
    (dualpipe-facts.md section 6), so the simulation runs at that count and the makespan is extended by the
    extra micro-batches' busy time.
    """
    stages = layout.num_stages
    if stages < 2 and layout.schedule in DUAL_SCHEDULES:
        return None
    m = batch.micro_batches
    m_sim = min(m, MAX_SIMULATED_MICRO_BATCHES)
    result = simulate(layout.schedule, stages, m_sim, OpCosts(f=1.0, b=2.0, w=1.0, fb=None))
    chunks_per_micro_batch = 2 if layout.schedule == "dualpipev" else 1
    makespan = float(result.makespan) + (m - m_sim) * chunks_per_micro_batch * 3.0
    bubble = float(result.bubble)
    formula = getattr(result, "formula_bubble", None)
    return ScheduleFigures(
        schedule=layout.schedule, num_stages=stages, num_ranks=layout.pp, micro_batches=m,
        makespan=makespan, bubble=bubble, bubble_fraction=bubble / makespan if makespan else 0.0,
        bubble_formula=float(formula) if isinstance(formula, (int, float)) else None,
        peak_activations=int(_peak(result.peak_activations)),
        params_per_rank="2x" if layout.schedule in DUAL_SCHEDULES else "1x",
    )


def _peak(value: Any) -> int:
    try:
        return int(max(value))
    except TypeError:
        return int(value)


# --------------------------------------------------------------------------------------------- layout report


@dataclass(frozen=True)
class GroupListing:
    """Every group of one kind: ``ranks`` has shape ``(num_groups, group_size)``."""

    kind: str
    meaning: str
    num_groups: int
    group_size: int
    ranks: Any  # numpy int64 array

    def to_data(self) -> dict[str, Any]:
        return {"kind": self.kind, "meaning": self.meaning, "num_groups": self.num_groups,
                "group_size": self.group_size, "ranks": self.ranks.tolist()}


@dataclass(frozen=True)
class LayoutReport:
    """``dsctl launch layout``: the layout part of a plan, why it was chosen, the stage split, the rank map and
    (``--explain``) every group. ``min_nodes`` is the node count ``--min-nodes`` found (None: given as --nodes).
    The JSON keeps the memory check to ``memory_fits`` / ``max_memory_bytes`` / ``hbm_bytes`` (details in
    ``dsctl launch``); ``exit_code`` is 1 when the layout does not fit in memory, as for ``dsctl launch``."""

    plan: LaunchPlan
    groups: tuple[GroupListing, ...] = ()
    min_nodes: int | None = None

    @property
    def choices(self) -> tuple[str, ...]:
        if self.min_nodes is None:
            return self.plan.choices
        return (*self.plan.choices, f"--min-nodes: {self.min_nodes} is the smallest node count that fits (every "
                                    "smaller count was checked)")

    @property
    def exit_code(self) -> int:
        return self.plan.exit_code

    def to_data(self) -> dict[str, Any]:
        p = self.plan
        return {
            "model": p.model, "node_profile": p.node_profile, "num_nodes": p.num_nodes,
            "gpus_per_node": p.gpus_per_node, "world_size": p.world_size, "layout": p.layout,
            "expert_dp": p.expert_dp, "zero_stage": p.zero_stage, "schedule": p.schedule, "num_stages": p.num_stages,
            "micro_batches": p.batch.micro_batches, "stages": p.stages, "choices": self.choices,
            "memory_fits": p.memory.fits, "max_memory_bytes": p.memory.max_total_bytes,
            "hbm_bytes": p.memory.hbm_bytes, "rank_map": p.rank_map, "groups": self.groups,
            "exit_code": self.exit_code,
        }


def plan_layout(model: ModelProfile, node: NodeProfile, request: LaunchRequest, explain: bool = False,
                find_min_nodes: bool = False, progress: Progress | None = None) -> LayoutReport:
    """``dsctl launch layout``: the plan of ``request`` without schedule figures, every group with ``explain``.

    ``find_min_nodes``: plan the smallest node count that fits instead of ``request.num_nodes``
    (:func:`dsctl.launch.minnodes.min_nodes`, reporting to ``progress``); InputError if none up to its limit does.
    """
    found = None
    if find_min_nodes:
        found = minnodes.min_nodes(model, node, request, progress=progress)
        if found is None:
            raise InputError(f"no node count up to {minnodes.SEARCH_LIMIT_NODES:,} fits {model.name} on {node.name} "
                             "with these options", hint="try --tp, --pp, or a smaller --global-batch / --micro-batches")
        request = replace(request, num_nodes=found)
    plan = plan_launch(model, node, request, simulate_schedule=False)
    groups: tuple[GroupListing, ...] = ()
    if explain:
        groups = tuple(GroupListing(kind, GROUP_MEANING[kind], int(ranks.shape[0]), int(ranks.shape[1]), ranks)
                       for kind in GROUP_KINDS for ranks in (plan.ranks.groups(kind),))
    return LayoutReport(plan, groups, found)
