"""dsctl launch: layout choice + rank map at the largest scale, and the full DeepSeek-V3 plan."""

from __future__ import annotations

from typing import Any

from benchmarks.case import Case
from dsctl.launch.layout import ParallelLayout, validate_layout
from dsctl.launch.minnodes import min_nodes
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


def _min_nodes_v3(profiles: tuple[Any, Any]) -> int | None:
    return min_nodes(*profiles, LaunchRequest(1))  # 128 (the memory rule: ZeRO-1, tp 1)


def _min_nodes_v3_searched(profiles: tuple[Any, Any]) -> int | None:
    from dsctl.launch.search import SearchOptions

    return min_nodes(*profiles, LaunchRequest(1), search=SearchOptions())  # 16 (tp, ZeRO-3, every recipe)


def _min_nodes_every_count(profiles: tuple[Any, Any]) -> int | None:
    # no count splits 7 sequences into 3 micro-batches: all 16,384 counts are scanned (the slowest request known)
    return min_nodes(*profiles, LaunchRequest(1, schedule="1f1b", micro_batches=3, global_batch=7))


def _search_2048_gpus(profiles: tuple[Any, Any]) -> int:
    """Issue 28: every layout for 256 nodes x 8 GPUs evaluated (structure, memory, predicted step) and ranked."""
    from dsctl.launch.candidates import PlanInputs
    from dsctl.launch.memory import MemoryAssumptions
    from dsctl.launch.ranking import search_layouts
    from dsctl.launch.search import SearchOptions
    from dsctl.model.params import count_parameters

    model, node = profiles
    inputs = PlanInputs(model, node, LaunchRequest(256), count_parameters(model), MemoryAssumptions())
    return search_layouts(inputs, SearchOptions()).num_evaluated  # 38,880 (tp 1/2/4/8, 5 schedules, ZeRO-1/2/3)


CASES = [
    Case("launch: layout search by predicted step, V3 on 2,048 GPUs (38,880 layouts)", _profiles, _search_2048_gpus,
         target_s=5.0),
    Case("launch: layout + rank map + ranks.csv, 2,048 nodes", lambda: None, _layout_and_rank_map, target_s=1.0),
    Case("launch: default layout choice + rank map, 2,048 nodes", _profiles, _plan_2048, target_s=1.0),
    Case("launch: full V3 plan incl. schedule sim, 256 nodes", _profiles, _plan_256, target_s=1.0),
    Case("launch: --min-nodes, V3 on h800-hgx (exact scan)", _profiles, _min_nodes_v3, target_s=0.5),
    Case("launch: --min-nodes over the search's space, V3 on h800-hgx", _profiles, _min_nodes_v3_searched,
         target_s=8.0),
    Case("launch: --min-nodes, no count fits, 16,384 scanned", _profiles, _min_nodes_every_count, target_s=2.0),
]
