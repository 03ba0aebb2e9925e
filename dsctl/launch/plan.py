"""The launch plan: layout choice (or check), stage split, memory fit, rank map and schedule figures in one result.

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

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from dsctl.errors import InputError
from dsctl.launch.defaults import DEFAULT_SEQ_LEN
from dsctl.launch.layout import (
    DUAL_SCHEDULES,
    ParallelLayout,
    check_schedule_layout,
    check_schedule_name,
    divisors,
    min_micro_batches,
    resolve_dp,
    validate_layout,
)
from dsctl.launch.memory import MemoryAssumptions, MemoryEstimate, estimate_memory
from dsctl.launch.rankmap import RankMap, RankMapSummary, build_rank_map, stages_of_rank
from dsctl.launch.schedule import OpCosts, simulate
from dsctl.launch.search import (
    PPCandidate,
    batch_suggestion,
    missed_fit_notes,
    no_layout_error,
    rejection_lines,
)
from dsctl.launch.stages import Stage, split_stages
from dsctl.model.params import ParameterCounts, count_parameters
from dsctl.names import shown
from dsctl.profiles.schema import ModelProfile, NodeProfile
from dsctl.units import GIB

#: largest cluster dsctl plans: 131,072 nodes (about a million GPUs); keeps the rank map well inside memory
MAX_NODES = 131_072
#: largest --pp/--ep/--tp/--dp/--micro-batches/--global-batch/--seq-len (2^53: exact as a float, far above any run)
MAX_COUNT = 2**53

#: DeepSeek-V3's final global batch, in sequences
DEFAULT_GLOBAL_BATCH = 15_360


@dataclass(frozen=True)
class LaunchRequest:
    """What the user asked for; ``None`` means "choose for me"."""

    num_nodes: int
    pp: int | None = None
    ep: int | None = None
    tp: int | None = None
    dp: int | None = None
    schedule: str = "dualpipe"
    micro_batches: int | None = None
    global_batch: int | None = None
    seq_len: int = DEFAULT_SEQ_LEN
    backend: str | None = None
    job_name: str | None = None
    train_command: tuple[str, ...] = ()


@dataclass(frozen=True)
class BatchPlan:
    """Sequences per step and how they are cut: ``global_batch = dp x micro_batches x micro_batch_size``."""

    global_batch: int
    micro_batches: int
    micro_batch_size: int
    seq_len: int

    @property
    def tokens_per_micro_batch(self) -> int:
        return self.micro_batch_size * self.seq_len

    def to_data(self) -> dict[str, Any]:
        return {"global_batch": self.global_batch, "micro_batches": self.micro_batches,
                "micro_batch_size": self.micro_batch_size, "seq_len": self.seq_len,
                "tokens_per_step": self.global_batch * self.seq_len}


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
    stages: tuple[dict[str, Any], ...]
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

    def layout_file(self) -> dict[str, Any]:
        """Content of ``layout.json`` (``--out``)."""
        return {
            "model": self.model, "node_profile": self.node_profile, "num_nodes": self.num_nodes,
            "gpus_per_node": self.gpus_per_node, "world_size": self.world_size,
            "layout": self.layout.degrees(), "expert_dp": self.expert_dp, "zero_stage": self.zero_stage,
            "schedule": self.schedule, "num_stages": self.num_stages, "batch": self.batch.to_data(),
            "stages": list(self.stages), "rank_order": self.rank_map.order,
            "groups": self.rank_map.to_data()["groups"], "train_command": list(self.train_command),
        }


# --------------------------------------------------------------------------------------------- choice helpers


def default_ep(model: ModelProfile, gpus_per_node: int, stage_ranks: int) -> int:
    """EP by rule 2 of the module docstring (1 for a dense model)."""
    if model.moe is None:
        return 1
    experts = model.moe.num_routed_experts
    target = gpus_per_node * max(1, model.moe.num_expert_groups)
    valid = [e for e in divisors(experts)
             if e <= target and stage_ranks % e == 0 and (gpus_per_node % e == 0 or e % gpus_per_node == 0)]
    return max(valid) if valid else 1


def pp_candidates(request: LaunchRequest, model: ModelProfile, gpus_per_node: int, tp: int) -> list[int]:
    """Valid pipeline degrees in increasing order for the request's fixed choices (rule 3)."""
    world = request.num_nodes * gpus_per_node
    if request.pp is not None:
        return [request.pp]
    if request.dp is not None:
        if world % (request.dp * tp):
            resolve_dp(request.num_nodes, gpus_per_node, 1, tp, request.dp)  # raises with the arithmetic
        return [world // (request.dp * tp)]
    out = []
    for pp in divisors(world // tp) if world % tp == 0 else []:
        stages = 2 * pp if request.schedule == "dualpipev" else pp
        if request.schedule == "dualpipe" and pp % 2:
            continue
        if stages > model.num_layers:
            continue
        if request.ep is not None and (world // pp) % request.ep:
            continue
        out.append(pp)
    return out


def resolve_batch(request: LaunchRequest, dp: int, pp: int) -> tuple[BatchPlan, list[str]]:
    """Rule 5: global batch, micro-batches per pipeline and micro-batch size; notes on any rounding."""
    notes: list[str] = []
    if request.seq_len < 1:
        raise InputError(f"--seq-len {request.seq_len} is not valid: it must be a whole number >= 1")
    if request.micro_batches is not None and request.micro_batches < 1:
        raise InputError(f"--micro-batches {request.micro_batches} is not valid: it must be >= 1")
    dual = request.schedule == "dualpipe"
    if request.global_batch is None:
        if request.micro_batches is not None:
            m = request.micro_batches
            size = max(1, math.ceil(DEFAULT_GLOBAL_BATCH / (dp * m)))
        else:
            m = max(math.ceil(DEFAULT_GLOBAL_BATCH / dp), min_micro_batches(request.schedule, pp))
            if dual and m % 2:
                m += 1
            size = 1
        global_batch = dp * m * size
        if global_batch != DEFAULT_GLOBAL_BATCH:
            floor = min_micro_batches(request.schedule, pp)
            why = (f"raised so that {request.schedule} gets its minimum of {floor} micro-batches"
                   if request.micro_batches is None and m <= floor + 1 else
                   f"the nearest whole split of DeepSeek-V3's {DEFAULT_GLOBAL_BATCH:,}")
            notes.append(f"global batch {global_batch:,} = dp {dp} x {m} micro-batches x {size} sequence(s): {why}")
        return BatchPlan(global_batch, m, size, request.seq_len), notes
    b = request.global_batch
    if b < 1:
        raise InputError(f"--global-batch {b} is not valid: it must be a whole number of sequences >= 1")
    fix = batch_suggestion(request.schedule, pp, dp, b, request.micro_batches)
    if b % dp:
        raise InputError(f"--global-batch {b} % dp {dp} = {b % dp}: every data-parallel replica needs the same "
                         f"number of sequences", hint=f"use a multiple of {dp}" + (f", e.g. {fix}" if fix else ""))
    per_replica = b // dp
    if request.micro_batches is None:
        return BatchPlan(b, per_replica, 1, request.seq_len), notes
    m = request.micro_batches
    if per_replica % m:
        raise InputError(f"--global-batch {b} / dp {dp} = {per_replica} sequences per replica is not a multiple of "
                         f"--micro-batches {m}", hint=f"e.g. {fix}" if fix else None)
    return BatchPlan(b, m, per_replica // m, request.seq_len), notes


# --------------------------------------------------------------------------------------------- the plan


def _layout_for(request: LaunchRequest, model: ModelProfile, node: NodeProfile, pp: int, tp: int) -> ParallelLayout:
    """The layout with pipeline degree ``pp``, its structure checked (the batch rules are checked by the caller)."""
    gpn = node.num_gpus
    dp = resolve_dp(request.num_nodes, gpn, pp, tp, request.dp)
    ep = request.ep if request.ep is not None else default_ep(model, gpn, tp * dp)
    layout = ParallelLayout(request.num_nodes, gpn, pp, ep, tp, dp, request.schedule)
    validate_layout(layout, num_layers=model.num_layers,
                    num_routed_experts=model.moe.num_routed_experts if model.moe else 0)
    return layout


def _micro_batch_source(request: LaunchRequest, dp: int, batch: BatchPlan) -> str | None:
    """How the micro-batch count came about, for schedule-rule errors (None: given as --micro-batches)."""
    if request.micro_batches is not None:
        return None
    if request.global_batch is not None:
        return f"{batch.micro_batches} micro-batches (--global-batch {request.global_batch} / dp {dp})"
    return f"{batch.micro_batches} micro-batches (default global batch)"


def _candidate(request: LaunchRequest, model: ModelProfile, node: NodeProfile, counts: Any, pp: int, tp: int,
               assumptions: MemoryAssumptions) -> tuple[ParallelLayout, BatchPlan, tuple[Stage, ...],
                                                        MemoryEstimate, list[str]]:
    layout = _layout_for(request, model, node, pp, tp)
    try:
        if request.micro_batches is not None:
            check_schedule_layout(layout.schedule, pp, request.micro_batches)
        batch, notes = resolve_batch(request, layout.dp, pp)
        check_schedule_layout(layout.schedule, pp, batch.micro_batches,
                              source=_micro_batch_source(request, layout.dp, batch))
    except InputError as exc:
        if exc.hint:
            raise
        fix = batch_suggestion(layout.schedule, pp, layout.dp, request.global_batch, request.micro_batches)
        raise InputError(exc.message, hint=f"use {fix}" if fix else None) from None
    stages = split_stages(model, counts, layout.num_stages)
    memory = estimate_memory(model, layout, stages, node.hbm_bytes, batch.tokens_per_micro_batch,
                             batch.micro_batches, assumptions)
    return layout, batch, stages, memory, notes


def _rejected(request: LaunchRequest, model: ModelProfile, node: NodeProfile, counts: Any, pp: int, tp: int,
              assumptions: MemoryAssumptions, error: InputError) -> PPCandidate:
    """A candidate that broke ``error``'s rule, with the memory it would need if the rule were lifted: the
    requested batch where it resolves over this dp, else the default batch."""
    world = request.num_nodes * node.num_gpus
    try:
        layout = _layout_for(request, model, node, pp, tp)
    except InputError:
        return PPCandidate(pp, world // (pp * tp), f"pp {pp}", error.message, error.hint)
    batch = None
    for attempt in (request, replace(request, global_batch=None, micro_batches=None)):
        try:
            batch = resolve_batch(attempt, layout.dp, pp)[0]
            break
        except InputError:
            continue
    memory = None
    if batch is not None:
        stages = split_stages(model, counts, layout.num_stages)
        memory = estimate_memory(model, layout, stages, node.hbm_bytes, batch.tokens_per_micro_batch,
                                 batch.micro_batches, assumptions)
    return PPCandidate(pp, layout.dp, layout.describe(), error.message, error.hint, memory)


def check_request(model: ModelProfile, request: LaunchRequest) -> LaunchRequest:
    """The checks of ``request`` that do not depend on its node count; returns it with the schedule name
    normalised. Raises InputError."""
    schedule = check_schedule_name(request.schedule)
    request = replace(request, schedule=schedule)
    for name in ("pp", "ep", "tp", "dp", "micro_batches", "global_batch", "seq_len"):
        value = getattr(request, name)
        flag = "--" + name.replace("_", "-")
        if value is not None and value < 1:
            raise InputError(f"{flag} {value} is not valid: it must be a whole number >= 1")
        if value is not None and value > MAX_COUNT:
            raise InputError(f"{flag} {shown(str(value), 20)} is not valid: dsctl plans counts up to {MAX_COUNT:,}")
    if request.pp is not None:
        check_schedule_layout(schedule, request.pp, None)
    if request.ep is not None and model.moe is not None and model.moe.num_routed_experts % request.ep:
        experts = model.moe.num_routed_experts
        valid = [str(d) for d in divisors(experts)]
        raise InputError(
            f"ep {request.ep} does not divide the {experts} routed experts of {model.name} "
            f"({experts} = {experts // request.ep} x {request.ep} + {experts % request.ep})",
            hint=f"valid ep for this model: {', '.join(valid)}",
        )
    return request


def layout_fits(model: ModelProfile, node: NodeProfile, request: LaunchRequest, counts: ParameterCounts,
                assumptions: MemoryAssumptions, worth_trying: Callable[[int], bool]) -> bool:
    """Whether :func:`plan_launch` of ``request`` (already through :func:`check_request`) fits in GPU memory, i.e.
    some pipeline degree builds a valid layout that fits; ``worth_trying(pp)`` False skips a degree known not to
    fit. Cheaper than the plan: no rank map, notes or schedule."""
    tp = request.tp if request.tp is not None else 1
    try:
        candidates = pp_candidates(request, model, node.num_gpus, tp)
    except InputError:
        return False
    for pp in candidates:
        if not worth_trying(pp):
            continue
        try:
            if _candidate(request, model, node, counts, pp, tp, assumptions)[3].fits:
                return True
        except InputError:
            continue
    return False


def plan_launch(model: ModelProfile, node: NodeProfile, request: LaunchRequest,
                assumptions: MemoryAssumptions | None = None, simulate_schedule: bool = True) -> LaunchPlan:
    """Choose (or check) the layout for ``request`` and build the full plan; raises InputError on bad input."""
    if not 1 <= request.num_nodes <= MAX_NODES:
        raise InputError(f"--nodes {request.num_nodes:,} is not valid: it must be a whole number from 1 to "
                         f"{MAX_NODES:,} (dsctl's planning limit)")
    request = check_request(model, request)
    schedule = request.schedule
    assumptions = assumptions or MemoryAssumptions()
    counts = count_parameters(model)
    gpn = node.num_gpus
    world = request.num_nodes * gpn
    tp = request.tp if request.tp is not None else 1
    choices: list[str] = []
    candidates = pp_candidates(request, model, gpn, tp)
    if not candidates:
        raise InputError(
            f"no pipeline degree works for {request.num_nodes} nodes x {gpn} GPUs with tp {tp}"
            + (f", ep {request.ep}" if request.ep else "") + f" and schedule {schedule} "
            f"(needs pp dividing {world} / tp, stages <= {model.num_layers} layers"
            + (", pp even)" if schedule == "dualpipe" else ")"),
            hint="give --pp explicitly, or choose another --schedule / --ep",
        )
    considered: list[PPCandidate] = []
    chosen = None
    for pp in candidates:
        try:
            result = _candidate(request, model, node, counts, pp, tp, assumptions)
        except InputError as exc:
            if len(candidates) == 1:
                raise
            considered.append(_rejected(request, model, node, counts, pp, tp, assumptions, exc))
            continue
        considered.append(PPCandidate(pp, result[0].dp, result[0].describe(), memory=result[3]))
        if result[3].fits or len(candidates) == 1:
            chosen = result
            break
    if chosen is None:
        usable = [c for c in considered if c.error is None and c.memory is not None]
        if not usable:
            raise no_layout_error(considered, request.num_nodes, schedule, request.global_batch,
                                  request.micro_batches)
        best = max(usable, key=lambda c: c.memory.headroom_bytes if c.memory else 0)
        chosen = _candidate(request, model, node, counts, best.pp, tp, assumptions)
    layout, batch, stages, memory, notes = chosen

    choices.extend(_explain(request, model, layout, memory, considered))
    notes.extend(missed_fit_notes(considered, memory.fits, schedule, request.global_batch, request.micro_batches))
    rank_map = build_rank_map(layout)
    figures = _schedule_figures(layout, batch) if simulate_schedule else None
    if figures is None and simulate_schedule:
        notes.append(f"no schedule figures: {layout.schedule} needs at least 2 pipeline stages")
    if not memory.fits:
        notes.append(f"does not fit: pipeline rank {memory.worst_pp_rank} needs "
                     f"{memory.max_total_bytes / GIB:.1f} GiB > {node.hbm_bytes / GIB:.1f} GiB HBM "
                     f"(short by {-memory.headroom_bytes / GIB:.1f} GiB)")
    if not request.train_command:
        notes.append("no training command given (put it after '--'); the plan is still complete")
    return LaunchPlan(
        model=model.name, node_profile=node.name, num_nodes=request.num_nodes, gpus_per_node=gpn,
        world_size=layout.world_size, layout=layout, expert_dp=layout.expert_dp, zero_stage=layout.zero_stage,
        schedule=layout.schedule, num_stages=layout.num_stages, batch=batch,
        stages=tuple(_stage_rows(layout, stages)), memory=memory, rank_map=rank_map.summary(),
        schedule_figures=figures, choices=tuple(choices), notes=tuple(notes), backend=request.backend,
        job_name=request.job_name, train_command=request.train_command,
        exit_code=0 if memory.fits else 1, ranks=rank_map,
    )


def _stage_rows(layout: ParallelLayout, stages: tuple[Stage, ...]) -> list[dict[str, Any]]:
    holders: dict[int, list[int]] = {s.index: [] for s in stages}
    for r in range(layout.pp):
        for s in stages_of_rank(layout, r):
            holders[s].append(r)
    return [{
        "stage": s.index, "contents": s.describe(), "first_layer": s.first_layer, "last_layer": s.last_layer,
        "num_layers": s.num_layers, "num_mtp_modules": s.num_mtp_modules, "pp_ranks": holders[s.index],
        "params_per_gpu": s.dense_params + s.routed_expert_params // layout.ep,
        "dense_params": s.dense_params, "routed_expert_params_per_gpu": s.routed_expert_params // layout.ep,
    } for s in stages]


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def _explain(request: LaunchRequest, model: ModelProfile, layout: ParallelLayout, memory: MemoryEstimate,
             considered: list[PPCandidate]) -> list[str]:
    out = []
    world = layout.world_size
    if request.tp is None:
        out.append("tp 1: no tensor parallelism, as DeepSeek-V3 trains; DualPipe, EP and ZeRO-1 save the memory")
    else:
        out.append(f"tp {layout.tp}: given")
    if request.ep is not None:
        out.append(f"ep {layout.ep}: given")
    elif model.moe is None:
        out.append("ep 1: dense model, no expert parallelism")
    else:
        moe = model.moe
        per_gpu = moe.num_routed_experts // layout.ep
        target = layout.gpus_per_node * max(1, moe.num_expert_groups)
        why = (f"{moe.num_expert_groups} expert groups x {layout.gpus_per_node} GPUs: one expert group per node, so "
               f"node-limited routing (<= {moe.num_limited_groups} groups per token) reaches <= "
               f"{moe.num_limited_groups} nodes" if layout.ep == target and moe.num_expert_groups > 1
               else f"largest value <= {target} dividing {moe.num_routed_experts} experts and the "
                    f"{layout.stage_ranks} ranks of a stage, node-aligned")
        nodes = max(1, layout.ep // layout.gpus_per_node)
        out.append(f"ep {layout.ep} = {why}; {moe.num_routed_experts} experts / {layout.ep} = {per_gpu} per GPU "
                   f"per MoE layer; each EP group spans {nodes} node(s) and "
                   f"{min(layout.ep, layout.gpus_per_node)} network plane(s)")
    if request.pp is not None or request.dp is not None:
        out.append(f"pp {layout.pp}: " + ("given" if request.pp is not None else f"from dp {request.dp}"))
    else:
        kind = "even " if layout.schedule == "dualpipe" else ""
        if memory.fits:
            out.append(f"pp {layout.pp}: the smallest valid {kind}pp that fits in {_gib(memory.hbm_bytes)} per GPU "
                       f"(worst rank {_gib(memory.max_total_bytes)})")
        else:
            out.append(f"pp {layout.pp}: no valid {kind}pp fits in {_gib(memory.hbm_bytes)} per GPU; this one comes "
                       f"closest (worst rank {_gib(memory.max_total_bytes)})")
        out.extend(rejection_lines(considered, layout.pp))
    out.append(f"dp {layout.dp} = {world} GPUs / (pp {layout.pp} x tp {layout.tp}); expert-dp {layout.expert_dp} = "
               f"tp {layout.tp} x dp {layout.dp} / ep {layout.ep} replicas of each expert; ZeRO-1 shards optimizer "
               f"states over dp (dense) and expert-dp (experts)")
    if layout.schedule in DUAL_SCHEDULES:
        out.append(f"schedule {layout.schedule}: 2 stages' weights per GPU, {layout.num_stages + 1} micro-batch "
                   f"activations in flight; {layout.num_stages} stages on {layout.pp} pipeline ranks")
    else:
        out.append(f"schedule {layout.schedule}: 1 stage per GPU, up to {layout.pp} micro-batch activations in flight")
    return out


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
    """``dsctl launch layout``: the layout, why it was chosen, the stage split, the rank map and (``--explain``)
    every group. ``memory_fits`` / ``max_memory_bytes`` summarise the memory check (details in ``dsctl launch``);
    ``exit_code`` is 1 when the layout does not fit in memory, as for ``dsctl launch``."""

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
    micro_batches: int
    stages: tuple[dict[str, Any], ...]
    choices: tuple[str, ...]
    memory_fits: bool
    max_memory_bytes: int
    hbm_bytes: int
    rank_map: RankMapSummary
    groups: tuple[GroupListing, ...]
    exit_code: int
    ranks: RankMap = field(repr=False, metadata={"output": False})


def layout_report(plan: LaunchPlan, explain: bool) -> LayoutReport:
    """The layout part of ``plan``; with ``explain`` every group of every kind is listed."""
    from dsctl.launch.rankmap import GROUP_KINDS, GROUP_MEANING

    groups: tuple[GroupListing, ...] = ()
    if explain:
        listings = []
        for kind in GROUP_KINDS:
            ranks = plan.ranks.groups(kind)
            listings.append(GroupListing(kind, GROUP_MEANING[kind], int(ranks.shape[0]), int(ranks.shape[1]), ranks))
        groups = tuple(listings)
    return LayoutReport(
        model=plan.model, node_profile=plan.node_profile, num_nodes=plan.num_nodes, gpus_per_node=plan.gpus_per_node,
        world_size=plan.world_size, layout=plan.layout, expert_dp=plan.expert_dp, zero_stage=plan.zero_stage,
        schedule=plan.schedule, num_stages=plan.num_stages, micro_batches=plan.batch.micro_batches,
        stages=plan.stages, choices=plan.choices, memory_fits=plan.memory.fits,
        max_memory_bytes=plan.memory.max_total_bytes, hbm_bytes=plan.memory.hbm_bytes, rank_map=plan.rank_map,
        groups=groups, exit_code=plan.exit_code, ranks=plan.ranks,
    )
