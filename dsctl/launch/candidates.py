"""Step 2 of the launch pipeline: the pipeline degrees a request allows, each evaluated once into a
:class:`Candidate` (layout, batch, stage split, memory, or the rule it breaks), and the choice among them.

``dsctl launch`` without ``--pp`` tries the valid degrees in increasing order and takes the first whose worst GPU
fits in HBM; if none fits, the valid one with the most headroom (rule 3 of ``dsctl.launch.plan``). A degree whose
batch breaks a rule keeps the memory it *would* need (the requested batch as far as it resolves, else the
default batch), so that the explanation and the error name the layout dsctl would otherwise have chosen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from dsctl.errors import InputError
from dsctl.launch.batch import BatchPlan, checked_batch, resolve_batch
from dsctl.launch.layout import ParallelLayout, resolve_dp, validate_layout
from dsctl.launch.memory import MemoryAssumptions, MemoryEstimate, estimate_memory
from dsctl.launch.request import LaunchRequest
from dsctl.launch.rules import default_ep, divisors, pipeline_degree_allowed
from dsctl.launch.stages import Stage, split_stages
from dsctl.model.params import ParameterCounts
from dsctl.model.recipes import ActivationRecipe, resolve_recipe
from dsctl.profiles.schema import ModelProfile, NodeProfile


@dataclass(frozen=True)
class PlanInputs:
    """What every candidate of one request is evaluated against (``request`` through ``LaunchRequest.checked``)."""

    model: ModelProfile
    node: NodeProfile
    request: LaunchRequest
    counts: ParameterCounts
    assumptions: MemoryAssumptions

    @property
    def tp(self) -> int:
        return self.request.tp_or_default

    @property
    def recipe(self) -> ActivationRecipe:
        return resolve_recipe(self.model, self.request.recipe)


@dataclass(frozen=True)
class Choice:
    """The parts of a valid candidate, none missing: what the plan is built from."""

    layout: ParallelLayout
    batch: BatchPlan
    stages: tuple[Stage, ...]
    memory: MemoryEstimate
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Candidate:
    """One pipeline degree, evaluated once.

    ``label``: the layout (``PP16 EP64 TP1 DP128``) or ``pp N`` when even its structure is invalid.
    ``error``: the rule the requested batch or layout breaks (None for a valid candidate), ``hint`` its hint.
    ``memory``: the memory estimate with the requested batch (valid candidate) or, for a rejected one, with the
    requested batch as far as it resolves (else the default batch) ignoring the broken rule; None if the
    layout itself is invalid. ``layout``, ``batch``, ``stages`` and ``notes`` (batch rounding) are what the plan
    is built from; ``batch`` is None for a rejected candidate.
    """

    pp: int
    dp: int
    label: str
    error: str | None = None
    hint: str | None = None
    memory: MemoryEstimate | None = None
    layout: ParallelLayout | None = None
    batch: BatchPlan | None = None
    stages: tuple[Stage, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        """The candidate's memory fits in HBM (False when unknown)."""
        return self.memory is not None and self.memory.fits

    @property
    def valid(self) -> bool:
        """No rule broken: a plan can be built from it."""
        return self.error is None and self.memory is not None

    def choice(self) -> Choice | None:
        """The parts of a valid candidate (None for a rejected one)."""
        if self.error is not None or self.layout is None or self.batch is None or self.memory is None:
            return None
        return Choice(self.layout, self.batch, self.stages, self.memory, self.notes)

    def failure(self) -> InputError:
        """The broken rule as the error a single-candidate plan raises."""
        return InputError(self.error or "no valid layout", hint=self.hint)


def pp_candidates(inputs: PlanInputs) -> list[int]:
    """Valid pipeline degrees in increasing order for the request's fixed choices (rule 3)."""
    request, model, tp = inputs.request, inputs.model, inputs.tp
    gpn = inputs.node.num_gpus
    world = request.num_nodes * gpn
    if request.pp is not None:
        return [request.pp]
    if request.dp is not None:
        if world % (request.dp * tp):
            resolve_dp(request.num_nodes, gpn, 1, tp, request.dp)  # raises with the arithmetic
        return [world // (request.dp * tp)]
    return [pp for pp in (divisors(world // tp) if world % tp == 0 else [])
            if pipeline_degree_allowed(request.schedule, pp, model.num_layers)
            and not (request.ep is not None and (world // pp) % request.ep)]


def layout_for(inputs: PlanInputs, pp: int) -> ParallelLayout:
    """The layout with pipeline degree ``pp`` (rule 2 picks ep unless given), checked against the model."""
    request, model, tp = inputs.request, inputs.model, inputs.tp
    gpn = inputs.node.num_gpus
    dp = resolve_dp(request.num_nodes, gpn, pp, tp, request.dp)
    moe = model.moe
    ep = request.ep if request.ep is not None else default_ep(model, gpn, tp * dp)
    layout = ParallelLayout(request.num_nodes, gpn, pp, ep, tp, dp, request.schedule)
    validate_layout(layout, num_layers=model.num_layers, num_routed_experts=moe.num_routed_experts if moe else 0)
    return layout


def _memory(inputs: PlanInputs, layout: ParallelLayout, batch: BatchPlan) -> tuple[tuple[Stage, ...], MemoryEstimate]:
    stages = split_stages(inputs.model, inputs.counts, layout.num_stages)
    return stages, estimate_memory(inputs.model, layout, stages, inputs.node.usable_hbm_bytes,
                                   batch.tokens_per_micro_batch, batch.micro_batches, inputs.assumptions,
                                   inputs.recipe, inputs.node.hbm_bytes)


def evaluate(inputs: PlanInputs, pp: int, explain_rejection: bool = True) -> Candidate:
    """The candidate of degree ``pp``; ``explain_rejection`` False skips the would-be memory of a rejected one."""
    request = inputs.request
    try:
        layout = layout_for(inputs, pp)
    except InputError as exc:
        world = request.num_nodes * inputs.node.num_gpus
        return Candidate(pp, world // (pp * inputs.tp), f"pp {pp}", request.reason(exc), exc.hint)
    try:
        batch, notes = checked_batch(request, layout.schedule, pp, layout.dp)
    except InputError as exc:
        memory = None
        if explain_rejection:
            for attempt in (request, replace(request, global_batch=None, micro_batches=None)):
                try:
                    memory = _memory(inputs, layout, resolve_batch(attempt, layout.dp, pp)[0])[1]
                    break
                except InputError:
                    continue
        return Candidate(pp, layout.dp, layout.describe(), request.reason(exc), exc.hint, memory, layout)
    stages, memory = _memory(inputs, layout, batch)
    return Candidate(pp, layout.dp, layout.describe(), memory=memory, layout=layout, batch=batch, stages=stages,
                     notes=tuple(notes))


def no_degree_error(inputs: PlanInputs) -> InputError:
    """The error when no pipeline degree is even structurally possible."""
    request, tp = inputs.request, inputs.tp
    gpn = inputs.node.num_gpus
    schedule = request.schedule
    return InputError(
        f"no pipeline degree works for {request.num_nodes} nodes x {gpn} GPUs with tp {tp}"
        + (f", ep {request.ep}" if request.ep else "") + f" and schedule {schedule} "
        f"(needs pp dividing {request.num_nodes * gpn} / tp, stages <= {inputs.model.num_layers} layers"
        + (", pp even)" if schedule == "dualpipe" else ")"),
        hint="give --pp explicitly, or choose another --schedule / --ep",
    )


def search(inputs: PlanInputs) -> tuple[Choice | None, tuple[Candidate, ...]]:
    """Evaluate the degrees in increasing order up to the first that fits: ``(chosen, considered)``.

    ``chosen`` is the first fitting candidate, else the valid one with the most headroom, else None (every
    degree breaks a rule). A single allowed degree that breaks a rule raises its error.
    """
    degrees = pp_candidates(inputs)
    if not degrees:
        raise no_degree_error(inputs)
    considered: list[Candidate] = []
    for pp in degrees:
        candidate = evaluate(inputs, pp)
        if not candidate.valid and len(degrees) == 1:
            raise candidate.failure()
        considered.append(candidate)
        choice = candidate.choice()
        if choice is not None and (choice.memory.fits or len(degrees) == 1):
            return choice, tuple(considered)
    usable = [choice for choice in (c.choice() for c in considered) if choice is not None]
    if not usable:
        return None, tuple(considered)
    return max(usable, key=lambda choice: choice.memory.headroom_bytes), tuple(considered)


def first_fitting(inputs: PlanInputs, worth_trying: Callable[[int], bool]) -> Candidate | None:
    """The first pipeline degree of ``inputs.request`` that builds a valid layout fitting in GPU memory (None:
    none); ``worth_trying(pp)`` False skips a degree known not to fit. Cheaper than the plan: no rank map, notes
    or schedule, no memory of rejected degrees."""
    try:
        degrees = pp_candidates(inputs)
    except InputError:
        return None
    for pp in degrees:
        if worth_trying(pp):
            candidate = evaluate(inputs, pp, explain_rejection=False)
            if candidate.fits and candidate.valid:
                return candidate
    return None
