"""The optional numba kernels (``pip install dsctl[fast]``) against the numpy reference on random ECMP cases.

Routes must be the same links (the kernels draw the same random numbers); rates, link loads and carried bytes
within 1e-9 relative (they come out bit-identical for whole-number members). Skipped where numba is absent: the
numpy path is then the only one the simulator takes.
"""

from __future__ import annotations

import functools
import sys

import numpy as np
import pytest

from dsctl.topology.api import plan_files
from dsctl.topology.plan import PlanSpec, build_plan, default_planes, default_templates
from dsctl.topology.sim import compiled
from dsctl.topology.sim.graph import SimGraph, build_graph, failed_links
from dsctl.topology.sim.maxmin import max_min, route_loads
from dsctl.topology.sim.routing import _compiled_ecmp, next_hops, route_flows
from dsctl.topology.summary import summarize

# slow: the first test compiles the kernels (10-20 s on a loaded machine; later runs load them from the cache)
kernels = pytest.mark.skipif(not compiled.available(), reason="numba (the dsctl[fast] extra) is not installed")
RTOL = 1e-9
#: buffers shared by the odd cases, as the simulator reuses them plane after plane (sizes differ case to case)
SCRATCH = compiled.Scratch()


@functools.cache
def _graph(kind: str, nodes: int) -> SimGraph:
    spec = PlanSpec(kind, nodes, 8, 8, default_planes(kind, 8), 64, 400.0, 82045.0, 544.0, 544.0, 1.0,
                    default_templates(kind), "h800-hgx", "ib-ndr-64")
    plan = build_plan(spec)
    return build_graph(plan_files(plan, summarize(plan))["plan.json"], "plan.json", 200e9)


def _flows(graph: SimGraph, rng: np.random.Generator, num: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``num`` random NIC pairs of one plane (NIC endpoints of plane 0), members 1..8 or all 8."""
    eps = np.flatnonzero(graph.ep_leaf >= 0)
    plane0 = eps[graph.link_plane[graph.ep_up[eps]] == graph.link_plane[graph.ep_up[eps[0]]]]
    src, dst = rng.choice(plane0, num), rng.choice(plane0, num)
    keep = src != dst
    members = rng.integers(1, 9, num).astype(np.float64) if rng.random() < 0.5 else np.full(num, 8.0)
    return src[keep], dst[keep], members[keep]


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    scale = max(float(np.abs(b).max(initial=0.0)), 1e-300)
    return bool(np.all(np.abs(a - b) <= RTOL * scale))


@pytest.mark.slow
@kernels
@pytest.mark.parametrize("case", range(12))
def test_the_kernels_match_the_numpy_reference_on_random_ecmp_cases(case: int) -> None:
    rng = np.random.default_rng(case)
    kind, nodes = (("mpft", 64), ("mpft", 96), ("ft3", 32))[case % 3]
    graph = _graph(kind, nodes)
    # random failed cables; on MPFT every other case also a dead leaf and a NIC cable (flows without a live path)
    named = ["p0-leaf01", "node0003:mlx5_0"] if kind == "mpft" and case % 2 else []
    dead, _ = failed_links(graph, named, int(rng.integers(0, 6)), case)
    src, dst, members = _flows(graph, rng, int(rng.integers(500, 6000)))
    if case % 2:  # the all-to-all builder hands over int32 endpoint ids
        src, dst = src.astype(np.int32), dst.astype(np.int32)
    hops = next_hops(graph, dead)
    seed = int(rng.integers(0, 1 << 30))
    reference = route_flows(graph, hops, dead, src, dst, "ecmp", seed)
    scratch = SCRATCH if case % 2 else None
    fast = _compiled_ecmp(graph, hops, dead, src, dst, seed, scratch)
    assert np.array_equal(fast.flow_routes, reference.flow_routes)
    assert np.array_equal(fast.routable, reference.routable)
    nbytes = rng.uniform(1e3, 1e9, len(members)) if case % 3 else np.broadcast_to(3e6, members.shape)
    if case % 4 == 0:  # one value broadcast, as the traffic builders hand over constant columns
        members = np.broadcast_to(members[0], members.shape)
    carried_weight = members * nbytes
    want = max_min(reference.flow_routes, members, graph.link_cap, reference.bundle_ptr, reference.bundle_link,
                   reference.bundle_frac)
    want_carried = route_loads(reference.flow_routes, carried_weight, graph.num_links, reference.bundle_ptr,
                               reference.bundle_link, reference.bundle_frac)
    got, got_carried = compiled.compiled_max_min(fast.flow_routes, members, graph.link_cap, nbytes, scratch)
    assert _close(got.rate, want.rate)
    assert _close(got.link_load, want.link_load)
    assert _close(got_carried, want_carried)
    assert got.rounds == want.rounds
    if named:
        assert not reference.routable.all()
    assert not dead[reference.flow_routes[reference.flow_routes >= 0]].any()


@pytest.mark.slow
@kernels
def test_the_kernel_solves_the_textbook_case_and_keeps_unrouted_flows_at_zero() -> None:
    """Links A (cap 1) and B (cap 2): f0 on A, f1 on A and B, f2 on B, f3 on nothing: 1/2, 1/2, 3/2, 0."""
    routes = np.array([[0, -1], [0, 1], [1, -1], [-1, -1]], dtype=np.int32)
    sol, carried = compiled.compiled_max_min(routes, np.ones(4), np.array([1.0, 2.0]), np.array([1.0, 2, 4, 8]))
    assert compiled.compiled_max_min(routes, np.full(4, 2.0), np.array([1.0, 2.0]), np.ones(4))[0].rounds == 2
    assert np.allclose(sol.rate, [0.5, 0.5, 1.5, 0.0])
    assert np.allclose(sol.link_load, [1.0, 2.0])
    assert np.allclose(carried, [3.0, 6.0])
    assert sol.rounds == 2


def test_scratch_parts_are_aligned_side_by_side_and_a_short_buffer_grows() -> None:
    """Parts of one buffer do not overlap, start on 64-byte boundaries, and share memory with the parts taken from
    the same buffer before; a larger request replaces the buffer, a smaller one reuses it."""
    scratch = compiled.Scratch()
    a, b = scratch.take("work", [(3, np.int16), (5, np.float64)])
    assert (a.dtype, len(a), b.dtype, len(b)) == (np.int16, 3, np.float64, 5)
    assert b.ctypes.data - a.ctypes.data == 64 and b.ctypes.data % 64 == a.ctypes.data % 64
    a[:] = 7
    b[:] = 1.5
    assert a.tolist() == [7, 7, 7] and b.tolist() == [1.5] * 5
    (c,) = scratch.take("work", [(4, np.int32)])
    assert c.ctypes.data == a.ctypes.data  # the same memory, reused
    (d,) = scratch.take("work", [(1000, np.float64)])
    assert len(d) == 1000 and d.base is not None and len(d.base) >= 8000
    (e,) = scratch.take("routes", [(0, np.int32)])
    assert len(e) == 0


def test_a_changed_rate_fails_the_comparison() -> None:
    """The 1e-9 comparison can fail: a rate moved by 1e-8 relative is caught."""
    rate = np.array([1.0, 2.0, 3.0])
    assert _close(rate * (1 + 1e-12), rate)
    assert not _close(rate * np.array([1, 1 + 1e-8, 1]), rate)


def test_the_kernels_are_chosen_for_large_ecmp_planes_only_and_numba_can_be_hidden(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Adaptive and static planes, and ECMP planes below MIN_FLOWS, stay on numpy; a hidden numba (what
    ``benchmarks.sim_peaks --numpy`` does) is not available."""
    assert not compiled.chosen("adaptive", 1 << 24)
    assert not compiled.chosen("static", 1 << 24)
    assert not compiled.chosen("ecmp", compiled.MIN_FLOWS - 1)
    assert compiled.chosen("ecmp", compiled.MIN_FLOWS) == compiled.available()
    monkeypatch.setitem(sys.modules, "numba", None)
    assert not compiled.available()
    assert not compiled.chosen("ecmp", 1 << 24)
