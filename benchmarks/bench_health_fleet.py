"""dsctl health fleet: aggregating 2,048 node reports (256 nodes x 8 GPUs is 256 reports; 2,048 is a 16k-GPU fleet).

The reports are real ``dsctl health check --format json`` documents (healthy H800 plus faulty records), read back
with ``json.loads`` as the runner does. The srun fan-out over emulated Slurm nodes is measured by
``python -m benchmarks.fleet_slurm`` (it needs the CI cluster).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.bench_health import _record, _sample
from benchmarks.case import Case
from dsctl.health import api
from dsctl.health.expectations import GPU_SKUS, expectations_for
from dsctl.health.fleet import NodeInput, aggregate, fleet_gauges
from dsctl.output.prometheus import render_fleet
from dsctl.profiles.loader import ProfileStore

NUM_REPORTS = 2048
DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "health"


def _documents() -> list[dict[str, Any]]:
    """One healthy document and three faulty ones, as JSON text parsed back."""
    import yaml

    exp = expectations_for(ProfileStore().node("h800-hgx"), GPU_SKUS[1])
    docs = [api.run_checks(_sample(_record()), exp).to_data()]
    for name in ("nvlink_link_down", "row_remap_pending", "fabric_not_started"):
        data = yaml.safe_load((DATA / f"{name}.yaml").read_text(encoding="utf-8"))
        docs.append(api.run_checks(_sample(data), exp).to_data())
    return [json.loads(json.dumps(d)) for d in docs]


def _items() -> list[NodeInput]:
    docs = _documents()
    items = []
    for i in range(NUM_REPORTS):  # ~2% faulty of each kind, ~1% unreachable
        name = f"node{i:04d}"
        if i % 97 == 13:
            items.append(NodeInput(name, None, "no answer within 120 s (killed on the node)"))
            continue
        doc = docs[1] if i % 50 == 7 else docs[2] if i % 70 == 3 else docs[3] if i % 300 == 11 else docs[0]
        items.append(NodeInput(name, doc))
    return items


def _prometheus(items: list[NodeInput]) -> int:
    report = aggregate(items)
    return len(render_fleet(report, 0.0, fleet_gauges(items)))


CASES = [
    Case(f"health fleet: aggregate {NUM_REPORTS} node reports", _items, aggregate, target_s=1.0),
    Case(f"health fleet: aggregate + Prometheus text, {NUM_REPORTS} nodes", _items, _prometheus, target_s=2.0),
]
