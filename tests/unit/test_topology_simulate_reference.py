"""The simulator's results stay what they were before the issue 32 speed-ups (1e-9 relative), 256-2,048 GPUs.

tests/data/topology/sim_reference.json was recorded by the solver as it stood on main before issue 32 (identical
planes already mapped), with ``python tests/unit/test_topology_simulate_reference.py --write``; rewrite it only
when a change of results is intended. Each case records the job, plane and GPU figures the output prints and a
digest of the per-link utilisation (sum, sum of squares, an index-weighted sum that a permutation changes, max).
Progressive-filling rounds are not compared: batching rounds changes their count, not the rates.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dsctl.profiles.loader import ProfileStore
from dsctl.topology.api import make_spec, plan_files
from dsctl.topology.plan import build_plan
from dsctl.topology.sim import SimRequest, Workload, run
from dsctl.topology.sim.api import EpModel
from dsctl.topology.summary import summarize

DATA = Path(__file__).resolve().parents[1] / "data" / "topology" / "sim_reference.json"
RTOL = 1e-9
WORKLOADS = ("alltoall", "ep-dispatch", "ep-combine")
ROUTINGS = ("adaptive", "ecmp", "static")


#: a leaf of plane 2 and one NIC cable: flows without a live path (unroutable) besides re-routed ones
DEAD = ("p2-leaf02", "node0003:mlx5_5")


def _cases() -> list[tuple[int, str, str, int, bool]]:
    """(nodes, workload, routing, random failed cables (-1: the devices of DEAD), reflow)."""
    out = [(32, w, r, 0, False) for w in WORKLOADS for r in ROUTINGS]  # one leaf per plane: nothing to fail
    out += [(64, w, r, f, False) for w in WORKLOADS for r in ROUTINGS for f in (0, 3, -1)]
    out += [(64, "alltoall", "adaptive", 0, True), (64, "ep-dispatch", "ecmp", 2, True)]
    out += [(256, w, r, f, False) for w in WORKLOADS for r in ("adaptive", "ecmp") for f in (0, 4)]
    return out


def _name(case: tuple[int, str, str, int, bool]) -> str:
    nodes, work, routing, fail, reflow = case
    return f"{nodes * 8}gpu-{work}-{routing}-fail{fail}" + ("-reflow" if reflow else "")


_PLANS: dict[int, str] = {}


def _plan(nodes: int) -> str:
    if nodes not in _PLANS:
        store = ProfileStore()
        plan = build_plan(make_spec("mpft", nodes, store.node("h800-hgx"), store.switch("ib-ndr-64")))
        _PLANS[nodes] = plan_files(plan, summarize(plan))["plan.json"]
    return _PLANS[nodes]


def _spread(s: Any) -> list[float]:
    return [s.min, s.median, s.max, s.mean]


def _digest(case: tuple[int, str, str, int, bool]) -> dict[str, Any]:
    nodes, work, routing, fail, reflow = case
    request = SimRequest(Workload("w", work, size_bytes=float(1 << 28), tokens_per_gpu=4096), routing, seed=5,
                         fail_random=max(fail, 0),
                         fail=DEAD if fail < 0 else (), model=EpModel(7168, 8, 4), reflow=reflow, nic_efficiency=0.9)
    r = run(_plan(nodes), "plan.json", 160e9, request)
    util = r.link_utilisation
    weight = (np.arange(len(util)) * 2654435761 % 1000) / 1000.0
    return {
        "completion_s": r.completion_s, "lower_bound_s": r.lower_bound_s, "gpu": _spread(r.gpu_bytes_per_s),
        "nvlink_max": r.nvlink_max_utilisation, "unroutable": r.unroutable_flows, "failed": r.failed,
        "jobs": [[j.completion_s, *_spread(j.gpu_bytes_per_s), j.algbw_bytes_per_s, j.unroutable_transfers,
                  *_spread(j.logical_bytes_per_s)] for j in r.jobs],
        "planes": [[p.flows, p.max_utilisation, p.mean_uplink_utilisation, *_spread(p.gpu_bytes_per_s)]
                   for p in r.planes],
        "hottest": [[h.name, h.utilisation, h.bytes_per_s] for h in r.hottest_links],
        "util": [float(util.sum()), float((util ** 2).sum()), float((util * weight).sum()), float(util.max())],
    }


def _close(got: Any, want: Any, where: str) -> None:
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            _close(g, w, f"{where}[{k}]")
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=RTOL, abs=1e-300), where
    else:
        assert got == want, where


def _check(case: tuple[int, str, str, int, bool]) -> None:
    want = json.loads(DATA.read_text())[_name(case)]
    got = json.loads(json.dumps(_digest(case)))
    for key, value in want.items():
        if key == "hottest":  # ties among equally hot links may list in either order: compare the values
            _close(sorted(h[1:] for h in got[key]), sorted(h[1:] for h in value), key)
        else:
            _close(got[key], value, key)


@pytest.mark.parametrize("case", [c for c in _cases() if c[0] <= 64], ids=_name)
def test_256_and_512_gpus_match_the_recorded_results(case: tuple[int, str, str, int, bool]) -> None:
    _check(case)


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in _cases() if c[0] == 256], ids=_name)
def test_2048_gpus_match_the_recorded_results(case: tuple[int, str, str, int, bool]) -> None:
    _check(case)


def test_a_changed_result_fails_the_comparison() -> None:
    with pytest.raises(AssertionError):
        _close([1.0, [2.0]], [1.0, [2.0 * (1 + 1e-8)]], "x")


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    DATA.write_text(json.dumps({_name(c): _digest(c) for c in _cases()}, indent=1) + "\n")
