"""dsctl health: running every check on a sampled 8-GPU node, and sampling a node through the fake NVML module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from benchmarks.case import Case
from dsctl.health import api
from dsctl.health.backends.nvml import backend_from_record
from dsctl.health.expectations import GPU_SKUS, expectations_for
from dsctl.health.sample import sample_node
from dsctl.profiles.loader import ProfileStore

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "data" / "health" / "hgx_h800_healthy.yaml"


def _record() -> dict[str, Any]:
    data = yaml.safe_load(FIXTURE.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def _sample(data: dict[str, Any]) -> Any:
    backend, fake = backend_from_record(data, "bench")
    return sample_node(backend, None, 10.0, lambda _: fake.advance())


def _checks_setup() -> tuple[Any, Any]:
    snap = _sample(_record())
    return snap, expectations_for(ProfileStore().node("h800-hgx"), GPU_SKUS[1])


def _checks(inputs: tuple[Any, Any]) -> int:
    return len(api.run_checks(inputs[0], inputs[1]).findings)


CASES = [
    Case("health: sample 8 GPUs x 18 links via fake NVML", _record, _sample, target_s=0.2),
    Case("health: run G1-G21 + R1-R10 on a snapshot", _checks_setup, _checks, target_s=0.01),
]
