"""dsctl.eplb.metrics: before/after GPU loads, balancedness and the lower bounds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.eplb.bounds import (
    equal_partitions,
    global_lower_bound,
    hierarchical_lower_bound,
    min_max_replica_load,
    num_partitions,
)
from dsctl.eplb.checks import check_layout
from dsctl.eplb.metrics import contiguous_loads, placement_metrics
from dsctl.eplb.reference import rebalance_reference

README_WEIGHT = np.array([
    [90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
    [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27],
])


def test_contiguous_before_placement() -> None:
    loads = contiguous_loads(np.array([[1.0, 2, 3, 4, 5, 6]]), 3)
    assert loads.tolist() == [[3.0, 7.0, 11.0]]
    # not divisible: contiguous blocks of 3 and 2 experts (e -> floor(e * G / E))
    assert contiguous_loads(np.array([[1.0, 2, 3, 4, 5]]), 2).tolist() == [[6.0, 9.0]]


def test_m_star_is_the_apportionment_optimum() -> None:
    # 3 slots for loads 10 and 4: counts (2, 1) give max(5, 4) = 5
    assert min_max_replica_load(np.array([[10.0, 4.0]]), 3).tolist() == [5.0]
    assert min_max_replica_load(np.array([[10.0, 4.0]]), 2).tolist() == [10.0]


def test_readme_metrics_and_bounds() -> None:
    layout = check_layout(2, 12, 16, 4, 2, 8)
    p = rebalance_reference(README_WEIGHT, 16, 4, 2, 8)
    m = placement_metrics(README_WEIGHT, p, layout)
    assert m.after.max_gpu_load.tolist() == [156.0, 179.5]
    assert m.bound_kind == "hierarchical"
    assert np.all(m.lower_bound_gpu_load <= m.after.max_gpu_load)
    assert np.all(m.lower_bound_gpu_load >= m.after.mean_gpu_load)
    # layer 0: the mean; layer 1: replica granularity lifts the bound above the mean 161.25 (2 slots per GPU: at
    # most 4 replicas above T / 2 fit, the exact optimum is 179.5)
    assert m.lower_bound_gpu_load[0] == 146.75
    assert 171.9 < m.lower_bound_gpu_load[1] <= 172.0
    summary = m.summary()
    assert summary["worst_layer"] == 1
    assert summary["mean_balancedness_after"] == pytest.approx((129.125 / 156 + 144.5 / 179.5) / 2)
    data = m.to_data()
    assert set(data["layers"][0]) == {"layer", "before", "after", "bound", "gap_to_bound"}
    assert set(data["layers"][0]["after"]) == {"gpu_loads", "max_gpu_load", "mean_gpu_load", "balancedness"}


def test_all_zero_layer_is_balanced() -> None:
    layout = check_layout(1, 8, 8, 2, 2, 4)
    w = np.zeros((1, 8))
    m = placement_metrics(w, rebalance_reference(w, 8, 2, 2, 4), layout)
    assert m.after.balancedness.tolist() == [1.0] and m.balancedness_bound.tolist() == [1.0]


def test_partition_enumeration_counts() -> None:
    assert len(equal_partitions(tuple(range(8)), 2)) == num_partitions(8, 2) == 105
    assert len(equal_partitions(tuple(range(8)), 4)) == num_partitions(8, 4) == 35
    assert len(equal_partitions(tuple(range(8)), 1)) == 1
    parts = equal_partitions(tuple(range(6)), 3)
    assert all(sorted(x for block in part for x in block) == list(range(6)) for part in parts)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**16), st.sampled_from([(16, 4, 2, 4, 24), (32, 8, 4, 8, 48), (16, 4, 1, 4, 20)]))
def test_bounds_never_exceed_the_reference_max_load(seed: int, shape: tuple[int, ...]) -> None:
    experts, groups, nodes, gpus, replicas = shape
    w = np.random.default_rng(seed).lognormal(0, 1.5, (2, experts))
    layout = check_layout(2, experts, replicas, groups, nodes, gpus)
    p = rebalance_reference(w, replicas, groups, nodes, gpus)
    m = placement_metrics(w, p, layout)
    assert np.all(m.lower_bound_gpu_load <= m.after.max_gpu_load * (1 + 1e-6))
    hier = hierarchical_lower_bound(w, replicas, groups, nodes, gpus)
    assert np.all(global_lower_bound(w, replicas, gpus) <= hier * (1 + 1e-9))
    assert np.all((m.balancedness_bound >= m.after.balancedness - 1e-9) & (m.balancedness_bound <= 1 + 1e-12))
