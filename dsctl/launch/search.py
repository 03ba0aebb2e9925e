"""The layout search of ``dsctl launch`` (issue 28): every valid layout of a request, ranked by predicted step.

One straight pipeline, each stage a function over frozen dataclasses, each rule asked in one place:

1. :func:`search_space` (request -> the degrees, schedules and micro-batch sizes to try; a degree the user fixed
   narrows the space, it never skips a check);
2. :func:`enumerate_trials` (space -> structurally valid :class:`Trial` s and :class:`Rejected` ones: every rule
   of ``dsctl.launch.rules`` / ``layout`` / ``batch`` is asked by building the layout and batch);
3. :func:`attach_memory` (the memory model, ``dsctl.launch.memory``; a layout over HBM is rejected);
4. :func:`attach_step_time` (``dsctl.steptime.predict_step`` for what fits; EP all-to-all seconds are computed
   once per EP group shape and fabric and shared by every layout);
5. :func:`rank` (the objective orders the predicted trials);
6. ``dsctl.launch.search_explain`` (the top few side by side, one line per rejected family).

Scope: ZeRO-1 only (the memory and step-time models have no other stage) and tp = 1 unless given (the step-time
model covers tp 1; DeepSeek-V3 trains without TP); both are said in the explanation.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from dsctl.errors import InputError
from dsctl.launch.batch import DEFAULT_GLOBAL_BATCH, BatchPlan, checked_batch
from dsctl.launch.candidates import PlanInputs
from dsctl.launch.imbalance import stats_balancedness
from dsctl.launch.layout import ParallelLayout, validate_layout
from dsctl.launch.memory import MemoryEstimate, estimate_memory
from dsctl.launch.request import LaunchRequest
from dsctl.launch.rules import SCHEDULES, divisors, ep_node_aligned, min_micro_batches
from dsctl.launch.stages import Stage, split_stages
from dsctl.steptime import EpCostModel, StepTime, fabric_ep, predict_step

#: what the ranking prefers: the shortest predicted step, the most memory headroom among layouts within
#: :data:`HEADROOM_SLACK` of the fastest, or (over a node range) the fewest nodes
OBJECTIVES: tuple[str, ...] = ("fastest", "headroom", "fewest-nodes")
#: sequences per micro-batch tried when the user gives neither --micro-batches nor a batch that fixes it
MICRO_BATCH_SIZES: tuple[int, ...] = (1, 2, 4)
#: "headroom" takes the most headroom among layouts at most this much slower than the fastest (10%)
HEADROOM_SLACK = 0.10
#: the kinds of rejection, in the order the explanation lists them
REJECTION_KINDS: tuple[str, ...] = ("schedule rule", "divisibility", "EP span", "memory", "step-time model")
#: free HBM a chosen layout keeps beyond the memory model's reserve: what issue 28 measured and the model does not
#: yet hold (backward temporaries ~3 GB at 4K tokens, ~0.4 GiB of the 80 GiB not usable), rounded up to 4 GiB
DEFAULT_MIN_HEADROOM_BYTES = 4 * 2**30


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

    def balancedness_at(self, ep: int) -> float:
        """The balancedness the prediction uses at EP degree ``ep``."""
        if self.expert_loads is None or ep <= 1:
            return self.balancedness
        return stats_balancedness(self.expert_loads, ep)


@dataclass(frozen=True)
class SearchSpace:
    """Stage 1: the degrees tried for ``num_nodes`` nodes (tp fixed; dp follows from pp and tp)."""

    num_nodes: int
    pps: tuple[int, ...]
    eps: tuple[int, ...]
    tp: int
    schedules: tuple[str, ...]
    micro_batch_sizes: tuple[int, ...]

    @property
    def size(self) -> int:
        """Combinations tried (each becomes a trial or a rejection)."""
        return len(self.pps) * len(self.eps) * len(self.schedules) * len(self.micro_batch_sizes)


@dataclass(frozen=True)
class Trial:
    """One structurally valid layout with its batch, then (stages 3-4) its memory and predicted step."""

    layout: ParallelLayout
    batch: BatchPlan
    notes: tuple[str, ...] = ()
    stages: tuple[Stage, ...] = ()
    memory: MemoryEstimate | None = None
    step: StepTime | None = None

    def predicted(self) -> tuple[MemoryEstimate, StepTime]:
        """Memory and step of a trial that went through stages 3-4 (a missing one is a bug)."""
        if self.memory is None or self.step is None:
            raise RuntimeError(f"{self.label()} was ranked without its memory or step prediction")
        return self.memory, self.step

    def label(self) -> str:
        """``PP16 EP64 dualpipe 120x1`` (micro-batches x sequences each; dp = world / (pp x tp))."""
        lay = self.layout
        tp = f" TP{lay.tp}" if lay.tp > 1 else ""
        return f"PP{lay.pp} EP{lay.ep}{tp} {lay.schedule} {self.batch.micro_batches}x{self.batch.micro_batch_size}"


@dataclass(frozen=True)
class Rejected:
    """A combination that failed: ``kind`` (one of :data:`REJECTION_KINDS`), the rule's message, what it was."""

    kind: str
    schedule: str
    pp: int
    ep: int
    micro_batch_size: int
    reason: str
    memory_bytes: int | None = None


@dataclass(frozen=True)
class SearchResult:
    """Stages 1-5: the space, the ranked trials (fitting and predicted, best first) and every rejection."""

    space: SearchSpace
    objective: str
    ranked: tuple[Trial, ...]
    rejected: tuple[Rejected, ...]
    hbm_bytes: int

    @property
    def num_evaluated(self) -> int:
        """Layouts evaluated: every combination of the space (trials and rejections)."""
        return len(self.ranked) + len(self.rejected)

    @property
    def best(self) -> Trial | None:
        return self.ranked[0] if self.ranked else None


# --------------------------------------------------------------------------------------------- 1. space


def search_space(inputs: PlanInputs, options: SearchOptions) -> SearchSpace:
    """The combinations to try; a value the request fixes is the only one tried for that degree."""
    request, model = inputs.request, inputs.model
    tp = inputs.tp
    world = request.num_nodes * inputs.node.num_gpus
    if request.pp is not None:
        pps: tuple[int, ...] = (request.pp,)
    elif request.dp is not None:
        pps = (max(1, world // (request.dp * tp)),)
    else:
        pps = tuple(p for p in divisors(world // tp) if p <= model.num_layers) if world % tp == 0 else (1,)
    experts = model.moe.num_routed_experts if model.moe is not None else 1
    eps = (request.ep,) if request.ep is not None else tuple(divisors(experts))
    sizes = (1,) if request.micro_batches is not None else MICRO_BATCH_SIZES
    return SearchSpace(request.num_nodes, pps, eps, tp, options.schedules, sizes)


# --------------------------------------------------------------------------------------------- 2. structure


def _kind(message: str) -> str:
    """Which family of rule a layout or batch error message belongs to (the messages of rules/layout/batch)."""
    if "neither divides nor is a multiple" in message or "ranks of a pipeline stage" in message:
        return "EP span"
    if any(word in message for word in ("dualpipe", "1f1b", "zb1p", "stages >", "micro-batches >=")):
        return "schedule rule"
    return "divisibility"


def enumerate_trials(inputs: PlanInputs, space: SearchSpace) -> tuple[list[Trial], list[Rejected]]:
    """Build each combination's layout and batch; a rule broken on the way rejects it with the rule's message."""
    request, model, gpn = inputs.request, inputs.model, inputs.node.num_gpus
    experts = model.moe.num_routed_experts if model.moe is not None else 0
    trials: list[Trial] = []
    rejected: list[Rejected] = []
    global_batch = request.global_batch
    for schedule in space.schedules:
        for pp in space.pps:
            for ep in space.eps:
                for size in space.micro_batch_sizes:
                    try:
                        if not ep_node_aligned(ep, gpn):
                            raise InputError(f"ep {ep} neither divides nor is a multiple of the {gpn} GPUs of a "
                                             "node")
                        dp = request.dp if request.dp is not None else space.num_nodes * gpn // (pp * space.tp)
                        layout = ParallelLayout(space.num_nodes, gpn, pp, ep, space.tp, dp, schedule)
                        validate_layout(layout, num_layers=model.num_layers, num_routed_experts=experts)
                        batch, notes = checked_batch(_sized(request, schedule, dp, size, global_batch), schedule,
                                                     pp, dp)
                    except InputError as exc:
                        rejected.append(Rejected(_kind(exc.message), schedule, pp, ep, size, exc.message))
                        continue
                    trials.append(Trial(layout, batch, tuple(notes)))
    return trials, rejected


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


def attach_memory(inputs: PlanInputs, trials: list[Trial],
                  min_headroom_bytes: int = 0) -> tuple[list[Trial], list[Rejected]]:
    """Each trial's memory (stage splits computed once per stage count); one over HBM less
    ``min_headroom_bytes`` is rejected."""
    splits: dict[int, tuple[Stage, ...]] = {}
    kept: list[Trial] = []
    rejected: list[Rejected] = []
    hbm = inputs.node.hbm_bytes
    for trial in trials:
        lay = trial.layout
        stages = splits.get(lay.num_stages)
        if stages is None:
            stages = splits[lay.num_stages] = split_stages(inputs.model, inputs.counts, lay.num_stages)
        memory = estimate_memory(inputs.model, lay, stages, hbm, trial.batch.tokens_per_micro_batch,
                                 trial.batch.micro_batches, inputs.assumptions)
        if memory.fits and memory.headroom_bytes >= min_headroom_bytes:
            kept.append(replace(trial, stages=stages, memory=memory))
            continue
        need = f"needs {memory.max_total_bytes / 2**30:.1f} GiB"
        rejected.append(Rejected("memory", lay.schedule, lay.pp, lay.ep, trial.batch.micro_batch_size,
                                 f"{need} > {hbm / 2**30:.1f} GiB HBM" if not memory.fits else
                                 f"{need}: {memory.headroom_bytes / 2**30:.1f} GiB left < the "
                                 f"{min_headroom_bytes / 2**30:.1f} GiB headroom kept", memory.max_total_bytes))
    return kept, rejected


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
            step = _predict(inputs, lay, batch, balancedness, ep_models.get(lay.ep))
        except InputError as exc:
            # a fabric that cannot hold the EP group, or a balancedness no layout could have, is the user's
            # input, not a layout's failing; below 1/ep only rules out the smaller EP degrees
            if options.fabric_plan is not None or ("balancedness" in exc.message and "below 1/ep" not in
                                                   exc.message):
                raise
            rejected.append(Rejected("step-time model", lay.schedule, lay.pp, lay.ep, batch.micro_batch_size,
                                     exc.message))
            continue
        kept.append(replace(trial, step=step))
    if not kept and rejected and all("below 1/ep" in r.reason for r in rejected):
        raise InputError(rejected[0].reason)
    return kept, rejected


def _predict(inputs: PlanInputs, layout: ParallelLayout, batch: BatchPlan, balancedness: float,
             ep_cost: EpCostModel | None) -> StepTime:
    """The predicted step; beyond ``2 x`` :func:`steady_micro_batches` micro-batches it is extrapolated from two
    shorter simulations (the schedule's steady state adds the same seconds, and the same ops, per micro-batch
    pair: step, pipeline, bubble and every phase grow linearly), so a search at small dp (thousands of
    micro-batches) stays bounded. The plan re-predicts its chosen layout in full."""
    m = batch.micro_batches
    short = steady_micro_batches(layout)
    if m <= 2 * short:
        return predict_step(inputs.model, inputs.node, layout, m, batch.micro_batch_size, batch.seq_len,
                            balancedness=balancedness, ep_cost=ep_cost)
    longer, shorter = (predict_step(inputs.model, inputs.node, layout, k, batch.micro_batch_size, batch.seq_len,
                                    balancedness=balancedness, ep_cost=ep_cost) for k in (short, short - 2))
    pairs = (m - short) / 2

    def grown(name: str, a: object, b: object) -> float:
        x, y = getattr(a, name), getattr(b, name)
        return x + pairs * (x - y)

    phases = longer.breakdown
    breakdown = replace(phases, **{name: (round if name.startswith("num_") else float)(
        grown(name, phases, shorter.breakdown)) for name in ("one_f_s", "one_b_s", "one_w_s", "overlapped_fb_s",
                                                             "bubble_s", "optimizer_s", "num_f", "num_b", "num_w",
                                                             "num_fb")})
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
    return SearchResult(space, options.objective, rank(predicted, options.objective),
                        tuple(rejected + over + failed), inputs.node.hbm_bytes)


#: the stages of :func:`search_layouts` and its explanation, in order (the pipeline test walks them)
STAGES: tuple[str, ...] = ("search_space", "enumerate_trials", "attach_memory", "attach_step_time", "rank",
                           "explain_search")
