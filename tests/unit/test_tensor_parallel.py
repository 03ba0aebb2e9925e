"""Tensor parallelism with sequence parallelism (issue 28, "TP > 1 is not searched"): memory against Korthikanti
et al. 2022 derived independently here, the step's NVLink collectives by hand, and the search trying tp."""

from __future__ import annotations

import dataclasses

import pytest

from dsctl.errors import InputError
from dsctl.launch.candidates import PlanInputs
from dsctl.launch.layout import ParallelLayout
from dsctl.launch.memory import MemoryAssumptions, estimate_memory
from dsctl.launch.plan import plan_launch
from dsctl.launch.ranking import search_layouts
from dsctl.launch.request import LaunchRequest
from dsctl.launch.search import SearchOptions, search_space
from dsctl.launch.search_explain import choice_lines, explain_search
from dsctl.launch.stages import split_stages
from dsctl.launch.tensor_parallel import searched_tps, tp_allowed
from dsctl.launch.trials import SearchResult
from dsctl.model.params import count_parameters
from dsctl.model.recipes import RECIPES
from dsctl.profiles.loader import ProfileStore
from dsctl.profiles.schema import ModelProfile
from dsctl.steptime import predict_step
from dsctl.steptime.gemm import gemm_seconds
from dsctl.steptime.hardware import gpu_rates
from dsctl.steptime.layers import dense_ffn_block, layer_seconds

STORE = ProfileStore()
LLAMA = STORE.model("llama3.1-405b")  # dense: 126 layers, h 16,384, 128 heads, 8 KV heads of 128, FFN 53,248
V3 = STORE.model("deepseek-v3")
LITE = STORE.model("deepseek-v2-lite")
H100 = STORE.node("h100-hgx")
H800 = STORE.node("h800-hgx")
SEQ = 8192


def _korthikanti_llama_bytes_per_token(t: int) -> float:
    """One Llama layer's saved activations per token per GPU, plain BF16, no recompute, with tensor + sequence
    parallelism of degree ``t``, counted the way Korthikanti et al. 2022 (section 4.1) count GPT's
    ``s b h (34 + 5 a s / h)`` -> ``s b h (34/t + 5 a s / (h t))``, for Llama's block: RMSNorm instead of
    LayerNorm (an FP32 rstd per token instead of mean and variance), no dropout (no masks), FlashAttention (the
    FP32 log-sum-exp of ``a`` heads instead of the ``5 a s / h`` softmax and scores), grouped-query K/V of
    ``kv x d`` values, SwiGLU of width ``i`` instead of GeLU of 4h. Every term divides by t (sequence
    parallelism splits the norms' and residuals' tensors along the sequence, TP the rest along the hidden)."""
    h, a, kv, d, i = 16384, 128, 8, 128, 53248
    attention = 2 * h + 4 + 2 * h + 2 * h + 2 * 2 * kv * d + 4 * a + 2 * h  # norm in, rstd, QKV in, q, k+v, LSE, wo in
    mlp = 2 * h + 4 + 2 * h + 2 * 2 * i + 2 * i + 2 * i  # norm in, rstd, gate/up in, gate+up out, SiLU, down in
    return (attention + mlp) / t


def _llama_memory(tp: int, pp: int = 14, nodes: int = 1792):  # type: ignore[no-untyped-def]
    layout = ParallelLayout(nodes, 8, pp, 1, tp, nodes * 8 // (pp * tp), "1f1b")
    stages = split_stages(LLAMA, count_parameters(LLAMA), layout.num_stages)
    return stages, estimate_memory(LLAMA, layout, stages, H100.usable_hbm_bytes, SEQ, 64, MemoryAssumptions(),
                                   RECIPES["none"], H100.hbm_bytes)


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_llama_activations_follow_korthikanti_with_sequence_parallelism(tp: int) -> None:
    stages, memory = _llama_memory(tp)
    row = memory.per_rank[1]  # a middle stage: layers only (no embedding, no head)
    layers = stages[1].num_layers
    expected = row.activation_chunks * SEQ * layers * _korthikanti_llama_bytes_per_token(tp)
    assert row.activations_bytes + row.attention_lse_bytes == pytest.approx(expected, abs=4)
    assert memory.activation_bytes_per_token_layer == int(_korthikanti_llama_bytes_per_token(tp))
    # one layer's plain-BF16 working set of the backward splits the same way
    assert row.backward_temporaries_bytes == pytest.approx(SEQ * _korthikanti_llama_bytes_per_token(tp), abs=1)


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_llama_weights_split_over_tp_but_the_norms(tp: int) -> None:
    h, kv, d, i = 16384, 8, 128, 53248
    gemm_per_layer = h * (h + 2 * kv * d) + h * h + 3 * h * i  # q/k/v + output projection + SwiGLU
    norms_per_layer = 2 * h
    stages, memory = _llama_memory(tp)
    layers = stages[1].num_layers
    row = memory.per_rank[1]
    assert stages[1].dense_params == layers * (gemm_per_layer + norms_per_layer)
    assert row.dense_params == layers * norms_per_layer + layers * gemm_per_layer // tp
    assert row.weights_bytes == 2 * row.dense_params and row.gradients_bytes == 4 * row.dense_params
    dp = 1792 * 8 // (14 * tp)
    assert row.optimizer_bytes == pytest.approx(8 * row.dense_params / dp, abs=1)
    one = _llama_memory(1)[1].per_rank[1]
    assert row.total_bytes < one.total_bytes


def test_tp_degrees_divide_the_node_and_the_heads() -> None:
    assert searched_tps(LLAMA, 8) == (1, 2, 4, 8)
    assert searched_tps(LLAMA, 4) == (1, 2, 4)
    assert searched_tps(LITE, 8) == (1, 2, 4, 8)  # 16 heads
    assert not tp_allowed(LLAMA, 8, 3) and not tp_allowed(LLAMA, 16, 16)  # 16 > the 8 KV heads


@pytest.mark.parametrize(("model", "tp", "says"), [
    (dataclasses.replace(LLAMA, attention=dataclasses.replace(LLAMA.attention, num_kv_heads=4)), 8,
     "tp 8 does not divide the 4 KV heads"),
    (LLAMA, 3, "tp 3 must divide the 8 GPUs of a node"),
])
def test_a_given_tp_breaking_a_rule_of_tp_allowed_is_refused_naming_it(model: ModelProfile, tp: int,
                                                                        says: str) -> None:
    """A given --tp is held to the rules the search's tps meet (Megatron-LM asserts the KV heads divide), with
    the broken rule named, not a search that plans it anyway or fails on a pipeline degree."""
    request = LaunchRequest(num_nodes=4, tp=tp)
    with pytest.raises(InputError) as caught:
        plan_launch(model, H800, request, search=SearchOptions())
    assert says in caught.value.message


def test_tp_collectives_by_hand() -> None:
    """Per layer and micro-batch: 2 all-gathers + 2 reduce-scatters forward and the same backward, each moving
    (t-1)/t of the micro-batch's T x h BF16 activation per GPU over NVLink at the profile's achievable rate."""
    rates = gpu_rates(H100, LLAMA.training_precision)
    assert rates.nvlink_bytes_per_s == 360e9  # h100-hgx: 450 GB/s per direction x 0.8
    for tp in (2, 4, 8):
        layer = layer_seconds(LLAMA, False, float(SEQ), SEQ, True, 1, rates, None, 1.0, RECIPES["none"], tp)
        one = (tp - 1) / tp * SEQ * 16384 * 2 / 360e9  # tp 8: 234.9 MB per GPU, 0.652 ms
        assert layer.tp_f == pytest.approx(4 * one) and layer.tp_b == pytest.approx(4 * one)
    flat = layer_seconds(LLAMA, False, float(SEQ), SEQ, True, 1, rates, None, 1.0, RECIPES["none"], 1)
    assert flat.tp_f == flat.tp_b == 0.0
    # full recompute redoes the forward's collectives in the backward
    full = layer_seconds(LLAMA, False, float(SEQ), SEQ, True, 1, rates, None, 1.0, RECIPES["full-recompute"], 4)
    assert full.tp_b == pytest.approx(2 * full.tp_f)


def test_tp_gemms_run_at_the_smaller_shapes() -> None:
    """The dense FFN's GEMMs per GPU at tp 4: gate/up h -> 2i/4 and down i/4 -> h over all T tokens, through the
    shape-aware roofline (BF16 inputs for Llama)."""
    rates = gpu_rates(H100, LLAMA.training_precision)
    h, i, t = 16384, 53248, float(SEQ)
    plain = RECIPES["none"]
    block = dense_ffn_block(LLAMA, t, rates, plain, 4)
    f = (gemm_seconds(t, 2 * i / 4, h, rates.fp8_gemm_flops, rates.gemm_hbm, 2.0)
         + gemm_seconds(t, h, i / 4, rates.fp8_gemm_flops, rates.gemm_hbm, 2.0))
    elementwise = (h * (2 + 2 + 1.03125) + 6 * h + i * (4 + 1.03125 + 2)) * t / 4 / rates.hbm_bytes_per_s
    assert block.f == pytest.approx(f + elementwise)
    one = dense_ffn_block(LLAMA, t, rates, plain, 1)
    assert one.f / 4 < block.f < one.f / 3  # a quarter of the FLOPs, a little slower per FLOP


def test_tp_step_of_a_dense_model() -> None:
    """Llama 3.1 405B on 2,048 H100 at PP16 x TP8: the step has its TP collectives and the 1/tp work."""
    layout = ParallelLayout(256, 8, 16, 1, 8, 16, "1f1b")
    step = predict_step(LLAMA, H100, layout, 64, 1, SEQ, recipe=RECIPES["none"])
    layer = step.layers[0]
    assert layer.tp_f_s == pytest.approx(4 * 7 / 8 * SEQ * 16384 * 2 / 360e9)
    assert step.tokens_per_step == 64 * SEQ * 16
    assert 0.2 < step.mfu_causal < 0.7
    two = predict_step(LLAMA, H100, ParallelLayout(256, 8, 16, 1, 2, 64, "1f1b"), 16, 1, SEQ,
                       recipe=RECIPES["none"])
    assert two.tokens_per_step == step.tokens_per_step


def test_search_tries_tp_and_ranks_it() -> None:
    inputs = PlanInputs(LITE, H800, LaunchRequest(2, global_batch=256), count_parameters(LITE), MemoryAssumptions())
    space = search_space(inputs, SearchOptions())
    assert space.tps == (1, 2, 4, 8)
    assert all(16 % (pp * tp) == 0 for pp, tp in space.pp_tps) and (2, 4) in space.pp_tps
    result = search_layouts(inputs, SearchOptions())
    assert {t.layout.tp for t in result.ranked} > {1}
    steps = [t.predicted()[1].step_s for t in result.ranked]
    assert steps == sorted(steps)
    tp_trial = next(t for t in result.ranked if t.layout.tp > 1)
    assert f"TP{tp_trial.layout.tp}" in tp_trial.label()
    lines = choice_lines(result, explain_search(result))
    others = [tp for tp in space.tps if tp != result.ranked[0].layout.tp]
    assert sum(line.startswith("tp ") for line in lines) == len(others)


def test_fixed_tp_narrows_the_search() -> None:
    inputs = PlanInputs(LITE, H800, LaunchRequest(2, tp=2, global_batch=256), count_parameters(LITE),
                        MemoryAssumptions())
    result = search_layouts(inputs, SearchOptions())
    assert result.space.tps == (2,) and {t.layout.tp for t in result.ranked} == {2}
    assert "tp 2 as given" in explain_search(result).scope


def test_a_single_allowed_tp_is_not_said_to_be_given() -> None:
    """One KV head (multi-query attention) leaves tp 1 the only degree the search may try: the scope line says
    so, not that --tp gave it."""
    mqa = dataclasses.replace(LLAMA, attention=dataclasses.replace(LLAMA.attention, num_kv_heads=1))
    inputs = PlanInputs(mqa, H800, LaunchRequest(2), count_parameters(mqa), MemoryAssumptions())
    space = search_space(inputs, SearchOptions(schedules=("1f1b",)))
    assert space.tps == (1,)
    scope = explain_search(SearchResult(space, "fastest", (), (), H800.usable_hbm_bytes)).scope
    assert "as given" not in scope and "tp 1 only (the one the node and the heads allow)" in scope


def test_tp2_plan_of_a_dense_model_predicts_its_step() -> None:
    plan = plan_launch(LLAMA, H100, LaunchRequest(128, tp=2, pp=16, schedule="1f1b", seq_len=SEQ, global_batch=512),
                       search=SearchOptions(schedules=("1f1b",)))
    assert plan.layout.tp == 2 and plan.layout.pp == 16 and plan.layout.dp == 32
    assert plan.step_time is not None and plan.step_time.step_s > 0
    assert plan.step_time.layers[0].tp_f_s == pytest.approx(4 * 1 / 2 * SEQ * 16384 * 2 / 360e9)
    middle = plan.stages[1]  # its GEMM weights halved per GPU, its norms (2h per layer) whole
    assert middle.params_per_gpu == middle.num_layers * 2 * 16384 + (middle.dense_params
                                                                     - middle.num_layers * 2 * 16384) // 2
