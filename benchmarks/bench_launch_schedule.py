"""Pipeline schedule simulation (``dsctl launch schedule``): generate, time and summarise every rank's ops."""

from __future__ import annotations

from typing import Any

from benchmarks.case import Case
from dsctl.launch.schedule import OpCosts, simulate, timeline_svg


def _run(schedule: str, pp: int, mb: int, model: str = "ideal") -> Any:
    return lambda _: simulate(schedule, pp, mb, OpCosts(1, 2, 1, 2.5), model)


def _svg(_: Any) -> str:
    return timeline_svg(simulate("dualpipe", 16, 64))


CASES = [
    Case("launch schedule: dualpipe PP16, 64 micro-batches", lambda: None, _run("dualpipe", 16, 64), 1.0),
    Case("launch schedule: dualpipev 16 stages, 64 micro-batches", lambda: None, _run("dualpipev", 16, 64), 1.0),
    Case("launch schedule: 1f1b PP16, 64 micro-batches", lambda: None, _run("1f1b", 16, 64), 1.0),
    Case("launch schedule: zb1p PP16, 64 micro-batches", lambda: None, _run("zb1p", 16, 64), 1.0),
    Case("launch schedule: dualpipe PP16, 64, batched model", lambda: None, _run("dualpipe", 16, 64, "batched"),
         1.0),
    Case("launch schedule: dualpipe PP16, 64 + SVG", lambda: None, _svg, 1.0),
    Case("launch schedule: dualpipe PP16, 1024 micro-batches", lambda: None, _run("dualpipe", 16, 1024), 2.0),
]
