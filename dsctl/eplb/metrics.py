"""Load metrics of a placement: per-GPU loads, max, mean, balancedness, and lower bounds on the max GPU load.

Definitions (per layer; loads in the statistics' unit, e.g. tokens):
- GPU load = sum over the GPU's slots of load(e) / logcnt(e); slot s is on GPU s // (R / G).
- balancedness = mean GPU load / max GPU load (1.0 = perfect; 1.0 for an all-zero layer).
- "before" = one copy per expert, contiguous: expert e on GPU floor(e * G / E).
- m*(experts, S) = smallest achievable largest per-replica load with S slots (the replication greedy attains it).
- global lower bound = max(total / G, m*(all E experts, R slots)), valid for any placement.
- hierarchical lower bound (groups and their replicas confined to one node, S = R / N slots per node) =
  min over group->node partitions of max over nodes of max(node load / (G / N), m*(node's experts, S)).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsctl.eplb.checks import Layout
from dsctl.eplb.placement import Placement, balancedness, gpu_loads
from dsctl.eplb.reference import min_max_replica_load

#: enumerate group->node partitions only up to this many (8 groups on 4 nodes: 105)
MAX_PARTITIONS = 20_000


@dataclass(frozen=True)
class LoadMetrics:
    """Per-layer GPU loads of one placement: ``gpu_loads`` float64 [L, G]; the rest float64 [L]."""

    gpu_loads: np.ndarray
    max_gpu_load: np.ndarray
    mean_gpu_load: np.ndarray
    balancedness: np.ndarray

    @staticmethod
    def from_loads(loads: np.ndarray) -> LoadMetrics:
        loads = np.asarray(loads, dtype=np.float64)
        return LoadMetrics(loads, loads.max(axis=1), loads.mean(axis=1), balancedness(loads))

    def layer(self, index: int) -> dict[str, Any]:
        return {"gpu_loads": self.gpu_loads[index], "max_gpu_load": float(self.max_gpu_load[index]),
                "mean_gpu_load": float(self.mean_gpu_load[index]), "balancedness": float(self.balancedness[index])}


@dataclass(frozen=True)
class PlacementMetrics:
    """Before/after metrics and the lower bound, per layer. ``bound_kind`` says which bound was computed."""

    before: LoadMetrics
    after: LoadMetrics
    lower_bound_gpu_load: np.ndarray  # float64 [L]
    bound_kind: str

    @property
    def num_layers(self) -> int:
        return int(self.after.max_gpu_load.shape[0])

    @property
    def balancedness_bound(self) -> np.ndarray:
        """mean / lower bound: the best balancedness any placement under the policy could reach, [L]."""
        out = np.ones_like(self.lower_bound_gpu_load)
        np.divide(self.after.mean_gpu_load, self.lower_bound_gpu_load, out=out, where=self.lower_bound_gpu_load > 0)
        return out

    @property
    def worst_layer(self) -> int:
        """Index of the layer with the lowest balancedness after placement (first on ties)."""
        return int(np.argmin(self.after.balancedness))

    def summary(self) -> dict[str, Any]:
        bound = self.balancedness_bound
        worst = self.worst_layer
        return {
            "num_layers": self.num_layers,
            "mean_balancedness_before": float(self.before.balancedness.mean()),
            "mean_balancedness_after": float(self.after.balancedness.mean()),
            "mean_balancedness_bound": float(bound.mean()),
            "worst_layer": worst,
            "worst_balancedness_before": float(self.before.balancedness.min()),
            "worst_balancedness_after": float(self.after.balancedness[worst]),
            "worst_layer_balancedness_bound": float(bound[worst]),
            "bound_kind": self.bound_kind,
        }

    def to_data(self) -> dict[str, Any]:
        bound = self.balancedness_bound
        layers = [
            {"layer": i, "before": self.before.layer(i), "after": self.after.layer(i),
             "bound": {"max_gpu_load": float(self.lower_bound_gpu_load[i]), "balancedness": float(bound[i])}}
            for i in range(self.num_layers)
        ]
        return {"summary": self.summary(), "layers": layers}


def contiguous_loads(weight: np.ndarray, num_gpus: int) -> np.ndarray:
    """GPU loads [L, G] with one copy per expert, expert e on GPU floor(e * G / E) (contiguous blocks)."""
    weight = np.asarray(weight, dtype=np.float64)
    num_layers, num_experts = weight.shape
    gpu_of = (np.arange(num_experts) * num_gpus) // num_experts
    loads = np.zeros((num_gpus, num_layers))
    np.add.at(loads, gpu_of, weight.T)
    return loads.T.copy()


def global_lower_bound(weight: np.ndarray, num_replicas: int, num_gpus: int) -> np.ndarray:
    """max(total / G, m*(all experts, R slots)) per layer, float64 [L]: no placement can do better."""
    weight = np.asarray(weight, dtype=np.float64)
    return np.maximum(weight.sum(axis=1) / num_gpus, min_max_replica_load(weight, num_replicas))


def _equal_partitions(num_items: int, block: int) -> list[list[tuple[int, ...]]]:
    """Every partition of range(num_items) into blocks of ``block`` items (blocks sorted, first item fixed)."""
    def rec(remaining: tuple[int, ...]) -> list[list[tuple[int, ...]]]:
        if not remaining:
            return [[]]
        first, rest = remaining[0], remaining[1:]
        out = []
        for others in itertools.combinations(rest, block - 1):
            chosen = (first, *others)
            left = tuple(x for x in rest if x not in others)
            out.extend([[chosen, *tail] for tail in rec(left)])
        return out
    return rec(tuple(range(num_items)))


def _count_partitions(num_items: int, block: int) -> int:
    num_blocks = num_items // block
    return math.factorial(num_items) // (math.factorial(block) ** num_blocks * math.factorial(num_blocks))


def hierarchical_lower_bound(weight: np.ndarray, layout: Layout) -> np.ndarray | None:
    """The hierarchical bound per layer, float64 [L]; None when there are too many partitions to enumerate."""
    weight = np.asarray(weight, dtype=np.float64)
    num_layers, num_experts = weight.shape
    groups, nodes = layout.num_groups, layout.num_nodes
    per_node = groups // nodes
    if _count_partitions(groups, per_node) > MAX_PARTITIONS:
        return None
    group_size = num_experts // groups
    subsets = list(itertools.combinations(range(groups), per_node))
    index = {s: i for i, s in enumerate(subsets)}
    by_group = weight.reshape(num_layers, groups, group_size)
    subset_weight = by_group[:, np.array(subsets), :].reshape(num_layers * len(subsets), per_node * group_size)
    m_star = min_max_replica_load(subset_weight, layout.slots_per_node).reshape(num_layers, len(subsets))
    node_avg = subset_weight.sum(axis=1).reshape(num_layers, len(subsets)) / layout.gpus_per_node
    per_subset = np.maximum(m_star, node_avg)  # [L, subsets]
    partitions = np.array([[index[b] for b in part] for part in _equal_partitions(groups, per_node)])
    return np.asarray(per_subset[:, partitions].max(axis=2).min(axis=1))


def lower_bound(weight: np.ndarray, layout: Layout) -> tuple[np.ndarray, str]:
    """Best valid lower bound on the max GPU load for the layout's policy, float64 [L], and its name."""
    bound = global_lower_bound(weight, layout.num_replicas, layout.num_gpus)
    if layout.policy != "hierarchical":
        return bound, "global"
    hier = hierarchical_lower_bound(weight, layout)
    if hier is None:
        return bound, "global (too many group->node partitions to enumerate the hierarchical bound)"
    return np.maximum(bound, hier), "hierarchical"


def placement_metrics(weight: np.ndarray, placement: Placement, layout: Layout) -> PlacementMetrics:
    """Before (contiguous, one copy per expert) and after metrics of ``placement`` on ``weight`` [L, E]."""
    weight = np.asarray(weight, dtype=np.float64)
    before = LoadMetrics.from_loads(contiguous_loads(weight, layout.num_gpus))
    after = LoadMetrics.from_loads(gpu_loads(weight, placement.phy2log, placement.logcnt, layout.num_gpus))
    bound, kind = lower_bound(weight, layout)
    return PlacementMetrics(before, after, bound, kind)
