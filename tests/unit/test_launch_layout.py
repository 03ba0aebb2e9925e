"""Layout validation, default choice and stage split (domain only)."""

from __future__ import annotations

import re

import pytest

from dsctl.errors import InputError
from dsctl.launch.layout import ParallelLayout, resolve_dp, validate_layout
from dsctl.launch.plan import LaunchRequest, plan_launch
from dsctl.launch.rules import check_schedule_layout, default_ep
from dsctl.launch.stages import slots_per_stage, split_stages
from dsctl.model.params import count_parameters
from dsctl.profiles.loader import ProfileStore


@pytest.fixture(scope="module")
def store() -> ProfileStore:
    return ProfileStore()


def test_deepseek_v3_default_on_256_nodes(store: ProfileStore) -> None:
    plan = plan_launch(store.model("deepseek-v3"), store.node("h800-hgx"), LaunchRequest(256),
                       simulate_schedule=False)
    assert plan.layout.degrees() == {"pp": 16, "ep": 64, "tp": 1, "dp": 128}
    assert plan.schedule == "dualpipe" and plan.zero_stage == 1 and plan.expert_dp == 2
    assert plan.memory.fits and plan.exit_code == 0
    assert plan.batch.global_batch == 15_360 and plan.batch.micro_batches == 120
    assert any(c.startswith("pp 16: the smallest valid even pp that fits") for c in plan.choices)
    assert any(c.startswith("pp 8 rejected: does not fit: needs 100.9 GiB") for c in plan.choices)


def test_default_ep_is_one_expert_group_per_node(store: ProfileStore) -> None:
    v3 = store.model("deepseek-v3")
    assert default_ep(v3, 8, 128) == 64
    assert default_ep(v3, 8, 16) == 16  # a stage of 16 ranks caps it
    assert default_ep(store.model("deepseek-v2"), 8, 128) == 32  # 160 experts: 64 does not divide them
    assert default_ep(store.model("llama3.1-405b"), 8, 128) == 1


@pytest.mark.parametrize(
    ("nodes", "pp", "ep", "tp", "dp", "message"),
    [
        (256, 16, 64, 1, 24, "pp 16 x dp 24 x tp 1 = 384 != world size 2048 (256 nodes x 8 GPUs)"),
        (3, 2, 12, 1, 12, "ep 12 neither divides nor is a multiple of the 8 GPUs"),
        (80, 8, 80, 1, 80, "256 routed experts % ep 80 = 16"),
        (3, 2, 4, 3, 4, "tp 3 must divide the 8 GPUs of a node"),
        (256, 128, 32, 1, 16, "ep 32 does not divide the tp 1 x dp 16 = 16 ranks"),
    ],
)
def test_constraint_failures_show_the_arithmetic(nodes: int, pp: int, ep: int, tp: int, dp: int,
                                                 message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):  # the layout's own rules fail where it is built
        validate_layout(ParallelLayout(nodes, 8, pp, ep, tp, dp), num_layers=61, num_routed_experts=256,
                        num_micro_batches=2 * pp)


def test_schedule_requirements() -> None:
    with pytest.raises(InputError, match="dualpipe needs an even pp"):
        check_schedule_layout("dualpipe", 7, 28)
    with pytest.raises(InputError, match=r"even number of micro-batches >= 2 x pp = 32; got --micro-batches 30"):
        check_schedule_layout("dualpipe", 16, 30)
    with pytest.raises(InputError, match="dualpipe needs an even number"):
        check_schedule_layout("dualpipe", 4, 9)
    with pytest.raises(InputError, match=r"dualpipev needs micro-batches >= its 16 stages"):
        check_schedule_layout("dualpipev", 8, 15)
    check_schedule_layout("dualpipev", 7, 15)  # odd pp and odd micro-batches are fine for DualPipeV
    with pytest.raises(InputError, match="1f1b needs micro-batches >= pp 8"):
        check_schedule_layout("1f1b", 8, 4)
    with pytest.raises(InputError, match="valid schedules"):
        check_schedule_layout("gpipe", 8, 4)


def test_stages_exceed_layers() -> None:
    layout = ParallelLayout(256, 8, 64, 8, 1, 32, schedule="dualpipev")
    with pytest.raises(InputError, match=r"128 pipeline stages > 61 transformer layers.*2 x pp 64"):
        validate_layout(layout, num_layers=61, num_routed_experts=256)


def test_dense_model_rejects_ep() -> None:
    with pytest.raises(InputError, match="dense"):
        validate_layout(ParallelLayout(16, 8, 8, 8, 1, 16), num_layers=126, num_routed_experts=0)


def test_resolve_dp() -> None:
    assert resolve_dp(256, 8, 16, 1, None) == 128
    with pytest.raises(InputError, match="pp 3 x tp 1 = 3 does not divide world size 2048"):
        resolve_dp(256, 8, 3, 1, None)


def test_v3_stage_split(store: ProfileStore) -> None:
    model = store.model("deepseek-v3")
    stages = split_stages(model, count_parameters(model), 16)
    assert [s.num_layers for s in stages] == [3] + [4] * 14 + [2]
    assert stages[0].has_embedding and stages[0].num_dense_layers == 3 and stages[0].num_moe_layers == 0
    assert stages[-1].has_head and stages[-1].num_mtp_modules == 1 and stages[-1].has_embedding_copy
    assert sum(s.num_layers for s in stages) == 61
    counts = count_parameters(model)
    total = sum(s.dense_params + s.routed_expert_params for s in stages)
    assert total == counts.total_with_mtp + counts.embedding  # + the MTP embedding copy


@pytest.mark.parametrize(("slots", "stages"), [(62, 16), (62, 8), (62, 2), (62, 1), (62, 61), (10, 3), (7, 7)])
def test_slots_per_stage_sum_and_balance(slots: int, stages: int) -> None:
    counts = slots_per_stage(slots, stages)
    assert sum(counts) == slots and max(counts) - min(counts) <= 1
    if stages > 2 and slots % stages:
        assert counts[-1] == min(counts)  # the head stage is kept light


def test_dualpipev_and_1f1b_plans(store: ProfileStore) -> None:
    model, node = store.model("deepseek-v3"), store.node("h800-hgx")
    v = plan_launch(model, node, LaunchRequest(256, pp=8, schedule="dualpipev"), simulate_schedule=False)
    assert v.num_stages == 16 and v.layout.dp == 256
    one = plan_launch(model, node, LaunchRequest(256, pp=16, schedule="1f1b"), simulate_schedule=False)
    chunks = [r.activation_chunks for r in one.memory.per_rank]
    assert chunks[0] == 16 and chunks[-1] == 1


def test_global_batch_checks(store: ProfileStore) -> None:
    model, node = store.model("deepseek-v3"), store.node("h800-hgx")
    with pytest.raises(InputError, match=r"^global_batch 1000 % dp 128 = 104: every data-parallel replica"):
        plan_launch(model, node, LaunchRequest(256, pp=16, global_batch=1000), simulate_schedule=False)
    spelled = LaunchRequest(256, pp=16, global_batch=1000, spelling={"global_batch": "--global-batch"})
    with pytest.raises(InputError, match=r"^--global-batch 1000 % dp 128 = 104: every data-parallel replica"):
        plan_launch(model, node, spelled, simulate_schedule=False)  # as the command layer spells the field
    plan = plan_launch(model, node, LaunchRequest(256, pp=16, global_batch=15360, micro_batches=60),
                       simulate_schedule=False)
    assert plan.batch.micro_batch_size == 2 and plan.batch.tokens_per_micro_batch == 8192
    # twice the tokens per micro-batch: 17 chunks of 2 sequences no longer fit in 80 GiB
    assert not plan.memory.fits and plan.exit_code == 1
    assert any(n.startswith("does not fit: pipeline rank") for n in plan.notes)


def test_default_batch_rises_to_schedule_minimum(store: ProfileStore) -> None:
    plan = plan_launch(store.model("deepseek-v3"), store.node("h800-hgx"), LaunchRequest(2048),
                       simulate_schedule=False)
    assert plan.batch.micro_batches >= 2 * plan.layout.pp
    assert any("minimum" in n for n in plan.notes)
