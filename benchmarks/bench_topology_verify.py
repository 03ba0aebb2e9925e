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
