"""Schedules timed with a duration per op that depends on the stages it runs (seconds, not uniform units).

``simulate_stage_costs`` generates the same per-rank op order as :func:`dsctl.launch.schedule.simulate` (for
DualPipe: the reference code's order) and times it with the ideal model plus a p2p delay, asking
``seconds_of(kind, fwd_stage, bwd_stage)`` for each op: stages differ (embedding, dense layers, MoE layers, MTP,
head), and an overlapped F&B op pairs the forward of one stage with the backward of another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from dsctl.errors import InputError
from dsctl.launch.schedule.api import rank_programs
from dsctl.launch.schedule.params import check_schedule_params
from dsctl.launch.schedule.program import RankProgram
from dsctl.launch.schedule.simulator import (
    IdealPlan,
    op_dependencies,
    plan_ideal,
    simulate_ideal_timed,
    simulate_planned,
)

#: ``seconds_of(kind, fwd_stage, bwd_stage)``: kind F, B, I, W or FB; a stage is None when the op has no such part
SecondsOf = Callable[[str, "int | None", "int | None"], float]


@dataclass(frozen=True)
class TimedOp:
    """One op of one rank: its kind, the stages of its forward / backward part (None if absent), start and end."""

    kind: str
    fwd_stage: int | None
    bwd_stage: int | None
    start: float
    end: float


@dataclass(frozen=True)
class TimedSchedule:
    """A schedule timed in seconds. ``busy_per_rank[r]`` sums rank ``r``'s op durations; idle = makespan - busy.

    ``parts[r][i]`` is ``(kind, fwd_stage, bwd_stage)`` of rank ``r``'s op ``i``; ``starts`` / ``ends`` its times.
    """

    schedule: str
    num_stages: int
    num_micro_batches: int
    makespan: float
    busy_per_rank: tuple[float, ...]
    parts: tuple[tuple[tuple[str, int | None, int | None], ...], ...]
    starts: tuple[tuple[float, ...], ...]
    ends: tuple[tuple[float, ...], ...]

    @property
    def idle_per_rank(self) -> tuple[float, ...]:
        return tuple(self.makespan - b for b in self.busy_per_rank)

    @property
    def timeline(self) -> tuple[tuple[TimedOp, ...], ...]:
        """Every op of every rank with its stages and times (built on demand)."""
        return tuple(tuple(TimedOp(kind, f, b, s, e) for (kind, f, b), s, e in zip(row, starts, ends, strict=True))
                     for row, starts, ends in zip(self.parts, self.starts, self.ends, strict=True))

    def seconds_by_kind(self, rank: int) -> dict[str, float]:
        """Seconds rank ``rank`` spends in each op kind (F, B, I, W, FB)."""
        out = dict.fromkeys(("F", "B", "I", "W", "FB"), 0.0)
        for (kind, _, _), start, end in zip(self.parts[rank], self.starts[rank], self.ends[rank], strict=True):
            out[kind] += end - start
        return out

    def count_by_kind(self, rank: int) -> dict[str, int]:
        out = dict.fromkeys(("F", "B", "I", "W", "FB"), 0)
        for kind, _, _ in self.parts[rank]:
            out[kind] += 1
        return out


Parts = tuple[tuple[tuple[str, "int | None", "int | None"], ...], ...]


@lru_cache(maxsize=32)
def prepared_schedule(schedule: str, num_stages: int, num_micro_batches: int) -> tuple[list[RankProgram], Parts, list]:
    """Programs, each op's (kind, forward stage, backward stage) and dependencies; reused by every timing of the
    same schedule shape (a layout search times one shape with many costs). Read only."""
    programs = rank_programs(schedule, num_stages, num_micro_batches)
    geometry = programs[0].geometry
    parts = tuple(tuple(
        (op.kind,
         geometry.stage(p.rank, op.fwd[0]) if op.fwd is not None and op.kind in ("F", "FB") else None,
         geometry.stage(p.rank, op.bwd[0]) if op.bwd is not None and op.kind != "F" else None)
        for op in p.ops) for p in programs)
    return programs, parts, op_dependencies(programs)


#: schedule shapes timed before: the second timing of a shape records its op order (the plan costs about two
#: timings, and a search times most shapes many times, some once); bounded
_TIMED_ONCE: set[tuple[str, int, int]] = set()


@lru_cache(maxsize=64)  # more than prepared_schedule's 32: a search's 33rd shape must not evict the first
def _ideal_plan(schedule: str, num_stages: int, num_micro_batches: int) -> IdealPlan | None:
    """:func:`dsctl.launch.schedule.simulator.plan_ideal` of the shape (one per shape, like its programs)."""
    programs, _, deps = prepared_schedule(schedule, num_stages, num_micro_batches)
    return plan_ideal(programs, deps)


def simulate_stage_costs(schedule: str, num_stages: int, num_micro_batches: int, seconds_of: SecondsOf,
                         transfer_s: float = 0.0) -> TimedSchedule:
    """Time ``schedule`` with per-op durations from ``seconds_of`` and ``transfer_s`` per cross-rank dependency.

    Raises ``InputError`` for parameters the schedule cannot run or a negative / non-finite duration.
    """
    check_schedule_params(schedule, num_stages, num_micro_batches)
    if not 0.0 <= transfer_s < float("inf"):
        raise InputError(f"p2p transfer time {transfer_s} s must be finite and >= 0")
    programs, parts, deps = prepared_schedule(schedule, num_stages, num_micro_batches)
    cache: dict[tuple[str, int | None, int | None], float] = {}
    for key in sorted({key for row in parts for key in row}, key=repr):
        value = float(seconds_of(*key))
        if not 0.0 <= value < float("inf"):
            raise InputError(f"op {key[0]} of stages {key[1]}/{key[2]}: duration {value} s must be finite and >= 0")
        cache[key] = value
    seconds = [[cache[key] for key in row] for row in parts]
    shape = (schedule, num_stages, num_micro_batches)
    plan = _ideal_plan(*shape) if shape in _TIMED_ONCE else None  # a shape timed once may be timed only once
    if len(_TIMED_ONCE) >= 4096:
        _TIMED_ONCE.clear()
    _TIMED_ONCE.add(shape)
    timing = (simulate_planned(plan, seconds, transfer_s) if plan is not None else
              simulate_ideal_timed(programs, seconds, transfer_s, deps))
    makespan = max((ends[-1] for ends in timing.ends if ends), default=0.0)
    busy = tuple(sum(row) for row in seconds)
    return TimedSchedule(schedule, num_stages, num_micro_batches, makespan, busy, parts,
                         tuple(map(tuple, timing.starts)), tuple(map(tuple, timing.ends)))
