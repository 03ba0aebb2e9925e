"""Activation recipes against an independent measurement (issue 28): PyTorch's saved-tensor hooks on a reduced
DeepSeek-V3-style layer (MLA attention + MoE FFN, the structure of deepseek-ai/DeepSeek-V3 inference/model.py),
every saved tensor counted once per storage, parameters and buffers excluded.

The layer is written here from its structure, not from dsctl's formulas: each recipe is a way of running the
same modules (plain autograd; a recomputed region that keeps only its inputs; an FP8/E5M6 cache that keeps a
quantized input with FP32 1x128 tile scales; FlashAttention's contract of keeping q, k, v, o and the log-sum-exp).
The reduced layer keeps V3's head dimensions (128 nope + 64 RoPE, 128 value) and shrinks the widths, heads and
experts; dsctl's per-token bytes at that shape must match the measurement within 5%, and the V3-size figures are
the measurement scaled by dsctl's shape formula.
"""

from __future__ import annotations

import pytest

from dsctl.model.recipes import RECIPES, layer_activations, saved_tensors
from dsctl.profiles.loader import ProfileStore
from dsctl.profiles.schema import AttentionSpec, ModelProfile, MoESpec, PublishedFigures

H, HEADS, Q_LORA, KV_LORA, NOPE, ROPE, V_DIM = 512, 4, 256, 128, 128, 64, 128
EXPERTS, TOP_K, SHARED, INTER = 16, 4, 1, 256
TOKENS = 256
TILE = 128

REDUCED = ModelProfile(
    name="reduced", description="", source="", num_layers=1, num_dense_layers=0, hidden_size=H, vocab_size=1000,
    dense_intermediate_size=4 * H,
    attention=AttentionSpec(kind="mla", num_heads=HEADS, num_kv_heads=HEADS, head_dim=NOPE + ROPE,
                            q_lora_rank=Q_LORA, kv_lora_rank=KV_LORA, qk_nope_head_dim=NOPE,
                            qk_rope_head_dim=ROPE, v_head_dim=V_DIM),
    moe=MoESpec(num_routed_experts=EXPERTS, num_shared_experts=SHARED, num_experts_per_token=TOP_K,
                moe_intermediate_size=INTER),
    num_mtp_modules=0, tie_word_embeddings=False, published=PublishedFigures(),
)


pytestmark = pytest.mark.slow  # imports torch (3-5 s) and runs four recipes of the layer


@pytest.fixture(scope="module")
def measured() -> dict[str, float]:
    torch = pytest.importorskip("torch")
    from tests.unit.recipes_torch_layer import Layer, measure

    torch.set_num_threads(1)
    layer = Layer()
    return {name: measure(layer, name) for name in RECIPES}


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_recipe_within_5pct_of_saved_tensor_measurement(measured: dict[str, float], recipe: str) -> None:
    ours = layer_activations(REDUCED, RECIPES[recipe]).total
    assert ours == pytest.approx(measured[recipe], rel=0.05), (recipe, ours, measured[recipe])


def test_measured_recipe_order(measured: dict[str, float]) -> None:
    """Plain BF16 keeps the most; with FlashAttention, recomputing the core only drops the log-sum-exp; DeepSeek's
    recipe keeps about a quarter to a third; full recompute only the layer input."""
    assert measured["full-recompute"] == pytest.approx(2 * H, rel=0.01)
    assert measured["none"] - measured["selective"] == pytest.approx(4 * HEADS, rel=0.01)
    assert 2.6 < measured["none"] / measured["deepseek"] < 4.5


def test_v3_per_layer_figures_scaled_by_the_shape_formula(measured: dict[str, float]) -> None:
    """The V3 layer's bytes per token: the reduced measurement x (dsctl at V3 / dsctl at the reduced shape)."""
    v3 = ProfileStore().model("deepseek-v3")
    expected = {"deepseek": 156_832, "selective": 607_536, "none": 608_048, "full-recompute": 14_336}
    for name, recipe in RECIPES.items():
        ours_v3 = layer_activations(v3, recipe).total
        assert ours_v3 == pytest.approx(expected[name], abs=1), name
        scaled = measured[name] * ours_v3 / layer_activations(REDUCED, recipe).total
        assert scaled == pytest.approx(ours_v3, rel=0.05)


def test_saved_tensors_name_the_lse_and_scales() -> None:
    v3 = ProfileStore().model("deepseek-v3")
    names = {t.name for t in saved_tensors(v3, RECIPES["deepseek"])}
    assert "attention log-sum-exp" in names
    layer = layer_activations(v3, RECIPES["deepseek"])
    assert layer.lse == 128 * 4
    # scales: E5M6 attention output 128x128 values + FP8 (8 routed) x (h + 2 i) + FP32 per 128 values
    assert layer.scales == pytest.approx((128 * 128 + 8 * (7168 + 2 * 2048) + 2 * 2048) / 128 * 4)
