"""Stages 4-5 of the layout search (``dsctl.launch.search``) and the pipeline itself: each fitting layout's
predicted step, the ranking by objective, and :func:`search_layouts`, which runs stages 1-5 in order."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dsctl.errors import InputError
from dsctl.launch.candidates import PlanInputs
from dsctl.launch.layout import ParallelLayout
from dsctl.launch.rules import min_micro_batches
from dsctl.launch.search import (
    HEADROOM_SLACK,
    OBJECTIVES,
    Rejected,
    SearchOptions,
    SearchResult,
    Trial,
    attach_memory,
    enumerate_trials,
    search_space,
)
from dsctl.steptime import EpCostModel, StepTime, fabric_ep, predict_step

#: the best layouts re-predicted without extrapolation (what the plan shows side by side)
EXACT_TOP = 5


# --------------------------------------------------------------------------------------------- 4. step time


def attach_step_time(inputs: PlanInputs, options: SearchOptions,
                     trials: list[Trial]) -> tuple[list[Trial], list[Rejected]]:
    """Each fitting trial's predicted step; the EP model is built once per EP degree (its seconds are cached per
    token count inside :func:`dsctl.topology.sim.ep_time.ep_exchange_seconds`)."""
    model, node = inputs.model, inputs.node
    ep_models: dict[int, EpCostModel | None] = {}
    kept: list[Trial] = []
    rejected: list[Rejected] = []
    for trial in trials:
        lay, batch = trial.layout, trial.batch
        balancedness = options.balancedness_at(lay.ep)
        if lay.ep not in ep_models and 0.0 < balancedness <= 1.0:
            ep_models[lay.ep] = (fabric_ep(model, node, lay.ep, 1.0 / balancedness, options.fabric_plan)
                                 if lay.ep > 1 and model.moe is not None else None)
        try:
            step = _predict(inputs, trial, balancedness, ep_models.get(lay.ep))
        except InputError as exc:
            # a fabric that cannot hold the EP group, or a balancedness no layout could have, is the user's
            # input, not a layout's failing; below 1/ep only rules out the smaller EP degrees
            if options.fabric_plan is not None or ("balancedness" in exc.message and "below 1/ep" not in
                                                   exc.message):
                raise
            rejected.append(Rejected("step-time model", lay.schedule, lay.pp, lay.ep, batch.micro_batch_size,
                                     exc.message, recipe=trial.recipe.name))
            continue
        kept.append(replace(trial, step=step))
    if not kept and rejected and all("below 1/ep" in r.reason for r in rejected):
        raise InputError(rejected[0].reason)
    return kept, rejected


def _predict(inputs: PlanInputs, trial: Trial, balancedness: float, ep_cost: EpCostModel | None) -> StepTime:
    """The predicted step; beyond ``2 x`` :func:`steady_micro_batches` micro-batches it is extrapolated from two
    shorter simulations (the schedule's steady state adds the same seconds, and the same ops, per micro-batch
    pair: step, pipeline, bubble and every phase grow linearly), so a search at small dp (thousands of
    micro-batches) stays bounded. The plan re-predicts its chosen layout in full."""
    layout, batch, recipe = trial.layout, trial.batch, trial.recipe
    m = batch.micro_batches
    short = steady_micro_batches(layout)
    if m <= 2 * short:
        return predict_step(inputs.model, inputs.node, layout, m, batch.micro_batch_size, batch.seq_len,
                            balancedness=balancedness, ep_cost=ep_cost, recipe=recipe)
    longer, shorter = (predict_step(inputs.model, inputs.node, layout, k, batch.micro_batch_size, batch.seq_len,
                                    balancedness=balancedness, ep_cost=ep_cost, recipe=recipe)
                       for k in (short, short - 2))
    pairs = (m - short) / 2

    def grown(name: str, a: object, b: object) -> float:
        x, y = getattr(a, name), getattr(b, name)
        return x + pairs * (x - y)

    phases = longer.breakdown
    grown_phases: dict[str, Any] = {name: (round if name.startswith("num_") else float)(
        grown(name, phases, shorter.breakdown)) for name in ("one_f_s", "one_b_s", "one_w_s", "overlapped_fb_s",
                                                             "bubble_s", "optimizer_s", "num_f", "num_b", "num_w",
                                                             "num_fb")}
    breakdown = replace(phases, **grown_phases)
    return replace(longer, step_s=grown("step_s", longer, shorter), pipeline_s=grown("pipeline_s", longer, shorter),
                   max_bubble_s=grown("max_bubble_s", longer, shorter), breakdown=breakdown,
                   tokens_per_step=longer.tokens_per_step * m / short)


def steady_micro_batches(layout: ParallelLayout) -> int:
    """Micro-batches a simulation needs to reach the schedule's steady state: its minimum + 8, even."""
    least = min_micro_batches(layout.schedule, layout.pp)
    return least + 8 + (least % 2)


# --------------------------------------------------------------------------------------------- 5. rank


def rank(trials: list[Trial], objective: str) -> tuple[Trial, ...]:
    """Trials best first. ``fastest`` (and ``fewest-nodes`` within one node count): shortest step, then most
    headroom; ``headroom``: most headroom among trials within :data:`HEADROOM_SLACK` of the fastest, then the
    rest by step."""
    def step_key(t: Trial) -> tuple[float, float]:
        memory, step = t.predicted()
        return (round(step.step_s, 6), -memory.headroom_bytes)

    by_step = sorted(trials, key=step_key)
    if objective != "headroom" or not by_step:
        return tuple(by_step)
    limit = step_key(by_step[0])[0] * (1.0 + HEADROOM_SLACK)
    near = [t for t in by_step if step_key(t)[0] <= limit]
    rest = [t for t in by_step if step_key(t)[0] > limit]
    return tuple(sorted(near, key=lambda t: step_key(t)[1]) + rest)


def check_objective(objective: str) -> str:
    """``--objective`` lower-cased, or InputError naming the valid ones."""
    name = objective.lower()
    if name not in OBJECTIVES:
        raise InputError(f"--objective {objective!r} is not known; valid: {', '.join(OBJECTIVES)}")
    return name


# --------------------------------------------------------------------------------------------- the pipeline


def search_layouts(inputs: PlanInputs, options: SearchOptions) -> SearchResult:
    """Stages 1-5 in order: space -> trials -> memory -> step time -> ranking."""
    space = search_space(inputs, options)
    trials, rejected = enumerate_trials(inputs, space)
    fitting, over = attach_memory(inputs, trials, options.min_headroom_bytes)
    predicted, failed = attach_step_time(inputs, options, fitting)
    ranked = rank(predicted, options.objective)
    exact = [_exact(inputs, options, t) for t in ranked[:EXACT_TOP]]  # the rows a reader compares, in full
    return SearchResult(space, options.objective, rank([*exact, *ranked[EXACT_TOP:]], options.objective),
                        tuple(rejected + over + failed), inputs.node.usable_hbm_bytes,
                        other_recipes(inputs, options) if not ranked else ())


def other_recipes(inputs: PlanInputs, options: SearchOptions) -> tuple[Trial, ...]:
    """With a recipe the request fixes: the best trial under each other recipe the model can train with (the
    same search with the recipe left open), ranked; () when the request fixes none."""
    fixed = inputs.request.recipe
    if fixed is None:
        return ()
    opened = search_layouts(replace(inputs, request=replace(inputs.request, recipe=None)), options)
    by_recipe: dict[str, list[Trial]] = {}
    for trial in opened.ranked:
        if trial.recipe.name != fixed:
            by_recipe.setdefault(trial.recipe.name, []).append(trial)
    best = [rank([_exact(inputs, options, t) for t in trials[:3]], options.objective)[0]
            for trials in by_recipe.values()]  # each recipe's leaders simulated in full
    return rank(best, options.objective)


def _exact(inputs: PlanInputs, options: SearchOptions, trial: Trial) -> Trial:
    """``trial`` with its step simulated in full (no extrapolation)."""
    lay, batch = trial.layout, trial.batch
    return replace(trial, step=predict_step(inputs.model, inputs.node, lay, batch.micro_batches,
                                            batch.micro_batch_size, batch.seq_len,
                                            balancedness=options.balancedness_at(lay.ep),
                                            fabric_plan=options.fabric_plan, recipe=trial.recipe))


#: the stages of :func:`search_layouts` and its explanation, in order (the pipeline test walks them)
STAGES: tuple[str, ...] = ("search_space", "enumerate_trials", "attach_memory", "attach_step_time", "rank",
                           "explain_search")
