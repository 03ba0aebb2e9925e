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
    from dsctl.launch.schedule import timed

    timed.prepared_schedule.cache_clear()
    timed._ideal_plan.cache_clear()  # and the shape's recorded op order, built from its second timing on
    timed._TIMED_ONCE.clear()
    return _predict(inputs)


CASES.append(Case("steptime: the same, schedule programs rebuilt (first layout of a shape)", _setup, _predict_cold,
                  0.05))


def _setup_fabric() -> Any:
    """The same layout on a planned non-blocking MPFT of 256 nodes; its EP groups simulated once (cached)."""
    from dsctl.topology.api import plan_files
    from dsctl.topology.plan import PlanSpec, build_plan, default_planes, default_templates
    from dsctl.topology.summary import summarize

    spec = PlanSpec("mpft", 256, 8, 8, default_planes("mpft", 8), 64, 400.0, 82045.0, 544.0, 544.0, 1.0,
                    default_templates("mpft"), "h800-hgx", "ib-ndr-64")
    plan = build_plan(spec)
    inputs = (*_setup(), plan_files(plan, summarize(plan))["plan.json"])
    _predict_fabric(inputs)
    return inputs


def _predict_fabric(inputs: Any) -> Any:
    model, node, layout, plan = inputs
    return predict_step(model, node, layout, 120, fabric_plan=plan)


CASES.append(Case("steptime: the same on a planned fabric (256-node MPFT plan, EP groups simulated once)",
                  _setup_fabric, _predict_fabric, 0.05))
