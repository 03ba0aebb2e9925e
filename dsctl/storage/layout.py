"""A whole chain table: one design per disk index, node relabelling per disk, and rotated chain order.

A layout is three aligned arrays over all ``C = num_disks * b`` chains, in chain-table order
(disk index 0's chains first):

- ``nodes``  (C, k) int64: 0-based node indexes, **ordered head -> tail**;
- ``disk``   (C,)   int64: 0-based disk index (every member's target sits on this disk index);
- ``index``  (C,)   int64: 1-based chain index within the disk index (the low digits of the chain id).

Chain order matters in 3FS: writes enter at the head; when a target fails it moves to the end of its
chain, and when it returns the last surviving member re-syncs it. The upstream tool always lists
members in ascending node order, so the lowest node never re-syncs anyone. ``rotate_chains`` orders
each chain's members greedily so that, summed over all chains, every node is head and tail equally
often and every (failed node, peer) pair carries an even share of re-sync work.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from dsctl.progress_count import Report, Stages, each
from dsctl.storage.design import build_disk_designs, search_cost_us

ROTATION_PASSES = 2
REFINE_MAX_CHAINS = 40_000  # larger tables get the greedy pass only (time)
ORDER_COST_US = 8  # estimated cost of ordering one chain once (weighs the progress count's stages only)


@dataclass(frozen=True)
class ChainLayout:
    """Chains of one table (see module docstring for the array shapes)."""

    num_nodes: int
    num_disks: int
    replication: int
    nodes: np.ndarray
    disk: np.ndarray
    index: np.ndarray

    @property
    def num_chains(self) -> int:
        return int(self.nodes.shape[0])


def _orderings(k: int) -> list[tuple[int, ...]]:
    """Candidate member orders (as permutations of positions) that differ in head, pre-tail or tail."""
    if k <= 4:
        return list(itertools.permutations(range(k)))
    picks = []
    for head, pre, tail in itertools.permutations(range(k), 3):
        middle = [i for i in range(k) if i not in (head, pre, tail)]
        picks.append((head, *middle, pre, tail))
    return picks


def rotation_passes(num_chains: int, passes: int = ROTATION_PASSES) -> int:
    """Passes ``rotate_chains`` makes over ``num_chains`` chains (the greedy one, then refinements if few)."""
    return passes if num_chains <= REFINE_MAX_CHAINS else 1


def rotate_chains(nodes: np.ndarray, num_nodes: int, passes: int = ROTATION_PASSES,
                  report: Report | None = None) -> np.ndarray:
    """Order each chain's members (rows of ``nodes``, shape (C, k)) to balance head, tail and re-sync roles.

    Re-sync source of a failed member ``x`` = the last surviving member in chain order: the tail, or the
    member before the tail when ``x`` is the tail. Each chain takes the member order that adds least to the
    sum of squares of (re-sync count per ordered pair) + (head count per node) + (tail count per node):
    a greedy pass in table order, then ``passes - 1`` refinement passes that take each chain out and put it
    back in its best order given all the others. Returns a new (C, k) array. ``report(orderings_done,
    C * passes_made)`` every 4,096 chains.
    """
    count, k = nodes.shape
    if k < 2 or count == 0:
        return nodes.copy()
    sync = [[0] * num_nodes for _ in range(num_nodes)]
    heads = [0] * num_nodes
    tails = [0] * num_nodes
    orders = _orderings(k)

    def apply(seq: list[int], step: int) -> None:
        h, p, t = seq[0], seq[-2], seq[-1]
        heads[h] += step
        tails[t] += step
        sync[t][p] += step
        for m in seq[:-1]:
            sync[m][t] += step

    def best_order3(row: list[int]) -> list[int]:
        # k = 3 unrolled: for each tail t the other two are head/pre-tail in one of two orders.
        a, b, c = row
        best, best_cost = row, -1
        for t, x, y in ((c, a, b), (a, b, c), (b, c, a)):
            st = sync[t]
            base = tails[t] + sync[x][t] + sync[y][t]
            cost_xy = base + heads[x] + st[y]
            cost_yx = base + heads[y] + st[x]
            if best_cost < 0 or cost_xy < best_cost:
                best, best_cost = [x, y, t], cost_xy
            if cost_yx < best_cost:
                best, best_cost = [y, x, t], cost_yx
        return best

    def best_order(row: list[int]) -> list[int]:
        if k == 3:
            return best_order3(row)
        best, best_cost = row, -1
        for order in orders:
            seq = [row[i] for i in order]
            t = seq[-1]
            cost = heads[seq[0]] + tails[t] + sync[t][seq[-2]]
            for m in seq[:-1]:
                cost += sync[m][t]
            if best_cost < 0 or cost < best_cost:
                best, best_cost = seq, cost
        return best

    made = rotation_passes(count, passes)
    tick = each(report, count * made, every=4096)
    out = []
    for row in nodes.tolist():
        seq = best_order(row)
        apply(seq, 1)
        out.append(seq)
        tick(len(out))
    for p in range(1, made):
        for c, seq in enumerate(out):
            apply(seq, -1)
            new = best_order(seq)
            apply(new, 1)
            out[c] = new
            tick(p * count + c + 1)
    return np.asarray(out, dtype=np.int64).reshape(count, k)


def ascending_layout(per_disk_blocks: list[np.ndarray], num_nodes: int, replication: int) -> ChainLayout:
    """Layout with members in ascending node order (what the upstream tool writes), one block array per disk."""
    nodes = np.concatenate([np.sort(b, axis=1) for b in per_disk_blocks], axis=0)
    disk = np.concatenate([np.full(len(b), d, dtype=np.int64) for d, b in enumerate(per_disk_blocks)])
    index = np.concatenate([np.arange(1, len(b) + 1, dtype=np.int64) for b in per_disk_blocks])
    return ChainLayout(num_nodes, len(per_disk_blocks), replication, nodes, disk, index)


def rotation_cost_us(num_nodes: int, num_disks: int, replication: int, targets_per_ssd: int) -> float:
    """Estimated cost of ``rotate_chains`` over a whole table, in microseconds (progress weights only)."""
    chains = num_disks * (num_nodes * targets_per_ssd // replication)
    return chains * rotation_passes(chains) * ORDER_COST_US


def layout_cost_us(num_nodes: int, num_disks: int, replication: int, targets_per_ssd: int,
                   rotate: bool = True) -> float:
    """Estimated cost of ``build_layout`` in microseconds (weighs it against other stages of a progress count)."""
    return search_cost_us(num_nodes, replication, targets_per_ssd, num_disks) + \
        (rotation_cost_us(num_nodes, num_disks, replication, targets_per_ssd) if rotate else 0.0)


def build_layout(num_nodes: int, num_disks: int, replication: int, targets_per_ssd: int,
                 rotate: bool = True, seed: int = 0, report: Report | None = None) -> tuple[ChainLayout, str]:
    """dsctl's chain table: (near-)balanced designs per disk index, members rotated; returns (layout, method).
    ``report(done, total)`` counts the design search, then the chains ordered (weighed by estimated cost)."""
    stages = Stages(report, [search_cost_us(num_nodes, replication, targets_per_ssd, num_disks),
                             rotation_cost_us(num_nodes, num_disks, replication, targets_per_ssd) if rotate else 0])
    per_disk, method = build_disk_designs(num_nodes, replication, targets_per_ssd, num_disks, seed=seed,
                                          report=stages.part(0))
    layout = ascending_layout(per_disk, num_nodes, replication)
    if rotate:
        layout = ChainLayout(num_nodes, num_disks, replication,
                             rotate_chains(layout.nodes, num_nodes, report=stages.part(1)), layout.disk, layout.index)
    stages.finish()
    return layout, method
