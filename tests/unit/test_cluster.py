"""The shared cluster model: plan.json and ranks.csv as written by dsctl, read back, and joined into places."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsctl.cluster import load_plan, load_ranks, place_ranks
from dsctl.errors import InputError
from dsctl.launch.layout import ParallelLayout
from dsctl.launch.rankmap import build_rank_map
from dsctl.profiles.loader import ProfileStore
from dsctl.topology.api import make_spec, plan_files
from dsctl.topology.plan import build_plan
from dsctl.topology.summary import summarize


def _plan_text(num_nodes: int) -> str:
    store = ProfileStore()
    spec = make_spec("mpft", num_nodes, store.node("h800-hgx"), store.switch("ib-ndr-64"))
    plan = build_plan(spec)
    return plan_files(plan, summarize(plan))["plan.json"]


@pytest.fixture(scope="module")
def plan16() -> str:
    return _plan_text(16)


def test_plan_reads_nodes_nics_planes_and_uplinks(plan16: str) -> None:
    fabric = load_plan(plan16)
    assert len(fabric.nodes) == 16
    assert fabric.nodes == tuple(sorted(fabric.nodes))
    assert fabric.num_planes == 8 and len(fabric.nics) == 8
    assert fabric.port_gbps == 400 and fabric.num_gpus_per_node == 8
    # every NIC of every node has exactly one leaf port, on a leaf of the NIC's plane
    assert len(fabric.uplink) == 16 * 8
    for (_node, nic), (leaf, port) in fabric.uplink.items():
        assert fabric.tier[leaf] == "leaf" and fabric.plane[leaf] == fabric.nic_plane[nic]
        assert 1 <= int(port) <= fabric.ports[leaf]


def test_places_join_rank_map_and_plan(plan16: str) -> None:
    layout = ParallelLayout(num_nodes=16, gpus_per_node=8, pp=4, dp=32, tp=1, ep=32)
    text = build_rank_map(layout).to_csv()
    ranks = load_ranks(text)
    assert ranks.world_size == 128
    fabric = load_plan(plan16)
    places = place_ranks(ranks, fabric)
    rank = 77  # node 9, GPU 5
    place = places.of(rank)
    assert place["node"] == 9 and place["gpu"] == 5 and place["node_name"] == fabric.nodes[9]
    assert place["nic"] == fabric.nics[5] and place["plane"] == fabric.nic_plane[fabric.nics[5]]
    leaf, port = fabric.uplink[(fabric.nodes[9], fabric.nics[5])]
    assert place["leaf"] == leaf and place["leaf_port"] == int(port)
    assert place["pp_stage"] == 77 // 32
    # one EP group = 32 consecutive ranks of one stage
    assert len(set(places.ep_group[:32].tolist())) == 1 and places.ep_group[32] != places.ep_group[0]


def test_rank_map_larger_than_plan_is_refused(plan16: str) -> None:
    layout = ParallelLayout(num_nodes=32, gpus_per_node=8, pp=2, dp=128, tp=1, ep=64)
    ranks = load_ranks(build_rank_map(layout).to_csv())
    with pytest.raises(InputError, match=r"32 nodes but plan\.json plans 16"):
        place_ranks(ranks, load_plan(plan16))


@pytest.mark.parametrize(("text", "message"), [
    ("rank,node\n0,0\n", "header must be"),
    ("rank,node,local_gpu,plane,pp,dp,tp,ep,edp,stages\n", "lists no ranks"),
    ("rank,node,local_gpu,plane,pp,dp,tp,ep,edp,stages\n1,0,0,0,0,0,0,0,0,0\n", "out of order"),
    ("rank,node,local_gpu,plane,pp,dp,tp,ep,edp,stages\n0,0,0,0,0,0,0,0,0,0\n1,0,0,0,0,1,0,1,0,0\n",
     "holds two ranks"),
    ("rank,node,local_gpu,plane,pp,dp,tp,ep,edp,stages\n0,-1,0,0,0,0,0,0,0,0\n", "node '-1' must be"),
    ("rank,node,local_gpu,plane,pp,dp,tp,ep,edp,stages\n0,0,0,0,0,0,0,0,0,x\n", "stages 'x'"),
    ("rank,node,local_gpu,plane,pp,dp,tp,ep,edp,stages\n0,0,0\n", "expected 10 values"),
])
def test_bad_rank_maps_name_the_line_and_column(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        load_ranks(text, "ranks.csv")


def test_plan_with_a_switch_before_a_node_is_refused(plan16: str) -> None:
    doc = json.loads(plan16)
    doc["devices"].insert(0, doc["devices"].pop(16))
    with pytest.raises(InputError, match="nodes are listed before switches"):
        load_plan(json.dumps(doc))


@given(st.text(max_size=200))
def test_any_text_is_a_rank_map_or_one_input_error(text: str) -> None:
    try:
        table = load_ranks("rank,node,local_gpu,plane,pp,dp,tp,ep,edp,stages\n" + text)
    except InputError:
        return
    assert table.world_size >= 1 and np.array_equal(table["rank"], np.arange(table.world_size))
