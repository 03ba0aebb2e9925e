"""GPU hours and cost: the V3 tech report's Table 1."""

from __future__ import annotations

import pytest

from dsctl.errors import InputError
from dsctl.model.cost import resolve_throughput, training_cost
from dsctl.profiles.loader import ProfileStore
from dsctl.units import parse_count

STORE = ProfileStore()
V3 = STORE.model("deepseek-v3")


def test_measured_default_180k_per_trillion() -> None:
    t = resolve_throughput(V3)
    assert t.source == "measured"
    r = training_cost(V3, 1e12, t)
    assert r.gpu_hours == pytest.approx(180_000)
    assert round(r.days_per_trillion_tokens, 1) == 3.7  # on 2,048 GPUs
    assert r.days == pytest.approx(180_000 / 2048 / 24)


def test_pretraining_2664k_hours() -> None:
    r = training_cost(V3, parse_count("14.8T"), resolve_throughput(V3))
    assert r.gpu_hours == pytest.approx(2_664_000)
    assert r.cost_usd == pytest.approx(5.328e6)
    assert r.days < 60  # "less than two months"


def test_total_2788k_hours_5_576m() -> None:
    r = training_cost(V3, 14.8e12, resolve_throughput(V3), extra_gpu_hours=[119e3, 5e3])
    assert r.train_gpu_hours == pytest.approx(2_664_000)
    assert r.gpu_hours == pytest.approx(2_788_000)
    assert r.cost_usd == pytest.approx(5.576e6)
    assert r.extra_gpu_hours == (119e3, 5e3)


def test_flops_path_989_tflops_mfu_039() -> None:
    t = resolve_throughput(V3, gpu_tflops=989, mfu=0.39)
    assert t.source == "flops" and t.flops_per_token == 250e9
    r = training_cost(V3, 1e12, t)
    assert r.gpu_hours_per_trillion_tokens == pytest.approx(180_000, rel=0.001)  # 180.05K
    assert training_cost(V3, 14.8e12, t).gpu_hours == pytest.approx(2_664_000, rel=0.001)


def test_table4_throughput_gives_180k() -> None:
    # 272.80B tokens/day on 2,048 GPUs (ISCA Table 4)
    t = resolve_throughput(V3, tokens_per_gpu_second=272.80e9 / 86400 / 2048)
    assert t.source == "given"
    assert training_cost(V3, 1e12, t).gpu_hours == pytest.approx(180_000, rel=0.002)  # 180.2K


def test_computed_flops_for_unpublished_model() -> None:
    import dataclasses

    unpublished = dataclasses.replace(V3.published, training_gflops_per_token=0,
                                      training_gpu_hours_per_trillion_tokens=0)
    bare = dataclasses.replace(V3, name="my-moe", published=unpublished)
    t = resolve_throughput(bare)
    assert t.source == "flops" and t.flops_per_token == pytest.approx(250.45e9, rel=1e-4)
    assert "seq-len 4096" in t.note


def test_other_models_use_published_flops() -> None:
    t = resolve_throughput(STORE.model("deepseek-v2"))
    assert t.source == "flops" and t.flops_per_token == 155e9
    t2 = resolve_throughput(V3, gflops_per_token=100)
    assert t2.flops_per_token == 100e9 and t2.gpu_tflops == 989 and t2.mfu == 0.39


def test_bad_inputs() -> None:
    with pytest.raises(InputError, match=r"^mfu is a fraction of peak between 0 and 1, got 1\.5$"):
        resolve_throughput(V3, mfu=1.5)
    with pytest.raises(InputError, match=r"^gpu_tflops must be positive, got 0$"):
        resolve_throughput(V3, gpu_tflops=0)
    combined = r"^tokens_per_gpu_second cannot be combined with gflops_per_token, gpu_tflops or mfu$"
    with pytest.raises(InputError, match=combined):
        resolve_throughput(V3, tokens_per_gpu_second=1000, mfu=0.4)
    t = resolve_throughput(V3)
    with pytest.raises(InputError, match=r"^tokens must be positive, got 0$"):
        training_cost(V3, 0, t)
    with pytest.raises(InputError, match=r"^gpus must be positive, got 0$"):
        training_cost(V3, 1e12, t, num_gpus=0)
    with pytest.raises(InputError, match=r"^extra_gpu_hours cannot be negative, got -1$"):
        training_cost(V3, 1e12, t, extra_gpu_hours=[-1])
    with pytest.raises(InputError, match=r"^gpu_hour_usd cannot be negative, got -2$"):
        training_cost(V3, 1e12, t, gpu_hour_usd=-2)
