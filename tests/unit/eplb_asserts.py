"""EPLB placement invariants and small hypothesis layouts shared by the reference, balanced and migration tests."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from dsctl.eplb.placement import Placement


def assert_valid(p: Placement, num_experts: int, num_replicas: int) -> None:
    """Shapes; every expert has >= 1 replica; rows sum to R; log2phy lists exactly each expert's slots, -1 after."""
    layers = p.phy2log.shape[0]
    assert p.phy2log.shape == (layers, num_replicas)
    assert np.all(p.logcnt >= 1)
    assert np.all(p.logcnt.sum(axis=1) == num_replicas)
    assert p.log2phy.shape == (layers, num_experts, int(p.logcnt.max()))
    for layer in range(layers):
        counts = np.bincount(p.phy2log[layer], minlength=num_experts)
        assert np.array_equal(counts, p.logcnt[layer])
        for e in range(num_experts):
            row = p.log2phy[layer, e]
            assert sorted(row[: p.logcnt[layer, e]].tolist()) == np.flatnonzero(p.phy2log[layer] == e).tolist()
            assert np.all(row[p.logcnt[layer, e] :] == -1)


def assert_hierarchical(p: Placement, num_groups: int, num_nodes: int) -> None:
    """Every group's experts and all their replicas on one node."""
    layers, num_slots = p.phy2log.shape
    group_size = p.logcnt.shape[1] // num_groups
    node_of_slot = np.arange(num_slots) // (num_slots // num_nodes)
    for layer in range(layers):
        group_of_slot = p.phy2log[layer] // group_size
        for g in range(num_groups):
            assert len(set(node_of_slot[group_of_slot == g].tolist())) == 1


def draw_shape(draw: st.DrawFn, node_choices: tuple[int, ...] = (1, 2, 4)) -> tuple[int, int, int, int, int, int]:
    """A small valid EPLB layout for hypothesis: (layers, experts, replicas, groups, nodes, gpus).

    Groups divide evenly over nodes and experts over groups; replicas are a multiple of GPUs and >= experts.
    """
    nodes = draw(st.sampled_from(node_choices))
    groups = nodes * draw(st.integers(1, 3))
    experts = groups * draw(st.integers(1, 4))
    gpus = nodes * draw(st.integers(1, 3))
    per_gpu = draw(st.integers(1, 4))
    replicas = gpus * per_gpu
    if replicas < experts:
        replicas = gpus * -(-experts // gpus) * per_gpu
    layers = draw(st.integers(1, 3))
    return layers, experts, replicas, groups, nodes, gpus
