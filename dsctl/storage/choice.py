"""Automatic targets per SSD that gives a balanced table (issue 14, item 1).

After a node fails, each surviving peer ``y`` takes ``shared(x, y) / (k-1)`` of its reads (target units);
the ideal is an even split, ``lambda / (k-1)`` with ``lambda = D*r*(k-1)/(v-1)`` chains per node pair over
all ``D`` disk indexes. Pair-shares are integers, so the best any table can do is
``ceil(lambda) / lambda`` times the ideal (``bound_ratio``). The upstream rule (smallest ``r`` with
``r(k-1) >= v-1``) ignores this: with one SSD and ``lambda`` just above 1 some peers take twice the ideal.
``choose_targets_per_ssd`` keeps the upstream ``r`` when its bound is good and otherwise takes the nearest
``r`` (at most 99, two digits of a target id) whose bound is, saying why.
"""

from __future__ import annotations

import math

from dsctl.storage.design import use_all_disk_orbits
from dsctl.storage.sizing import MAX_AUTO_TARGETS_PER_SSD, auto_targets_per_ssd

REDIRECT_LIMIT = 1.25  # node-failure read redirect, max over ideal (the acceptance figure)
CHOICE_MARGIN = 1.15  # the chosen r's bound leaves room for a search that ends one chain above it
FALLBACK_TRIES = 3  # larger r tried when a built table misses the limit


def pair_share_ideal(num_nodes: int, replication: int, targets_per_ssd: int, num_disks: int) -> float:
    """Chains shared by each node pair over all disk indexes in a perfectly even table (lambda)."""
    return num_disks * targets_per_ssd * (replication - 1) / (num_nodes - 1)


def bound_ratio(num_nodes: int, replication: int, targets_per_ssd: int, num_disks: int) -> float:
    """Smallest possible node-failure redirect max / ideal: ``ceil(lambda) / lambda``."""
    lam = pair_share_ideal(num_nodes, replication, targets_per_ssd, num_disks)
    return math.ceil(lam - 1e-9) / lam


def needs_whole_orbits(num_nodes: int, replication: int, targets_per_ssd: int, num_disks: int) -> bool:
    """Tables that ``design.use_all_disk_orbits`` balances over all disks by cyclic orbits need ``k | r``."""
    return use_all_disk_orbits(num_nodes, replication, targets_per_ssd, num_disks)


def choose_targets_per_ssd(num_nodes: int, replication: int, num_disks: int) -> tuple[int, str | None]:
    """``(r, note)``: the upstream automatic ``r`` when it can be balanced, else the nearest that can.

    ``note`` says why another ``r`` was picked (None when the upstream value is kept).
    """
    v, k, d = num_nodes, replication, num_disks

    def valid(r: int) -> bool:
        return (v * r) % k == 0 and (not needs_whole_orbits(v, k, r, d) or r % k == 0)

    def good(r: int) -> bool:
        return pair_share_ideal(v, k, r, d) >= 1 and bound_ratio(v, k, r, d) <= CHOICE_MARGIN

    upstream = auto_targets_per_ssd(v, k)
    if valid(upstream) and good(upstream):
        return upstream, None
    upward = [r for r in range(upstream, MAX_AUTO_TARGETS_PER_SSD + 1) if valid(r) and good(r)]
    downward = [r for r in range(upstream - 1, 0, -1) if valid(r) and good(r)]
    for r in (upward or downward)[:1]:
        return r, (f"targets per SSD {r} instead of the upstream rule's {upstream}: with {d} SSD(s) it keeps "
                       f"every node pair within {bound_ratio(v, k, r, d):.3f}x of an even share "
                       f"(upstream's gives {bound_ratio(v, k, upstream, d):.3f}x at best)")
    options = [r for r in range(1, MAX_AUTO_TARGETS_PER_SSD + 1) if valid(r)] or [upstream]
    best = min(options, key=lambda r: (pair_share_ideal(v, k, r, d) < 1, bound_ratio(v, k, r, d), -r))
    lam = pair_share_ideal(v, k, best, d)
    why = (f"{v} nodes need more than 99 targets per SSD (two digits of a target id) for every pair to share a chain"
           if lam < 1 else f"no r up to 99 is closer to an even share with {d} SSD(s)")
    note = (f"targets per SSD {best}: {why}; node-failure redirect is at best {bound_ratio(v, k, best, d):.3f}x "
            "the even share (more SSDs per node or more storage services balance better)")
    return best, None if best == upstream and lam >= 1 and bound_ratio(v, k, best, d) <= REDIRECT_LIMIT else note


def fallback_targets_per_ssd(num_nodes: int, replication: int, num_disks: int, tried: int,
                             count: int = FALLBACK_TRIES) -> list[int]:
    """Up to ``count`` larger ``r`` (nearest first) with a good bound, for when the table built with ``tried``
    misses the redirect limit (a search that did not reach the bound: small designs on few SSDs)."""
    v, k, d = num_nodes, replication, num_disks
    return [r for r in range(tried + 1, MAX_AUTO_TARGETS_PER_SSD + 1)
            if (v * r) % k == 0 and (not needs_whole_orbits(v, k, r, d) or r % k == 0)
            and pair_share_ideal(v, k, r, d) >= 1 and bound_ratio(v, k, r, d) <= CHOICE_MARGIN][:count]
