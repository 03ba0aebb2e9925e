"""Bookkeeping of the automatic pipeline-degree search: why each candidate ``pp`` was passed over.

``dsctl launch`` without ``--pp`` tries the valid pipeline degrees in increasing order and takes the first whose
worst GPU fits in HBM (``dsctl.launch.plan``). Each degree it looks at becomes a :class:`PPCandidate`: either a
valid layout with its memory estimate, or one rejected by a rule (the batch does not split over its ``dp``, too
few micro-batches for the schedule) together with the memory it *would* need, so that the explanation and the
error name the layout dsctl would otherwise have chosen, not merely the first degree it tried.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from dsctl.errors import InputError
from dsctl.launch.layout import min_micro_batches
from dsctl.launch.memory import MemoryEstimate
from dsctl.units import GIB


@dataclass(frozen=True)
class PPCandidate:
    """One pipeline degree the search looked at.

    ``label``: the layout (``PP16 EP64 TP1 DP128``) or ``pp N`` when even its structure is invalid.
    ``error``: the rule the requested batch breaks (None for a valid candidate), ``hint`` its hint.
    ``memory``: the memory estimate with the requested batch (valid candidate) or, for a rejected one, with the
    requested batch as far as it resolves (else the default batch) ignoring the broken rule; None if the
    layout itself is invalid.
    """

    pp: int
    dp: int
    label: str
    error: str | None = None
    hint: str | None = None
    memory: MemoryEstimate | None = None

    @property
    def fits(self) -> bool:
        """The candidate's memory fits in HBM (False when unknown)."""
        return self.memory is not None and self.memory.fits


def gib(num_bytes: float) -> str:
    """``69.1 GiB``."""
    return f"{num_bytes / GIB:.1f} GiB"


def rejection_reason(candidate: PPCandidate, terse: bool = False) -> str:
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


def preferred_candidate(considered: Sequence[PPCandidate]) -> tuple[PPCandidate, str]:
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


def batch_suggestion(schedule: str, pp: int, dp: int, global_batch: int | None,
                     micro_batches: int | None) -> str | None:
    """Options that make the batch valid for ``pp`` / ``dp``: the smallest values at or above the given ones.

    Rules (``dsctl.launch.layout.check_schedule_layout``): the global batch splits evenly over ``dp`` and over the
    micro-batches; micro-batches >= 2 x pp (DualPipe(V)) or pp, and even for DualPipe. None if nothing to change.
    """
    least = min_micro_batches(schedule, pp)

    def even(x: int) -> int:
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
    if global_batch is not None:
        per_replica = even(max(math.ceil(global_batch / dp), least))
        if dp * per_replica == global_batch:
            return None
        return f"--global-batch {dp * per_replica} (dp {dp} x {per_replica} micro-batches of 1 sequence)"
    return None


def no_layout_error(considered: Sequence[PPCandidate], num_nodes: int, schedule: str,
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


def rejection_lines(considered: Sequence[PPCandidate], chosen_pp: int) -> list[str]:
    """One "why this layout" line per candidate passed over, with its reason."""
    return [f"pp {c.pp} rejected: {rejection_reason(c)}" for c in considered if c.pp != chosen_pp]


def missed_fit_notes(considered: Sequence[PPCandidate], chosen_fits: bool, schedule: str,
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
