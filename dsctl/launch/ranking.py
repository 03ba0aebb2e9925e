"""Stages 4-5 of the layout search (``dsctl.launch.search``) and the pipeline itself: each fitting layout's
predicted step, the ranking by objective, and :func:`search_layouts`, which runs stages 1-5 in order."""

from __future__ import annotations

from bisect import insort
from dataclasses import replace
from typing import Any

from dsctl.errors import InputError
from dsctl.gcpause import gc_paused
from dsctl.launch.candidates import PlanInputs
from dsctl.launch.layout import ParallelLayout
from dsctl.launch.rules import min_micro_batches
from dsctl.launch.search import (
    HEADROOM_SLACK,
    OBJECTIVES,
    SearchOptions,
    attach_memory,
    enumerate_trials,
    search_space,
    with_rows,
)
from dsctl.launch.trials import Rejected, SearchResult, Trial
from dsctl.model.recipes import recomputes_at_least
from dsctl.progress_count import Report, Stages, each
from dsctl.steptime import EpCostModel, StepTime, fabric_ep, predict_step, step_lower_bound

#: the best layouts re-predicted without extrapolation (what the plan shows side by side)
EXACT_TOP = 5
#: progress weights, in predicted layouts: one memory estimate, one full re-prediction (measured, V3 on 256 nodes:
#: 2.6 ms, 170 ms a layout predicted, about 500 ms one re-predicted in full)
MEMORY_WEIGHT = 0.02
EXACT_WEIGHT = 3.0


# --------------------------------------------------------------------------------------------- 3b. dominated


def drop_dominated(trials: list[Trial], objective: str) -> tuple[list[Trial], list[Rejected]]:
    """Stage 3b: a fitting trial is dominated when a fitting twin (same degrees, schedule and batch) has a ZeRO
    stage never slower (:func:`never_slower_zero`) and a recipe that recomputes no more
    (:func:`dsctl.model.recipes.recomputes_at_least`), differing in one of them: the step-time model gives the
    twin a step no longer (ZeRO-2 only adds a gradient reduce-scatter per micro-batch, a recipe only its
    recompute), so only ``headroom`` predicts such a trial."""
    if objective == "headroom":
        return trials, []
    twins: dict[tuple[object, ...], list[Trial]] = {}
    for t in trials:
        lay = t.layout
        twins.setdefault((lay.pp, lay.ep, lay.tp, lay.dp, lay.schedule, t.batch.micro_batches,
                          t.batch.micro_batch_size), []).append(t)

    def beaten_by(t: Trial) -> Trial | None:
        lay = t.layout
        for other in twins[(lay.pp, lay.ep, lay.tp, lay.dp, lay.schedule, t.batch.micro_batches,
                            t.batch.micro_batch_size)]:
            zero = other.layout.zero_stage
            # nothing to shard over: every ZeRO stage runs alike (expert-dp = tp x dp / ep counts only where
            # there are experts)
            no_experts = bool(t.stages) and not any(s.routed_expert_params for s in t.stages)
            no_group = lay.dp == 1 and (lay.expert_dp == 1 or no_experts)
            if ((never_slower_zero(zero, lay.zero_stage) or (no_group and zero < lay.zero_stage))
                    and recomputes_at_least(t.recipe, other.recipe)
                    and (zero < lay.zero_stage or not recomputes_at_least(other.recipe, t.recipe))):
                return other
        return None

    kept: list[Trial] = []
    dropped: list[Rejected] = []
    for t in trials:
        other = beaten_by(t)
        if other is None:
            kept.append(t)
            continue
        dropped.append(Rejected("dominated", t.layout.schedule, t.layout.pp, t.layout.ep, t.batch.micro_batch_size,
                                f"ZeRO-{t.layout.zero_stage} {t.recipe.name}: never faster than its twin with "
                                f"ZeRO-{other.layout.zero_stage} {other.recipe.name}, which fits",
                                t.predicted_memory_bytes(), t.recipe.name, t.layout.zero_stage, t.layout.tp))
    return kept, dropped


def never_slower_zero(zero: int, than: int) -> bool:
    """Whether the step-time model never gives ZeRO stage ``zero`` a longer step than ``than`` on the same layout:
    the same stage, or 1 against 2 (ZeRO-2 only adds its per-micro-batch reduce-scatter). ZeRO-3 is compared with
    nothing else: it drops the end-of-step all-gather while adding per-layer gathers, so either may win."""
    return zero == than or zero < than <= 2


# --------------------------------------------------------------------------------------------- 4. step time


def attach_step_time(inputs: PlanInputs, options: SearchOptions, trials: list[Trial],
                     report: Report | None = None) -> tuple[list[Trial], list[Rejected]]:
    """Each fitting trial's predicted step; the EP model is built once per EP degree (its seconds are cached per
    token count inside :func:`dsctl.topology.sim.ep_time.ep_exchange_seconds`). Trials are simulated in the order
    of their lower bound (:func:`dsctl.steptime.step_lower_bound`), and one whose bound is above the
    :data:`EXACT_TOP`-th best step so far (and, for ``headroom``, above the fastest + :data:`HEADROOM_SLACK`)
    cannot enter the rows shown or win: it is rejected as "outpaced" without its simulation.
    ``report(trials_done, trials)`` after each."""
    model, node = inputs.model, inputs.node
    ep_models: dict[int, EpCostModel | None] = {}
    for trial in trials:  # in the enumeration's order: a fabric that cannot hold an EP group fails as before
        ep, balancedness = trial.layout.ep, options.balancedness_at(trial.layout.ep)
        if ep not in ep_models and 0.0 < balancedness <= 1.0:
            ep_models[ep] = (fabric_ep(model, node, ep, 1.0 / balancedness, options.fabric_plan)
                             if ep > 1 and model.moe is not None else None)
    kept: list[Trial] = []
    rejected: list[Rejected] = []
    steps: list[float] = []
    below: InputError | None = None  # the first "below 1/ep" error, raised as it is when it rules out every layout
    slack = HEADROOM_SLACK if options.objective == "headroom" else 0.0  # only headroom ranks past the fastest
    tick = each(report, len(trials))
    for done, (bound, trial) in enumerate(sorted(((_bound(inputs, options, t, ep_models.get(t.layout.ep)), t)
                                                  for t in trials), key=lambda bt: bt[0]), 1):
        tick(done)
        lay, batch = trial.layout, trial.batch
        if len(steps) >= EXACT_TOP and bound > max(steps[EXACT_TOP - 1], steps[0] * (1.0 + slack)):
            rejected.append(Rejected("outpaced", lay.schedule, lay.pp, lay.ep, batch.micro_batch_size,
                                     f"at least {bound:.2f} s (its work alone, no bubble) > the {EXACT_TOP}th best "
                                     f"{steps[EXACT_TOP - 1]:.2f} s", trial.predicted_memory_bytes(),
                                     trial.recipe.name, lay.zero_stage, lay.tp))
            continue
        try:
            step = _predict(inputs, trial, options.balancedness_at(lay.ep), ep_models.get(lay.ep))
        except InputError as exc:
            # a fabric that cannot hold the EP group, or a balancedness no layout could have, is the user's
            # input, not a layout's failing; below 1/ep only rules out the smaller EP degrees
            if options.fabric_plan is not None and trial is not trials[0]:
                _predict(inputs, trials[0], options.balancedness_at(trials[0].layout.ep),
                         ep_models.get(trials[0].layout.ep))  # the enumeration's first layout names the error
            if options.fabric_plan is not None or ("balancedness" in exc.message and "below 1/ep" not in
                                                   exc.message):
                raise
            if below is None and "below 1/ep" in exc.text:
                below = exc
            rejected.append(Rejected("step-time model", lay.schedule, lay.pp, lay.ep, batch.micro_batch_size,
                                     exc.message, recipe=trial.recipe.name, zero_stage=lay.zero_stage,
                                     tp=lay.tp))
            continue
        kept.append(replace(trial, step=step))
        insort(steps, step.step_s)
    if not kept and rejected and below is not None and all("below 1/ep" in r.reason for r in rejected):
        raise below
    return kept, rejected


def _bound(inputs: PlanInputs, options: SearchOptions, trial: Trial, ep_cost: EpCostModel | None) -> float:
    """:func:`dsctl.steptime.step_lower_bound` of ``trial`` (0 when its balancedness is out of range: the
    prediction then says why)."""
    balancedness = options.balancedness_at(trial.layout.ep)
    if not 0.0 < balancedness <= 1.0:
        return 0.0
    batch = trial.batch
    try:
        return step_lower_bound(inputs.model, inputs.node, trial.layout, batch.micro_batches,
                                batch.micro_batch_size, batch.seq_len, balancedness, trial.recipe, ep_cost)
    except InputError:  # e.g. a fabric too small for the EP group: the prediction reports it, in order
        return 0.0


def _predict(inputs: PlanInputs, trial: Trial, balancedness: float, ep_cost: EpCostModel | None) -> StepTime:
    """The predicted step; beyond ``2 x`` :func:`steady_micro_batches` micro-batches it is extrapolated from two
    shorter simulations (the schedule's steady state adds the same seconds, and the same ops, per micro-batch
    pair: step, pipeline, bubble and every phase grow linearly), so a search at small dp (thousands of
    micro-batches) stays bounded. The plan re-predicts its chosen layout in full."""
    layout, batch, recipe = trial.layout, trial.batch, trial.recipe
    m = batch.micro_batches
    short, unit = steady_micro_batches(layout), growth_unit(layout)
    if m <= 2 * short:
        return predict_step(inputs.model, inputs.node, layout, m, batch.micro_batch_size, batch.seq_len,
                            balancedness=balancedness, ep_cost=ep_cost, recipe=recipe)
    longer, shorter = (predict_step(inputs.model, inputs.node, layout, k, batch.micro_batch_size, batch.seq_len,
                                    balancedness=balancedness, ep_cost=ep_cost, recipe=recipe)
                       for k in (short, short - unit))
    pairs = (m - short) / unit

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
    """Micro-batches a simulation needs to reach the schedule's steady state: its minimum + 8, even; interleaved
    1F1B: 3 x pp (its period is pp micro-batches, and M = pp runs every forward first)."""
    if layout.schedule == "interleaved":
        return 3 * layout.pp
    least = min_micro_batches(layout.schedule, layout.pp)
    return least + 8 + (least % 2)


def growth_unit(layout: ParallelLayout) -> int:
    """Micro-batches of one period of the steady state (what the extrapolation adds at a time): a pair, or pp
    under interleaved 1F1B (Megatron sends groups of pp micro-batches through each chunk in turn)."""
    return layout.pp if layout.schedule == "interleaved" else 2


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
        raise InputError(f"{objective!r} is not known; valid: {', '.join(OBJECTIVES)}", field="objective")
    return name


# --------------------------------------------------------------------------------------------- the pipeline


def search_layouts(inputs: PlanInputs, options: SearchOptions, report: Report | None = None) -> SearchResult:
    """Stages 1-5 in order: space -> trials -> memory (-> dominated ZeRO-2 twins dropped) -> step time -> ranking.
    ``report(done, total)`` counts the layouts predicted, then the best re-predicted in full (weighed by
    ``MEMORY_WEIGHT``/``EXACT_WEIGHT``). The cyclic collector waits (``dsctl.gcpause``): the search's tens of
    thousands of trials, estimates and cached stage figures hold no cycles, and its scans of them cost about a
    sixth of the search (DeepSeek-V3 on 256 nodes: ~0.5 of ~3 CPU s, measured)."""
    with gc_paused():
        return _search_layouts(inputs, options, report)


def _search_layouts(inputs: PlanInputs, options: SearchOptions, report: Report | None) -> SearchResult:
    """:func:`search_layouts` itself."""
    space = search_space(inputs, options)
    trials, rejected = enumerate_trials(inputs, space)
    # the per-rank memory rows only for the layouts predicted (those the plan and its explanation can show)
    fitting, over = attach_memory(inputs, trials, options.min_headroom_bytes, rows=False)
    undominated, dominated = drop_dominated(fitting, options.objective)
    stages = Stages(report, [MEMORY_WEIGHT * len(trials), len(undominated),
                             EXACT_WEIGHT * min(EXACT_TOP, len(undominated))])
    stages.part(0)(1, 1)
    predicted, failed = attach_step_time(inputs, options, undominated, stages.part(1))
    predicted = [with_rows(inputs, t) for t in predicted]
    ranked = rank(predicted, options.objective)
    tick = each(stages.part(2), min(EXACT_TOP, len(ranked)))
    exact = []
    for t in ranked[:EXACT_TOP]:  # the rows a reader compares, simulated in full
        exact.append(_exact(inputs, options, t))
        tick(len(exact))
    stages.finish()
    return SearchResult(space, options.objective, rank([*exact, *ranked[EXACT_TOP:]], options.objective),
                        tuple(rejected + over + dominated + failed), inputs.node.usable_hbm_bytes,
                        other_recipes(inputs, options) if not ranked else ())


def other_recipes(inputs: PlanInputs, options: SearchOptions) -> tuple[Trial, ...]:
    """With a recipe the request fixes: the best trial under each other recipe the model can train with (the
    same search with the recipe left open), ranked; () when the request fixes none.

    The open search skips the fixed recipe, whose trials the first search has evaluated (none fits, or none
    could be predicted, a rule no recipe changes): a trial that does not fit dominates none
    (:func:`drop_dominated` compares fitting twins only), so leaving them out changes no other recipe's ranking
    and spares their memory and step-time evaluation a second time."""
    fixed = inputs.request.recipe
    if fixed is None:
        return ()
    opened = search_layouts(replace(inputs, request=replace(inputs.request, recipe=None)),
                            replace(options, skip_recipes=(*options.skip_recipes, fixed)))
    by_recipe: dict[str, list[Trial]] = {}
    for trial in opened.ranked:
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
STAGES: tuple[str, ...] = ("search_space", "enumerate_trials", "attach_memory", "drop_dominated",
                           "attach_step_time", "rank", "explain_search")
