"""Step 3 of the launch pipeline: the batch of a candidate layout (rule 5 of ``dsctl.launch.plan``).

``global_batch = dp x micro_batches x micro_batch_size`` sequences per step. ``--global-batch`` defaults to
DeepSeek-V3's 15,360; ``--micro-batches`` per pipeline per step defaults to one sequence per micro-batch
(global / dp, made even for DualPipe). The schedule's minimum (``dsctl.launch.rules``) is checked here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dsctl.errors import InputError
from dsctl.launch.request import LaunchRequest
from dsctl.launch.rules import check_schedule_layout, min_micro_batches

#: DeepSeek-V3's final global batch, in sequences
DEFAULT_GLOBAL_BATCH = 15_360


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


def resolve_batch(request: LaunchRequest, dp: int, pp: int) -> tuple[BatchPlan, list[str]]:
    """Global batch, micro-batches per pipeline and micro-batch size over ``dp`` replicas; notes on any rounding.
    Raises InputError when the given batch does not split (the schedule's minimum is :func:`checked_batch`'s)."""
    notes: list[str] = []
    if request.seq_len < 1:
        raise InputError(f"{request.seq_len} is not valid: it must be a whole number >= 1", field="seq_len")
    if request.micro_batches is not None and request.micro_batches < 1:
        raise InputError(f"{request.micro_batches} is not valid: it must be >= 1", field="micro_batches")
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
        raise InputError(f"{b} is not valid: it must be a whole number of sequences >= 1", field="global_batch")
    fix = batch_suggestion(request.schedule, pp, dp, b, request.micro_batches)
    if b % dp:
        raise InputError(f"{b} % dp {dp} = {b % dp}: every data-parallel replica needs the same number of "
                         "sequences", field="global_batch",
                         hint=f"use a multiple of {dp}" + (f", e.g. {fix}" if fix else ""))
    per_replica = b // dp
    if request.micro_batches is None:
        return BatchPlan(b, per_replica, 1, request.seq_len), notes
    m = request.micro_batches
    if per_replica % m:
        raise InputError(f"{b} / dp {dp} = {per_replica} sequences per replica is not a multiple of "
                         f"{{micro_batches}} {m}", field="global_batch", mentions=("micro_batches",),
                         hint=f"e.g. {fix}" if fix else None)
    return BatchPlan(b, m, per_replica // m, request.seq_len), notes


def micro_batch_source(request: LaunchRequest, dp: int, batch: BatchPlan) -> str | None:
    """How the micro-batch count came about, for schedule-rule errors (None: given as ``micro_batches``)."""
    if request.micro_batches is not None:
        return None
    if request.global_batch is not None:
        given = f"{request.option('global_batch')} {request.global_batch}"
        return f"{batch.micro_batches} micro-batches ({given} / dp {dp})"
    return f"{batch.micro_batches} micro-batches (default global batch)"


def checked_batch(request: LaunchRequest, schedule: str, pp: int, dp: int) -> tuple[BatchPlan, list[str]]:
    """:func:`resolve_batch` plus the schedule's rules on the micro-batches; an error without a hint gets the
    options that would fix it (:func:`batch_suggestion`)."""
    try:
        if request.micro_batches is not None:
            check_schedule_layout(schedule, pp, request.micro_batches)
        batch, notes = resolve_batch(request, dp, pp)
        check_schedule_layout(schedule, pp, batch.micro_batches, source=micro_batch_source(request, dp, batch))
    except InputError as exc:
        if exc.hint:
            raise
        fix = batch_suggestion(schedule, pp, dp, request.global_batch, request.micro_batches)
        raise InputError(exc.text, hint=f"use {fix}" if fix else None, field=exc.field, mentions=exc.mentions) from None
    return batch, notes


def batch_rules_pass(request: LaunchRequest, pp: int, dp: int) -> bool:
    """Whether the batch of ``request`` splits over ``dp`` and meets the schedule's minimum for ``pp``."""
    try:
        check_schedule_layout(request.schedule, pp, resolve_batch(request, dp, pp)[0].micro_batches)
    except InputError:
        return False
    return True


def batch_suggestion(schedule: str, pp: int, dp: int, global_batch: int | None,
                     micro_batches: int | None) -> str | None:
    """Options that make the batch valid for ``pp`` / ``dp``: the smallest values at or above the given ones.

    Rules (``dsctl.launch.rules.check_schedule_layout``): the global batch splits evenly over ``dp`` and over the
    micro-batches; micro-batches >= 2 x pp (DualPipe(V)) or pp, even for DualPipe, a multiple of pp for
    interleaved 1F1B. None if nothing to change.
    """
    least = min_micro_batches(schedule, pp)

    def even(x: int) -> int:
        if schedule == "interleaved":
            return x + (-x) % pp
        return x + x % 2 if schedule == "dualpipe" else x

    if micro_batches is not None and micro_batches >= 1:
        m = even(max(micro_batches, least))
        if global_batch is None:
            return f"--micro-batches {m}" if m != micro_batches else None
        size = max(1, math.ceil(global_batch / (dp * m)))
        total = dp * m * size
        parts = ([f"--micro-batches {m}"] if m != micro_batches else []) + (
            [f"--global-batch {total}"] if total != global_batch else [])
        if not parts:
            return None
        return " ".join(parts) + f" (dp {dp} x {m} micro-batches x {size} sequence(s))"
    total = global_batch if global_batch is not None else DEFAULT_GLOBAL_BATCH  # the default is 1 sequence each
    per_replica = even(max(math.ceil(total / dp), least))
    if dp * per_replica == total:
        return None
    return f"--global-batch {dp * per_replica} (dp {dp} x {per_replica} micro-batches of 1 sequence)"
