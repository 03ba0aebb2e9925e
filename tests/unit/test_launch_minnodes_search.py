"""--min-nodes over the layout search's space (tp, ZeRO stages, schedules, recipes): the smallest count at which the
search has a layout that fits, its bound never above what the search finds."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsctl.launch.candidates import PlanInputs
from dsctl.launch.memory import MemoryAssumptions
from dsctl.launch.minnodes import dp_needs, min_nodes, smallest_fit
from dsctl.launch.plan import LaunchRequest, plan_launch
from dsctl.launch.search import SearchOptions, attach_memory, enumerate_trials, search_request, search_space
from dsctl.launch.trials import Trial
from dsctl.model.params import count_parameters
from dsctl.profiles.loader import ProfileStore
from dsctl.profiles.schema import ModelProfile, NodeProfile

STORE = ProfileStore()


def _fitting(model: ModelProfile, node: NodeProfile, request: LaunchRequest, options: SearchOptions,
             num_nodes: int) -> list[Trial]:
    """Every layout of the search's space at ``num_nodes`` that fits: the search's own stages 1-3, in full."""
    req = search_request(replace(request, num_nodes=num_nodes), options).checked(model, node.num_gpus)
    inputs = PlanInputs(model, node, req, count_parameters(model), MemoryAssumptions())
    trials, _ = enumerate_trials(inputs, search_space(inputs, options))
    return attach_memory(inputs, trials, options.min_headroom_bytes)[0]


@pytest.mark.parametrize(("model", "schedules", "recipe", "smallest"), [
    ("llama3.1-405b", ("1f1b",), None, 9),
    ("qwen2.5-72b", ("dualpipe", "1f1b"), "none", 2),
])
def test_the_first_count_at_which_the_search_fits(model: str, schedules: tuple[str, ...], recipe: str | None,
                                                   smallest: int) -> None:
    m, node = STORE.model(model), STORE.node("h800-hgx")
    options = SearchOptions(schedules=schedules)
    request = LaunchRequest(1, recipe=recipe)
    found = smallest_fit(m, node, request, search=options)
    assert found is not None and found.num_nodes == smallest
    assert all(not _fitting(m, node, request, options, k) for k in range(1, smallest))
    fits = _fitting(m, node, request, options, smallest)
    assert found.label in {t.label(with_recipe=True) for t in fits}  # the layout it names does fit there


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["deepseek-v2-lite", "qwen2.5-72b", "llama3.1-405b"]),
       node=st.sampled_from(["h800-hgx", "h200-hgx"]),
       schedule=st.sampled_from(["dualpipe", "dualpipev", "1f1b", "interleaved"]),
       tp=st.sampled_from([None, 2]),
       recipe=st.sampled_from([None, "none"]))
def test_same_answer_as_searching_every_count(model: str, node: str, schedule: str, tp: int | None,
                                              recipe: str | None) -> None:
    m, n = STORE.model(model), STORE.node(node)
    options = SearchOptions(schedules=(schedule,))
    request = LaunchRequest(1, tp=tp, recipe=recipe, schedule=schedule)
    limit = 12
    expected = next((k for k in range(1, limit + 1) if _fitting(m, n, request, options, k)), None)
    assert min_nodes(m, n, request, max_nodes=limit, search=options) == expected


@pytest.mark.parametrize(("model", "request_", "counts"), [
    ("llama3.1-405b", LaunchRequest(1, schedule="1f1b"), (9, 10, 12, 16)),
    ("qwen2.5-72b", LaunchRequest(1, recipe="none"), (2, 3, 4)),
    ("deepseek-v2", LaunchRequest(1, schedule="1f1b"), (2, 3, 4, 6)),
    pytest.param("deepseek-v3", LaunchRequest(1, schedule="1f1b"), (16, 17), marks=pytest.mark.slow),
])
def test_the_bound_never_exceeds_what_the_search_finds(model: str, request_: LaunchRequest,
                                                       counts: tuple[int, ...]) -> None:
    m, node = STORE.model(model), STORE.node("h800-hgx")
    options = SearchOptions(schedules=(request_.schedule,))
    needs = dp_needs(m, node, request_, options)
    seen = 0
    for k in counts:
        for trial in _fitting(m, node, request_, options, k):
            lay = trial.layout
            assert lay.dp >= needs[lay.schedule, lay.pp, lay.tp], trial.label(with_recipe=True)
            seen += 1
    assert seen > 0  # the bound was held against real fits


@pytest.mark.slow
def test_deepseek_v3_with_tp_and_zero3_fits_far_fewer_nodes_than_the_memory_rule() -> None:
    model, node = STORE.model("deepseek-v3"), STORE.node("h800-hgx")
    assert min_nodes(model, node, LaunchRequest(1)) == 128  # the memory rule: ZeRO-1, tp 1
    options = SearchOptions(schedules=("1f1b",))
    found = smallest_fit(model, node, LaunchRequest(1, schedule="1f1b"), search=options)
    assert found is not None and found.num_nodes < 42  # the memory rule's answer under 1F1B
    plan = plan_launch(model, node, LaunchRequest(found.num_nodes, schedule="1f1b"), search=options)
    assert plan.memory.fits and plan.exit_code == 0  # the same search, with its step, plans a layout that fits
    assert not _fitting(model, node, LaunchRequest(1, schedule="1f1b"), options, found.num_nodes - 1)


@pytest.mark.slow
def test_a_plan_that_does_not_fit_names_the_searchs_smallest_count() -> None:
    model, node = STORE.model("qwen2.5-72b"), STORE.node("h800-hgx")
    options = SearchOptions(schedules=("1f1b",))
    plan = plan_launch(model, node, LaunchRequest(1, schedule="1f1b", recipe="none"), suggest_min_nodes=True,
                       search=options)
    smallest = min_nodes(model, node, LaunchRequest(1, schedule="1f1b", recipe="none"), search=options)
    assert plan.exit_code == 1 and smallest is not None and smallest > 1
    assert any(f"the smallest node count that fits is {smallest} " in note for note in plan.notes)
