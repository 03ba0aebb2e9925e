"""Step-time prediction (``dsctl.steptime.predict_step``): DeepSeek-V3 on 2,048 H800, PP16 EP64 DP128 DualPipe.

Target 50 ms per layout so that a search over thousands of layouts stays interactive (issue 27).
"""

from __future__ import annotations

from typing import Any

from benchmarks.case import Case
from dsctl.launch.layout import ParallelLayout
from dsctl.profiles.loader import ProfileStore
from dsctl.steptime import predict_step


def _setup() -> Any:
    store = ProfileStore()
    layout = ParallelLayout(num_nodes=256, gpus_per_node=8, pp=16, ep=64, tp=1, dp=128, schedule="dualpipe")
    return store.model("deepseek-v3"), store.node("h800-hgx"), layout


def _predict(inputs: Any) -> Any:
    model, node, layout = inputs
    return predict_step(model, node, layout, 120)


CASES = [
    Case("steptime: DeepSeek-V3 on 2,048 H800 (PP16 EP64 DualPipe, 120 micro-batches)", _setup, _predict, 0.05),
]


def _predict_cold(inputs: Any) -> Any:
    from dsctl.launch.schedule.timed import _prepared

    _prepared.cache_clear()
    return _predict(inputs)


CASES.append(Case("steptime: the same, schedule programs rebuilt (first layout of a shape)", _setup, _predict_cold,
                  0.05))
