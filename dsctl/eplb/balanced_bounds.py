"""Lower bounds on the largest GPU load any EPLB placement can reach (spec section 11).

- ``min_max_replica_load``: m*, the smallest achievable largest per-replica load when E experts share S slots
  (every expert >= 1 replica). Found by the classical apportionment greedy (give each extra slot to the expert with
  the largest load / count), which attains the optimum.
- ``global_lower_bound``: max(total / num_gpus, m*(all experts, R slots)), valid for any placement.
- ``hierarchical_lower_bound``: the minimum over all group -> node partitions (G/N groups per node) of the largest
  over nodes of max(node load / GPUs per node, m*(node's experts, R/N slots)). It ignores the exactly-k-slots-per-GPU
  rule, so it can be slightly optimistic; it is a true lower bound for plans that keep each group on one node.
All loads are float64 in the unit of the input (tokens); results are per layer, float64 [L].
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

#: above this many group -> node partitions the hierarchical bound uses a weaker closed form (still valid)
MAX_PARTITIONS = 20_000


def min_max_replica_load(weight: np.ndarray, num_slots: int) -> np.ndarray:
    """m* per row: float64 [rows] for ``weight`` [rows, n] sharing ``num_slots`` >= n slots."""
    weight = np.asarray(weight, dtype=np.float64)
    rows, num_items = weight.shape
    counts = np.ones((rows, num_items), dtype=np.float64)
    index = np.arange(rows)
    for _ in range(num_slots - num_items):
        pick = np.argmax(weight / counts, axis=1)
        counts[index, pick] += 1.0
    result: np.ndarray = (weight / counts).max(axis=1)
    return result


def global_lower_bound(weight: np.ndarray, num_replicas: int, num_gpus: int) -> np.ndarray:
    """Policy-free bound on the largest GPU load per layer, float64 [L]."""
    weight = np.asarray(weight, dtype=np.float64)
    result: np.ndarray = np.maximum(weight.sum(axis=1) / num_gpus, min_max_replica_load(weight, num_replicas))
    return result


def _equal_partitions(items: tuple[int, ...], block: int) -> list[list[tuple[int, ...]]]:
    """All partitions of ``items`` into blocks of ``block`` items (block order canonical: by smallest member)."""
    if not items:
        return [[]]
    first, rest = items[0], items[1:]
    out: list[list[tuple[int, ...]]] = []
    for mates in combinations(rest, block - 1):
        remaining = tuple(i for i in rest if i not in mates)
        for tail in _equal_partitions(remaining, block):
            out.append([(first, *mates), *tail])
    return out


def _num_partitions(num_groups: int, block: int) -> int:
    total, left = 1, num_groups
    while left > 0:
        ways = 1
        for i in range(block - 1):
            ways = ways * (left - 1 - i) // (i + 1)
        total *= ways
        left -= block
        if total > MAX_PARTITIONS:
            return total
    return total


def hierarchical_lower_bound(
    weight: np.ndarray, num_replicas: int, num_groups: int, num_nodes: int, num_gpus: int
) -> np.ndarray:
    """Bound for plans that keep every group (and its replicas) on one node, float64 [L]."""
    weight = np.asarray(weight, dtype=np.float64)
    num_layers, num_experts = weight.shape
    group_size = num_experts // num_groups
    block = num_groups // num_nodes
    slots_per_node = num_replicas // num_nodes
    gpus_per_node = num_gpus // num_nodes
    grouped = weight.reshape(num_layers, num_groups, group_size)
    if _num_partitions(num_groups, block) > MAX_PARTITIONS:
        # weaker closed form: the node holding group g carries at least g plus the lightest other groups,
        # and its m* is at least that of g alone
        group_load = grouped.sum(axis=2)
        lightest = np.sort(group_load, axis=1)[:, : block]
        node_floor = (group_load + lightest[:, : block - 1].sum(axis=1, keepdims=True)) / gpus_per_node
        alone = min_max_replica_load(grouped.reshape(-1, group_size), slots_per_node).reshape(num_layers, num_groups)
        per_group: np.ndarray = np.maximum(node_floor, alone).max(axis=1)
        return per_group
    blocks = list(combinations(range(num_groups), block))
    block_index = {b: i for i, b in enumerate(blocks)}
    members = np.array(blocks, dtype=np.int64)  # [nb, block]
    block_weight = grouped[:, members, :].reshape(num_layers * len(blocks), block * group_size)
    block_cost = np.maximum(
        block_weight.sum(axis=1) / gpus_per_node, min_max_replica_load(block_weight, slots_per_node)
    ).reshape(num_layers, len(blocks))
    partitions = np.array(
        [[block_index[b] for b in part] for part in _equal_partitions(tuple(range(num_groups)), block)],
        dtype=np.int64,
    )  # [np, N]
    per_partition = block_cost[:, partitions].max(axis=2)  # [L, np]
    result: np.ndarray = per_partition.min(axis=1)
    return result
