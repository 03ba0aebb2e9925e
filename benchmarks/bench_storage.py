"""dsctl storage: chain tables with every output file (the sheet's section-5 sizes and 180 x 16), and sizing."""

from __future__ import annotations

from typing import Any

from benchmarks.case import Case
from dsctl.profiles.loader import ProfileStore
from dsctl.storage.api import generate_chains
from dsctl.storage.chaintable import IdScheme
from dsctl.storage.choice import REDIRECT_LIMIT
from dsctl.storage.expand import expand
from dsctl.storage.sizing import SizingInputs, size


def _chains(v: int, disks: int, k: int, r: int | None) -> Case:
    def run(_: Any) -> int:
        return generate_chains(v, disks, k, r, 1, IdScheme(), with_svg=True).balance.num_targets

    label = f"r={r}" if r is not None else "auto r"
    return Case(f"storage: chains {v} nodes x {disks} SSDs, k={k}, {label}, files + svg", lambda: None, run,
                target_s=5.0 if v >= 100 else 2.0)


def _balanced(v: int, k: int) -> Case:
    """Issue 14's grid at its largest sizes: default r, 16 SSDs; fails unless redirect <= 1.25x ideal."""
    def run(_: Any) -> float:
        b = generate_chains(v, 16, k, None, 1, IdScheme()).balance
        if b.redirect.max_over_ideal > REDIRECT_LIMIT or min(b.pair_share_total) < 1:
            raise RuntimeError(f"{v} nodes, k={k}: redirect {b.redirect.max_over_ideal:.3f}x, "
                               f"smallest pair-share {min(b.pair_share_total)}")
        return b.redirect.max_over_ideal

    # issue 14's speed goal is 500 x 16 at k = 3 under 10 s; k = 4, 5 spend longer in the cyclic search
    return Case(f"storage: balanced default {v} nodes x 16 SSDs, k={k} (redirect <= 1.25x)", lambda: None, run,
                target_s=10.0 if k <= 3 else 30.0)


def _expand(v: int, n: int) -> Case:
    """Issue 14: grow a 16-SSD table by n nodes; fails unless balanced, at the bound and check-chains clean."""
    four = ("generated_chains.csv", "generated_chain_table.csv", "create_target_cmd.txt", "remove_target_cmd.txt")

    def setup() -> dict[str, str | None]:
        files = generate_chains(v, 16, 3, None, 1, IdScheme()).files_text
        return {name: files[name] for name in four}

    def run(texts: dict[str, str | None]) -> float:
        result = expand(texts, "bench", n, 1e12, 0.0, 0.0)
        for name in result.files_text:  # the files are rendered when written: render them here too
            result.files_text[name]
        if result.exit_code or result.moved_over_bound > 1.1:
            raise RuntimeError(f"expand {v}->{v + n}: exit {result.exit_code}, {result.moved_over_bound:.3f}x bound")
        return result.balance.redirect.max_over_ideal

    # issue 32: 180 -> 200 under 2 CPU-s (13.8 s at issue 32's start, 2.34 before the array reader, 1.65-1.88 now
    # on a shared 2-core machine); growth over 50..500 nodes in benchmarks/storage_expand_scale.py (nodes^1.32-1.51
    # at the default r, whose work grows as nodes^1.53-1.61; nodes^0.92-0.99 with r held), the bytes kept by
    # benchmarks/storage_expand_bytes.py
    return Case(f"storage: expand {v} -> {v + n} nodes x 16 SSDs (plan, files, check)", setup, run,
                target_s=2.0 if v >= 100 else 0.5, target_cpu=True)


def _size(_: Any) -> float:
    ref = ProfileStore().storage("3fs-reference")
    return size(ref, SizingInputs(num_nodes=180, num_clients=500, client_nic_bytes_per_s=25e9,
                                  dataset_bytes=1e16, checkpoint_bytes=2e13, checkpoint_budget_s=60)).read.bytes_per_s


CASES = [
    _chains(180, 16, 3, None),
    _chains(50, 16, 3, None),
    _chains(25, 16, 3, 12),
    _chains(15, 16, 3, 7),
    _chains(12, 16, 3, 6),
    _chains(10, 16, 3, 6),
    _chains(9, 16, 3, 4),
    _chains(5, 16, 3, 6),
    *(_balanced(v, k) for k in (2, 3, 4, 5) for v in (301, 500)),
    _expand(25, 5),
    _expand(180, 20),
    Case("storage: size 180 nodes with every target", lambda: None, _size, target_s=0.05),
]
