"""dsctl topology verify on the acceptance scenario: 16,384 GPUs, 8 planes, one dump per plane, 15 damage kinds."""

from __future__ import annotations

from typing import Any

from benchmarks.case import Case
from benchmarks.verify_damage import Scenario, scenario, score
from dsctl.topology.api import verify_texts


def _run(sc: Scenario) -> Any:
    result = verify_texts(sc.plan_json, sc.dumps, "plan.json", name_map=("map", sc.name_map),
                          guids=("guids", sc.recorded_guids), counters=sc.counters)
    recall, missed, false = score(result, sc)
    if recall < 1 or false:
        raise AssertionError(f"recall {recall:.3f}, missed {missed}, false {false}")
    return result.matched_cables


CASES = [
    Case("topology: verify 8 dumps (16,384 GPUs), 15 seeded damage kinds, name map, GUIDs, counters",
         lambda: scenario(2048), _run, target_s=10.0),
]


def _topo_setup() -> tuple[str, list[tuple[str, str]]]:
    from dsctl.profiles.loader import ProfileStore
    from dsctl.topology.api import make_spec, plan_files
    from dsctl.topology.plan import build_plan
    from dsctl.topology.summary import summarize

    store = ProfileStore()
    plan = build_plan(make_spec("mpft", 2048, store.node("h800-hgx"), store.switch("ib-ndr-64")))
    files = plan_files(plan, summarize(plan))
    return files["plan.json"], [(n, t) for n, t in files.items() if n.endswith(".topo")]


def _topo_run(inputs: tuple[str, list[tuple[str, str]]]) -> Any:
    plan_json, dumps = inputs
    result = verify_texts(plan_json, dumps, "plan.json")
    if result.findings or result.matched_cables != result.expected_cables:
        raise AssertionError(f"{len(result.findings)} findings, {result.matched_cables} matched")
    return result.matched_cables


CASES.append(Case("topology: verify the plan's 8 ibdiagnet topology files (16,384 GPUs; round trip, 0 findings)",
                  _topo_setup, _topo_run, target_s=10.0))
