"""Activation recipes: names, profile defaults, recompute FLOPs and the backward seconds they add (issue 28)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsctl.errors import InputError
from dsctl.launch.layout import ParallelLayout
from dsctl.model.recipes import RECIPES, recipe_named, recompute_flops_per_token, resolve_recipe
from dsctl.profiles.loader import ProfileStore
from dsctl.profiles.schema import ACTIVATION_RECIPES
from dsctl.steptime import predict_step
from dsctl.steptime.ep import fabric_ep
from dsctl.steptime.hardware import gpu_rates
from dsctl.steptime.layers import layer_seconds

STORE = ProfileStore()


def test_names_and_defaults() -> None:
    assert tuple(RECIPES) == ACTIVATION_RECIPES
    assert resolve_recipe(STORE.model("deepseek-v3"), None).name == "deepseek"
    assert resolve_recipe(STORE.model("llama3.1-405b"), None).name == "selective"
    assert resolve_recipe(STORE.model("deepseek-v3"), "NONE").name == "none"
    with pytest.raises(InputError, match=r"^recipe 'fp4' is not a known recipe; valid: deepseek, selective"):
        recipe_named("fp4")


def test_recompute_flops_per_token_v3() -> None:
    v3 = STORE.model("deepseek-v3")
    # up-projections: 2 x 1536 x 128 x 192 + 2 x 512 x 128 x 256
    assert recompute_flops_per_token(v3, RECIPES["deepseek"]) == 2 * 1536 * 128 * 192 + 2 * 512 * 128 * 256
    # causal attention core at 4K: 2 x 128 heads x (192 + 128) x 2048
    assert recompute_flops_per_token(v3, RECIPES["selective"]) == 2 * 128 * 320 * 2048
    assert recompute_flops_per_token(v3, RECIPES["none"]) == 0
    full = recompute_flops_per_token(v3, RECIPES["full-recompute"])
    # 2 x (attention 187.1M + router 1.8M + 9 experts x 44.0M GEMM weights) + the attention core
    attention = 7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256 + 128 * 128 * 7168
    gemm = attention + 256 * 7168 + 9 * 3 * 7168 * 2048
    assert full == 2 * gemm + 2 * 128 * 320 * 2048 == pytest.approx(1.338e9, rel=1e-3)


def test_recompute_seconds_enter_the_backward() -> None:
    v3, node = STORE.model("deepseek-v3"), STORE.node("h800-hgx")
    rates = gpu_rates(node, v3.training_precision)
    ep_cost = fabric_ep(v3, node, 64)
    layers = {name: layer_seconds(v3, True, 4096.0, 4096, True, 64, rates, ep_cost, 1.0, recipe)
              for name, recipe in RECIPES.items()}
    none, deepseek, full = layers["none"], layers["deepseek"], layers["full-recompute"]
    assert none.recompute_s == 0.0
    assert 0 < deepseek.recompute_s < 0.1 * (deepseek.compute.f + deepseek.comm_f)
    assert deepseek.compute.i == pytest.approx(none.compute.i + deepseek.recompute_s)
    assert full.recompute_s == pytest.approx(none.compute.f + none.comm_f)
    assert full.comm_b == pytest.approx(none.comm_b + none.comm_f)
    layout = ParallelLayout(256, 8, 16, 64, 1, 128, "dualpipe")
    steps = {name: predict_step(v3, node, layout, 120, recipe=recipe).step_s for name, recipe in RECIPES.items()}
    assert steps["none"] < steps["deepseek"] < steps["full-recompute"]
    assert steps["selective"] > steps["none"]


def test_usable_hbm_from_the_profile() -> None:
    assert STORE.node("h800-hgx").usable_hbm_bytes == 81_559 * 2**20
    assert STORE.node("h200-hgx").usable_hbm_bytes == STORE.node("h200-hgx").hbm_bytes  # not given: nominal


def test_profile_fields_are_checked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from dsctl.profiles.loader import check_file
    from dsctl.profiles.schema import ProfileKind

    node = STORE.node("h800-hgx").path
    text = Path(node).read_text(encoding="utf-8").replace("hbm_usable: 81559 MiB", "hbm_usable: 90 GiB")
    (tmp_path / "big.yaml").write_text(text.replace("name: h800-hgx", "name: big"), encoding="utf-8")
    profile, errors = check_file(tmp_path / "big.yaml", ProfileKind.NODE)
    assert profile is None and any("hbm_usable" in str(e) and "exceeds hbm" in str(e) for e in errors)
    model = Path(STORE.model("deepseek-v3").path).read_text(encoding="utf-8")
    (tmp_path / "m.yaml").write_text(model.replace("activation_recipe: deepseek", "activation_recipe: fp4")
                                     .replace("name: deepseek-v3", "name: m"), encoding="utf-8")
    profile, errors = check_file(tmp_path / "m.yaml", ProfileKind.MODEL)
    assert profile is None and any("activation_recipe" in str(e) for e in errors)
