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
from dsctl.eplb import milp
from dsctl.eplb.checks import check_layout
from dsctl.eplb.exact import solve
from dsctl.eplb.metrics import placement_metrics
from dsctl.eplb.rebalance import rebalance
from dsctl.eplb.reference import rebalance_reference
from dsctl.eplb.request import RebalanceRequest
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
    Case("eplb: metrics + bounds (with the slot bound) hier 288/4x8", _metrics_setup,
         lambda a: placement_metrics(*a), target_s=0.15),
    Case("eplb: rebalance() reference + metrics hier 288/4x8", _full_setup,
         lambda w: rebalance(w, RebalanceRequest(replicas=288, gpus=32, nodes=4, groups=8)), target_s=0.2),
    Case("eplb: parse 58x256 CSV statistics", _csv_setup, lambda b: parse_stats("s.csv", b), target_s=0.05),
]


#: vllm-ascend#3042: 8 experts on 8 GPUs x 2 slots (exact optimum 196.67)
_ASCEND_3042 = np.array([[600.0, 560, 120, 120, 20, 10, 10, 10]])


def _small_instances() -> list[tuple[np.ndarray, int, int, int, int]]:
    """20 random small instances (7-8 experts, 4 GPUs x 3 slots or 8 GPUs x 2 slots, lognormal sigma 1.2)."""
    rng = np.random.default_rng(7)
    out = []
    for i in range(20):
        gpus, k = (4, 3) if i % 2 else (8, 2)
        out.append((np.round(rng.lognormal(0, 1.2, (1, int(rng.integers(7, 9)))) * 100), k * gpus, 1, 1, gpus))
    return out


def _solve_all(cases: list[tuple[np.ndarray, int, int, int, int]]) -> None:
    for w, replicas, groups, nodes, gpus in cases:
        solve(w, replicas, gpus, groups, nodes)


def _pareto_setup() -> Any:
    rng = np.random.default_rng(3)
    w0 = rng.lognormal(0, 1.0, (58, 256)) * 1000
    w1 = np.round(w0 * np.exp(0.1 * rng.standard_normal(w0.shape)))
    request = RebalanceRequest(replicas=288, gpus=32, nodes=4, groups=8, algorithm="balanced")
    previous = rebalance(np.round(w0), request).placement
    return w1, previous


CASES += [
    Case("eplb: exact optimum vllm-ascend#3042 (8 experts, 8x2, no start)", lambda: _ASCEND_3042,
         lambda w: solve(w, 16, 8), target_s=2.0),
    Case("eplb: exact optimum 20 small instances (7-8 experts, 4x3 / 8x2)", _small_instances, _solve_all,
         target_s=30.0),
    Case("eplb: Pareto search --previous, 6+1 candidates, hier 288/4x8 (58x256)", _pareto_setup,
         lambda a: rebalance(a[0], RebalanceRequest(replicas=288, gpus=32, nodes=4, groups=8, algorithm="balanced",
                                                    previous=a[1])), target_s=30.0),
]

if milp.available():  # the dsctl[milp] extra
    CASES += [
        Case("eplb: MILP proves vllm-ascend#3042 from its optimum (8 experts, 8x2)", lambda: _ASCEND_3042,
             lambda w: milp.solve(w, 16, 8, start=np.array([590 / 3])), target_s=5.0),
    ]
