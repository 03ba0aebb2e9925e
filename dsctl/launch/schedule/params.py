"""Requirements each schedule puts on the pipeline size and the number of micro-batches."""

from __future__ import annotations

from dsctl.errors import InputError, one_of
from dsctl.launch.rules import SCHEDULES
from dsctl.launch.schedule.interleaved import INTERLEAVED_CHUNKS

#: stages x micro-batches above which a simulation would take too long to be useful interactively
MAX_STAGE_MICRO_BATCHES = 1_000_000


def check_schedule_params(schedule: str, num_stages: int, num_micro_batches: int) -> None:
    """Raise ``InputError`` naming the broken requirement of ``schedule``.

    ``num_stages`` is ``--pp`` (pipeline stages; DualPipeV runs them on ``num_stages / 2`` ranks),
    ``num_micro_batches`` is ``--micro-batches`` (total over both directions for DualPipe).

    - dualpipe: PP even and >= 2; micro-batches even and >= 2 x PP (every rank gets a steady-state step);
    - dualpipev: stages even and >= 2 (two per rank); micro-batches >= stages;
    - interleaved: stages a multiple of 2 (two chunks per rank) on >= 2 ranks; micro-batches a multiple of the
      ranks (Megatron-LM's rule for its virtual pipeline);
    - 1f1b, zb1p: PP >= 1; micro-batches >= 1.
    """
    if schedule not in SCHEDULES:
        raise InputError(f"{schedule!r} is not a known schedule; use {one_of(SCHEDULES)}", field="schedule")
    for option, value in (("pp", num_stages), ("micro_batches", num_micro_batches)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{value!r}: must be a whole number >= 1", field=option)
        if value > MAX_STAGE_MICRO_BATCHES:  # before any arithmetic: a 4,300-digit value cannot even be printed
            shown = f"{value:,}" if value < 10**30 else "a number of more than 30 digits"
            raise InputError(f"{shown}: at most {MAX_STAGE_MICRO_BATCHES:,} (the stages x micro-batches "
                             "limit of the simulator)", field=option)
    pp, mb = num_stages, num_micro_batches
    if schedule == "dualpipe":
        if pp < 2 or pp % 2:
            raise InputError(f"dualpipe needs an even --pp >= 2 (rank r holds stage r and its mirror "
                             f"PP-1-r): got --pp {pp}", hint="use --pp " + str(max(2, pp + pp % 2)))
        if mb % 2:
            raise InputError(f"dualpipe needs an even --micro-batches (half enter at each end): got {mb}",
                             hint=f"use --micro-batches {mb + 1}")
        if mb < 2 * pp:
            raise InputError(f"dualpipe needs --micro-batches >= 2 x --pp = {2 * pp}: got {mb}",
                             hint=f"use --micro-batches {2 * pp} or more, or a smaller --pp")
    elif schedule == "dualpipev":
        if pp < 2 or pp % 2:
            raise InputError(f"dualpipev needs an even number of stages --pp >= 2 (two stages per rank, "
                             f"{pp}/2 ranks): got --pp {pp}", hint="use --pp " + str(max(2, pp + pp % 2)))
        if mb < pp:
            raise InputError(f"dualpipev needs --micro-batches >= --pp (number of stages) = {pp}: got {mb}",
                             hint=f"use --micro-batches {pp} or more")
    elif schedule == "interleaved":
        v = INTERLEAVED_CHUNKS
        if pp < 2 * v or pp % v:
            raise InputError(f"interleaved needs --pp (number of stages) a multiple of {v} and >= {2 * v} ({v} "
                             f"chunks on each of at least 2 ranks): got --pp {pp}",
                             hint=f"use --pp {max(2 * v, pp + (-pp) % v)}")
        ranks = pp // v
        if mb % ranks:
            raise InputError(f"interleaved needs --micro-batches a multiple of its {ranks} ranks (--pp {pp} / {v}; "
                             f"Megatron-LM's rule): got {mb}", hint=f"use --micro-batches {mb + (-mb) % ranks}")
    if pp * mb > MAX_STAGE_MICRO_BATCHES:
        raise InputError(f"{pp} x {{micro_batches}} {mb} = {pp * mb:,} is too large to simulate "
                         f"(limit {MAX_STAGE_MICRO_BATCHES:,})", field="pp", mentions=("micro_batches",))
