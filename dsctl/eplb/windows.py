"""Plans judged on the future: plan on window t, score on window t + 1, for several re-planning intervals.

Given statistics windows W_0 .. W_{T-1} (each [L, E], e.g. one file per minute of serving) and a re-planning
interval I: the plan in force for window t + 1 is the one computed from W_s, s = the latest multiple of I <= t.
Per interval (docs/eplb.md "Serving loop"):
- ``delivered``: mean over t = 0..T-2 of the balancedness (mean / max GPU load, averaged over layers) that plan
  gives on W_{t+1}: what serving actually sees; ``oracle``: the same windows planned on themselves (the hindsight
  ceiling, interval-independent).
- ``replicas_moved_per_window``: slots changed at each re-plan (the new plan relabelled to keep the old one's slots,
  ``migration.relabel_to_match``) divided by the windows scored.
- ``pays_off``: share of re-plans (t > 0) whose plan beats keeping the previous plan on W_{t+1} by at least
  ``min_gain`` (relative drop of the summed max GPU load).
The best interval is the longest whose delivered balancedness is within ``slack`` (relative) of the best delivered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from dsctl.eplb.balanced import rebalance_balanced
from dsctl.eplb.checks import EplbLayout, check_layout, check_planning_work, check_weight, planning_work
from dsctl.eplb.migration import relabel_to_match
from dsctl.eplb.placement import Placement, balancedness, gpu_loads, placement_from_phy2log
from dsctl.eplb.reference import rebalance_layout
from dsctl.errors import InputError

DEFAULT_INTERVALS = (1, 2, 4, 8)
DEFAULT_SLACK = 0.005


@dataclass(frozen=True)
class IntervalScore:
    """Scores of one re-planning interval (see module doc)."""

    interval: int
    delivered: float
    worst_window: float
    replicas_moved_per_window: float
    replans: int
    pays_off: float | None  # None when the interval never re-plans after the first window


@dataclass(frozen=True)
class WindowReplay:
    """Output of ``dsctl eplb replay``."""

    layout: EplbLayout
    algorithm: str
    num_windows: int
    oracle: float
    stale: float  # the first window's plan kept for every window (interval = infinity)
    scores: tuple[IntervalScore, ...]
    best_interval: int
    min_gain: float
    sources: tuple[str, ...] = ()


def _bal(weight: np.ndarray, plan: Placement, num_gpus: int) -> tuple[float, float]:
    loads = gpu_loads(weight, plan.phy2log, plan.logcnt, num_gpus)
    return float(balancedness(loads).mean()), float(loads.max(axis=1).sum())


def replay_windows(
    windows: Sequence[np.ndarray], *, num_replicas: int, num_gpus: int, num_nodes: int, num_groups: int,
    policy: str = "auto", algorithm: str = "balanced", intervals: Sequence[int] = DEFAULT_INTERVALS,
    min_gain: float = 0.02, slack: float = DEFAULT_SLACK, sources: tuple[str, ...] = (),
    progress: Callable[[int, int], None] | None = None,
) -> WindowReplay:
    """Score every interval over ``windows`` (each [L, E], same shape, at least 2); InputError on bad input."""
    if len(windows) < 2:
        raise InputError(f"replay needs at least 2 statistics windows (plan on one, score on the next), "
                         f"got {len(windows)}")
    if not 0.0 <= min_gain < 1.0:  # NaN fails both comparisons: refused too
        raise InputError(f"{min_gain} must be in [0, 1) (a relative drop of the summed max GPU load)", field="min_gain")
    if not intervals or any(i < 1 for i in intervals):
        raise InputError(f"values must be >= 1, got {list(intervals)}", field="intervals")
    checked = [check_weight(w, f"window {i}")[0] for i, w in enumerate(windows)]
    shapes = {w.shape for w in checked}
    if len(shapes) != 1:
        raise InputError(f"statistics windows differ in shape: {sorted(shapes)}; every window must be layers x "
                         "experts of the same model")
    layers, experts = checked[0].shape
    layout = check_layout(layers, experts, num_replicas, num_groups, num_nodes, num_gpus, policy)
    check_planning_work(len(checked) * planning_work(layers, num_replicas, algorithm),
                        f"replay of {len(checked)} windows with --algorithm {algorithm}")
    report = progress if progress is not None else (lambda done, total: None)
    plans: list[Placement] = []
    for t, w in enumerate(checked):
        if algorithm == "balanced":
            plans.append(rebalance_balanced(w, num_replicas, num_groups, num_nodes, num_gpus, layout.policy))
        elif algorithm == "reference":
            plans.append(rebalance_layout(w, layout))
        else:
            raise InputError(f"{algorithm!r} is not valid: choose reference or balanced", field="algorithm")
        report(t + 1, len(checked))
    horizon = len(checked) - 1
    oracle = float(np.mean([_bal(checked[t], plans[t], num_gpus)[0] for t in range(1, len(checked))]))
    stale = float(np.mean([_bal(checked[t + 1], plans[0], num_gpus)[0] for t in range(horizon)]))
    scores = []
    for interval in sorted(set(intervals)):
        current = plans[0]
        delivered, moved, replans, paid = [], 0, 0, 0
        for t in range(horizon):
            if t > 0 and t % interval == 0:
                aligned = relabel_to_match(plans[t].phy2log, current.phy2log, experts, num_gpus,
                                           layout.num_nodes_eff)
                new = placement_from_phy2log(aligned, experts)
                moved += int((aligned != current.phy2log).sum())
                replans += 1
                keep_load = _bal(checked[t + 1], current, num_gpus)[1]
                new_load = _bal(checked[t + 1], new, num_gpus)[1]
                paid += int(keep_load > 0 and 1.0 - new_load / keep_load >= min_gain)
                current = new
            delivered.append(_bal(checked[t + 1], current, num_gpus)[0])
        scores.append(IntervalScore(interval, float(np.mean(delivered)), float(np.min(delivered)), moved / horizon,
                                    replans, paid / replans if replans else None))
    top = max(s.delivered for s in scores)
    best = max(s.interval for s in scores if s.delivered >= top * (1.0 - slack))
    return WindowReplay(layout, algorithm, len(checked), oracle, stale, tuple(scores), best, min_gain, sources)
