"""The plan pipeline: a layout that cannot be built invalid, one rules module, each candidate evaluated once, the
smallest-node-count decision inside the domain."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from dsctl.errors import InputError
from dsctl.launch import candidates, memory, minnodes, rules
from dsctl.launch.layout import ParallelLayout
from dsctl.launch.layout_report import plan_layout
from dsctl.launch.plan import LaunchRequest, plan_launch
from dsctl.output.data import to_data
from dsctl.profiles.loader import ProfileStore
from tests.unit.launch_messages import as_read

STORE = ProfileStore()


@pytest.mark.parametrize(("args", "message"), [
    ((256, 8, 16, 64, 1, 24), "pp 16 x dp 24 x tp 1 = 384 != world size 2048"),
    ((256, 8, 7, 8, 1, 2048 // 7 + 1), "!= world size"),
    ((32, 8, 7, 8, 1, 32, "1f1b"), "!= world size"),
    ((56, 8, 7, 8, 1, 64, "dualpipe"), "dualpipe needs an even pp"),
    ((16, 8, 2, 8, 1, 64, "gpipe"), "valid schedules"),
    ((16, 8, 2, 0, 1, 64), "--ep 0 is not valid"),
])
def test_a_layout_checks_its_own_rules_when_built(args: tuple, message: str) -> None:
    with pytest.raises(InputError) as info:
        ParallelLayout(*args)
    assert re.search(message, as_read(info))


def test_a_valid_layout_normalises_its_schedule() -> None:
    assert ParallelLayout(16, 8, 2, 8, 1, 64, "DualPipeV").schedule == "dualpipev"


@pytest.mark.parametrize("schedule", rules.SCHEDULES)
def test_one_set_of_rules_for_stages_chunks_and_degrees(schedule: str) -> None:
    for pp in (1, 2, 3, 4, 16, 31, 32, 61, 62):
        allowed = rules.pipeline_degree_allowed(schedule, pp, 61)
        assert allowed == (not (schedule == "dualpipe" and pp % 2) and not (schedule == "interleaved" and pp < 2)
                           and rules.num_stages(schedule, pp) <= 61)
        if not allowed:
            continue
        layout = ParallelLayout(pp, 8, pp, 8, 1, 8, schedule)
        held = [s for r in range(pp) for s in rules.stages_of_rank(schedule, pp, r)]
        assert set(held) == set(range(layout.num_stages))  # every stage is held by some rank
        for r in range(pp):
            fewest = rules.activation_chunks(schedule, pp, r)
            many = memory.activation_chunks(layout, r, 10**6)
            # interleaved without M: the fewest any valid M gives (M = pp runs every forward first: 2 pp)
            assert many == fewest if schedule != "interleaved" else fewest == min(many, 2 * pp)


def test_each_pipeline_degree_is_evaluated_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan that fits nowhere takes the closest candidate as it was evaluated, not a second evaluation."""
    seen: Counter[int] = Counter()
    real = candidates.evaluate

    def counting(inputs: candidates.PlanInputs, pp: int, explain_rejection: bool = True) -> candidates.Candidate:
        seen[pp] += 1
        return real(inputs, pp, explain_rejection)

    monkeypatch.setattr(candidates, "evaluate", counting)
    plan = plan_launch(STORE.model("deepseek-v3"), STORE.node("h800-hgx"), LaunchRequest(16))
    assert plan.exit_code == 1 and not plan.memory.fits
    assert seen and max(seen.values()) == 1
    assert sorted(seen) == [2, 4, 8, 16, 32]  # every even pp whose stages fit 61 layers, tried once each


def test_a_plan_that_does_not_fit_names_the_smallest_node_count_that_does(monkeypatch: pytest.MonkeyPatch) -> None:
    model, node = STORE.model("deepseek-v3"), STORE.node("h800-hgx")
    reported: list[tuple[int, int]] = []
    plan = plan_launch(model, node, LaunchRequest(16), suggest_min_nodes=True,
                       progress=lambda done, total: reported.append((done, total)))
    assert any("the smallest node count that fits is 128" in note for note in plan.notes)
    assert reported and reported[-1][0] <= reported[-1][1]
    assert not any("smallest node count" in n for n in plan_launch(model, node, LaunchRequest(16)).notes)
    searched: list[int] = []
    real_min_nodes = minnodes.min_nodes
    monkeypatch.setattr(minnodes, "min_nodes", lambda *a, **k: searched.append(1) or real_min_nodes(*a, **k))
    fitting = plan_launch(model, node, LaunchRequest(128), suggest_min_nodes=True,
                          progress=lambda done, total: None)
    assert fitting.memory.fits and searched == []  # no node-count search when the plan fits


def test_layout_report_is_a_view_of_the_plan() -> None:
    model, node = STORE.model("deepseek-v3"), STORE.node("h800-hgx")
    report = plan_layout(model, node, LaunchRequest(1), find_min_nodes=True)
    assert report.min_nodes == 128 and report.plan.num_nodes == 128
    data = to_data(report)
    assert list(data) == ["model", "node_profile", "num_nodes", "gpus_per_node", "world_size", "layout", "expert_dp",
                          "zero_stage", "schedule", "num_stages", "micro_batches", "stages", "choices", "memory_fits",
                          "max_memory_bytes", "hbm_bytes", "rank_map", "groups", "exit_code"]  # the JSON of before
    assert data["num_nodes"] == 128 and data["memory_fits"] is True and data["groups"] == []
    assert data["layout"] == {"pp": 16, "ep": 64, "tp": 1, "dp": 64} and data["stages"][0]["pp_ranks"] == [0, 15]
    assert data["choices"][-1].startswith("--min-nodes: 128 is the smallest node count")
    assert data["max_memory_bytes"] == report.plan.memory.max_total_bytes
