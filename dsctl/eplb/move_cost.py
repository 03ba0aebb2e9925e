"""A migration's moves priced against its gain: the planned fabric they are timed on (:class:`Fabric`), the timed
moves (:class:`MoveTime`) and the payback arithmetic. Types and arithmetic only, so that ``dsctl.eplb.pareto`` and
``dsctl.eplb.rebalance`` do not load the fabric simulator; :func:`dsctl.eplb.move_time.time_moves` does the timing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MoveFabric:
    """A planned fabric to time moves on: the plan.json text, its name, NVLink bytes/s per direction per GPU."""

    plan_text: str
    plan_name: str
    nvlink_bytes_per_s: float
    routing: str = "adaptive"
    #: re-solve rates as copies finish (``topology simulate --reflow``): a bulk copy of unequal sizes is far from
    #: its steady rates (V3 prefill on 4 nodes: 55 ms steady vs 19 ms with reflow = the busiest link's bound)
    reflow: bool = True


@dataclass(frozen=True)
class MoveTime:
    """One candidate's moves on the fabric: ``move_s`` seconds (all at once), copies by path, bytes on the network."""

    move_s: float
    lower_bound_s: float
    local_copies: int  # source on the destination GPU: no traffic
    nvlink_copies: int
    network_copies: int
    network_bytes: int


def break_even_steps(move_s: float, gain: float, step_time_s: float | None) -> float | None:
    """Steps after which the moves pay back (``move_s / (gain * step_time_s)``); None without a step time or gain;
    ``inf`` when the gain is nil and something moves."""
    if step_time_s is None:
        return None
    return payback_s(move_s, gain) / step_time_s


def payback_s(move_s: float, gain: float) -> float:
    """Seconds of load-bound step time after which the moves pay back: ``move_s / gain`` (0 when nothing moves,
    ``inf`` when the gain is <= 0)."""
    if move_s <= 0:
        return 0.0
    return move_s / gain if gain > 0 else float("inf")
