"""Step 5 of the launch pipeline: why the plan chose its layout, why each other candidate ``pp`` was passed
over, and the errors and notes that name the layout dsctl would otherwise have chosen.

Every line here is prose over :class:`~dsctl.launch.candidates.Candidate` and the chosen layout; no rule is
decided here (rules: ``dsctl.launch.rules``, batch: ``dsctl.launch.batch``).
"""

from __future__ import annotations

from collections.abc import Sequence

from dsctl.errors import InputError
from dsctl.launch.batch import batch_suggestion
from dsctl.launch.candidates import Candidate
from dsctl.launch.layout import ParallelLayout
from dsctl.launch.memory import MemoryEstimate
from dsctl.launch.request import LaunchRequest
from dsctl.launch.rules import DUAL_SCHEDULES, ep_target
from dsctl.profiles.schema import ModelProfile
from dsctl.units import format_gib as gib

#: what each ZeRO stage shards over the data-parallel groups (dsctl.launch.memory)
ZERO_SHARDS = {1: "optimizer states", 2: "optimizer states and gradients", 3: "optimizer states, gradients and weights"}


def rejection_reason(candidate: Candidate, terse: bool = False) -> str:
    """Why ``candidate`` was not chosen: the rule it breaks and/or its memory shortfall.

    ``terse`` (for error hints): a candidate that would not fit in memory anyway is described by that alone.
    """
    mem = candidate.memory
    short = None if mem is None or mem.fits else (f"needs {gib(mem.max_total_bytes)} per GPU > "
                                                   f"{gib(mem.hbm_bytes)} HBM")
    if candidate.error is None:
        if mem is None:
            return "not evaluated"
        return f"does not fit: {short}" if short else f"fits ({gib(mem.max_total_bytes)} per GPU)"
    if mem is None:
        return candidate.error
    if short is None:
        return f"{candidate.error} (it would fit in memory: {gib(mem.max_total_bytes)} per GPU)"
    return f"does not fit: {short}" if terse else f"{candidate.error}; it would not fit either: {short}"


def preferred_candidate(considered: Sequence[Candidate]) -> tuple[Candidate, str]:
    """The candidate the memory rule alone would pick, and why: the smallest that fits, else the closest to
    fitting, else the first (when no layout is even structurally valid)."""
    for c in considered:
        if c.fits:
            return c, f"the smallest pp whose memory fits in {gib(c.memory.hbm_bytes) if c.memory else 'HBM'} per GPU"
    known = [c for c in considered if c.memory is not None]
    if known:
        best = max(known, key=lambda c: c.memory.headroom_bytes if c.memory else 0)
        return best, "the valid pp that comes closest to fitting in memory; none fits"
    return considered[0], "the smallest pipeline degree tried"


def no_layout_error(considered: Sequence[Candidate], num_nodes: int, schedule: str,
                    global_batch: int | None, micro_batches: int | None) -> InputError:
    """The error when every candidate pp breaks a rule: it names the layout dsctl would otherwise choose and
    its broken rule, and lists why every other candidate was rejected in the hint."""
    preferred, why = preferred_candidate(considered)
    if preferred.memory is not None:
        message = (f"{preferred.label}, the layout dsctl would choose for {num_nodes} nodes ({why}), cannot run "
                   f"this batch: {preferred.error}")
    else:
        message = f"no pipeline degree works; {preferred.label} ({why}): {preferred.error}"
    fix = batch_suggestion(schedule, preferred.pp, preferred.dp, global_batch, micro_batches)
    others = "; ".join(f"pp {c.pp}: {rejection_reason(c, terse=True)}" for c in considered if c is not preferred)
    hint = (f"use {fix}, or give --pp" if fix else (preferred.hint or "give --pp explicitly"))
    if others:
        hint += f". Other pipeline degrees tried: {others}"
    return InputError(message, hint=hint)


def rejection_lines(considered: Sequence[Candidate], chosen_pp: int) -> list[str]:
    """One "why this layout" line per candidate passed over, with its reason."""
    return [f"pp {c.pp} rejected: {rejection_reason(c)}" for c in considered if c.pp != chosen_pp]


def missed_fit_notes(considered: Sequence[Candidate], chosen_fits: bool, schedule: str,
                     global_batch: int | None, micro_batches: int | None) -> list[str]:
    """When the chosen layout does not fit but a candidate rejected by a batch rule would, say how to get it."""
    if chosen_fits:
        return []
    for c in considered:
        if c.error is not None and c.fits and c.memory is not None:
            fix = batch_suggestion(schedule, c.pp, c.dp, global_batch, micro_batches)
            return [f"{c.label} would fit in memory ({gib(c.memory.max_total_bytes)} per GPU) but {c.error}"
                    + (f"; {fix} lets dsctl choose it" if fix else "")]
    return []


def explain_choices(request: LaunchRequest, model: ModelProfile, layout: ParallelLayout, memory: MemoryEstimate,
                    considered: Sequence[Candidate]) -> list[str]:
    """One line per degree of ``layout``: given, or which rule of ``dsctl.launch.plan`` chose it and why."""
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
        target = ep_target(layout.gpus_per_node, moe.num_expert_groups)
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
            out.append(f"pp {layout.pp}: the smallest valid {kind}pp that fits in {gib(memory.hbm_bytes)} per GPU "
                       f"(worst rank {gib(memory.max_total_bytes)})")
        else:
            out.append(f"pp {layout.pp}: no valid {kind}pp fits in {gib(memory.hbm_bytes)} per GPU; this one comes "
                       f"closest (worst rank {gib(memory.max_total_bytes)})")
        out.extend(rejection_lines(considered, layout.pp))
    out.append(f"dp {layout.dp} = {world} GPUs / (pp {layout.pp} x tp {layout.tp}); expert-dp {layout.expert_dp} = "
               f"tp {layout.tp} x dp {layout.dp} / ep {layout.ep} replicas of each expert; ZeRO-{layout.zero_stage} "
               f"shards {ZERO_SHARDS[layout.zero_stage]} over dp (dense) and expert-dp (experts)")
    if layout.schedule in DUAL_SCHEDULES:
        out.append(f"schedule {layout.schedule}: 2 stages' weights per GPU, {layout.num_stages + 1} micro-batch "
                   f"activations in flight; {layout.num_stages} stages on {layout.pp} pipeline ranks")
    elif layout.schedule == "interleaved":
        out.append(f"schedule interleaved: {layout.num_stages // layout.pp} model chunks (stages) per GPU, up to "
                   f"{memory.per_rank[0].activation_chunks} chunk activations in flight on rank 0; "
                   f"{layout.num_stages} stages on {layout.pp} pipeline ranks")
    else:
        out.append(f"schedule {layout.schedule}: 1 stage per GPU, up to {layout.pp} micro-batch activations in flight")
    return out


def does_not_fit_note(memory: MemoryEstimate) -> str:
    """The note of a plan whose worst GPU does not fit."""
    return (f"does not fit: pipeline rank {memory.worst_pp_rank} needs {gib(memory.max_total_bytes)} > "
            f"{gib(memory.hbm_bytes)} HBM (short by {gib(-memory.headroom_bytes)})")


def min_nodes_note(smallest: int | None, search_limit_nodes: int) -> str:
    """The note of a plan that does not fit: the smallest node count that does (or that none up to the limit does)."""
    if smallest is None:
        return (f"no node count up to {search_limit_nodes:,} fits with these options; try --tp, --pp or a "
                "smaller --global-batch / --micro-batches")
    return (f"the smallest node count that fits is {smallest} (--nodes {smallest}; "
            "'dsctl launch layout --min-nodes' shows its layout)")
