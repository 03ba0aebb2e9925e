"""Per-GPU memory of launch layouts."""

from __future__ import annotations

import pytest

from dsctl.launch.layout import ParallelLayout
from dsctl.launch.memory import (
    DEEPEP_BUFFER_BYTES,
    MEMORY_TERMS,
    MemoryAssumptions,
    RankMemory,
    activation_chunks,
    estimate_memory,
)
from dsctl.launch.stages import split_stages
from dsctl.model.params import count_parameters
from dsctl.model.recipes import RECIPES, layer_activations
from dsctl.profiles.loader import ProfileStore
from dsctl.units import GIB


@pytest.fixture(scope="module")
def v3():  # type: ignore[no-untyped-def]
    return ProfileStore().model("deepseek-v3")


USABLE = 81_559 * 2**20  # nvidia-smi's total of an 80 GB H800


def _estimate(model, layout, tokens=4096, micro=120, recipe="deepseek", **kw):  # type: ignore[no-untyped-def]
    stages = split_stages(model, count_parameters(model), layout.num_stages)
    return estimate_memory(model, layout, stages, USABLE, tokens, micro, MemoryAssumptions(**kw), RECIPES[recipe],
                           80 * GIB)


def test_activation_bytes_per_token_v3(v3) -> None:  # type: ignore[no-untyped-def]
    deepseek = layer_activations(v3, RECIPES["deepseek"])
    # MLA: x 2h + compressed q 2*1536 + compressed kv 2*(512 + 64) + E5M6 output 1.5*128*128
    # MoE: norm input 2h + FP32 scores 4*256 + top-k and routing map 2*8*8 + weights 4*8
    #      + 8 routed FP8 (h + 2*2048) + shared FP8 2*2048
    values = (2 * 7168 + 2 * 1536 + 2 * 576 + 1.5 * 16384) + (2 * 7168 + 1024 + 128 + 32 + 8 * (7168 + 4096) + 4096)
    assert deepseek.values == values == 152_864
    assert deepseek.lse == 512 and deepseek.total == 156_832
    none = layer_activations(v3, RECIPES["none"])
    assert none.total / deepseek.total == pytest.approx(3.877, abs=0.001)
    assert layer_activations(v3, RECIPES["full-recompute"]).total == 2 * 7168


def test_every_term_is_in_the_total(v3) -> None:  # type: ignore[no-untyped-def]
    row = _estimate(v3, ParallelLayout(256, 8, 16, 64, 1, 128, "dualpipe")).per_rank[1]
    assert row.total_bytes == sum(getattr(row, name) for name, _ in MEMORY_TERMS)
    not_terms = ("total_bytes", "headroom_bytes", "activation_chunk_bytes")
    fields = {f for f in RankMemory.__dataclass_fields__ if f.endswith("_bytes") and f not in not_terms}
    assert {name for name, _ in MEMORY_TERMS} == fields
    assert row.deepep_buffers_bytes == DEEPEP_BUFFER_BYTES == 3_000_000_000
    # FP8 copies: 1 B per GEMM weight (+ block scales) of the 2 stages' 3.27B parameters
    assert row.fp8_weights_bytes == pytest.approx(row.params, rel=0.01)
    assert row.attention_lse_bytes == 17 * 4096 * 4 * 512  # 17 chunks x tokens x 4 layers x 128 heads x 4 B
    assert row.backward_temporaries_bytes == 4096 * 608_048  # one layer's plain-BF16 saved set


def test_recipes_decide_the_fit_at_pp16_ep64(v3) -> None:  # type: ignore[no-untyped-def]
    layout = ParallelLayout(256, 8, 16, 64, 1, 128, "dualpipe")
    deepseek = _estimate(v3, layout)
    assert deepseek.fits and deepseek.hbm_bytes == USABLE and deepseek.nominal_hbm_bytes == 80 * GIB
    assert deepseek.max_total_bytes / GIB == pytest.approx(73.5, abs=0.1)
    none = _estimate(v3, layout, recipe="none")
    assert not none.fits and none.max_total_bytes / GIB == pytest.approx(187.5, abs=0.1)
    assert none.worst.fp8_weights_bytes == 0 and none.worst.activation_scales_bytes == 0
    full = _estimate(v3, layout, recipe="full-recompute")
    assert full.fits and full.max_total_bytes < deepseek.max_total_bytes
    assert full.worst.attention_lse_bytes == 0


def test_dualpipe_holds_two_copies_and_pp_plus_one_chunks(v3) -> None:  # type: ignore[no-untyped-def]
    dual = _estimate(v3, ParallelLayout(256, 8, 16, 64, 1, 128, "dualpipe"))
    single = _estimate(v3, ParallelLayout(256, 8, 16, 64, 1, 128, "1f1b"))
    mid_dual, mid_single = dual.per_rank[5], single.per_rank[5]
    assert mid_dual.stages == (5, 10) and mid_single.stages == (5,)
    assert mid_dual.params == 2 * mid_single.params  # stages 5 and 10 are the same shape
    assert all(r.activation_chunks == 17 for r in dual.per_rank)
    assert [r.activation_chunks for r in single.per_rank] == list(range(16, 0, -1))
    assert dual.fits and dual.headroom_bytes > 5 * GIB


def test_expert_parallel_shares_routed_experts(v3) -> None:  # type: ignore[no-untyped-def]
    counts = count_parameters(v3)
    est = _estimate(v3, ParallelLayout(256, 8, 16, 64, 1, 128, "1f1b"))
    # stage 5 = 4 MoE layers: each GPU holds 256 / 64 = 4 experts per layer
    assert est.per_rank[5].routed_params == 4 * 4 * counts.routed_expert
    # ZeRO-1: routed optimizer states over expert-dp 2, dense over dp 128, 8 bytes per parameter
    row = est.per_rank[5]
    assert row.optimizer_bytes == int(row.dense_params * 8 / 128 + row.routed_params * 8 / 2)
    assert row.gradients_bytes == 4 * row.params and row.weights_bytes == 2 * row.params


def test_pp8_does_not_fit_and_reports_shortfall(v3) -> None:  # type: ignore[no-untyped-def]
    est = _estimate(v3, ParallelLayout(256, 8, 8, 64, 1, 256, "dualpipe"), micro=60)
    assert not est.fits and est.headroom_bytes < 0
    assert est.max_total_bytes == est.hbm_bytes - est.headroom_bytes


def test_activation_chunks_capped_by_micro_batches() -> None:
    layout = ParallelLayout(256, 8, 16, 64, 1, 128, "1f1b")
    assert activation_chunks(layout, 0, 4) == 4
    assert activation_chunks(ParallelLayout(256, 8, 8, 64, 1, 256, "dualpipev"), 0, 16) == 17
