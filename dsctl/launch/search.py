"""The layout search of ``dsctl launch`` (issue 28): every valid layout of a request, ranked by predicted step.

One straight pipeline, each stage a function over frozen dataclasses, each rule asked in one place:

1. :func:`search_space` (request -> the degrees, schedules and micro-batch sizes to try; a degree the user fixed
   narrows the space, it never skips a check);
2. :func:`enumerate_trials` (space -> structurally valid :class:`Trial` s and :class:`Rejected` ones: every rule
   of ``dsctl.launch.rules`` / ``layout`` / ``batch`` is asked by building the layout and batch);
3. :func:`attach_memory` (the memory model, ``dsctl.launch.memory``; a layout over HBM is rejected);
4. :func:`~dsctl.launch.ranking.attach_step_time` (``dsctl.steptime.predict_step`` for what fits; EP all-to-all
   seconds are computed once per EP group shape and fabric and shared by every layout);
5. :func:`~dsctl.launch.ranking.rank` (the objective orders the predicted trials);
6. ``dsctl.launch.search_explain`` (the top few side by side, one line per rejected family).

Scope: ZeRO-1, 2 and 3, every schedule of ``dsctl.launch.rules.SCHEDULES`` (interleaved 1F1B with 2 chunks per
rank), tp in 1/2/4/8 where it divides a node and the heads (``dsctl.launch.tensor_parallel``; ``--tp`` fixes it):
``dsctl.launch.search_explain.SCOPE`` says what the models assume, and the explanation prints it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from dsctl.errors import InputError
from dsctl.launch.batch import DEFAULT_GLOBAL_BATCH, checked_batch
from dsctl.launch.candidates import PlanInputs
from dsctl.launch.imbalance import stats_balancedness
from dsctl.launch.layout import ParallelLayout, validate_layout
from dsctl.launch.memory import MemoryEstimate, estimate_memory
from dsctl.launch.request import LaunchRequest
from dsctl.launch.rules import SCHEDULES, divisors, ep_node_aligned
from dsctl.launch.stages import Stage, split_stages
from dsctl.launch.tensor_parallel import searched_tps
from dsctl.launch.trials import Rejected, Trial
from dsctl.model.recipes import DEEPSEEK, ActivationRecipe, searchable_recipes
from dsctl.steptime import PREDICTED_ZERO_STAGES

#: what the ranking prefers: the shortest predicted step, the most memory headroom among layouts within
#: :data:`HEADROOM_SLACK` of the fastest, or (over a node range) the fewest nodes
OBJECTIVES: tuple[str, ...] = ("fastest", "headroom", "fewest-nodes")
#: sequences per micro-batch tried when the user gives neither --micro-batches nor a batch that fixes it
MICRO_BATCH_SIZES: tuple[int, ...] = (1, 2, 4)
#: "headroom" takes the most headroom among layouts at most this much slower than the fastest (10%)
HEADROOM_SLACK = 0.10
#: free HBM a chosen layout must keep beyond the memory model's own terms and reserve: none by default, since the
#: memory model names what issue 28 measured (backward temporaries, FP8 scales, the attention LSE, DeepEP/NCCL
#: buffers) and budgets against usable HBM; a caller may ask for a margin (``SearchOptions.min_headroom_bytes``)
DEFAULT_MIN_HEADROOM_BYTES = 0


@dataclass(frozen=True)
class SearchOptions:
    """What the user left to the search: ``schedules`` tried (the given one, or all), the ``objective``,
    ``balancedness`` and ``fabric_plan`` of the prediction (as :func:`dsctl.steptime.predict_step`)."""

    objective: str = "fastest"
    schedules: tuple[str, ...] = SCHEDULES
    balancedness: float = 1.0
    fabric_plan: str | None = None
    min_headroom_bytes: int = DEFAULT_MIN_HEADROOM_BYTES
    #: routing statistics (tokens per expert, float [layers, experts]) from ``--eplb-stats``: each EP degree's
    #: balancedness comes from them (:func:`dsctl.launch.imbalance.stats_balancedness`) instead of ``balancedness``
    expert_loads: np.ndarray | None = field(default=None, compare=False, repr=False)
    #: recipe names an open search leaves out (those a first search with the recipe fixed has evaluated already)
    skip_recipes: tuple[str, ...] = ()

    def balancedness_at(self, ep: int) -> float:
        """The balancedness the prediction uses at EP degree ``ep``."""
        if self.expert_loads is None or ep <= 1:
            return self.balancedness
        return stats_balancedness(self.expert_loads, ep)


@dataclass(frozen=True)
class SearchSpace:
    """Stage 1: the degrees tried for ``num_nodes`` nodes (dp follows from pp and tp): ``pps`` and ``tps`` are
    every value tried, ``pp_tps`` the (pp, tp) pairs whose product divides the world (or meets the given dp)."""

    num_nodes: int
    pps: tuple[int, ...]
    eps: tuple[int, ...]
    tps: tuple[int, ...]
    schedules: tuple[str, ...]
    micro_batch_sizes: tuple[int, ...]
    #: ZeRO stages tried (those the step-time model predicts: 1, 2 and 3)
    zero_stages: tuple[int, ...] = (1,)
    #: activation recipes tried (the request's, or every one the model can train with, its profile's first)
    recipes: tuple[ActivationRecipe, ...] = (DEEPSEEK,)
    pp_tps: tuple[tuple[int, int], ...] = ()
    #: ``tps`` is the one the request fixes (else every one the node and the heads allow)
    tp_given: bool = False

    @property
    def size(self) -> int:
        """Combinations tried (each becomes a trial or a rejection)."""
        return (len(self.pp_tps) * len(self.eps) * len(self.schedules) * len(self.micro_batch_sizes)
                * len(self.zero_stages) * len(self.recipes))


# --------------------------------------------------------------------------------------------- 1. space


def search_request(request: LaunchRequest, options: SearchOptions) -> LaunchRequest:
    """The request a search starts from: with the schedule left to the search (several in ``options``) and a
    fixed ``pp``, the first schedule that pp allows (DualPipe needs an even pp), so the request's own checks and
    the memory rule's fallback run on a schedule the search can choose."""
    if len(options.schedules) < 2 or request.pp is None or request.schedule not in options.schedules:
        return request
    allowed = [s for s in options.schedules if s != "dualpipe" or request.pp % 2 == 0]
    return replace(request, schedule=request.schedule if request.schedule in allowed else allowed[0]) \
        if allowed else request


def _pps(inputs: PlanInputs, tp: int) -> tuple[int, ...]:
    """Pipeline degrees tried with tensor-parallel degree ``tp``."""
    request, model = inputs.request, inputs.model
    world = request.num_nodes * inputs.node.num_gpus
    if request.pp is not None:
        return (request.pp,)
    if request.dp is not None:
        return (max(1, world // (request.dp * tp)),)
    return tuple(p for p in divisors(world // tp) if p <= model.num_layers) if world % tp == 0 else (1,)


def search_space(inputs: PlanInputs, options: SearchOptions) -> SearchSpace:
    """The combinations to try; a value the request fixes is the only one tried for that degree. Left to the
    search, tp takes each of :data:`~dsctl.launch.tensor_parallel.TP_DEGREES` the node and the heads allow, with
    the pipeline degrees that leave a whole dp (a fixed tp is tried with every pp, its rules rejecting the
    others)."""
    request, model = inputs.request, inputs.model
    world = request.num_nodes * inputs.node.num_gpus
    tps = (inputs.tp,) if request.tp is not None else searched_tps(model, inputs.node.num_gpus) or (1,)
    pairs = tuple((pp, tp) for tp in tps for pp in _pps(inputs, tp)
                  if len(tps) == 1 or (world % (pp * tp) == 0 and (request.dp is None or pp * tp * request.dp
                                                                   == world)))
    pps = tuple(sorted({pp for pp, _ in pairs}))
    experts = model.moe.num_routed_experts if model.moe is not None else 1
    eps = (request.ep,) if request.ep is not None else tuple(divisors(experts))
    sizes = (1,) if request.micro_batches is not None else MICRO_BATCH_SIZES
    recipes = ((inputs.recipe,) if request.recipe is not None else
               tuple(r for r in searchable_recipes(model) if r.name not in options.skip_recipes))
    return SearchSpace(request.num_nodes, pps, eps, tps, options.schedules, sizes, PREDICTED_ZERO_STAGES, recipes,
                       pairs, request.tp is not None)


# --------------------------------------------------------------------------------------------- 2. structure


def _kind(message: str) -> str:
    """Which family of rule a layout or batch error message belongs to (the messages of rules/layout/batch)."""
    if "neither divides nor is a multiple" in message or "ranks of a pipeline stage" in message:
        return "EP span"
    if any(word in message for word in ("dualpipe", "1f1b", "zb1p", "interleaved", "stages >",
                                            "micro-batches >=")):
        return "schedule rule"
    return "divisibility"


def enumerate_trials(inputs: PlanInputs, space: SearchSpace) -> tuple[list[Trial], list[Rejected]]:
    """Build each combination's layout and batch; a rule broken on the way rejects it with the rule's message.
    No structural rule depends on the recipe: each layout is built once and tried under every recipe."""
    request, model, gpn = inputs.request, inputs.model, inputs.node.num_gpus
    experts = model.moe.num_routed_experts if model.moe is not None else 0
    trials: list[Trial] = []
    rejected: list[Rejected] = []
    global_batch = request.global_batch
    for schedule in space.schedules:
        for pp, tp in space.pp_tps:
            for ep in space.eps:
                for size in space.micro_batch_sizes:
                    try:
                        if not ep_node_aligned(ep, gpn):
                            raise InputError(f"ep {ep} neither divides nor is a multiple of the {gpn} GPUs of a "
                                             "node")
                        dp = request.dp if request.dp is not None else space.num_nodes * gpn // (pp * tp)
                        layout = ParallelLayout(space.num_nodes, gpn, pp, ep, tp, dp, schedule)
                        validate_layout(layout, num_layers=model.num_layers, num_routed_experts=experts)
                        batch, notes = checked_batch(_sized(request, schedule, dp, size, global_batch), schedule,
                                                     pp, dp)
                    except InputError as exc:
                        reason = request.reason(exc)
                        rejected.append(Rejected(_kind(reason), schedule, pp, ep, size, reason, tp=tp))
                        continue
                    trials.append(Trial(layout, batch, tuple(notes)))
    # recipe by recipe (the profile's first), ZeRO stage by stage: later stages meet the layouts in one order
    staged = {z: [replace(t.layout, zero_stage=z) if z != 1 else t.layout for t in trials] for z in space.zero_stages}
    # built directly rather than by dataclasses.replace (the same fields; a search makes tens of thousands)
    return ([Trial(layout, t.batch, t.notes, r)
             for r in space.recipes for z in space.zero_stages for t, layout in zip(trials, staged[z], strict=True)],
            [Rejected(x.kind, x.schedule, x.pp, x.ep, x.micro_batch_size, x.reason, x.memory_bytes, r.name, z, x.tp)
             for r in space.recipes for z in space.zero_stages for x in rejected])


def _sized(request: LaunchRequest, schedule: str, dp: int, size: int, global_batch: int | None) -> LaunchRequest:
    """The request with ``size`` sequences per micro-batch: micro-batches = global / (dp x size)."""
    request = replace(request, schedule=schedule)
    if size == 1:
        return request
    total = global_batch if global_batch is not None else DEFAULT_GLOBAL_BATCH
    if total % (dp * size):
        raise InputError(f"global batch {total:,} does not split into dp {dp} x micro-batches of {size} sequences")
    return replace(request, micro_batches=total // (dp * size), global_batch=total)


# --------------------------------------------------------------------------------------------- 3. memory


def _split_of(inputs: PlanInputs, num_stages: int, splits: dict[int, tuple[Stage, ...]]) -> tuple[Stage, ...]:
    """The stage split into ``num_stages``, cached in ``splits``."""
    stages = splits.get(num_stages)
    if stages is None:
        stages = splits[num_stages] = split_stages(inputs.model, inputs.counts, num_stages)
    return stages


def _estimate(inputs: PlanInputs, trial: Trial, stages: tuple[Stage, ...], rows: bool) -> MemoryEstimate:
    """The memory estimate of ``trial`` on ``stages`` (``rows``: ``estimate_memory``'s)."""
    return estimate_memory(inputs.model, trial.layout, stages, inputs.node.usable_hbm_bytes,
                           trial.batch.tokens_per_micro_batch, trial.batch.micro_batches, inputs.assumptions,
                           trial.recipe, inputs.node.hbm_bytes, rows)


def with_memory(inputs: PlanInputs, trial: Trial, splits: dict[int, tuple[Stage, ...]],
                rows: bool = True) -> tuple[Trial, MemoryEstimate]:
    """``trial`` with its stage split and memory estimate, and the estimate; ``splits`` caches the split per stage
    count; ``rows`` False: the estimate without its per-rank rows (``estimate_memory``'s ``rows``)."""
    stages = _split_of(inputs, trial.layout.num_stages, splits)
    memory = _estimate(inputs, trial, stages, rows)
    return _placed(trial, stages, memory), memory


def _placed(trial: Trial, stages: tuple[Stage, ...], memory: MemoryEstimate) -> Trial:
    """``trial`` with its stage split and memory estimate, built directly rather than by dataclasses.replace (the
    same fields; a search makes tens of thousands)."""
    return Trial(trial.layout, trial.batch, trial.notes, trial.recipe, stages, memory, trial.step)


def with_rows(inputs: PlanInputs, trial: Trial) -> Trial:
    """``trial`` (through :func:`attach_memory` with ``rows`` False) with its full memory estimate."""
    if trial.memory is not None and trial.memory.per_rank:
        return trial
    return with_memory(inputs, trial, {len(trial.stages): trial.stages} if trial.stages else {})[0]


def screened_memory(inputs: PlanInputs, trial: Trial, splits: dict[int, tuple[Stage, ...]],
                    min_headroom_bytes: int, rows: bool = True) -> tuple[Trial | None, int]:
    """(``trial`` as :func:`with_memory` gives it, or None when it breaks the memory rule of
    :func:`fits_with_headroom`; its largest rank total in bytes). The rule is asked of the estimate without its
    rows (the same integer terms, ``estimate_memory``'s ``rows``), which are built only for a layout that fits
    and only with ``rows``: most layouts of a search do not fit, and few that do are ever shown."""
    stages = _split_of(inputs, trial.layout.num_stages, splits)
    memory = _estimate(inputs, trial, stages, rows=False)
    total = memory.max_total_bytes
    if not fits_with_headroom(total, inputs.node.usable_hbm_bytes, min_headroom_bytes):
        return None, total  # no trial built: most layouts of a search end here
    if rows:
        return with_memory(inputs, trial, splits)[0], total
    return _placed(trial, stages, memory), total


def fits_with_headroom(total_bytes: int, hbm_bytes: int, min_headroom_bytes: int) -> bool:
    """The search's memory rule: the largest rank total fits in usable HBM and leaves at least
    ``min_headroom_bytes``."""
    return total_bytes <= hbm_bytes and hbm_bytes - total_bytes >= min_headroom_bytes


def attach_memory(inputs: PlanInputs, trials: list[Trial], min_headroom_bytes: int = 0,
                  rows: bool = True) -> tuple[list[Trial], list[Rejected]]:
    """Each trial's memory (stage splits computed once per stage count); one over HBM less
    ``min_headroom_bytes`` is rejected. ``rows`` False: the kept trials' estimates without their per-rank rows
    (:func:`with_rows` adds them)."""
    splits: dict[int, tuple[Stage, ...]] = {}
    kept: list[Trial] = []
    rejected: list[Rejected] = []
    hbm = inputs.node.usable_hbm_bytes
    for bare in trials:
        trial, total = screened_memory(inputs, bare, splits, min_headroom_bytes, rows)
        if trial is not None:
            kept.append(trial)
            continue
        lay = bare.layout
        need = f"needs {total / 2**30:.1f} GiB"
        rejected.append(Rejected("memory", lay.schedule, lay.pp, lay.ep, bare.batch.micro_batch_size,
                                 f"{need} > {hbm / 2**30:.1f} GiB HBM" if total > hbm else
                                 f"{need}: {(hbm - total) / 2**30:.1f} GiB left < the "
                                 f"{min_headroom_bytes / 2**30:.1f} GiB headroom kept", total,
                                 bare.recipe.name, lay.zero_stage, lay.tp))
    return kept, rejected
