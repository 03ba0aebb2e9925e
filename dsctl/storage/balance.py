"""Balance statistics of a chain table, measured as in the reference sheet's section-5 table.

- **pair-share** histogram: for each node pair, chains holding both (on disk index 0, as the sheet
  measures it, and summed over all disk indexes).
- **redirect**: when node ``x`` fails, each of its targets hands its reads evenly to the ``k-1`` other
  members of its chain; the load a surviving peer ``y`` receives is ``shared_chains(x, y) / (k-1)`` in
  target units. Reported as max / min over all ordered (failed, peer) pairs, and the ideal even split
  ``targets(x) / (v-1)``.
- **re-sync source**: the chains of ``x`` for which peer ``y`` is the last surviving member (the one that
  streams the missing chunks back when ``x`` returns). Max / min / ideal as above.
- **head / tail**: chains each node heads (receives writes first) and tails, max / min / ideal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class LoadSpread:
    """Max, min and ideal of one load figure (target units unless named otherwise)."""

    max: float
    min: float
    ideal: float

    @property
    def max_over_ideal(self) -> float:
        return self.max / self.ideal if self.ideal else float("nan")

    def to_data(self) -> dict[str, float]:
        return {"max": self.max, "min": self.min, "ideal": round(self.ideal, 4),
                "max_over_ideal": round(self.max_over_ideal, 4) if self.ideal else float("nan")}


@dataclass(frozen=True)
class Balance:
    """Balance of a chain table over ``num_nodes`` nodes (see module docstring)."""

    num_nodes: int
    num_disks: int
    replication: int
    num_chains: int
    num_targets: int
    ideal_pair_share_per_disk: float
    pair_share_disk0: dict[int, int]
    pair_share_total: dict[int, int]
    redirect: LoadSpread
    sync_source: LoadSpread
    head: LoadSpread
    tail: LoadSpread
    targets_per_node: LoadSpread
    pair_share_matrix: np.ndarray = field(repr=False, metadata={"output": False})


def _spread(values: np.ndarray, ideal: float) -> LoadSpread:
    if values.size == 0:
        return LoadSpread(0.0, 0.0, ideal)
    return LoadSpread(float(values.max()), float(values.min()), ideal)


def _histogram(values: np.ndarray) -> dict[int, int]:
    keys, counts = np.unique(values, return_counts=True)
    return {int(a): int(b) for a, b in zip(keys, counts, strict=True)}


def measure(nodes: np.ndarray, disk: np.ndarray, num_nodes: int) -> Balance:
    """Statistics of chains ``nodes`` (C, k) ordered head -> tail, ``disk`` (C,) their disk indexes.

    All chains must have the same length ``k >= 1`` and members on distinct nodes (checked by callers).
    """
    count, k = nodes.shape
    v = num_nodes
    num_disks = int(disk.max()) + 1 if count else 0
    share = np.zeros((v, v), dtype=np.int64)
    share0 = np.zeros((v, v), dtype=np.int64)
    first = disk == (int(disk.min()) if count else 0)
    for p in range(k):
        for q in range(p + 1, k):
            np.add.at(share, (nodes[:, p], nodes[:, q]), 1)
            np.add.at(share0, (nodes[first, p], nodes[first, q]), 1)
    share = share + share.T
    share0 = share0 + share0.T
    iu = np.triu_indices(v, 1)
    off = ~np.eye(v, dtype=bool)
    targets = np.bincount(nodes.ravel(), minlength=v).astype(np.int64)
    per_failed_ideal = float(targets.mean()) / (v - 1) if v > 1 else 0.0
    redirect = share[off] / (k - 1) if k > 1 else np.zeros(0)
    sync = np.zeros((v, v), dtype=np.int64)
    if k >= 2:
        tail, pre = nodes[:, -1], nodes[:, -2]
        for m in range(k - 1):
            np.add.at(sync, (nodes[:, m], tail), 1)
        np.add.at(sync, (tail, pre), 1)
    heads = np.bincount(nodes[:, 0], minlength=v) if count else np.zeros(v)
    tails = np.bincount(nodes[:, -1], minlength=v) if count else np.zeros(v)
    chains_per_disk = count / num_disks if num_disks else 0.0
    ideal_share = (chains_per_disk * k / v) * (k - 1) / (v - 1) if v > 1 else 0.0
    return Balance(
        num_nodes=v,
        num_disks=num_disks,
        replication=k,
        num_chains=count,
        num_targets=count * k,
        ideal_pair_share_per_disk=ideal_share,
        pair_share_disk0=_histogram(share0[iu]),
        pair_share_total=_histogram(share[iu]),
        redirect=_spread(np.asarray(redirect, dtype=float), per_failed_ideal if k > 1 else 0.0),
        sync_source=_spread(sync[off].astype(float), per_failed_ideal if k > 1 else 0.0),
        head=_spread(heads.astype(float), count / v),
        tail=_spread(tails.astype(float), count / v),
        targets_per_node=_spread(targets.astype(float), count * k / v),
        pair_share_matrix=share,
    )
