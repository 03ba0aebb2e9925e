"""Identical planes solved once (issue 30: 16,384-GPU simulate in seconds): the mapped planes give exactly what
solving every plane gives, and symmetry is used only where it holds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import dsctl.topology.sim.solve as solve
from dsctl.topology.sim.api import SimRequest, Workload, run
from dsctl.topology.sim.solve import SimResult
from tests.unit.test_topology_simulate import NVLINK, V3, plan_text


def _run(text: str, workload: str, routing: str, **kw: object) -> SimResult:
    fail = tuple(kw.pop("fail", ()))  # type: ignore[call-overload]
    return run(text, "plan.json", NVLINK, SimRequest(Workload(workload, workload, **kw), routing, 0, fail,  # type: ignore[arg-type]
                                                     model=V3))


def _same(a: SimResult, b: SimResult) -> None:
    for f in dataclasses.fields(SimResult):
        if f.name == "mirrored_planes":
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert np.allclose(x, y, rtol=1e-12, atol=0), f.name
        else:
            assert x == y, f.name


@pytest.mark.parametrize(("kind", "nodes", "workload", "routing", "extra"), [
    ("mpft", 16, "alltoall", "adaptive", {}),
    ("mpft", 16, "alltoall", "static", {}),
    ("mpft", 40, "ep-dispatch", "adaptive", {"ep_gpus": 64}),
    ("mpft", 40, "ep-combine", "adaptive", {"ep_gpus": 32}),
    ("mpft", 24, "allreduce", "adaptive", {}),
])
def test_mirrored_planes_give_what_solving_every_plane_gives(kind: str, nodes: int, workload: str, routing: str,
                                                            extra: dict[str, object],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    text = plan_text(kind, nodes, 16)
    fast = _run(text, workload, routing, **dict(extra))
    assert fast.mirrored_planes == list(range(1, 8))
    monkeypatch.setattr(solve, "plane_maps", lambda *a: {})
    slow = _run(text, workload, routing, **dict(extra))
    assert slow.mirrored_planes == []
    _same(fast, slow)


def test_no_symmetry_under_ecmp_or_with_a_failure_or_a_permutation() -> None:
    text = plan_text("mpft", 16, 16)
    assert _run(text, "alltoall", "ecmp").mirrored_planes == []  # each plane hashes with its own seed
    assert _run(text, "alltoall", "adaptive", fail=("p3-spine01",)).mirrored_planes == []
    assert _run(text, "permutation", "adaptive").mirrored_planes != list(range(1, 8))  # flows differ by plane
