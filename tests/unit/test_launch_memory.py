"""Per-GPU memory of launch layouts."""

from __future__ import annotations

import pytest

from dsctl.launch.layout import ParallelLayout
from dsctl.launch.memory import (
    MemoryAssumptions,
    activation_chunks,
    attention_activation_bytes,
    estimate_memory,
    moe_layer_activation_bytes,
)
from dsctl.launch.stages import split_stages
from dsctl.model.params import count_parameters
from dsctl.profiles.loader import ProfileStore
from dsctl.units import GIB


@pytest.fixture(scope="module")
def v3():  # type: ignore[no-untyped-def]
    return ProfileStore().model("deepseek-v3")


def _estimate(model, layout, tokens=4096, micro=120, **kw):  # type: ignore[no-untyped-def]
    stages = split_stages(model, count_parameters(model), layout.num_stages)
    return estimate_memory(model, layout, stages, 80 * GIB, tokens, micro, MemoryAssumptions(**kw))


def test_activation_bytes_per_token_v3(v3) -> None:  # type: ignore[no-untyped-def]
    # MLA: 2*7168 + 2*(1536 + 512 + 64) + 1.5*128*128
    assert attention_activation_bytes(v3) == 14336 + 4224 + 24576
    # MoE: attention + 2h + (8 + 1) * (h + 2 * 2048) + 4 * 256
    assert moe_layer_activation_bytes(v3) == 43136 + 14336 + 9 * (7168 + 4096) + 1024


def test_dualpipe_holds_two_copies_and_pp_plus_one_chunks(v3) -> None:  # type: ignore[no-untyped-def]
    dual = _estimate(v3, ParallelLayout(256, 8, 16, 64, 1, 128, "dualpipe"))
    single = _estimate(v3, ParallelLayout(256, 8, 16, 64, 1, 128, "1f1b"))
    mid_dual, mid_single = dual.per_rank[5], single.per_rank[5]
    assert mid_dual.stages == (5, 10) and mid_single.stages == (5,)
    assert mid_dual.params == 2 * mid_single.params  # stages 5 and 10 are the same shape
    assert all(r.activation_chunks == 17 for r in dual.per_rank)
    assert [r.activation_chunks for r in single.per_rank] == list(range(16, 0, -1))
    assert dual.fits and dual.headroom_bytes > 8 * GIB


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
