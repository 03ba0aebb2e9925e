"""Op durations used by the schedule simulator, in arbitrary time units (README figures: one cell = 1)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dsctl.errors import InputError


@dataclass(frozen=True)
class OpCosts:
    """Durations of one chunk's work on one rank (same unit for all, e.g. milliseconds or figure cells).

    - ``f``: forward of one micro-batch through one stage;
    - ``b``: full backward (input gradient + weight gradient);
    - ``w``: weight-gradient part alone; the input-gradient part is ``i = b - w``;
    - ``fb``: one forward and one full backward overlapped as one op; ``None`` means ``f + b`` (no overlap gain).
    """

    f: float = 1.0
    b: float = 2.0
    w: float = 1.0
    fb: float | None = None

    @property
    def i(self) -> float:
        """Input-gradient-only backward: ``b - w``."""
        return self.b - self.w

    @property
    def fb_cost(self) -> float:
        """Duration of an overlapped forward+backward op (``fb`` or ``f + b``)."""
        return self.f + self.b if self.fb is None else self.fb

    def duration(self, kind: str) -> float:
        """Duration of an op of ``kind`` (F, B, I, W or FB)."""
        if kind == "F":
            return self.f
        if kind == "B":
            return self.b
        if kind == "I":
            return self.i
        if kind == "W":
            return self.w
        return self.fb_cost

    def validate(self) -> None:
        """Raise ``InputError`` naming the option (--f-cost, --b-cost, --w-cost, --fb-cost) whose value is
        impossible."""
        for option, value in (("f_cost", self.f), ("b_cost", self.b), ("w_cost", self.w), ("fb_cost", self.fb)):
            if value is None:
                continue
            if not math.isfinite(value) or value < 0:
                raise InputError(f"{value}: op costs must be finite and >= 0", field=option)
        if self.f <= 0 or self.b <= 0:
            raise InputError(f"{self.f} {{b_cost}} {self.b}: forward and backward costs must be > 0", field="f_cost",
                             mentions=("b_cost",))
        if self.w > self.b:
            raise InputError(f"{self.w} > {{b_cost}} {self.b}: the weight-gradient part W is a part of the full "
                             "backward B, so 0 <= W <= B (input-gradient part I = B - W)", field="w_cost",
                             mentions=("b_cost",))
        if self.fb is not None and self.fb <= 0:
            raise InputError(f"{self.fb}: an overlapped forward+backward must take > 0", field="fb_cost")


#: schedules with overlapped forward+backward ops (FB) and with weight-gradient ops (W) of their own
FB_SCHEDULES = ("dualpipe", "dualpipev")
W_SCHEDULES = ("dualpipe", "dualpipev", "zb1p")


def check_costs_apply(schedule: str, costs: OpCosts, w_given: bool) -> None:
    """Raise ``InputError`` when a cost was given that ``schedule`` never uses: ``fb`` outside DualPipe(V),
    whose FB ops are the only overlapped ones, or an explicit ``w`` (``w_given``) where every backward runs
    whole (1F1B, interleaved 1F1B), so the answer would silently not depend on it."""
    if costs.fb is not None and schedule not in FB_SCHEDULES:
        raise InputError(f"{costs.fb:g}: {schedule} never overlaps a forward with a backward; the overlapped cost "
                         f"applies to {' and '.join(FB_SCHEDULES)} only", field="fb_cost",
                         hint="leave it out, or choose --schedule dualpipe or dualpipev")
    if w_given and schedule not in W_SCHEDULES:
        raise InputError(f"{costs.w:g}: {schedule} runs every backward whole (B), never the weight-gradient part "
                         f"alone; it applies to {', '.join(W_SCHEDULES)}", field="w_cost",
                         hint="leave it out, or choose --schedule zb1p, dualpipe or dualpipev")
