"""Balance versus migration (dsctl.eplb.pareto through rebalance --previous) on a drifting workload."""

from __future__ import annotations

import numpy as np
import pytest

from dsctl.eplb.rebalance import rebalance
from dsctl.eplb.request import RebalanceRequest
from dsctl.errors import InputError

LAYOUT = {"replicas": 288, "gpus": 32, "nodes": 4, "groups": 8}


def drift_windows(num_windows: int, layers: int = 6, sigma: float = 0.1, seed: int = 0) -> list[np.ndarray]:
    """The generated drift model of docs/eplb.md: lognormal(0, 1) expert loads (x 1000 tokens), each window
    multiplying every load by exp(sigma * N(0, 1)) (a random walk in log load)."""
    rng = np.random.default_rng(seed)
    w = rng.lognormal(0, 1.0, (layers, 256)) * 1000
    out = [np.round(w)]
    for _ in range(num_windows - 1):
        w = w * np.exp(sigma * rng.standard_normal(w.shape))
        out.append(np.round(w))
    return out


def test_drifting_windows_near_unconstrained_balance_moving_few_replicas() -> None:
    windows = drift_windows(4)
    plan = rebalance(windows[0], RebalanceRequest(**LAYOUT, algorithm="balanced")).placement
    for w in windows[1:]:
        res = rebalance(w, RebalanceRequest(**LAYOUT, algorithm="balanced", previous=plan, tolerance=0.02))
        trade = res.trade_off
        assert trade is not None and res.migration is not None
        unconstrained = next(p for p in trade.points if p.tolerance == 0.0)
        achieved = float(res.metrics.after.balancedness.mean())
        assert achieved >= 0.98 * unconstrained.mean_balancedness  # within 2% of the unconstrained balance
        assert res.migration.replicas_moved <= 0.25 * trade.num_slots  # moving at most 25% of the replicas
        assert trade.points[0].tolerance is None and trade.points[0].replicas_moved == 0
        front = [p for p in trade.points if p.on_front]
        assert front and all(p.within_budget for p in trade.points)
        plan = res.placement


def test_budget_and_not_worth_it() -> None:
    w0, w1 = drift_windows(2)
    plan = rebalance(w0, RebalanceRequest(**LAYOUT, algorithm="balanced")).placement
    free = rebalance(w1, RebalanceRequest(**LAYOUT, algorithm="balanced", previous=plan))
    assert free.trade_off is not None and free.trade_off.worth_it and free.migration is not None
    budget = max(1, free.migration.replicas_moved // 4)
    capped = rebalance(w1, RebalanceRequest(**LAYOUT, algorithm="balanced", previous=plan, max_moves=budget))
    assert capped.migration is not None and capped.migration.replicas_moved <= budget
    assert capped.trade_off is not None
    assert all(p.within_budget == (p.replicas_moved <= budget) for p in capped.trade_off.points)
    gain = free.trade_off.points[free.trade_off.chosen].gain
    keep = rebalance(w1, RebalanceRequest(**LAYOUT, algorithm="balanced", previous=plan,
                                          min_gain=min(0.99, gain + 0.01)))
    assert keep.trade_off is not None and not keep.trade_off.worth_it
    assert "not worth it" in keep.trade_off.reason and keep.migration is not None
    assert keep.migration.replicas_moved == 0 and np.array_equal(keep.placement.phy2log, plan.phy2log)
    with pytest.raises(InputError, match=r"^max_moves 3 only applies with a previous placement"):
        rebalance(w1, RebalanceRequest(**LAYOUT, max_moves=3))
    with pytest.raises(InputError, match="needs the expert size"):
        rebalance(w1, RebalanceRequest(**LAYOUT, previous=plan, max_move_bytes=10))
