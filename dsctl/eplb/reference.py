"""DeepSeek's EPLB algorithm (deepseek-ai/EPLB ``eplb.py``, MIT licence), re-implemented in numpy.

Independent implementation of the published algorithm (spec: docs/eplb.md and the reference sheet); no code
from the repository. It reproduces the reference exactly on inputs without ties: the same ``phy2log`` and
``logcnt``, and ``log2phy`` with the same replica slots per expert. On inputs with ties between different
experts in rows of more than 16 items (integer token counts) it gives the same ``logcnt`` and the same
per-GPU loads (the reference's torch sort is not stable there; this one is).

Every step is vectorised across layers (and across nodes): the Python loops run over item positions only,
each iteration handling all rows at once. Arithmetic is float32 throughout, as in the reference:
- descending sort with ties in index order (stable sort of the negated values);
- greedy packing: the next item goes to the non-full bin with the smallest float32 running total,
  lowest bin index on equal totals;
- replication: each extra slot goes to the expert with the largest float32 ``load / count``, first
  (lowest index) maximum on ties.
"""

from __future__ import annotations

import numpy as np

from dsctl.eplb.checks import EplbLayout, check_layout, check_weight
from dsctl.eplb.placement import Placement, check_log2phy_size

_INF32 = np.float32(np.inf)


def _row_offsets(rows: int, width: int) -> np.ndarray:
    return (np.arange(rows, dtype=np.int64) * width)[:, None]


def take_rows(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``values[r, index[r, j]]`` for 2-D arrays: ``np.take_along_axis(values, index, axis=1)`` by one flat gather
    (about half the time at these sizes: no broadcast index arrays)."""
    rows, width = values.shape
    return np.ascontiguousarray(values).reshape(-1)[index + _row_offsets(rows, width)]


def put_rows(out: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """``out[r, index[r, j]] = values[r, j]`` for 2-D arrays: ``np.put_along_axis(out, index, values, axis=1)``,
    by one flat scatter when ``out`` is C-contiguous."""
    if not out.flags.c_contiguous:
        np.put_along_axis(out, index, values, axis=1)
        return
    rows, width = out.shape
    out.reshape(-1)[(index + _row_offsets(rows, width)).reshape(-1)] = np.asarray(values).reshape(-1)


def pack_balanced(values: np.ndarray, num_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Greedy balanced packing of each row's n items into ``num_bins`` bins of exactly n / num_bins items.

    ``values`` float32 [rows, n]. Items are taken in descending value order (ties: lower index first);
    each goes to the non-full bin with the smallest float32 running total (ties: lowest bin index).
    Returns ``(bin_index, position_in_bin)``, both int64 [rows, n]; the position is the bin's item count
    before the item arrived. With one item per bin, item i goes to bin i whatever its value.
    """
    values = np.ascontiguousarray(values, dtype=np.float32)
    rows, num_items = values.shape
    capacity = num_items // num_bins
    if capacity == 1:
        return (np.broadcast_to(np.arange(num_items, dtype=np.int64), (rows, num_items)).copy(),
                np.zeros((rows, num_items), dtype=np.int64))
    order = np.argsort(-values, axis=1, kind="stable")
    columns = np.ascontiguousarray(take_rows(values, order).T)  # [n, rows], item t of each row
    # keys: the bin's float32 running total while it has room, +inf once full (so argmin skips it)
    keys = np.zeros((rows, num_bins), dtype=np.float32)
    keys_flat = keys.reshape(-1)
    counts = np.zeros(rows * num_bins, dtype=np.int64)
    bin_sorted = np.empty((num_items, rows), dtype=np.int64)
    pos_sorted = np.empty((num_items, rows), dtype=np.int64)
    row_base = np.arange(rows, dtype=np.int64) * num_bins
    last_position = capacity - 1
    for t in range(num_items):  # as few numpy calls per item as possible: this loop is the hot path
        chosen = keys.argmin(axis=1)  # first minimum = lowest bin index on equal totals
        bin_sorted[t] = chosen
        flat = chosen + row_base
        count = counts[flat]
        pos_sorted[t] = count
        counts[flat] = count + 1
        new_total = keys_flat[flat] + columns[t]  # float32 + float32; the chosen bin is never full
        new_total[count == last_position] = _INF32
        keys_flat[flat] = new_total
    bin_index = np.empty((rows, num_items), dtype=np.int64)
    position = np.empty((rows, num_items), dtype=np.int64)
    put_rows(bin_index, order, bin_sorted.T)
    put_rows(position, order, pos_sorted.T)
    return bin_index, position


def replicate_experts(weight: np.ndarray, num_slots: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Apportion ``num_slots`` slots among each row's X experts, minimising the largest per-replica load.

    ``weight`` float32 [rows, X]. Slots 0..X-1 hold each expert once (rank 0); each further slot goes to
    the expert with the largest float32 ``weight / count`` (first maximum on ties).
    Returns ``(slot_expert int64 [rows, num_slots], slot_rank int64 [rows, num_slots], count int64 [rows, X])``.
    """
    weight = np.ascontiguousarray(weight, dtype=np.float32)
    rows, num_experts = weight.shape
    slot_expert = np.empty((rows, num_slots), dtype=np.int64)
    slot_expert[:, :num_experts] = np.arange(num_experts)
    slot_rank = np.zeros((rows, num_slots), dtype=np.int64)
    counts = np.ones((rows, num_experts), dtype=np.float32)
    ratio = weight.copy()
    ratio_flat, counts_flat, weight_flat = ratio.reshape(-1), counts.reshape(-1), weight.reshape(-1)
    row_base = np.arange(rows, dtype=np.int64) * num_experts
    for slot in range(num_experts, num_slots):
        chosen = ratio.argmax(axis=1)  # first maximum on ties
        flat = row_base + chosen
        count = counts_flat[flat]
        slot_expert[:, slot] = chosen
        slot_rank[:, slot] = count
        count = count + np.float32(1)
        counts_flat[flat] = count
        ratio_flat[flat] = weight_flat[flat] / count  # float32 / float32
    return slot_expert, slot_rank, counts.astype(np.int64)


def _inverse_permutation(perm: np.ndarray) -> np.ndarray:
    inverse = np.empty_like(perm)
    put_rows(inverse, perm, np.broadcast_to(np.arange(perm.shape[1]), perm.shape))
    return inverse


def rebalance_layout(weight: np.ndarray, layout: EplbLayout) -> Placement:
    """Run the reference pipeline on a checked layout. ``weight`` [L, E] (any numeric dtype; cast to float32)."""
    w32 = np.ascontiguousarray(np.asarray(weight, dtype=np.float32))
    num_layers, num_experts = w32.shape
    groups, nodes = layout.num_groups_eff, layout.num_nodes_eff
    group_size = num_experts // groups
    groups_per_node = groups // nodes
    experts_per_node = num_experts // nodes
    slots_per_node = layout.num_replicas // nodes
    gpus_per_node = layout.num_gpus // nodes
    slots_per_gpu = layout.num_replicas // layout.num_gpus

    # Step 1: pack groups onto nodes; node-major intermediate ("m") numbering of the experts.
    group_load = w32.reshape(num_layers, groups, group_size).sum(axis=2, dtype=np.float32)
    group_node, group_pos = pack_balanced(group_load, nodes)
    group_first = (group_node * groups_per_node + group_pos) * group_size  # [L, groups]
    log2mlog = (group_first[:, :, None] + np.arange(group_size)).reshape(num_layers, num_experts)
    mlog2log = _inverse_permutation(log2mlog)

    # Step 2: replicate experts inside each node; rows = (layer, node).
    node_weight = take_rows(w32, mlog2log).reshape(num_layers * nodes, experts_per_node)
    phy2mlog, phy_rank, mlog_count = replicate_experts(node_weight, slots_per_node)

    # Step 3: pack the node's replicas onto its GPUs, slots_per_gpu each.
    per_replica = node_weight / mlog_count.astype(np.float32)
    replica_load = take_rows(per_replica, phy2mlog)
    gpu, pos = pack_balanced(replica_load, gpus_per_node)
    slot_of = gpu * slots_per_gpu + pos  # node-local slot of each replica
    slot_mlog = np.empty_like(phy2mlog)
    slot_rank = np.empty_like(phy_rank)
    put_rows(slot_mlog, slot_of, phy2mlog)
    put_rows(slot_rank, slot_of, phy_rank)

    # Assembly: back to logical ids, layer-wide slot numbers.
    node_offset = (np.arange(nodes, dtype=np.int64) * experts_per_node)[None, :, None]
    slot_mlog_global = (slot_mlog.reshape(num_layers, nodes, slots_per_node) + node_offset).reshape(num_layers, -1)
    phy2log = take_rows(mlog2log, slot_mlog_global)
    rank = slot_rank.reshape(num_layers, -1)
    logcnt = take_rows(mlog_count.reshape(num_layers, num_experts), log2mlog)
    return placement_from_ranks(phy2log, rank, logcnt)


def placement_from_ranks(phy2log: np.ndarray, rank: np.ndarray, logcnt: np.ndarray) -> Placement:
    """Assemble a Placement whose ``log2phy[l, e, r]`` is the slot of replica rank r (creation order).

    ``log2phy`` width M is the global max of ``logcnt``; unused ranks hold -1.
    """
    num_layers, num_slots = phy2log.shape
    num_experts = logcnt.shape[1]
    width = int(logcnt.max())
    check_log2phy_size(num_layers, num_experts, width)
    log2phy = np.full(num_layers * num_experts * width, -1, dtype=np.int64)
    flat = ((np.arange(num_layers)[:, None] * num_experts + phy2log) * width + rank).ravel()
    log2phy[flat] = np.tile(np.arange(num_slots, dtype=np.int64), num_layers)
    log2phy = log2phy.reshape(num_layers, num_experts, width)
    return Placement(phy2log=phy2log.astype(np.int64), log2phy=log2phy, logcnt=logcnt.astype(np.int64))


def rebalance_reference(
    weight: np.ndarray,
    num_replicas: int,
    num_groups: int,
    num_nodes: int,
    num_gpus: int,
    policy: str = "auto",
) -> Placement:
    """DeepSeek's ``rebalance_experts``: ``weight`` [L, E] loads -> Placement (phy2log [L, R], log2phy, logcnt).

    ``policy`` auto|hierarchical|global; auto = hierarchical iff ``num_groups % num_nodes == 0`` (reference rule).
    Raises InputError for bad input (rules V1-V9), never AssertionError.
    """
    checked, _ = check_weight(weight)
    layout = check_layout(checked.shape[0], checked.shape[1], num_replicas, num_groups, num_nodes, num_gpus, policy)
    return rebalance_layout(checked, layout)
