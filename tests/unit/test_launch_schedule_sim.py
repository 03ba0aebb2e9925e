"""Timing of the pipeline schedules: README bubble formulas in their exact regime, memory peaks, both models."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.launch.schedule import OpCosts, ScheduleResult, parse_op, simulate, timeline_svg
from tests.unit.launch_messages import as_read

_cost = st.sampled_from([0.25, 0.5, 1.0, 1.5, 2.0, 3.0])


def stage_of(result: ScheduleResult, rank: int, d: int) -> int:
    if d == 0:
        return rank
    if result.schedule == "dualpipe":
        return result.num_stages - 1 - rank
    return result.num_stages - 1 - rank  # dualpipev: 2R-1-r, and num_stages = 2R


def check_dependencies(result: ScheduleResult) -> None:
    """Every forward starts after the previous stage's forward, every backward after the next stage's one."""
    fwd_end: dict[tuple[int, int, int], float] = {}
    bwd_end: dict[tuple[int, int, int], float] = {}
    v = result.schedule == "dualpipev"
    for rank, row in enumerate(result.timeline):
        prev_end = 0.0
        for name, start, end in row:
            assert start >= prev_end - 1e-9
            prev_end = end
            op = parse_op(name)
            if op.fwd and op.kind in ("F", "FB"):
                d, m = op.fwd
                fwd_end[(m if v else d, m, stage_of(result, rank, d))] = end
            if op.bwd and op.kind in ("B", "I", "FB"):
                d, m = op.bwd
                bwd_end[(m if v else d, m, stage_of(result, rank, d))] = end
    last = result.num_stages - 1
    for rank, row in enumerate(result.timeline):
        for name, start, _ in row:
            op = parse_op(name)
            if op.fwd and op.kind in ("F", "FB"):
                d, m = op.fwd
                s = stage_of(result, rank, d)
                if s > 0:
                    assert fwd_end[(m if v else d, m, s - 1)] <= start + 1e-9, (rank, name)
            if op.bwd and op.kind in ("B", "I", "FB"):
                d, m = op.bwd
                s = stage_of(result, rank, d)
                need = fwd_end[(m if v else d, m, s)] if s == last else bwd_end[(m if v else d, m, s + 1)]
                assert need <= start + 1e-9, (rank, name)


def test_readme_figure_dualpipe_pp8_c20() -> None:
    result = simulate("dualpipe", 8, 20, OpCosts(f=1, b=2, w=1, fb=3))
    assert result.makespan == 66  # the figure's width in cells
    assert result.idle_per_rank == [6.0] * 8
    assert result.bubble == result.formula_bubble == 6.0 == 2 * (8 / 2 - 1)
    assert result.formula_exact and result.formula_matches
    assert result.peak_activations_per_rank == [9] * 8
    assert result.num_ranks == 8 and len(result.ops) == 8
    check_dependencies(result)


def test_dualpipe_fb_2_5_idle_per_rank() -> None:
    result = simulate("dualpipe", 8, 20, OpCosts(f=1, b=2, w=1, fb=2.5))
    assert result.idle_per_rank == [3.5, 4, 4.5, 4.5, 4.5, 4.5, 4, 3.5]
    assert result.bubble == result.formula_bubble == 4.5 == 1.5 * (8 / 2 - 1)
    assert result.makespan == result.formula_makespan == (20 - 8 - 1) * 2.5 + 9 * 3 + 4.5


@pytest.mark.parametrize("pp", [2, 4, 6, 8, 16])
def test_dualpipe_bubble_per_pp(pp: int) -> None:
    for fb, slope in ((2.5, 1.5), (3.0, 2.0)):
        result = simulate("dualpipe", pp, 4 * pp, OpCosts(1, 2, 1, fb))
        assert result.bubble == pytest.approx(slope * (pp / 2 - 1))
        assert result.formula_matches


@settings(max_examples=40, deadline=None)
@given(
    schedule=st.sampled_from(["dualpipe", "dualpipev"]),
    half_pp=st.integers(1, 6),
    extra=st.integers(0, 10),
    f=_cost,
    w_frac=st.sampled_from([0.25, 0.5, 1.0]),
    fb_frac=st.floats(0, 1),
)
def test_dualpipe_formula_exact_when_f_equals_i_and_w_at_most_f(
    schedule: str, half_pp: int, extra: int, f: float, w_frac: float, fb_frac: float
) -> None:
    pp = 2 * half_pp
    w = f * w_frac
    b = f + w  # I = F
    fb = max(f, b) + fb_frac * (f + b - max(f, b))
    mb = 2 * pp + 2 * extra if schedule == "dualpipe" else pp + extra
    result = simulate(schedule, pp, mb, OpCosts(f, b, w, fb))
    assert result.formula_exact
    assert result.bubble == pytest.approx((pp / 2 - 1) * (fb + b - 3 * w), abs=1e-6)
    chunks = mb if schedule == "dualpipe" else 2 * mb
    closed_form = (chunks - pp - 1) * fb + (pp + 1) * (f + b) + (pp / 2 - 1) * (fb + b - 3 * w)
    assert result.makespan == pytest.approx(closed_form, abs=1e-6)
    assert result.peak_activations_per_rank == [pp + 1] * result.num_ranks
    check_dependencies(result)


@pytest.mark.parametrize(
    ("costs", "sim", "formula"),
    [(OpCosts(f=1, b=2, w=0.5, fb=2.5), 8.0, 9.0),  # I > F: simulation below the formula
     (OpCosts(f=2, b=2, w=1, fb=3), 9.0, 6.0)],  # I < F: above; exact value (PP/2-1)(FB+F-2W)
)
def test_dualpipe_outside_the_exact_regime_reports_the_true_value(costs: OpCosts, sim: float, formula: float) -> None:
    result = simulate("dualpipe", 8, 20, costs)
    assert not result.formula_exact and not result.formula_matches
    assert result.bubble == sim and result.formula_bubble == formula
    assert result.formula_makespan is None


@settings(max_examples=40, deadline=None)
@given(pp=st.integers(1, 10), mb=st.integers(1, 30), f=_cost, b=_cost, w_frac=st.floats(0, 1))
def test_one_f_one_b_idle_is_exact_on_every_rank(pp: int, mb: int, f: float, b: float, w_frac: float) -> None:
    result = simulate("1f1b", pp, mb, OpCosts(f, b, b * w_frac))
    assert result.idle_per_rank == pytest.approx([(pp - 1) * (f + b)] * pp)
    assert result.makespan == pytest.approx((mb + pp - 1) * (f + b))
    assert result.formula_exact and result.formula_matches


def test_one_f_one_b_activation_peaks() -> None:
    result = simulate("1f1b", 8, 20)
    assert result.peak_activations_per_rank == [8, 7, 6, 5, 4, 3, 2, 1]
    assert result.peak_activations == 8
    assert result.bubble == 7 * 3


@settings(max_examples=40, deadline=None)
@given(pp=st.integers(1, 10), extra=st.integers(0, 20), f=_cost, i=_cost, w=_cost)
def test_zb1p_formula_exact_when_w_at_most_min_f_i(pp: int, extra: int, f: float, i: float, w: float) -> None:
    result = simulate("zb1p", pp, pp + extra, OpCosts(f, i + w, w))
    if w <= min(f, i):
        assert result.formula_exact
        assert result.bubble == pytest.approx((pp - 1) * (f + i - w))
    else:
        assert not result.formula_exact
        assert result.bubble >= result.formula_bubble - 1e-9
    assert result.peak_activations_per_rank == list(range(pp, 0, -1))
    check_dependencies(result)


def test_zb1p_reference_point() -> None:
    result = simulate("zb1p", 8, 20, OpCosts(1, 2, 1))
    assert result.bubble == result.formula_bubble == 7.0


def test_dualpipev_timeline_is_the_first_half_of_dualpipe() -> None:
    costs = OpCosts(1, 2, 1, 2.5)
    v = simulate("dualpipev", 8, 10, costs)
    dp = simulate("dualpipe", 8, 20, costs)
    assert v.num_ranks == 4 and v.num_stages == 8
    assert v.timeline == dp.timeline[:4]
    assert v.bubble == 4.5 and v.peak_activations_per_rank == [9] * 4
    check_dependencies(v)


def test_batched_model_stalls_when_i_below_f() -> None:
    costs = OpCosts(f=2, b=2, w=1, fb=3)
    ideal = simulate("dualpipe", 8, 20, costs)
    batched = simulate("dualpipe", 8, 20, costs, comm_model="batched")
    assert (ideal.makespan, batched.makespan) == (78, 79)  # facts sheet: measured 79.95
    assert batched.comm_model == "batched"
    check_dependencies(batched)


def test_batched_model_local_delay_pp4() -> None:
    ideal = simulate("dualpipe", 4, 10)
    batched = simulate("dualpipe", 4, 10, comm_model="commit")
    assert ideal.timeline[0][5] == ("W1.0", 5.0, 6.0)
    assert batched.timeline[0][5] == ("W1.0", 6.0, 7.0)  # waits for the next far forward's input
    assert batched.makespan == ideal.makespan


@settings(max_examples=25, deadline=None)
@given(schedule=st.sampled_from(["dualpipe", "dualpipev"]), half_pp=st.integers(1, 5), extra=st.integers(0, 6),
       f=_cost, i_extra=st.sampled_from([0.0, 0.5, 1.0]), w=_cost, fb_frac=st.floats(0, 1))
def test_batched_equals_ideal_makespan_when_i_at_least_f(
    schedule: str, half_pp: int, extra: int, f: float, i_extra: float, w: float, fb_frac: float
) -> None:
    pp = 2 * half_pp
    b = f + i_extra + w
    fb = max(f, b) + fb_frac * (f + b - max(f, b))
    mb = 2 * pp + 2 * extra if schedule == "dualpipe" else pp + extra
    ideal = simulate(schedule, pp, mb, OpCosts(f, b, w, fb))
    batched = simulate(schedule, pp, mb, OpCosts(f, b, w, fb), "batched")
    assert math.isclose(ideal.makespan, batched.makespan, abs_tol=1e-6)
    assert batched.ops == ideal.ops
    check_dependencies(batched)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"costs": OpCosts(f=0)}, "--f-cost 0"),
        ({"costs": OpCosts(w=3)}, "--w-cost 3 > --b-cost 2"),
        ({"costs": OpCosts(b=-1)}, "--b-cost -1"),
        ({"costs": OpCosts(fb=0)}, "--fb-cost 0"),
        ({"costs": OpCosts(f=math.nan)}, "--f-cost nan"),
        ({"comm_model": "fast"}, "--comm-model 'fast'"),
    ],
)
def test_bad_costs_and_models(kwargs: dict, needle: str) -> None:
    with pytest.raises(InputError) as info:
        simulate("dualpipe", 4, 8, **kwargs)
    assert needle in as_read(info)


def test_batched_model_only_for_the_dualpipe_family() -> None:
    with pytest.raises(InputError, match="dualpipe and dualpipev only"):
        simulate("1f1b", 4, 8, comm_model="batched")


def test_json_shape() -> None:
    data = simulate("dualpipe", 4, 10).to_data()
    assert data["ops"][0][:3] == ["F0.0", "F0.1", "F0.2"]
    assert data["timeline"][0][0] == ["F0.0", 0.0, 1.0]
    assert data["costs"] == {"f": 1.0, "b": 2.0, "w": 1.0, "i": 1.0, "fb": 3.0}
    for key in ("makespan", "bubble", "formula_bubble", "formula_exact", "peak_activations",
                "peak_activations_per_rank", "idle_per_rank", "num_ranks", "num_stages", "num_micro_batches"):
        assert key in data


@pytest.mark.parametrize("schedule", ["dualpipe", "dualpipev", "1f1b", "zb1p"])
def test_svg_draws_every_op(schedule: str) -> None:
    result = simulate(schedule, 4, 10, OpCosts(1, 2, 1, 2.5))
    svg = timeline_svg(result)
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    texts = [t.text or "" for t in root.iter(f"{ns}text")]
    for rank in range(result.num_ranks):
        assert f"Device {rank}" in texts
    num_ops = sum(result.num_ops_per_rank)
    num_fb = sum(result.num_overlapped_per_rank)
    # one rect per plain op, three (F part, B part, frame) per overlapped op, plus background and legend
    cells = [r for r in root.iter(f"{ns}rect") if r.get("height") == "22"]
    assert len(cells) == num_ops + 2 * num_fb


def test_svg_size_cap() -> None:
    from dsctl.launch.schedule import MAX_SVG_OPS, check_svg_size, min_ops

    check_svg_size(MAX_SVG_OPS)
    with pytest.raises(InputError) as info:
        check_svg_size(MAX_SVG_OPS + 1)
    assert as_read(info).startswith("--svg: the timeline has 20,001 ops")
    result = simulate("dualpipe", 8, 200)
    assert sum(result.num_ops_per_rank) >= min_ops(8, 200)
    result = simulate("1f1b", 4, 3000)
    assert sum(result.num_ops_per_rank) > MAX_SVG_OPS
    with pytest.raises(InputError) as info:
        timeline_svg(result)
    assert as_read(info).startswith("--svg: the timeline has ")
    with pytest.raises(InputError) as info:
        check_svg_size(MAX_SVG_OPS + 1, exact=False)
    assert "at least 20,001 ops (--pp x --micro-batches)" in as_read(info)
