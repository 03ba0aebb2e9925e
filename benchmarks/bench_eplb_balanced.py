"""Balanced EPLB mode and migration at DeepSeek-V3 scale (58 layers x 256 experts, 8 groups; Zipf 1.0 loads).

Target: balanced mode under 1 s per layout (one core, includes the reference run it starts from). The migration
case (10% load drift, 1% tolerance) has no hard target; it is recorded in docs/eplb-balanced.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.case import Case
from benchmarks.eplb_layouts import LAYOUTS, NUM_GROUPS
from benchmarks.eplb_quality import synthetic_loads
from dsctl.eplb.balanced import rebalance_balanced
from dsctl.eplb.migration import rebalance_with_previous


def _balanced_case(label: str, replicas: int, nodes: int, gpus: int, policy: str) -> Case:
    return Case(
        f"eplb: balanced {label} (58x256, zipf 1.0)",
        lambda: synthetic_loads("zipf", 1.0),
        lambda w: rebalance_balanced(w, replicas, NUM_GROUPS, nodes, gpus, policy),
        target_s=1.0,
    )


def _migration_setup() -> Any:
    w = synthetic_loads("lognormal", 0.6)
    previous = rebalance_balanced(w, 288, NUM_GROUPS, 4, 32, "hierarchical")
    drifted = w * np.exp(0.1 * np.random.default_rng(1).standard_normal(w.shape))
    return drifted, previous


CASES = [
    *(_balanced_case(*layout) for layout in LAYOUTS),
    Case(
        "eplb: migration hier 288/4x8 (10% drift, 1% tolerance)",
        _migration_setup,
        lambda a: rebalance_with_previous(a[0], a[1], 288, NUM_GROUPS, 4, 32, "hierarchical", 0.01),
        target_s=None,
    ),
]
