"""Exact optimum (dsctl.eplb.exact) against the bounds and the balanced mode on small instances."""

from __future__ import annotations

import numpy as np
import pytest
from eplb_asserts import assert_hierarchical, assert_valid

from dsctl.eplb.balanced import rebalance_balanced
from dsctl.eplb.bounds import global_lower_bound, hierarchical_lower_bound, slot_bound
from dsctl.eplb.exact import solve
from dsctl.eplb.placement import gpu_loads, placement_from_phy2log

#: vllm-ascend#3042: 8 experts on 8 GPUs x 2 slots; DeepSeek EPLB 232, FlashLB 205, mean 181.25
ASCEND_3042 = np.array([[600.0, 560, 120, 120, 20, 10, 10, 10]])


def max_load(weight: np.ndarray, phy2log: np.ndarray, num_gpus: int) -> np.ndarray:
    p = placement_from_phy2log(phy2log, weight.shape[1])
    return gpu_loads(weight, p.phy2log, p.logcnt, num_gpus).max(axis=1)


def test_vllm_ascend_3042_example_is_proved_optimal() -> None:
    exact = solve(ASCEND_3042, 16, 8)
    assert exact.proved.tolist() == [True]
    assert exact.optimum[0] == pytest.approx(590 / 3)  # 560 / 3 + 10 = 196.67
    assert max_load(ASCEND_3042, exact.phy2log, 8)[0] == pytest.approx(590 / 3)
    balanced = rebalance_balanced(ASCEND_3042, 16, 1, 1, 8, "global")
    assert gpu_loads(ASCEND_3042, balanced.phy2log, balanced.logcnt, 8).max() == pytest.approx(590 / 3)
    # proved from the balanced plan as the incumbent: nothing better exists
    proof = solve(ASCEND_3042, 16, 8, start=np.array([590 / 3]))
    assert proof.proved.tolist() == [True] and not proof.improved.any()
    assert global_lower_bound(ASCEND_3042, 16, 8)[0] == pytest.approx(181.25)


def test_exact_beats_a_bad_start_and_returns_a_valid_plan() -> None:
    exact = solve(ASCEND_3042, 16, 8, start=np.array([232.0]))  # DeepSeek EPLB's max load
    assert exact.improved.tolist() == [True] and exact.optimum[0] == pytest.approx(590 / 3)
    assert_valid(placement_from_phy2log(exact.phy2log, 8), 8, 16)


def test_three_slots_per_gpu_exact_by_search() -> None:
    # 6 equal experts, 9 slots on 3 GPUs: counts 2,2,2,1,1,1 -> 3 x 0.5 + ... the optimum is total / 3 = 2
    w = np.array([[1.0, 1, 1, 1, 1, 1]])
    exact = solve(w, 9, 3)
    assert exact.proved[0] and exact.optimum[0] == pytest.approx(2.0)


def _instances() -> list[tuple[np.ndarray, int, int, int, int, str]]:
    """50 random small instances: 25 global (5-9 experts, 4-8 GPUs, 2 slots, or 4 GPUs x 3 slots) and 25
    hierarchical (8 experts in 4 groups on 2 nodes, 4 or 8 GPUs); lognormal loads (sigma 1.2), integer tokens."""
    rng = np.random.default_rng(2026)
    out = []
    for i in range(50):
        if i % 2:
            gpus = int(rng.choice([4, 8]))
            k = 3 if gpus == 4 else 2
            w = np.round(rng.lognormal(0, 1.2, (1, 8)) * 100)
            out.append((w, k * gpus, 4, 2, gpus, "hierarchical"))
        else:
            experts = int(rng.integers(5, 10))
            gpus, k = (4, 3) if rng.random() < 0.3 else (int(rng.choice([4, 6, 8])), 2)
            if gpus * k < experts:
                gpus = 6
            w = np.round(rng.lognormal(0, 1.2, (1, experts)) * 100)
            out.append((w, k * gpus, 1, 1, gpus, "global"))
    return out


def test_balanced_within_one_percent_of_the_proved_optimum_on_50_small_instances() -> None:
    worst = 0.0
    for w, replicas, groups, nodes, gpus, policy in _instances():
        bal = rebalance_balanced(w, replicas, groups, nodes, gpus, policy)
        got = gpu_loads(w, bal.phy2log, bal.logcnt, gpus).max(axis=1)
        exact = solve(w, replicas, gpus, groups, nodes, start=got)
        assert exact.proved[0], (w, replicas, gpus, policy)
        optimum = exact.optimum[0]
        worst = max(worst, got[0] / optimum - 1)
        assert got[0] <= optimum * 1.01
        if policy == "hierarchical":
            bound = hierarchical_lower_bound(w, replicas, groups, nodes, gpus)
            assert_hierarchical(bal, groups, nodes)
        else:
            bound = global_lower_bound(w, replicas, gpus)
        assert bound[0] <= optimum * (1 + 1e-9)  # a bound never exceeds the proved optimum
    assert worst <= 0.01


def test_slot_bound_is_replica_granularity() -> None:
    # 3 GPUs x 2 slots, loads 4, 4, 4, 4, 1, 1: mean 6 and m* 4, but four replicas of 4 cannot sit on 3 GPUs
    # without two sharing one (no slot is left to split them): the bound is 8, which is the optimum
    w = np.array([[4.0, 4, 4, 4, 1, 1]])
    assert global_lower_bound(w, 6, 3)[0] == pytest.approx(8.0, rel=1e-8)
    assert global_lower_bound(w, 6, 3)[0] <= 8.0
    assert solve(w, 6, 3).optimum[0] == pytest.approx(8.0)
    assert slot_bound(w, 6, 3)[0] == pytest.approx(8.0, rel=1e-8)
