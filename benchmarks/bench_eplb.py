"""dsctl eplb at DeepSeek-V3 scale: 58 MoE layers x 256 experts, 8 groups.

Targets for the reference mode are 1/100 of DeepSeek's torch reference measured side by side on the same
machine (benchmarks/eplb_vs_reference.py; see docs/eplb.md): >= 100x faster.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from benchmarks.case import Case
from benchmarks.eplb_layouts import LAYOUTS
from dsctl.eplb.checks import check_layout
from dsctl.eplb.metrics import placement_metrics
from dsctl.eplb.rebalance import rebalance
from dsctl.eplb.reference import rebalance_reference
from dsctl.eplb.stats import parse_stats

#: DeepSeek's torch reference, seconds per 58-layer plan measured side by side (1 thread), by layout label
REFERENCE_S = {"hier 288 / 4x8": 1.075, "hier 320 / 8x8": 0.872, "global 288 / 32": 2.587, "global 320 / 64": 3.663}


def _loads(seed: int = 1234) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = 1e6 / np.arange(1, 257)
    w = np.stack([rng.permutation(base) for _ in range(58)]) * rng.lognormal(0, 0.1, (58, 256))
    return w.astype(np.float32)


def _reference_case(label: str, replicas: int, nodes: int, gpus: int, policy: str, ref_s: float) -> Case:
    return Case(f"eplb: reference {label} (58x256)", _loads,
                lambda w: rebalance_reference(w, replicas, 8, nodes, gpus, policy), target_s=ref_s / 100)


def _full_setup() -> Any:
    return _loads()


def _metrics_setup() -> Any:
    w = _loads()
    return w, rebalance_reference(w, 288, 8, 4, 32), check_layout(58, 256, 288, 8, 4, 32)


def _csv_setup() -> bytes:
    buf = io.StringIO()
    np.savetxt(buf, np.round(_loads()), delimiter=",", fmt="%d")
    return buf.getvalue().encode()


CASES = [
    *(_reference_case(*layout, REFERENCE_S[layout[0]]) for layout in LAYOUTS),
    Case("eplb: metrics + bounds hier 288/4x8", _metrics_setup, lambda a: placement_metrics(*a), target_s=0.05),
    Case("eplb: rebalance() reference + metrics hier 288/4x8", _full_setup,
         lambda w: rebalance(w, num_replicas=288, num_gpus=32, num_nodes=4, num_groups=8), target_s=0.1),
    Case("eplb: parse 58x256 CSV statistics", _csv_setup, lambda b: parse_stats("s.csv", b), target_s=0.05),
]
