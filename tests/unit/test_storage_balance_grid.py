"""Issue 14 item 1: `storage chains` is balanced by default for replication 2..5 and 5..500 nodes.

The unit test samples the grid (sizes that exercise every construction path: exact cyclic designs, the
swap search, per-disk relabelling and the all-disk cyclic orbits); ``benchmarks/bench_storage.py`` runs the
largest sizes (300..500 nodes) with the same check.
"""

from __future__ import annotations

import pytest

from dsctl.storage.api import generate_chains
from dsctl.storage.balance import measure
from dsctl.storage.chaintable import IdScheme
from dsctl.storage.choice import REDIRECT_LIMIT, bound_ratio, choose_targets_per_ssd, pair_share_ideal
from dsctl.storage.design import build_disk_designs
from dsctl.storage.layout import ascending_layout

SSDS = 16  # the reference storage node (16 NVMe SSDs) and the acceptance benchmark

GRID = [(v, k) for k in (2, 3, 4, 5) for v in (5, 6, 9, 16, 40, 101)] + [(150, 2), (128, 3), (57, 4), (90, 5)]


def balance_of(v: int, k: int, disks: int) -> tuple[int, float, int, str | None]:
    """(r, redirect max/ideal, smallest pair-share over all disks, note) of the default table."""
    r, note = choose_targets_per_ssd(v, k, disks)
    per_disk, _ = build_disk_designs(v, k, r, disks)
    layout = ascending_layout(per_disk, v, k)
    b = measure(layout.nodes, layout.disk, v)
    return r, b.redirect.max_over_ideal, min(b.pair_share_total), note


@pytest.mark.parametrize(("v", "k"), GRID)
def test_default_tables_are_balanced_across_the_grid(v: int, k: int) -> None:
    r, ratio, min_share, _ = balance_of(v, k, SSDS)
    assert ratio <= REDIRECT_LIMIT, (v, k, r, ratio)
    assert min_share >= 1  # every node pair shares a chain (16 SSDs always allow it up to 500 nodes)
    assert 1 <= r <= 99


def test_choice_keeps_the_upstream_r_when_it_balances() -> None:
    assert choose_targets_per_ssd(180, 3, 16) == (90, None)
    assert choose_targets_per_ssd(9, 3, 16) == (4, None)


def test_choice_says_why_it_moves_away_from_the_upstream_r() -> None:
    r, note = choose_targets_per_ssd(500, 2, 16)  # upstream wants 499 > 99 targets per SSD
    assert r <= 99 and r % 2 == 0 and note is not None and "instead of the upstream rule's 99" in note
    assert bound_ratio(500, 2, r, 16) <= 1.15
    r1, note1 = choose_targets_per_ssd(10, 3, 1)  # one SSD: r = 6 gives pairs 1 or 2 chains (1.5x)
    assert r1 == 9 and note1 is not None and pair_share_ideal(10, 3, 9, 1) == 2


def test_choice_names_the_limit_when_no_r_can_balance() -> None:
    r, note = choose_targets_per_ssd(500, 3, 1)  # one SSD, 500 nodes: 99 targets cannot reach 499 peers
    assert r == 99 and note is not None and "more than 99 targets per SSD" in note


@pytest.mark.parametrize(("v", "k"), [(6, 3), (10, 3), (16, 4), (24, 4), (12, 5), (40, 5)])
def test_one_ssd_tables_retry_a_larger_r_when_the_search_misses(v: int, k: int) -> None:
    """With one SSD the single-disk search can end one chain above floor/ceil (2x at lambda = 1): dsctl then
    builds with the next r whose bound is good and keeps the better table, saying so."""
    result = generate_chains(v, 1, k, None, 1, IdScheme())
    assert result.balance.redirect.max_over_ideal <= REDIRECT_LIMIT, (v, k, result.targets_per_ssd)
    assert min(result.balance.pair_share_total) >= 1
