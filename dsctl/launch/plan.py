"""The launch plan: layout choice (or check), stage split, memory fit, rank map and schedule figures in one result.

A pipeline, one module per step: request (``request.py``: checks) -> candidates (``candidates.py``: each pipeline
degree evaluated once) -> batch (``batch.py``) -> memory (``memory.py``) -> explanation (``explanation.py``) ->
plan (here). The pp/schedule/EP rules live in ``rules.py``, shared with the smallest-node-count search
(``minnodes.py``), which a plan that does not fit runs to name the node count that would.

With ``search`` (``dsctl launch``) the layout is the best of every valid one by predicted step
(``search.py`` -> ``ranking.py`` -> ``search_explain.py``); the memory rule below decides when none fits, and for
``launch layout``. The memory rule (each step is explained in ``LaunchPlan.choices``):

1. ``tp`` = 1 unless given: DeepSeek-V3 trains without tensor parallelism.
2. ``ep`` unless given: one expert group per node (64 for DeepSeek-V3: 8 groups x 8 GPUs, node-limited routing
   reaches <= 4 nodes), lowered to the largest node-aligned divisor of the experts and a stage's ranks; dense: 1.
3. ``pp`` unless given: the smallest valid ``pp`` (even for DualPipe; stages <= layers; ``dp`` whole) whose
   worst rank fits in HBM. If none fits, the one with the most headroom (the plan then reports "does not fit").
4. ``dp`` = world / (pp x tp); ``expert_dp`` = tp x dp / ep; ZeRO-1.
5. Batch: ``--global-batch`` sequences per step (default 15,360, DeepSeek-V3's), ``--micro-batches`` per pipeline
   per step (default: one sequence per micro-batch, i.e. global / dp, made even for DualPipe).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from dsctl.errors import InputError
from dsctl.launch import minnodes
from dsctl.launch.batch import DEFAULT_GLOBAL_BATCH, BatchPlan
from dsctl.launch.candidates import Candidate, Choice, PlanInputs
from dsctl.launch.candidates import search as search_by_memory
from dsctl.launch.explanation import (
    does_not_fit_note,
    explain_choices,
    min_nodes_note,
    missed_fit_notes,
    no_layout_error,
)
from dsctl.launch.figures import ScheduleFigures, schedule_figures
from dsctl.launch.layout import ParallelLayout
from dsctl.launch.memory import MemoryAssumptions, MemoryEstimate
from dsctl.launch.ranking import search_layouts
from dsctl.launch.rankmap import RankMap, RankMapSummary, build_rank_map, stages_of_rank
from dsctl.launch.request import MAX_COUNT, MAX_NODES, LaunchRequest, check_node_count
from dsctl.launch.search import SearchOptions, search_request
from dsctl.launch.search_explain import SearchExplanation, choice_lines, explain_search
from dsctl.launch.stages import Stage
from dsctl.launch.tensor_parallel import dense_per_tp_rank, replicated_params
from dsctl.model.params import count_parameters
from dsctl.profiles.schema import ModelProfile, NodeProfile
from dsctl.progress_count import Report, Stages
from dsctl.steptime import DEFAULT_GPU_HOUR_USD, StepTime, TokenBudget, predict_step, token_budget

if TYPE_CHECKING:
    from dsctl.launch.sweep import NodeSweep
    from dsctl.launch.trials import SearchResult

__all__ = ["DEFAULT_GLOBAL_BATCH", "MAX_COUNT", "MAX_NODES", "BatchPlan", "LaunchPlan", "LaunchRequest",
           "ScheduleFigures", "StageRow", "plan_launch"]

#: progress callback ``(done, total)``: layouts predicted, counts of the smallest-node-count search
Progress = Report


@dataclass(frozen=True)
class StageRow:
    """One model stage of the plan: its layers (0-based, inclusive), the pipeline ranks holding it (two under
    DualPipe: the rank and its mirror) and its parameters per GPU (dense over tp but the norms and router, + routed
    experts / ep); ``dense_params`` is the stage's, before tensor parallelism."""

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
    #: the layout search (``dsctl.launch.search``) that chose the layout; None when the plan was not searched
    search: SearchExplanation | None = None
    #: ``--nodes LOW-HIGH``: the node counts searched and the one this plan is for (``dsctl.launch.sweep``)
    sweep: NodeSweep | None = None

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
                fabric_plan: str | None = None, search: SearchOptions | None = None,
                presearched: tuple[PlanInputs, SearchOptions, SearchResult] | None = None) -> LaunchPlan:
    """Choose (or check) the layout for ``request`` and build the full plan; raises InputError on bad input.

    With ``simulate_schedule`` the plan also predicts the step in seconds (:func:`dsctl.steptime.predict_step`);
    ``tokens`` (trained tokens) adds their GPU hours, days and cost at ``gpu_hour_usd``; ``balancedness`` (mean over
    max expert load, 1.0 = absolutely balanced) scales the busiest GPU's expert work; ``fabric_plan`` (a plan.json
    text of ``dsctl topology plan``) runs the prediction's EP all-to-alls through the fabric simulator on that
    fabric instead of the node profile's closed form.

    ``suggest_min_nodes``: a plan that does not fit gets a note naming the smallest node count that does
    (:func:`dsctl.launch.minnodes.min_nodes` over ``search``'s space, else the memory rule's; it reports to
    ``progress``).
    ``progress(done, total)`` counts the layouts predicted, then (if run) the node counts scanned; the total
    grows when the scan is needed.

    ``search`` (with ``simulate_schedule``): choose among every valid layout by predicted step
    (:func:`dsctl.launch.search.search_layouts`, its options' objective and schedules); when none fits, the plan
    falls back to the memory rule above and says so. ``presearched``: a search already run (inputs, options,
    result), used instead of searching again when its inputs and options are this plan's.
    """
    check_node_count(request.num_nodes)
    request = (search_request(request, search) if search is not None else request).checked(model, node.num_gpus)
    inputs = PlanInputs(model, node, request, count_parameters(model), assumptions or MemoryAssumptions())
    stages = Stages(progress, [])
    searched = None
    if search is not None and simulate_schedule:
        options = replace(search, balancedness=balancedness, fabric_plan=fabric_plan)
        report = stages.part(stages.add(1.0))
        if presearched is not None and presearched[0] == inputs and presearched[1] == options:
            searched = presearched[2]
            report(1, 1)
        else:
            searched = search_layouts(inputs, options, report)
    inputs, (chosen, considered) = _memory_rule(inputs, search.schedules if search is not None else ())
    request = inputs.request
    if searched is not None and searched.best is not None:
        best = searched.best
        chosen = Choice(best.layout, best.batch, best.stages, best.predicted()[0], best.notes)
    if chosen is None:
        raise no_layout_error(considered, request.num_nodes, request.schedule, request.global_batch,
                              request.micro_batches)
    layout, batch, memory = chosen.layout, chosen.batch, chosen.memory
    notes = list(chosen.notes)
    notes.extend(missed_fit_notes(considered, memory.fits, request.schedule, request.global_batch,
                                  request.micro_batches))
    rank_map = build_rank_map(layout)
    figures = schedule_figures(layout, batch) if simulate_schedule else None
    if figures is None and simulate_schedule:
        notes.append(f"no schedule figures: {layout.schedule} needs at least 2 pipeline stages")
    step = searched.best.step if searched is not None and searched.best is not None else None  # simulated in full
    if search is not None:  # routing statistics give each EP degree its own balancedness
        balancedness = replace(search, balancedness=balancedness).balancedness_at(layout.ep)
    if simulate_schedule and step is None:
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
        smallest = minnodes.min_nodes(model, node, request, progress=stages.part(stages.add(1.0)), search=search)
        notes.append(min_nodes_note(smallest, minnodes.SEARCH_LIMIT_NODES))
    explanation = explain_search(searched) if searched is not None else None
    choices = explain_choices(request, model, layout, memory, considered)
    if searched is not None and explanation is not None:  # without a fitting layout: the memory rule's lines
        choices = choice_lines(searched, explanation) + [
            line for line in choices if searched.best is None or line.startswith(("dp ", "schedule "))]
    stages.finish()
    return LaunchPlan(
        model=model.name, node_profile=node.name, num_nodes=request.num_nodes, gpus_per_node=node.num_gpus,
        world_size=layout.world_size, layout=layout, expert_dp=layout.expert_dp, zero_stage=layout.zero_stage,
        schedule=layout.schedule, num_stages=layout.num_stages, batch=batch,
        stages=tuple(_stage_rows(model, layout, chosen.stages)), memory=memory, rank_map=rank_map.summary(),
        schedule_figures=figures, choices=tuple(choices),
        notes=tuple(notes), backend=request.backend, job_name=request.job_name,
        train_command=request.train_command, exit_code=0 if memory.fits else 1, ranks=rank_map,
        step_time=step, token_budget=budget, search=explanation,
    )


def _memory_rule(inputs: PlanInputs, schedules: tuple[str, ...]) -> tuple[PlanInputs, tuple[Choice | None,
                                                                                       tuple[Candidate, ...]]]:
    """The memory rule's choice under the request's schedule, else (its pipeline degrees all break that schedule's
    rules: ``--tp 8`` or ``--dp 8`` on one node leaves pp 1, which DualPipe cannot run) under the first of
    ``schedules`` (those a search may choose) that can run them; with the inputs it was made under."""
    try:
        return inputs, search_by_memory(inputs)
    except InputError:
        for schedule in schedules:
            if schedule != inputs.request.schedule:
                other = replace(inputs, request=replace(inputs.request, schedule=schedule))
                try:
                    return other, search_by_memory(other)
                except InputError:
                    continue
        raise


def _stage_rows(model: ModelProfile, layout: ParallelLayout, stages: tuple[Stage, ...]) -> list[StageRow]:
    holders: dict[int, list[int]] = {s.index: [] for s in stages}
    for r in range(layout.pp):
        for s in stages_of_rank(layout, r):
            holders[s].append(r)
    return [StageRow(
        stage=s.index, contents=s.describe(), first_layer=s.first_layer, last_layer=s.last_layer,
        num_layers=s.num_layers, num_mtp_modules=s.num_mtp_modules, pp_ranks=tuple(holders[s.index]),
        params_per_gpu=int(dense_per_tp_rank(s.dense_params, replicated_params(model, s), layout.tp))
        + s.routed_expert_params // layout.ep,
        dense_params=s.dense_params, routed_expert_params_per_gpu=s.routed_expert_params // layout.ep,
    ) for s in stages]
