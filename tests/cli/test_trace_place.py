"""From rank to place on 2,048 ranks: a real `dsctl launch` rank map and a real `dsctl topology plan`.

Synthetic collectives (20 all-reduces; every rank's arrival jitters by up to 60 µs, each node's clock is off by up
to 300 µs) with one seeded slow part of the cluster arriving 400 µs late: a leaf switch, a plane, a node, a
pipeline stage. Each is named with its place, nothing else is; a healthy job names nothing.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from dsctl.cluster import Places, load_plan, load_ranks, place_ranks
from dsctl.trace.place import hypergeom_tail, locate
from dsctl.trace.skew import RankCollectives, stragglers

#: recording (or planning 256 nodes) takes tens of seconds on a busy machine: the slow step of .ci/run
pytestmark = pytest.mark.slow
NODES = 256


@pytest.fixture(scope="module")
def job_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``(launch --out folder, topology plan --out folder)`` of a 256-node DeepSeek-V3 job in DeepSeek's layout
    (PP16 EP64: the seeded stage 9 needs 16 stages)."""
    import io
    from contextlib import redirect_stdout

    from dsctl.cli import main

    out = tmp_path_factory.mktemp("place")
    for argv in (["launch", "--nodes", str(NODES), "--pp", "16", "--ep", "64", "--out-dir", str(out / "job")],
                 ["topology", "plan", "--nodes", str(NODES), "--out-dir", str(out / "fabric")]):
        with redirect_stdout(io.StringIO()):
            assert main(argv) == 0, argv
    return out / "job", out / "fabric"


@pytest.fixture(scope="module")
def places(job_dirs: tuple[Path, Path]) -> Places:
    job, fabric = job_dirs
    ranks = load_ranks((job / "ranks.csv").read_text(), "ranks.csv")
    assert ranks.world_size == 2048
    return place_ranks(ranks, load_plan((fabric / "plan.json").read_text(), "plan.json"))


def _job(places: Places, slow: np.ndarray, seed: int = 3, num: int = 20) -> list[RankCollectives]:
    rng = np.random.default_rng(seed)
    world = places.world_size
    clock = rng.uniform(-300.0, 300.0, int(places.node.max()) + 1)[places.node]
    parts = []
    t = 1000.0
    arrive = np.empty((num, world))
    for k in range(num):
        arrive[k] = t + rng.uniform(0.0, 60.0, world) + np.where(slow, 400.0, 0.0)
        t = float(arrive[k].max()) + 100.0
    end = arrive.max(axis=1) + 100.0
    for r in range(world):
        parts.append(RankCollectives(f"rank{r}.json", r, "gpu0", ("AllReduce",), np.zeros(num, np.int64),
                                     np.arange(num, dtype=np.int64), arrive[:, r] + clock[r], end + clock[r],
                                     np.ones(num, dtype=bool), "gpu kernels", str(places.node_name[r])))
    return parts


def _named(places: Places, slow: np.ndarray):
    result = stragglers(_job(places, slow), top=10, places=places)
    assert result.placement is not None
    return result, result.placement


@pytest.mark.parametrize(("kind", "pick"), [
    ("leaf", lambda p: p.leaf == "p3-leaf04"),
    ("plane", lambda p: p.plane == 5),
    ("node", lambda p: p.node_name == "node0155"),
    ("pp_stage", lambda p: p.pp == 9),
])
def test_a_seeded_slow_part_is_named_with_its_place(places: Places, kind: str, pick) -> None:
    slow = np.asarray(pick(places), dtype=bool)
    result, report = _named(places, slow)
    assert int(slow.sum()) <= report.num_slow <= int(slow.sum()) + 3  # the odd noisy rank besides
    assert len(report.concentrations) == 1, report.concentrations
    c = report.concentrations[0]
    expected = {"leaf": "p3-leaf04", "plane": "plane 5", "node": "node0155", "pp_stage": "pp_stage 9"}[kind]
    assert (c.kind, c.group, c.num_slow, c.num_ranks) == (kind, expected, int(slow.sum()), int(slow.sum()))
    assert c.p_value < 1e-10
    assert report.suspect_nodes == sorted(set(places.node_name[slow].tolist()))
    # every reported rank carries its place, and the top stragglers are the seeded ones
    top = result.stragglers[0]
    assert slow[top.rank] and top.place is not None
    assert set(top.place) >= {"node_name", "gpu", "nic", "plane", "leaf", "pp_stage", "ep_group", "dp_group"}
    assert top.place["node_name"] == places.node_name[top.rank] and top.place["leaf"] == places.leaf[top.rank]
    assert all(row["rank"] in np.flatnonzero(slow) for row in report.slow_ranks[:8])
    if kind == "leaf":
        assert report.suspect_switches == ["p3-leaf04"]
    if kind == "plane":
        assert report.suspect_planes == [5]


def test_a_healthy_job_names_nothing(places: Places) -> None:
    _result, report = _named(places, np.zeros(places.world_size, dtype=bool))
    assert report.concentrations == [] and report.suspect_nodes == []
    assert report.num_slow <= 5  # the odd noisy rank at most, and never a concentration


def test_two_slow_nodes_are_both_named_and_a_lone_rank_is_not_a_concentration(places: Places) -> None:
    slow = (places.node_name == "node0007") | (places.node_name == "node0200")
    slow[1234] = True  # one more slow rank elsewhere
    _result, report = _named(places, slow)
    assert sorted(c.group for c in report.concentrations) == ["node0007", "node0200"]
    assert any("fit no concentration" in n for n in report.notes)


def test_hypergeometric_tail_against_a_direct_sum() -> None:
    def direct(k: int, n_total: int, group: int, drawn: int) -> float:
        return sum(math.comb(group, i) * math.comb(n_total - group, drawn - i)
                   for i in range(k, min(group, drawn) + 1)) / math.comb(n_total, drawn)

    for args in [(2, 50, 8, 5), (8, 2048, 8, 8), (1, 10, 3, 4), (3, 20, 10, 3), (0, 30, 5, 7)]:
        assert hypergeom_tail(*args) == pytest.approx(direct(*args), rel=1e-9)
    assert hypergeom_tail(9, 2048, 8, 8) == 0.0


def test_locate_without_a_plan_uses_the_rank_map_only(job_dirs: tuple[Path, Path]) -> None:
    ranks = load_ranks((job_dirs[0] / "ranks.csv").read_text())
    bare = place_ranks(ranks)
    score = np.ones(ranks.world_size)
    score[bare.pp == 3] = 50.0
    report = locate(list(range(ranks.world_size)), score, bare)
    assert [(c.kind, c.group) for c in report.concentrations] == [("pp_stage", "pp_stage 3")]
