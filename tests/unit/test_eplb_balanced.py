"""Balanced EPLB mode: structure, hierarchy, never worse than the reference per layer, gains on skewed loads."""

from __future__ import annotations

import numpy as np
import pytest
from eplb_asserts import assert_hierarchical, assert_valid, draw_shape
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.eplb.balanced import rebalance_balanced
from dsctl.eplb.bounds import global_lower_bound, hierarchical_lower_bound, min_max_replica_load
from dsctl.eplb.placement import Placement, balancedness, gpu_loads
from dsctl.eplb.reference import rebalance_reference

README_WEIGHT = np.array(
    [
        [90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
        [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27],
    ]
)


def max_loads(weight: np.ndarray, p: Placement, num_gpus: int) -> np.ndarray:
    return gpu_loads(weight, p.phy2log, p.logcnt, num_gpus).max(axis=1)


def co_located(p: Placement, num_gpus: int) -> int:
    """Number of extra replicas sharing a GPU with another replica of the same expert."""
    layers, num_slots = p.phy2log.shape
    per_gpu = np.sort(p.phy2log.reshape(layers, num_gpus, num_slots // num_gpus), axis=2)
    return int((per_gpu[:, :, 1:] == per_gpu[:, :, :-1]).sum())


def zipf_loads(layers: int, experts: int, s: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((layers, experts))
    for layer in range(layers):
        ranks = rng.permutation(experts) + 1
        out[layer] = np.round(1e5 * ranks ** (-s) * np.exp(0.1 * rng.standard_normal(experts)))
    return out


@st.composite
def layouts(draw: st.DrawFn) -> tuple[np.ndarray, int, int, int, int, str]:
    layers, experts, replicas, groups, nodes, gpus = draw_shape(draw)
    kind = draw(st.sampled_from(["int", "lognormal", "zipf", "zeros"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if kind == "int":
        weight = rng.integers(0, 20, size=(layers, experts)).astype(float)
    elif kind == "lognormal":
        weight = rng.lognormal(0, 1.5, (layers, experts))
    elif kind == "zipf":
        weight = zipf_loads(layers, experts, 1.2, int(rng.integers(0, 1000)))
    else:
        weight = np.zeros((layers, experts))
    policy = draw(st.sampled_from(["hierarchical", "global"]))
    return weight, replicas, groups, nodes, gpus, policy


@settings(max_examples=50, deadline=None)
@given(layouts())
def test_invariants_and_never_worse(case: tuple[np.ndarray, int, int, int, int, str]) -> None:
    weight, replicas, groups, nodes, gpus, policy = case
    experts = weight.shape[1]
    ref = rebalance_reference(weight, replicas, groups, nodes, gpus, policy)
    bal = rebalance_balanced(weight, replicas, groups, nodes, gpus, policy)
    assert_valid(bal, experts, replicas)
    if policy == "hierarchical":
        assert_hierarchical(bal, groups, nodes)
    assert np.all(max_loads(weight, bal, gpus) <= max_loads(weight, ref, gpus))
    # never below the lower bound (sanity of both)
    bound = (
        hierarchical_lower_bound(weight, replicas, groups, nodes, gpus)
        if policy == "hierarchical"
        else global_lower_bound(weight, replicas, gpus)
    )
    assert np.all(max_loads(weight, bal, gpus) >= bound * (1 - 1e-9))


def test_readme_example_not_worse() -> None:
    bal = rebalance_balanced(README_WEIGHT, 16, 4, 2, 8, "hierarchical")
    assert_valid(bal, 12, 16)
    assert_hierarchical(bal, 4, 2)
    peak = max_loads(README_WEIGHT, bal, 8)
    assert peak[0] <= 156.0 and peak[1] <= 179.5


def test_deterministic() -> None:
    weight = zipf_loads(3, 64, 1.0, seed=3)
    first = rebalance_balanced(weight, 80, 8, 2, 16, "hierarchical")
    second = rebalance_balanced(weight, 80, 8, 2, 16, "hierarchical")
    assert np.array_equal(first.phy2log, second.phy2log)


@pytest.mark.parametrize(
    ("policy", "replicas", "nodes", "gpus", "min_gain"),
    [("hierarchical", 288, 4, 32, 0.03), ("global", 320, 8, 64, 0.05)],
)
def test_v3_shape_gain_on_skewed_loads(policy: str, replicas: int, nodes: int, gpus: int, min_gain: float) -> None:
    weight = zipf_loads(4, 256, 1.2, seed=11)
    ref = rebalance_reference(weight, replicas, 8, nodes, gpus, policy)
    bal = rebalance_balanced(weight, replicas, 8, nodes, gpus, policy)
    ref_bal = balancedness(gpu_loads(weight, ref.phy2log, ref.logcnt, gpus))
    new_bal = balancedness(gpu_loads(weight, bal.phy2log, bal.logcnt, gpus))
    assert np.all(new_bal >= ref_bal)
    assert new_bal.mean() - ref_bal.mean() >= min_gain
    if policy == "hierarchical":
        assert_hierarchical(bal, 8, nodes)


def test_global_swap_reaches_bound_on_mild_skew() -> None:
    rng = np.random.default_rng(5)
    weight = rng.lognormal(0, 0.6, (3, 64))
    bal = rebalance_balanced(weight, 80, 8, 16, 16, "global")
    bound = global_lower_bound(weight, 80, 16)
    assert np.all(max_loads(weight, bal, 16) <= bound * 1.01)


def test_one_slot_per_gpu_keeps_reference_quality() -> None:
    weight = zipf_loads(2, 16, 1.0, seed=1)
    ref = rebalance_reference(weight, 32, 4, 2, 32, "global")
    bal = rebalance_balanced(weight, 32, 4, 2, 32, "global")
    assert np.allclose(max_loads(weight, bal, 32), max_loads(weight, ref, 32))


def test_spreads_co_located_replicas() -> None:
    # the reference's greedy packs equal replicas of one expert onto one GPU here; the balanced mode does not
    weight = np.array([[60.0, 60.0, 30.0, 30.0, 10.0, 10.0, 5.0, 5.0]])
    ref = rebalance_reference(weight, 12, 1, 1, 4, "global")
    bal = rebalance_balanced(weight, 12, 1, 1, 4, "global")
    assert np.all(max_loads(weight, bal, 4) <= max_loads(weight, ref, 4))
    assert co_located(bal, 4) <= co_located(ref, 4)
    assert co_located(bal, 4) == 0


def test_all_zero_layer() -> None:
    weight = np.zeros((2, 16))
    bal = rebalance_balanced(weight, 20, 4, 2, 4, "hierarchical")
    assert_valid(bal, 16, 20)
    assert_hierarchical(bal, 4, 2)


def test_bounds_small_cases() -> None:
    assert min_max_replica_load(np.array([[10.0, 1.0]]), 4).tolist() == [10.0 / 3]
    weight = np.array([[4.0, 4.0, 4.0, 4.0]])
    assert global_lower_bound(weight, 4, 2).tolist() == [8.0]
    # two groups of two experts on two nodes of one GPU each: the heavy group sits alone on a node
    weight = np.array([[9.0, 9.0, 1.0, 1.0]])
    assert hierarchical_lower_bound(weight, 4, 2, 2, 2).tolist() == [18.0]
