"""Migration-aware EPLB: few replicas moved, within tolerance, never more than the unconstrained plan."""

from __future__ import annotations

import numpy as np
import pytest
from eplb_asserts import assert_hierarchical, assert_valid, draw_shape
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.eplb.balanced import rebalance_balanced
from dsctl.eplb.migration import MigrationResult, rebalance_with_previous, relabel_to_match
from dsctl.eplb.placement import Placement, balancedness, gpu_loads, placement_from_phy2log
from dsctl.eplb.reference import rebalance_reference
from dsctl.errors import InputError


def assert_result(r: MigrationResult, previous: Placement, weight: np.ndarray, num_gpus: int) -> None:
    moved = (r.placement.phy2log != previous.phy2log).sum(axis=1)
    assert np.array_equal(moved, r.replicas_moved_per_layer)
    assert r.replicas_moved == int(moved.sum())
    assert np.all(r.replicas_moved_per_layer <= r.unconstrained_moved_per_layer)
    achieved = balancedness(gpu_loads(weight, r.placement.phy2log, r.placement.logcnt, num_gpus))
    assert np.allclose(achieved, r.balancedness)
    assert np.all(achieved >= r.target_balancedness * (1 - r.tolerance) - 1e-12)


@st.composite
def drift_cases(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int, int, int, int, str, float]:
    layers, experts, replicas, groups, nodes, gpus = draw_shape(draw, node_choices=(1, 2))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    old = rng.lognormal(0, 1.0, (layers, experts))
    drift = draw(st.sampled_from([0.0, 0.1, 0.5]))
    new = old * np.exp(drift * rng.standard_normal(old.shape))
    policy = draw(st.sampled_from(["hierarchical", "global"]))
    tolerance = draw(st.sampled_from([0.0, 0.01, 0.05]))
    return old, new, replicas, groups, nodes, gpus, policy, tolerance


@settings(max_examples=40, deadline=None)
@given(drift_cases(), st.sampled_from(["balanced", "reference"]))
def test_migration_invariants(case: tuple[np.ndarray, np.ndarray, int, int, int, int, str, float], algo: str) -> None:
    old, new, replicas, groups, nodes, gpus, policy, tolerance = case
    previous = rebalance_reference(old, replicas, groups, nodes, gpus, policy)
    r = rebalance_with_previous(new, previous, replicas, groups, nodes, gpus, policy, tolerance, algo)
    assert_valid(r.placement, new.shape[1], replicas)
    if policy == "hierarchical":
        assert_hierarchical(r.placement, groups, nodes)
    assert_result(r, previous, new, gpus)


def test_unchanged_loads_move_nothing() -> None:
    rng = np.random.default_rng(2)
    weight = rng.lognormal(0, 1.0, (3, 64))
    previous = rebalance_balanced(weight, 80, 8, 2, 16, "hierarchical")
    r = rebalance_with_previous(weight, previous, 80, 8, 2, 16, "hierarchical")
    assert r.replicas_moved == 0
    assert np.array_equal(r.placement.phy2log, previous.phy2log)


def test_drift_moves_fewer_than_unconstrained() -> None:
    rng = np.random.default_rng(4)
    old = rng.lognormal(0, 0.6, (4, 256))
    new = old * np.exp(0.1 * rng.standard_normal(old.shape))
    previous = rebalance_balanced(old, 288, 8, 4, 32, "hierarchical")
    r = rebalance_with_previous(new, previous, 288, 8, 4, 32, "hierarchical", tolerance=0.01)
    assert_result(r, previous, new, 32)
    assert_hierarchical(r.placement, 8, 4)
    assert r.replicas_moved < 0.5 * r.unconstrained_replicas_moved


def test_relabel_recovers_a_permuted_plan() -> None:
    rng = np.random.default_rng(6)
    weight = rng.lognormal(0, 1.0, (2, 32))
    plan = rebalance_reference(weight, 48, 4, 2, 8, "hierarchical").phy2log
    # swap the two nodes and shuffle GPUs inside each node and slots inside each GPU
    shuffled = plan.reshape(2, 2, 4, 6)[:, ::-1][:, :, [2, 0, 3, 1]][:, :, :, ::-1].reshape(2, 48)
    assert np.array_equal(relabel_to_match(shuffled, plan, 32, 8, 2), plan)


def test_bad_previous_shape() -> None:
    weight = np.ones((2, 8))
    previous = placement_from_phy2log(np.tile(np.arange(8), (3, 1)), 8)
    with pytest.raises(InputError, match="previous placement has phy2log shape"):
        rebalance_with_previous(weight, previous, 8, 1, 1, 4, "global")


def test_bad_previous_missing_expert() -> None:
    weight = np.ones((1, 4))
    previous = placement_from_phy2log(np.array([[0, 0, 1, 2]]), 4)
    with pytest.raises(InputError, match="no replica of expert 3"):
        rebalance_with_previous(weight, previous, 4, 1, 1, 2, "global")


def test_bad_tolerance() -> None:
    weight = np.ones((1, 4))
    previous = placement_from_phy2log(np.array([[0, 1, 2, 3]]), 4)
    with pytest.raises(InputError, match="tolerance"):
        rebalance_with_previous(weight, previous, 4, 1, 1, 2, "global", tolerance=1.5)
