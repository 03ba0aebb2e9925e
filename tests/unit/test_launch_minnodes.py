"""The smallest node count that fits: exact although fit is not monotone in the node count."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsctl.errors import DsctlError, InputError
from dsctl.launch.minnodes import min_nodes
from dsctl.launch.plan import LaunchRequest, plan_launch
from dsctl.profiles.loader import ProfileStore
from dsctl.profiles.schema import ModelProfile, NodeProfile

STORE = ProfileStore()


def _fits(model: ModelProfile, node: NodeProfile, request: LaunchRequest, num_nodes: int) -> bool:
    try:
        plan = plan_launch(model, node, replace(request, num_nodes=num_nodes), simulate_schedule=False)
    except DsctlError:
        return False
    return plan.exit_code == 0


def test_deepseek_v3_on_h800_needs_128_nodes() -> None:
    assert min_nodes(STORE.model("deepseek-v3"), STORE.node("h800-hgx"), LaunchRequest(1)) == 128


@pytest.mark.parametrize(("model", "schedule", "recipe", "smallest", "gap"), [
    ("deepseek-v3", "1f1b", None, 42, range(47, 52)),
    ("qwen2.5-72b", "dualpipe", "deepseek", 21, range(25, 27)),
])
def test_exact_where_fit_is_not_monotone(model: str, schedule: str, recipe: str | None, smallest: int,
                                         gap: range) -> None:
    m, node = STORE.model(model), STORE.node("h800-hgx")
    request = LaunchRequest(1, schedule=schedule, recipe=recipe)
    assert min_nodes(m, node, request) == smallest
    assert _fits(m, node, request, smallest)
    assert not any(_fits(m, node, request, n) for n in range(1, smallest))
    assert not any(_fits(m, node, request, n) for n in gap)  # more nodes that do not fit


def test_a_model_that_never_fits_and_requests_wrong_at_any_count() -> None:
    node = STORE.node("h800-hgx")
    assert min_nodes(STORE.model("llama3.1-405b"), node, LaunchRequest(1)) is None  # activations alone > 80 GiB
    assert min_nodes(STORE.model("deepseek-v3"), node, LaunchRequest(1, global_batch=15_361), max_nodes=2_048) is None
    with pytest.raises(InputError, match="does not divide the 256 routed experts"):
        min_nodes(STORE.model("deepseek-v3"), node, LaunchRequest(1, ep=3))


def test_progress_follows_the_scan() -> None:
    seen: list[tuple[int, int]] = []
    found = min_nodes(STORE.model("deepseek-v3"), STORE.node("h800-hgx"), LaunchRequest(1),
                      progress=lambda done, total: seen.append((done, total)))
    assert found == 128 and seen and seen[-1][0] == len(seen) and seen[-1][1] >= len(seen)
    assert 128 - len(seen) + 1 > 1  # the bound skipped the small counts without planning them


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["deepseek-v2-lite", "deepseek-v2", "qwen2.5-72b"]),
       node=st.sampled_from(["h800-hgx", "h200-hgx"]),
       schedule=st.sampled_from(["dualpipe", "dualpipev", "1f1b", "zb1p"]),
       tp=st.sampled_from([None, 2]),
       global_batch=st.sampled_from([None, 1_536, 4_000]))
def test_same_answer_as_planning_every_count(model: str, node: str, schedule: str, tp: int | None,
                                             global_batch: int | None) -> None:
    m, n = STORE.model(model), STORE.node(node)
    request = LaunchRequest(1, schedule=schedule, tp=tp, global_batch=global_batch)
    limit = 32
    expected = next((k for k in range(1, limit + 1) if _fits(m, n, request, k)), None)
    assert min_nodes(m, n, request, max_nodes=limit) == expected
