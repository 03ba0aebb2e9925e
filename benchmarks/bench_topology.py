"""dsctl topology: full-size plans with every output file, and verification of a full fabric."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.case import Case
from dsctl.output.files import write_files
from dsctl.profiles.loader import ProfileStore
from dsctl.topology.api import make_spec, plan_files, plan_with_files, verify_texts
from dsctl.topology.export import cabling_csv
from dsctl.topology.observed import render_ibnetdiscover
from dsctl.topology.plan import PlanSpec, build_plan
from dsctl.topology.summary import summarize


def _spec(kind: str, nodes: int, radix: int | None = None) -> PlanSpec:
    store = ProfileStore()
    return make_spec(kind, nodes, store.node("h800-hgx"), store.switch("ib-ndr-64"), radix=radix)


def _plan_and_files(spec: PlanSpec) -> int:
    """Plan, render every file and stream it into a staged folder, as ``plan --out-dir`` does; bytes written."""
    _, files = plan_with_files(spec, with_files=True)
    folder = Path(tempfile.mkdtemp(prefix="dsctl-bench-"))
    try:
        written = write_files(folder / "plan", files)
        return sum(path.stat().st_size for path in written)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _verify_setup() -> tuple[str, str]:
    plan = build_plan(_spec("mpft", 2048))
    files = plan_files(plan, summarize(plan))
    links = [tuple(r.split(",")[3:7]) for r in cabling_csv(plan).splitlines()[1:]]
    radix = {n: 64 for n, t in zip(plan.device_names, plan.device_tier, strict=True) if t > 0}
    return files["plan.json"], render_ibnetdiscover(links, radix)  # type: ignore[arg-type]


def _verify(inputs: Any) -> int:
    plan_json, observed = inputs
    return verify_texts(plan_json, observed, "plan.json", "fabric.ibnet").matched_cables


CASES = [
    Case("topology: mpft 2,048 nodes x 8 planes, plan + all files", lambda: _spec("mpft", 2048),
         _plan_and_files, target_s=2.0),
    Case("topology: ft3 65,536 endpoints, plan + all files", lambda: _spec("ft3", 8192), _plan_and_files,
         target_s=10.0),
    Case("topology: ft3 524,288 endpoints (radix 128), plan + all files to disk (670 MB)",
         lambda: _spec("ft3", 65536, 128), _plan_and_files, target_s=10.0, target_cpu=True),
    Case("topology: verify 32,768 cables from ibnetdiscover text", _verify_setup, _verify, target_s=5.0),
]
