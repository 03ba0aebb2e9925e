"""The exact EPLB solver (dsctl.eplb.exact, branch and bound with bounds and symmetry cuts) against a brute force
written here without any of its ideas: every count vector, and for each an exact dynamic programme over subsets
of replicas (the best split into GPUs of exactly k replicas). Tiny instances only: the brute force is exponential.
"""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np
import pytest

from dsctl.eplb.exact import solve


def count_vectors(num_experts: int, num_slots: int) -> list[tuple[int, ...]]:
    """Every (r_1..r_X), r_e >= 1, summing to ``num_slots`` (stars and bars)."""
    out = []
    for bars in itertools.combinations(range(1, num_slots), num_experts - 1):
        edges = (0, *bars, num_slots)
        out.append(tuple(b - a for a, b in itertools.pairwise(edges)))
    return out


def best_split(items: tuple[float, ...], per_gpu: int) -> float:
    """Smallest possible largest group sum when ``items`` are cut into groups of exactly ``per_gpu``."""
    n = len(items)

    @cache
    def f(mask: int) -> float:
        if mask == 0:
            return 0.0
        low = (mask & -mask).bit_length() - 1  # the group holding the lowest item left: fixes one order
        rest = [i for i in range(n) if mask >> i & 1 and i != low]
        best = float("inf")
        for others in itertools.combinations(rest, per_gpu - 1):
            group = (low, *others)
            used = sum(1 << i for i in group)
            best = min(best, max(sum(items[i] for i in group), f(mask & ~used)))
        return best

    return f((1 << n) - 1)


def brute_global(weight: np.ndarray, num_slots: int, num_gpus: int) -> float:
    per_gpu = num_slots // num_gpus
    best = float("inf")
    for counts in count_vectors(len(weight), num_slots):
        items = tuple(float(w) / r for w, r in zip(weight, counts, strict=True) for _ in range(r))
        best = min(best, best_split(items, per_gpu))
    return best


def brute_hierarchical(weight: np.ndarray, num_slots: int, num_gpus: int, num_groups: int, num_nodes: int) -> float:
    """Groups of experts split equally over nodes (every split tried); each node solved by brute force."""
    size = len(weight) // num_groups
    per_node = num_groups // num_nodes
    best = float("inf")
    for order in itertools.permutations(range(num_groups)):
        blocks = [sorted(order[i * per_node:(i + 1) * per_node]) for i in range(num_nodes)]
        worst = max(brute_global(np.concatenate([weight[g * size:(g + 1) * size] for g in block]),
                                 num_slots // num_nodes, num_gpus // num_nodes) for block in blocks)
        best = min(best, worst)
    return best


def instances() -> list[tuple[str, np.ndarray, int, int, int, int]]:
    rng = np.random.default_rng(31)
    out: list[tuple[str, np.ndarray, int, int, int, int]] = []
    shapes = [(3, 2, 2), (4, 2, 3), (4, 4, 1), (5, 3, 2), (5, 4, 2), (6, 3, 2), (4, 3, 2), (6, 2, 4)]
    for i in range(48):
        experts, gpus, k = shapes[i % len(shapes)]
        w = np.round(rng.lognormal(0, 1.3, experts) * 50) + 1
        out.append(("global", w, gpus * k, gpus, 1, 1))
    for _ in range(12):  # 4 groups of 1-2 experts on 2 nodes of 2 GPUs x 2 slots
        w = np.round(rng.lognormal(0, 1.3, 4) * 50) + 1
        out.append(("hierarchical", w, 8, 4, 4, 2))
    return out


@pytest.mark.parametrize(("kind", "weight", "slots", "gpus", "groups", "nodes"), instances(),
                         ids=[f"{k}{i}" for i, (k, *_) in enumerate(instances())])
def test_exact_solver_agrees_with_brute_force(kind: str, weight: np.ndarray, slots: int, gpus: int, groups: int,
                                              nodes: int) -> None:
    got = solve(weight[None, :], slots, gpus, groups, nodes)
    expected = brute_global(weight, slots, gpus) if kind == "global" else \
        brute_hierarchical(weight, slots, gpus, groups, nodes)
    assert got.proved[0]
    assert got.optimum[0] == pytest.approx(expected, rel=1e-9)


def test_brute_force_itself_on_a_hand_case() -> None:
    # two experts 6 and 2 on 2 GPUs x 2 slots: counts (3, 1) give 2,2,2 | 2 -> GPUs 4 and 4
    assert brute_global(np.array([6.0, 2.0]), 4, 2) == pytest.approx(4.0)
    assert best_split((5.0, 1.0, 4.0, 2.0), 2) == pytest.approx(6.0)
