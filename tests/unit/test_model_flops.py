"""Training FLOPs per token: the paper's Table 2."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.model.flops import training_flops
from dsctl.profiles.loader import ProfileStore

STORE = ProfileStore()


def gflops(name: str, **kw: object) -> float:
    return training_flops(STORE.model(name), **kw).gflops_per_token  # type: ignore[arg-type]


def test_v3_250_gflops_within_2pct() -> None:
    assert gflops("deepseek-v3") == pytest.approx(250, rel=0.02)
    assert gflops("deepseek-v3") == pytest.approx(250.45, abs=0.01)


def test_v3_matches_table4_cross_check() -> None:
    # 385 causal TFLOPS x 2048 GPUs / (272.80B tokens/day) = 249.7 GFLOP/token
    measured = 385e12 * 2048 / (272.80e9 / 86400) / 1e9
    assert gflops("deepseek-v3") == pytest.approx(measured, rel=0.005)


def test_v3_non_causal_matches_432_tflops() -> None:
    # 432 non-causal TFLOPS gives ~280 GFLOP/token
    measured = 432e12 * 2048 / (272.80e9 / 86400) / 1e9
    assert gflops("deepseek-v3", causal=False) == pytest.approx(measured, rel=0.005)


def test_v2_155() -> None:
    assert gflops("deepseek-v2") == pytest.approx(155, rel=0.005)  # 155.30


def test_llama_2448_within_1_1pct() -> None:
    assert gflops("llama3.1-405b") == pytest.approx(2448, rel=0.011)  # 2473.2, +1.0%


def test_qwen_gap_is_documented() -> None:
    # 444.9 vs the printed 394 (+12.9%): 394 GFLOP would need ~63B matmul parameters, fewer than
    # Qwen2.5-72B (or Qwen-72B) has without its embedding; see docs/model.md.
    report = training_flops(STORE.model("qwen2.5-72b"))
    assert report.gflops_per_token == pytest.approx(444.86, abs=0.01)
    assert report.error_pct == pytest.approx(12.9, abs=0.05)


def test_breakdown() -> None:
    r = training_flops(STORE.model("deepseek-v3"))
    assert r.flops_per_token == pytest.approx(r.matmul_flops_per_token + r.attention_flops_per_token)
    assert r.forward_flops_per_token * 3 == pytest.approx(r.flops_per_token)
    assert r.matmul_flops_per_token == 6 * r.matmul_params
    # causal attention: 3 x 61 x 2 x 128 heads x (192 + 128) x 4096 / 2
    assert r.attention_flops_per_token == 3 * 61 * 2 * 128 * 320 * 2048


def test_bad_seq_len() -> None:
    with pytest.raises(InputError, match=r"^seq_len must be at least 1 token, got 0$"):
        training_flops(STORE.model("deepseek-v3"), 0)


@settings(max_examples=30, deadline=None)
@given(seq=st.integers(1, 1 << 18))
def test_attention_grows_linearly_with_seq_len(seq: int) -> None:
    model = STORE.model("llama3.1-405b")
    a = training_flops(model, seq)
    b = training_flops(model, 2 * seq)
    assert b.attention_flops_per_token == pytest.approx(2 * a.attention_flops_per_token)
    assert a.matmul_flops_per_token == b.matmul_flops_per_token
    assert training_flops(model, seq, causal=False).attention_flops_per_token == pytest.approx(
        2 * a.attention_flops_per_token)
