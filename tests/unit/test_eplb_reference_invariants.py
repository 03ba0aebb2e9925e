"""Structural invariants of reference placements on random inputs, and the input checks V1-V11."""

from __future__ import annotations

import numpy as np
import pytest
from eplb_asserts import assert_hierarchical, assert_valid, draw_shape
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.commands.eplb import FIELD_OPTIONS as EPLB_FIELD_OPTIONS
from dsctl.eplb.checks import check_layout, check_weight, choose_policy
from dsctl.eplb.reference import rebalance_reference
from dsctl.errors import InputError


@st.composite
def layouts(draw: st.DrawFn) -> tuple[np.ndarray, int, int, int, int, str]:
    layers, experts, replicas, groups, nodes, gpus = draw_shape(draw)
    integer = draw(st.booleans())
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    if integer:
        weight = rng.integers(0, 20, size=(layers, experts)).astype(float)
    else:
        weight = rng.lognormal(0, 1, (layers, experts))
    policy = draw(st.sampled_from(["auto", "global"]))
    return weight, replicas, groups, nodes, gpus, policy


@settings(max_examples=60, deadline=None)
@given(layouts())
def test_structural_invariants(case: tuple[np.ndarray, int, int, int, int, str]) -> None:
    weight, replicas, groups, nodes, gpus, policy = case
    p = rebalance_reference(weight, replicas, groups, nodes, gpus, policy)
    assert_valid(p, weight.shape[1], replicas)
    if choose_policy(groups, nodes, policy) == "hierarchical":
        assert_hierarchical(p, groups, nodes)


@pytest.mark.parametrize(("args", "needle"), [
    ((1, 256, 288, 8, 4, 64), "--replicas 288 is not a multiple of --gpus 64: 288 = 4 x 64 + 32 (rule V8)"),
    ((1, 256, 200, 8, 4, 8), "--replicas 200 is smaller than the number of experts 256"),
    ((1, 256, 288, 8, 4, 30), "--gpus 30 to be a multiple of --nodes 4"),
    ((1, 250, 288, 8, 4, 32), "250 experts to split into --groups 8"),
    ((1, 256, 288, 8, 0, 32), "--nodes must be >= 1, got 0 (rule V4)"),
    ((1, 256, 288, 0, 4, 32), "--groups must be >= 1, got 0 (rule V5)"),
    ((1, 256, 288, 8, 4, 0), "--gpus must be >= 1, got 0 (rule V5)"),
    ((1, 256, -1, 8, 4, 32), "--replicas must be >= 1"),
    ((0, 256, 288, 8, 4, 32), "rule V1"),
])
def test_layout_rules(args: tuple[int, ...], needle: str) -> None:
    with pytest.raises(InputError) as err:
        check_layout(*args)
    assert needle.replace("--", "") in err.value.message  # the domain names fields
    err.value.name_options(EPLB_FIELD_OPTIONS.get)  # as 'dsctl eplb' spells them
    assert needle in err.value.message


def test_layout_reports_every_failing_rule_at_once() -> None:
    with pytest.raises(InputError) as err:
        check_layout(1, 250, 200, 8, 4, 30)
    message = err.value.message
    assert "V6" in message and "V7" in message and "V8" in message and "V9" in message


def test_hierarchical_forced_on_indivisible_groups_is_an_error() -> None:
    with pytest.raises(InputError, match="multiple of nodes 3"):
        check_layout(1, 256, 288, 8, 3, 24, "hierarchical")


def test_policy_choice_follows_the_reference() -> None:
    assert [choose_policy(8, n) for n in (1, 2, 4, 8, 3, 5, 16)] == ["hierarchical"] * 4 + ["global"] * 3
    with pytest.raises(InputError, match=r"^policy .best. is not valid: choose auto, hierarchical or global"):
        choose_policy(8, 4, "best")


def test_global_policy_ignores_groups_and_nodes_with_a_warning() -> None:
    layout = check_layout(1, 250, 320, 8, 3, 64)
    assert layout.policy == "global" and layout.num_groups_eff == 1 and layout.num_nodes_eff == 1
    assert any("V10" in w for w in layout.warnings)


@pytest.mark.parametrize(("weight", "needle"), [
    (np.array([[1.0, np.nan]]), "is nan: every load must be a finite number (rule V2)"),
    (np.array([[1.0, np.inf]]), "rule V2"),
    (np.array([[1.0, -2.0]]), "layer 0, expert 1 is -2: loads must be >= 0 (rule V3)"),
    (np.array([1.0, 2.0]), "rule V1"),
    (np.zeros((0, 4)), "rule V1"),
    (np.array([["a", "b"]]), "must be integers or floats"),
    (np.array([[True, False]]), "must be integers or floats, got dtype bool"),
    (np.array([[3e38, 3e38]]), "too large for float32"),
])
def test_weight_rules(weight: np.ndarray, needle: str) -> None:
    with pytest.raises(InputError) as err:
        check_weight(weight)
    assert needle in err.value.message


def test_large_integer_loads_warn() -> None:
    _, warnings = check_weight(np.array([[2.0**25 + 1, 3.0]]))
    assert warnings and "V11" in warnings[0]


def test_rebalance_never_raises_assertion_error() -> None:
    with pytest.raises(InputError):
        rebalance_reference(np.ones((2, 12)), 16, 4, 2, 7)
