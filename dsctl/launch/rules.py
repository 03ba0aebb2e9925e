"""The pipeline-schedule and degree rules of a launch, in one place: the plan (``dsctl.launch.plan``), the layout
(``dsctl.launch.layout``), the memory model and the smallest-node-count search (``dsctl.launch.minnodes``) all ask
here.

``pp`` counts pipeline *ranks*; M is the number of micro-batches per pipeline per step.

=========  ==============  ===========================  ===========  ===========================
schedule   stages          stages held by rank r        pp           micro-batches M
=========  ==============  ===========================  ===========  ===========================
dualpipe   pp              r and pp-1-r (a copy)        even         even, >= 2 x pp
dualpipev  2 x pp          r and 2pp-1-r                any          >= 2 x pp
1f1b/zb1p  pp              r                            any          >= pp
interleav. 2 x pp          r and pp+r                   >= 2         a multiple of pp
=========  ==============  ===========================  ===========  ===========================

Activation chunks in flight on rank r: ``stages + 1`` under DualPipe(V) (README table), ``pp - r`` under
1F1B/ZB1P, and under interleaved 1F1B (v = 2 chunks per rank, each half a 1F1B stage) the warm-up forwards of
Megatron's order plus one: ``2 (pp - r - 1) + (v - 1) pp + 1`` (rank 0: ``v pp + pp - 1``), ``v M`` when M = pp.
Every stage needs at least one transformer layer. The default EP is one expert group per node (rule 2 of
``dsctl.launch.plan``). Every check raises :class:`~dsctl.errors.InputError` whose message shows the arithmetic.
"""

from __future__ import annotations

from dsctl.errors import InputError, one_of
from dsctl.profiles.schema import ModelProfile

#: schedules the planner knows, in the order they are offered
SCHEDULES: tuple[str, ...] = ("dualpipe", "dualpipev", "1f1b", "zb1p", "interleaved")

#: schedules that hold two stages' weights per rank (and stages + 1 micro-batch activations in flight)
DUAL_SCHEDULES: frozenset[str] = frozenset({"dualpipe", "dualpipev"})

#: model chunks per rank of interleaved 1F1B (Megatron's virtual pipeline stages); the schedule generator
#: (``dsctl.launch.schedule.interleaved``) takes any v, the planner and ``dsctl launch schedule`` use this one
INTERLEAVED_CHUNKS = 2


def divisors(n: int) -> list[int]:
    """All positive divisors of ``n`` in increasing order (``O(sqrt(n))``)."""
    small, large = [], []
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i != n // i:
                large.append(n // i)
        i += 1
    return small + large[::-1]


def check_schedule_name(schedule: str) -> str:
    """Return ``schedule`` lower-cased, or raise naming the valid schedules."""
    name = schedule.lower()
    if name not in SCHEDULES:
        raise InputError(f"{schedule!r} is not known; valid schedules: {one_of(list(SCHEDULES))}", field="schedule")
    return name


def stages_per_rank(schedule: str) -> int:
    """Model stages per pipeline rank: 2 under DualPipeV, ``INTERLEAVED_CHUNKS`` under interleaved 1F1B, else 1
    (DualPipe's second stage is a copy)."""
    if schedule == "interleaved":
        return INTERLEAVED_CHUNKS
    return 2 if schedule == "dualpipev" else 1


def num_stages(schedule: str, pp: int) -> int:
    """Model stages of ``pp`` pipeline ranks: ``2 x pp`` under DualPipeV and interleaved 1F1B, else ``pp``."""
    return stages_per_rank(schedule) * pp


def stages_of_rank(schedule: str, pp: int, pp_rank: int) -> tuple[int, ...]:
    """Model stages held by pipeline rank ``r``: DualPipe ``(r, pp-1-r)``, DualPipeV ``(r, 2pp-1-r)``, interleaved
    ``(r, pp+r)``, else ``(r,)``.

    Under DualPipe the second entry is a *copy* of a stage another rank also holds.
    """
    if schedule == "dualpipe" and pp > 1:
        return (pp_rank, pp - 1 - pp_rank)
    if schedule == "dualpipev":
        return (pp_rank, 2 * pp - 1 - pp_rank)
    if schedule == "interleaved":
        return tuple(c * pp + pp_rank for c in range(INTERLEAVED_CHUNKS))
    return (pp_rank,)


def interleaved_warmup_forwards(pp: int, chunks: int, pp_rank: int, num_micro_batches: int) -> int:
    """Forwards rank ``pp_rank`` of interleaved 1F1B runs before its first backward (Megatron-LM's
    ``num_warmup_microbatches``): ``min(2 (pp - r - 1) + (v - 1) pp, v M)``, all ``v M`` when ``M = pp``."""
    total = chunks * num_micro_batches
    if num_micro_batches == pp:
        return total
    return min(2 * (pp - pp_rank - 1) + (chunks - 1) * pp, total)


def activation_chunks(schedule: str, pp: int, pp_rank: int, num_micro_batches: int | None = None) -> int:
    """Peak micro-batch stage-chunks in flight on ``pp_rank``: ``stages + 1`` under DualPipe(V) (the schedule
    already requires M >= 2 x pp); interleaved: its warm-up forwards + 1 (one chunk is one of the rank's
    ``INTERLEAVED_CHUNKS`` stages), without M the fewest any valid M gives (what ``dsctl.launch.minnodes``'s
    bound needs); else ``pp - r`` capped at M when M is given."""
    if schedule in DUAL_SCHEDULES:
        return num_stages(schedule, pp) + 1
    if schedule == "interleaved":
        if num_micro_batches is None:  # the fewest any valid M gives: M = pp (all forwards first) or M > pp
            return min(activation_chunks(schedule, pp, pp_rank, m) for m in (pp, 2 * pp))
        total = INTERLEAVED_CHUNKS * num_micro_batches
        return min(interleaved_warmup_forwards(pp, INTERLEAVED_CHUNKS, pp_rank, num_micro_batches) + 1, total)
    chunks = pp - pp_rank
    return max(1, min(chunks, num_micro_batches) if num_micro_batches is not None else chunks)


def min_micro_batches(schedule: str, pp: int) -> int:
    """Fewest micro-batches per step the schedule accepts: 2 x pp for DualPipe(V), pp otherwise (interleaved: a
    multiple of pp)."""
    return 2 * pp if schedule in DUAL_SCHEDULES else pp


def pipeline_degree_allowed(schedule: str, pp: int, num_layers: int) -> bool:
    """Whether ``pp`` pipeline ranks can run ``schedule`` on a model of ``num_layers`` transformer layers: an even
    pp for DualPipe, pp >= 2 for interleaved 1F1B, at most one stage per layer."""
    return (pp >= (2 if schedule == "interleaved" else 1) and not (schedule == "dualpipe" and pp % 2)
            and num_stages(schedule, pp) <= num_layers)


def check_schedule_layout(schedule: str, pp: int, num_micro_batches: int | None, source: str | None = None) -> None:
    """The schedule's requirements on ``pp`` and M (table of the module docstring); M is checked when given.

    ``source`` says where M came from in the error message (default ``--micro-batches M``), e.g.
    ``30 micro-batches (--global-batch 3840 / dp 128)``.
    """
    name = check_schedule_name(schedule)
    m = num_micro_batches
    got = source or f"--micro-batches {m}"
    if name == "dualpipe":
        if pp % 2:
            raise InputError(f"dualpipe needs an even pp (rank r pairs with rank pp-1-r); got pp {pp}",
                             hint="use --schedule dualpipev, 1f1b or zb1p for an odd pp")
        if m is not None and (m % 2 or m < 2 * pp):
            raise InputError(f"dualpipe needs an even number of micro-batches >= 2 x pp = {2 * pp}; got {got}")
    elif name == "dualpipev":
        if m is not None and m < 2 * pp:
            raise InputError(f"dualpipev needs micro-batches >= its {2 * pp} stages (2 x pp {pp}); got {got}")
    elif name == "interleaved":
        if pp < 2:
            raise InputError(f"interleaved needs pp >= 2 (its {INTERLEAVED_CHUNKS} model chunks per rank pass "
                             f"between ranks); got pp {pp}", hint="use --schedule 1f1b for pp 1")
        if m is not None and (m < pp or m % pp):
            raise InputError(f"interleaved needs micro-batches a multiple of pp {pp} (Megatron-LM's rule for "
                             f"its virtual pipeline); got {got}")
    elif m is not None and m < pp:
        raise InputError(f"{name} needs micro-batches >= pp {pp}; got {got}")


def ep_target(gpus_per_node: int, num_expert_groups: int) -> int:
    """The EP rule 2 aims at: one expert group per node, ``gpus_per_node x expert groups``."""
    return gpus_per_node * max(1, num_expert_groups)


def ep_node_aligned(ep: int, gpus_per_node: int) -> bool:
    """EP groups tile nodes evenly: ``ep`` divides the GPUs of a node or is a multiple of them."""
    return gpus_per_node % ep == 0 or ep % gpus_per_node == 0


def default_ep(model: ModelProfile, gpus_per_node: int, stage_ranks: int | None) -> int:
    """Rule 2: the largest EP at most :func:`ep_target` that divides the routed experts and (when given) the
    ``stage_ranks`` of a pipeline stage, node-aligned; 1 for a dense model.

    With ``stage_ranks`` None this is the largest EP any node count could give (the search's bound).
    """
    if model.moe is None:
        return 1
    num_routed_experts = model.moe.num_routed_experts
    target = ep_target(gpus_per_node, model.moe.num_expert_groups)
    valid = [e for e in divisors(num_routed_experts) if e <= target and (
        stage_ranks is None or (stage_ranks % e == 0 and ep_node_aligned(e, gpus_per_node)))]
    return max(valid) if valid else 1
