"""``simulate()``: build a schedule's per-rank programs, time them, and compare with the README formulas."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dsctl.errors import InputError, one_of
from dsctl.launch.schedule.costs import OpCosts
from dsctl.launch.schedule.dualpipe import dualpipe_program
from dsctl.launch.schedule.formulas import FormulaCheck, formula_check
from dsctl.launch.schedule.geometry import Geometry
from dsctl.launch.schedule.interleaved import INTERLEAVED_CHUNKS, interleaved_program
from dsctl.launch.schedule.linear import one_f_one_b_program, zb1p_program
from dsctl.launch.schedule.params import check_schedule_params
from dsctl.launch.schedule.program import RankProgram
from dsctl.launch.schedule.simulator import Timing, simulate_commit, simulate_ideal

#: timing models: "ideal" (README figures) and "batched" (the reference code's batched p2p; alias "commit")
COMM_MODELS = ("ideal", "batched")
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class ScheduleResult:
    """A simulated pipeline schedule. Times are in the unit of ``costs``.

    - ``ops[r]``: op names of rank ``r`` in execution order (grammar in ``dsctl.launch.schedule.ops``);
    - ``timeline[r]``: ``(op, start, end)`` per op of rank ``r``;
    - ``idle_per_rank[r]`` = ``makespan - busy_per_rank[r]``; ``bubble`` = max over ranks (README's "bubble");
    - ``formula_bubble``: the DualPipe README table's value; ``formula_exact`` says whether the costs are in the
      regime where it is exact, ``formula_matches`` whether the simulation equals it here;
    - ``peak_activations_per_rank[r]``: most stage-chunks forwarded but not yet backward-ed at once on rank ``r``.
    """

    schedule: str
    comm_model: str
    num_stages: int
    num_ranks: int
    num_micro_batches: int
    costs: OpCosts
    makespan: float
    bubble: float
    formula_bubble: float
    formula_exact: bool
    formula_matches: bool
    formula_regime: str
    formula_makespan: float | None
    peak_activations: int
    peak_activations_per_rank: list[int]
    busy_per_rank: list[float]
    idle_per_rank: list[float]
    num_ops_per_rank: list[int]
    num_overlapped_per_rank: list[int]
    ops: list[list[str]]
    timeline: list[list[tuple[str, float, float]]]

    def to_data(self) -> dict[str, Any]:
        costs = {"f": self.costs.f, "b": self.costs.b, "w": self.costs.w, "i": self.costs.i,
                 "fb": self.costs.fb_cost}
        data: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            data[name] = costs if name == "costs" else value
        data["timeline"] = [[[op, start, end] for op, start, end in rank] for rank in self.timeline]
        return data


def rank_programs(schedule: str, num_stages: int, num_micro_batches: int, comm: bool = False) -> list[RankProgram]:
    """Each pipeline rank's op program of ``schedule`` (``comm``: with its send/receive ops)."""
    if schedule == "dualpipe":
        geometry = Geometry("dualpipe", num_stages, num_stages, num_micro_batches)
        return [dualpipe_program(geometry, r, comm) for r in range(num_stages)]
    if schedule == "dualpipev":
        geometry = Geometry("dualpipev", num_stages // 2, num_stages, num_micro_batches)
        return [dualpipe_program(geometry, r, comm) for r in range(num_stages // 2)]
    if schedule == "interleaved":
        ranks = num_stages // INTERLEAVED_CHUNKS
        geometry = Geometry("interleaved", ranks, num_stages, num_micro_batches)
        return [interleaved_program(geometry, r) for r in range(ranks)]
    geometry = Geometry("linear", num_stages, num_stages, num_micro_batches)
    build = one_f_one_b_program if schedule == "1f1b" else zb1p_program
    return [build(geometry, r) for r in range(num_stages)]


def schedule_ops(schedule: str, num_stages: int, num_micro_batches: int) -> list[list[str]]:
    """Per-rank op names of ``schedule`` without timing them."""
    check_schedule_params(schedule, num_stages, num_micro_batches)
    return [[op.name for op in p.ops] for p in rank_programs(schedule, num_stages, num_micro_batches)]


def _peak_activations(program: RankProgram) -> int:
    """Most chunks forwarded and not yet backward-ed; an overlapped op counts its forward before its backward."""
    live = peak = 0
    for op in program.ops:
        if op.has_forward:
            live += 1
            peak = max(peak, live)
        if op.has_backward:
            live -= 1
    return peak


def _round(value: float) -> float:
    """Drop float noise from sums of op costs (keeps 9 decimals)."""
    return round(value, 9) + 0.0


def simulate(schedule: str, num_stages: int, num_micro_batches: int, costs: OpCosts | None = None,
             comm_model: str = "ideal") -> ScheduleResult:
    """Simulate ``schedule`` with ``num_stages`` pipeline stages (``--pp``) and ``num_micro_batches``.

    DualPipe runs ``num_stages`` ranks and splits the micro-batches in two directions; DualPipeV and interleaved
    1F1B run ``num_stages / 2`` ranks with two stages each. ``comm_model`` is "ideal" or "batched" (alias "commit",
    DualPipe and DualPipeV only). Raises ``InputError`` for parameters the schedule cannot run.
    """
    costs = costs or OpCosts()
    costs.validate()
    check_schedule_params(schedule, num_stages, num_micro_batches)
    model = "batched" if comm_model == "commit" else comm_model
    if model not in COMM_MODELS:
        raise InputError(f"{comm_model!r} is not known; use {one_of(COMM_MODELS)}", field="comm_model")
    if model == "batched" and schedule not in ("dualpipe", "dualpipev"):
        raise InputError(f"batched replays the p2p pattern of DeepSeek's DualPipe code and applies "
                         f"to dualpipe and dualpipev only, not {schedule}", field="comm_model",
                         hint="use --comm-model ideal")
    programs = rank_programs(schedule, num_stages, num_micro_batches, comm=model == "batched")
    timing: Timing = (simulate_ideal if model == "ideal" else simulate_commit)(programs, costs)

    makespan = _round(max((ends[-1] for ends in timing.ends if ends), default=0.0))
    busy = [_round(sum(costs.duration(op.kind) for op in p.ops)) for p in programs]
    if not all(math.isfinite(t) for t in (makespan, *busy)):
        raise InputError(f"{costs.f:g} {{b_cost}} {costs.b:g} {{w_cost}} {costs.w:g}: the step's total time "
                         "overflows (larger than 1.8e308 in any unit)", field="f_cost", mentions=("b_cost", "w_cost"),
                         hint="give the op costs in a larger time unit")
    idle = [_round(makespan - b) for b in busy]
    bubble = max(idle)
    check: FormulaCheck = formula_check(schedule, num_stages, num_micro_batches, costs)
    timeline = [[(op.name, _round(s), _round(e)) for op, s, e in zip(p.ops, timing.starts[r], timing.ends[r],
                                                                       strict=True)]
                for r, p in enumerate(programs)]
    peaks = [_peak_activations(p) for p in programs]
    return ScheduleResult(
        schedule=schedule,
        comm_model=model,
        num_stages=num_stages,
        num_ranks=len(programs),
        num_micro_batches=num_micro_batches,
        costs=costs,
        makespan=makespan,
        bubble=bubble,
        formula_bubble=_round(check.bubble),
        formula_exact=check.exact,
        formula_matches=math.isclose(bubble, check.bubble, rel_tol=0, abs_tol=1e-6),
        formula_regime=check.regime,
        formula_makespan=None if check.makespan is None else _round(check.makespan),
        peak_activations=max(peaks),
        peak_activations_per_rank=peaks,
        busy_per_rank=busy,
        idle_per_rank=idle,
        num_ops_per_rank=[len(p.ops) for p in programs],
        num_overlapped_per_rank=[sum(op.kind == "FB" for op in p.ops) for p in programs],
        ops=[[op.name for op in p.ops] for p in programs],
        timeline=timeline,
    )
