"""Per-layer slot budget (dsctl.eplb.budget) against the uniform count."""

from __future__ import annotations

import numpy as np
import pytest

from dsctl.eplb.budget import allocate_slots
from dsctl.errors import InputError


def test_skewed_layer_gets_the_slots_and_the_step_gets_faster() -> None:
    rng = np.random.default_rng(0)
    flat = rng.uniform(90, 110, (1, 16))
    hot = flat.copy()
    hot[0, 0] = 3000.0  # one hot expert: more replicas in this layer pay, the flat layer needs none
    w = np.vstack([flat, hot])
    res = allocate_slots(w, total_slots=2 * 24, num_gpus=4, num_nodes=1, num_groups=1, policy="global",
                         algorithm="reference")
    assert res.slots_per_layer.tolist() == [16, 32]
    assert res.max_load_per_layer.sum() < res.max_load_uniform.sum() and res.gain > 0.05
    assert res.slots_per_layer.sum() == res.total_slots
    assert res.gain == pytest.approx(1 - res.max_load_per_layer.sum() / res.max_load_uniform.sum())


def test_budget_must_allow_a_uniform_comparison() -> None:
    w = np.ones((2, 16))
    with pytest.raises(InputError, match="multiple of gpus 4 "):
        allocate_slots(w, total_slots=2 * 18, num_gpus=4, num_nodes=1, num_groups=1)
