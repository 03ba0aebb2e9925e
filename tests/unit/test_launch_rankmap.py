"""Rank-map invariants (hypothesis) and the documented order."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.launch.layout import ParallelLayout
from dsctl.launch.rankmap import GROUP_KINDS, build_rank_map, compact_ranks, stages_of_rank
from dsctl.launch.rules import divisors


@st.composite
def layouts(draw: st.DrawFn) -> ParallelLayout:
    gpn = draw(st.sampled_from([1, 2, 4, 8]))
    nodes = draw(st.integers(1, 64))
    world = nodes * gpn
    tp = draw(st.sampled_from(divisors(gpn)))
    pp = draw(st.sampled_from(divisors(world // tp)))
    dp = world // (pp * tp)
    stage_ranks = tp * dp
    eps = [e for e in divisors(stage_ranks) if gpn % e == 0 or e % gpn == 0]
    ep = draw(st.sampled_from(eps))
    return ParallelLayout(nodes, gpn, pp, ep, tp, dp, schedule="1f1b")


@settings(max_examples=80, deadline=None)
@given(layouts())
def test_rank_map_invariants(layout: ParallelLayout) -> None:
    rmap = build_rank_map(layout)
    world = layout.world_size
    # every rank exactly once, coordinates in range, rank = node * gpn + local
    cols = rmap.columns()
    assert np.array_equal(cols["node"] * layout.gpus_per_node + cols["local_gpu"], np.arange(world))
    coords = np.stack([rmap.pp, rmap.dp, rmap.tp], axis=1)
    assert len({tuple(c) for c in coords.tolist()}) == world
    expert = np.stack([rmap.pp, rmap.edp, rmap.ep], axis=1)
    assert len({tuple(c) for c in expert.tolist()}) == world
    sizes = {"tp": layout.tp, "dp": layout.dp, "pp": layout.pp, "ep": layout.ep, "edp": layout.expert_dp}
    for kind in GROUP_KINDS:
        groups = rmap.groups(kind)
        assert groups.shape == (world // sizes[kind], sizes[kind])
        assert np.array_equal(np.sort(groups.ravel()), np.arange(world))  # a partition of the ranks
    # members of a group differ only in that group's coordinate
    for kind, fixed in (("tp", ("pp", "dp")), ("dp", ("pp", "tp")), ("pp", ("dp", "tp")),
                        ("ep", ("pp", "edp")), ("edp", ("pp", "ep"))):
        groups = rmap.groups(kind)
        for name in fixed:
            values = getattr(rmap, name)[groups]
            assert np.all(values == values[:, :1])
        assert np.all(np.diff(getattr(rmap, kind)[groups], axis=1) == 1)
    # EP groups span the fewest nodes possible and, from one node up, every plane equally
    ep_nodes = rmap.nodes_per_group("ep")
    assert np.all(ep_nodes == math.ceil(layout.ep / layout.gpus_per_node))
    if layout.ep >= layout.gpus_per_node:
        assert np.all(rmap.planes_per_group("ep") == layout.gpus_per_node)
        planes = rmap.plane[rmap.groups("ep")]
        counts = np.stack([(planes == p).sum(axis=1) for p in range(layout.gpus_per_node)], axis=1)
        assert np.all(counts == layout.ep // layout.gpus_per_node)
    # TP stays inside a node
    assert np.all(rmap.nodes_per_group("tp") == 1)


def test_megatron_example_world_16() -> None:
    # launch-facts.md section 4: world 16, TP1, PP2, EP4
    rmap = build_rank_map(ParallelLayout(2, 8, 2, 4, 1, 8))
    assert rmap.groups("dp").tolist() == [list(range(8)), list(range(8, 16))]
    assert rmap.groups("ep").tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert rmap.groups("edp").tolist()[:2] == [[0, 4], [1, 5]]
    assert rmap.groups("pp").tolist()[:2] == [[0, 8], [1, 9]]


def test_deepseek_v3_rank_map() -> None:
    rmap = build_rank_map(ParallelLayout(256, 8, 16, 64, 1, 128))
    summary = {g.kind: g for g in rmap.summary().groups}
    assert (summary["ep"].num_groups, summary["ep"].group_size) == (32, 64)
    assert summary["ep"].max_nodes_per_group == 8 and summary["ep"].min_planes_per_group == 8
    assert summary["pp"].max_planes_per_group == 1  # pipeline traffic stays on one plane
    assert summary["edp"].group_size == 2
    assert rmap.groups("pp")[0].tolist() == list(range(0, 2048, 128))
    csv = rmap.to_csv().splitlines()
    assert csv[0] == "rank,node,local_gpu,plane,pp,dp,tp,ep,edp,stages"
    assert csv[1] == "0,0,0,0,0,0,0,0,0,0;15"
    assert csv[-1] == "2047,255,7,7,15,127,0,63,1,15;0"
    assert len(csv) == 2049


def test_stages_of_rank() -> None:
    assert stages_of_rank(ParallelLayout(256, 8, 16, 64, 1, 128, "dualpipe"), 3) == (3, 12)
    assert stages_of_rank(ParallelLayout(256, 8, 8, 64, 1, 256, "dualpipev"), 3) == (3, 12)
    assert stages_of_rank(ParallelLayout(256, 8, 16, 64, 1, 128, "1f1b"), 3) == (3,)


def test_compact_ranks() -> None:
    assert compact_ranks([0, 1, 2, 3]) == "0-3"
    assert compact_ranks([0, 128, 256]) == "0, 128, ..., 256 (step 128, 3 in all)"
    assert compact_ranks([0, 1, 5, 9, 10]) == "0-1, 5, 9-10"
