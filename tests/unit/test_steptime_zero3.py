"""ZeRO-3's step (issue 28): per-layer parameter gathers on the all-to-all's NIC time, checked by hand for one
layer of DeepSeek-V3, composed into the stages, and ranked by the search; interleaved 1F1B searched on a dense
model where it beats 1F1B."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dsctl.launch.candidates import PlanInputs
from dsctl.launch.layout import ParallelLayout
from dsctl.launch.memory import MemoryAssumptions
from dsctl.launch.ranking import drop_dominated, never_slower_zero, search_layouts
from dsctl.launch.request import LaunchRequest
from dsctl.launch.search import SearchOptions
from dsctl.launch.stages import split_stages
from dsctl.model.params import count_parameters
from dsctl.profiles.loader import ProfileStore
from dsctl.steptime import predict_step
from dsctl.steptime.layers import BlockSeconds, LayerSeconds
from dsctl.steptime.zero3 import (
    gather_seconds,
    layer_parameters,
    outside_parameters,
    outside_per_tp_rank,
    with_gathers,
)

STORE = ProfileStore()
V3 = STORE.model("deepseek-v3")
QWEN = STORE.model("qwen2.5-72b")
H800 = STORE.node("h800-hgx")
#: one 400 Gb/s NIC per GPU at the profile's 0.88 efficiency, bytes/s; IB latency across leaves (Table 5)
RATE, LATENCY = 400e9 / 8 * 0.88, 3.7e-6


def test_one_v3_layer_gather_by_hand() -> None:
    """PP16 EP64 DP128 (expert-DP 2): a V3 MoE layer's dense part, 232,996,864 parameters (attention, shared
    expert, router, norms), ring-gathered in BF16 over 128 GPUs, then this GPU's 4 of 256 experts
    (176,160,768 parameters) over 2."""
    counts = count_parameters(V3)
    dense, routed = layer_parameters(V3, counts, True)
    assert dense == 232_996_864 and routed == 256 * 44_040_192
    layout = ParallelLayout(256, 8, 16, 64, 1, 128, "dualpipe", 3)
    dense_s = 127 / 128 * 232_996_864 * 2 / 44e9 + 127 * 3.7e-6  # 10.508 ms + 0.470 ms
    expert_s = 1 / 2 * 176_160_768 * 2 / 44e9 + 1 * 3.7e-6  # 4.004 ms + 0.004 ms
    assert gather_seconds(dense, routed / 64, layout, RATE, LATENCY) == pytest.approx(dense_s + expert_s, rel=1e-12)
    assert dense_s + expert_s == pytest.approx(0.0149853, abs=1e-7)


def test_the_gather_joins_the_all_to_all_or_hides_under_compute() -> None:
    """Overlapped schedules: the whole gather on the all-to-all's side (forward dispatch, backward combine
    gradient); otherwise only what the layer's compute does not cover."""
    layer = LayerSeconds(BlockSeconds(0.004, 0.006, 0.002), BlockSeconds(0.006, 0.004, 0.003), 0.002, 0.003, 0.004,
                         0.001)
    dual = with_gathers(layer, 0.015, overlapped=True)
    assert (dual.dispatch_f, dual.combine_b) == pytest.approx((0.017, 0.016))
    assert (dual.combine_f, dual.dispatch_b, dual.compute) == (0.003, 0.004, layer.compute)
    plain = with_gathers(layer, 0.015, overlapped=False)  # compute F 10 ms, B 15 ms
    assert (plain.dispatch_f, plain.combine_b) == pytest.approx((0.002 + 0.005, 0.001 + 0.0))


def test_zero3_stage_costs_add_each_layers_gathers() -> None:
    """V3 PP16 DualPipe, 120 micro-batches: each stage's forward all-to-all seconds grow by (layers x gather), its
    backward's too, its lone forward also by the exposed gather of what lies outside the layers; no tail
    all-gather is left, and the step is far slower than ZeRO-1 (73.8 s against 17.3 s)."""
    one = ParallelLayout(256, 8, 16, 64, 1, 128, "dualpipe")
    three = replace(one, zero_stage=3)
    s1, s3 = predict_step(V3, H800, one, 120), predict_step(V3, H800, three, 120)
    counts = count_parameters(V3)
    moe_dense, routed = layer_parameters(V3, counts, True)
    gather = gather_seconds(moe_dense, routed / 64, three, RATE, LATENCY)
    middle = 5  # stage 5: 4 MoE layers, nothing outside them
    a, b = s1.stages[middle], s3.stages[middle]
    assert b.comm_f_s - a.comm_f_s == pytest.approx(4 * gather, rel=1e-9)
    assert b.comm_b_s - a.comm_b_s == pytest.approx(4 * gather, rel=1e-9)
    assert b.f_s - a.f_s == pytest.approx(4 * gather, rel=1e-9)
    # stage 0: 3 dense layers (583,483,392 parameters each) and the embedding table, gathered exposed
    stage0 = split_stages(V3, counts, 16)[0]
    dense_gather = gather_seconds(layer_parameters(V3, counts, False)[0], 0.0, three, RATE, LATENCY)
    embedding = outside_parameters(V3, counts, stage0)
    assert embedding == V3.vocab_size * V3.hidden_size + 0.0
    outside = gather_seconds(embedding, 0.0, three, RATE, LATENCY)
    assert s3.stages[0].f_s - s1.stages[0].f_s == pytest.approx(3 * dense_gather + outside, rel=1e-9)
    assert s3.all_gather_s == 0.0 < s1.all_gather_s and s3.reduce_scatter_s == 0.0
    assert s1.step_s == pytest.approx(17.31, abs=0.02) and s3.step_s == pytest.approx(73.8, abs=0.2)
    assert s3.ep_dispatch_s == s1.ep_dispatch_s  # the all-to-all alone, without the gather


def test_zero3_gathers_one_tp_ranks_share_under_tp() -> None:
    """PP16 EP64 TP2 DP64 (expert-DP 2): each GPU gathers its TP rank's half of a MoE layer's dense parameters,
    the norms (2 x 7,168 + 1,536 + 512) and the router (256 x 7,169) whole: 1,851,648 + (232,996,864 - 1,851,648)
    / 2 = 117,424,256 over dp 64, and its 4 experts (not tensor-parallel) over expert-DP 2, as at tp 1."""
    counts = count_parameters(V3)
    dense, routed = layer_parameters(V3, counts, True, 2)
    assert dense == 1_851_648 + (232_996_864 - 1_851_648) / 2 == 117_424_256 and routed == 256 * 44_040_192
    assert layer_parameters(V3, counts, False, 2)[0] == 16_384 + (583_483_392 - 16_384) / 2
    stage15 = split_stages(V3, counts, 16)[15]  # head, final norm, MTP projection and its 3 norms
    assert outside_per_tp_rank(V3, counts, stage15, 2) == 4 * 7168 + (outside_parameters(V3, counts, stage15)
                                                                       - 4 * 7168) / 2
    one = ParallelLayout(256, 8, 16, 64, 2, 64, "dualpipe")
    three = replace(one, zero_stage=3)
    s1, s3 = predict_step(V3, H800, one, 64), predict_step(V3, H800, three, 64)
    gather = gather_seconds(dense, routed / 64, three, RATE, LATENCY)
    dense_s = 63 / 64 * 117_424_256 * 2 / 44e9 + 63 * 3.7e-6
    expert_s = 1 / 2 * 176_160_768 * 2 / 44e9 + 1 * 3.7e-6
    assert gather == pytest.approx(dense_s + expert_s, rel=1e-12)
    assert s3.stages[5].comm_f_s - s1.stages[5].comm_f_s == pytest.approx(4 * gather, rel=1e-9)
    assert s3.stages[5].comm_b_s - s1.stages[5].comm_b_s == pytest.approx(4 * gather, rel=1e-9)


def test_zero3_is_ranked_not_dominated() -> None:
    """ZeRO-3 is compared with nothing but ZeRO-3 twins (either it or ZeRO-1 may be faster), except without a
    group to shard over (dp = expert-dp = 1): then every stage runs alike and the lighter ZeRO-1 wins. At tp 1
    (with tp searched, PP8 TP2 DP1 ZeRO-1 DualPipeV wins: TP shards the weights instead)."""
    assert never_slower_zero(1, 2) and never_slower_zero(3, 3)
    assert not never_slower_zero(1, 3) and not never_slower_zero(2, 3) and not never_slower_zero(2, 1)
    inputs = PlanInputs(QWEN, H800, LaunchRequest(2, tp=1, global_batch=32), count_parameters(QWEN),
                        MemoryAssumptions())
    result = search_layouts(inputs, SearchOptions())
    zero3 = [t for t in result.ranked if t.layout.zero_stage == 3]
    assert result.best is not None and result.best.layout.zero_stage == 3  # 72B on 16 GPUs: sharding wins
    assert len(zero3) > 3 and all(t.layout.dp > 1 for t in zero3)
    kept, dropped = drop_dominated([t for t in result.ranked], "fastest")
    assert len(kept) == len(result.ranked) and not dropped


def test_interleaved_beats_1f1b_on_a_dense_model() -> None:
    """Qwen2.5-72B on 4 nodes, 64 sequences: PP16 DP2 gives 32 micro-batches per pipeline; 1F1B idles
    (p-1)(F+B) per rank, interleaved (2 chunks per rank) half that, which pays for its doubled p2p sends. With
    tp searched the winner is interleaved too, at PP4 TP2 DP4 (16 micro-batches: a shorter pipeline)."""
    request = LaunchRequest(4, global_batch=64, recipe="full-recompute")
    inputs = PlanInputs(QWEN, H800, request, count_parameters(QWEN), MemoryAssumptions())
    result = search_layouts(inputs, SearchOptions(schedules=("1f1b", "interleaved")))
    assert result.best is not None and result.best.layout.schedule == "interleaved"
    best_1f1b = next(t for t in result.ranked if t.layout.schedule == "1f1b")
    assert result.best.predicted()[1].step_s < best_1f1b.predicted()[1].step_s
    assert result.best.label() == "PP4 EP1 TP2 interleaved 16x1"
    same = ParallelLayout(4, 8, 16, 1, 1, 2, "1f1b")
    one_f_one_b = predict_step(QWEN, H800, same, 32, recipe=result.best.recipe)
    interleaved = predict_step(QWEN, H800, replace(same, schedule="interleaved"), 32, recipe=result.best.recipe)
    assert interleaved.step_s < one_f_one_b.step_s and interleaved.max_bubble_s < one_f_one_b.max_bubble_s
    assert {r.kind for r in result.rejected if r.schedule == "interleaved"} >= {"schedule rule"}


def test_the_search_extrapolates_interleaved_by_its_period() -> None:
    """Beyond 2 x 3 pp micro-batches the search extrapolates from 3 pp and 2 pp (the steady state repeats every
    pp micro-batches): equal to the full simulation."""
    from dsctl.launch.batch import BatchPlan
    from dsctl.launch.ranking import _predict, growth_unit, steady_micro_batches
    from dsctl.launch.trials import Trial
    from dsctl.model.recipes import resolve_recipe

    recipe = resolve_recipe(QWEN, "full-recompute")
    inputs = PlanInputs(QWEN, H800, LaunchRequest(4), count_parameters(QWEN), MemoryAssumptions())
    layout = ParallelLayout(4, 8, 8, 1, 1, 4, "interleaved")
    assert (steady_micro_batches(layout), growth_unit(layout)) == (24, 8)
    trial = Trial(layout, BatchPlan(200 * 4, 200, 1, 4096), recipe=recipe)
    full = predict_step(QWEN, H800, layout, 200, recipe=recipe)
    assert _predict(inputs, trial, 1.0, None).step_s == pytest.approx(full.step_s, rel=1e-12)
