"""dsctl launch: layout choice + rank map at the largest scale, and the full DeepSeek-V3 plan."""

from __future__ import annotations

from typing import Any

from benchmarks.case import Case
from dsctl.launch.layout import ParallelLayout, validate_layout
from dsctl.launch.plan import LaunchRequest, plan_launch
from dsctl.launch.rankmap import build_rank_map
from dsctl.profiles.loader import ProfileStore


def _profiles() -> tuple[Any, Any]:
    store = ProfileStore()
    return store.model("deepseek-v3"), store.node("h800-hgx")


def _layout_and_rank_map(_: Any) -> int:
    layout = ParallelLayout(2048, 8, 16, 64, 1, 1024)
    validate_layout(layout, num_layers=61, num_routed_experts=256, num_micro_batches=32)
    rmap = build_rank_map(layout)
    rmap.summary()
    return len(rmap.to_csv())


def _plan_2048(profiles: tuple[Any, Any]) -> int:
    plan = plan_launch(*profiles, LaunchRequest(2048), simulate_schedule=False)
    plan.ranks.to_csv()
    return plan.world_size


def _plan_256(profiles: tuple[Any, Any]) -> int:
    return plan_launch(*profiles, LaunchRequest(256)).world_size


CASES = [
    Case("launch: layout + rank map + ranks.csv, 2,048 nodes", lambda: None, _layout_and_rank_map, target_s=1.0),
    Case("launch: default layout choice + rank map, 2,048 nodes", _profiles, _plan_2048, target_s=1.0),
    Case("launch: full V3 plan incl. schedule sim, 256 nodes", _profiles, _plan_256, target_s=1.0),
]
