"""Op order of the pipeline schedules: DualPipe/DualPipeV as DeepSeek's code runs them, 1F1B, ZB1P."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.launch.schedule import Op, parse_op, schedule_ops
from tests.unit.launch_messages import as_read

# dualpipe-facts.md §3: logged from the reference code, PP=4, C=10
PP4_C10 = {
    0: "F0.0 F0.1 F0.2 F1.0 I1.0 W1.0 F1.1 F0.3&B1.1 F1.2&B0.0 F0.4&B1.2 F1.3&B0.1 B1.3 F1.4&B0.2 B1.4 "
       "I0.3 W0.3 I0.4 W0.4",
    1: "F0.0 F1.0 F0.1 F1.1 F0.2 B1.0 F1.2&B0.0 F0.3&B1.1 F1.3&B0.1 F0.4&B1.2 F1.4&B0.2 B1.3 B0.3 I1.4 I0.4 "
       "W1.4 W0.4",
}


def names(text: str) -> list[str]:
    return text.split()


def swap_directions(ops: list[str]) -> list[str]:
    return [re.sub(r"([FBIW])([01])\.", lambda m: f"{m.group(1)}{1 - int(m.group(2))}.", op) for op in ops]


def test_dualpipe_pp4_c10_worked_example_all_ranks() -> None:
    ops = schedule_ops("dualpipe", 4, 10)
    assert ops[0] == PP4_C10[0].split()
    assert ops[1] == PP4_C10[1].split()
    # r2 and r3 are the mirrors of r1 and r0 with the directions swapped
    assert ops[2] == swap_directions(PP4_C10[1].split())
    assert ops[3] == swap_directions(PP4_C10[0].split())
    assert ops[3][:7] == names("F1.0 F1.1 F1.2 F0.0 I0.0 W0.0 F0.1")


def test_dualpipe_pp8_c20_op_counts_from_the_facts_sheet() -> None:
    ops = schedule_ops("dualpipe", 8, 20)
    assert [len(r) for r in ops] == [38, 36, 34, 33, 33, 34, 36, 38]
    assert [sum("&" in op for op in r) for r in ops] == [9, 10, 11, 11, 11, 11, 10, 9]
    assert [len(r) for r in schedule_ops("dualpipe", 4, 10)] == [18, 17, 17, 18]


@pytest.mark.parametrize(("pp", "c"), [(2, 4), (2, 10), (4, 8), (6, 12), (8, 20), (8, 30), (12, 24), (16, 64)])
def test_dualpipe_structure(pp: int, c: int) -> None:
    ops = schedule_ops("dualpipe", pp, c)
    n = pp // 2
    for r, rank_ops in enumerate(ops):
        h = min(r, pp - 1 - r)
        mid = int(h == n - 1)
        parsed = [parse_op(o) for o in rank_ops]
        # overlapped-op count formula of the facts sheet
        assert sum(o.kind == "FB" for o in parsed) == c - 2 * pp + n + h + 1 - mid
        # mirror rank
        assert ops[pp - 1 - r] == swap_directions(rank_ops)
        for d in (0, 1):
            fwd = [o.fwd[1] for o in parsed if o.fwd and o.fwd[0] == d]
            bwd = [o.bwd[1] for o in parsed if o.kind in ("B", "I", "FB") and o.bwd and o.bwd[0] == d]
            assert fwd == list(range(c // 2)) and bwd == list(range(c // 2))
        # W ops pop the queued input-gradient-only backwards first-in first-out
        splits = [o.bwd for o in parsed if o.kind == "I"]
        weights = [o.bwd for o in parsed if o.kind == "W"]
        assert weights == splits and len(splits) == 2 * (n - h - 1) + h + 1
        # a W never runs before its own I
        for i, o in enumerate(parsed):
            if o.kind == "W":
                assert Op("I", bwd=o.bwd) in parsed[:i]


def test_dualpipe_middle_ranks_run_their_first_steady_pair_unoverlapped() -> None:
    ops = schedule_ops("dualpipe", 8, 20)
    # rank 3: phase 2 ends with F1.3, then F0.4 and B1.0 run as two ops
    assert ops[3][8:11] == ["F0.4", "B1.0", "F1.4&B0.0"]


@pytest.mark.parametrize(("ranks", "c"), [(1, 2), (2, 4), (2, 7), (3, 6), (4, 10), (4, 13), (8, 16)])
def test_dualpipev_equals_the_first_half_of_dualpipe(ranks: int, c: int) -> None:
    v_ops = schedule_ops("dualpipev", 2 * ranks, c)
    dp_ops = schedule_ops("dualpipe", 2 * ranks, 2 * c)
    assert len(v_ops) == ranks
    assert v_ops == dp_ops[:ranks]


def test_dualpipev_readme_figure_device0() -> None:
    ops = schedule_ops("dualpipev", 8, 10)[0]
    assert ops[:10] == [f"F0.{m}" for m in range(7)] + ["F1.0", "I1.0", "W1.0"]


def test_one_f_one_b_order() -> None:
    ops = schedule_ops("1f1b", 4, 6)
    assert ops[0] == names("F0.0 F0.1 F0.2 F0.3 B0.0 F0.4 B0.1 F0.5 B0.2 B0.3 B0.4 B0.5")
    assert ops[3] == names("F0.0 B0.0 F0.1 B0.1 F0.2 B0.2 F0.3 B0.3 F0.4 B0.4 F0.5 B0.5")


def test_zb1p_order_holds_back_r_weight_gradients() -> None:
    ops = schedule_ops("zb1p", 4, 6)
    assert ops[0][:6] == names("F0.0 F0.1 F0.2 F0.3 I0.0 W0.0")
    assert ops[3][:7] == names("F0.0 I0.0 F0.1 I0.1 F0.2 I0.2 F0.3")
    assert ops[3][-3:] == ["W0.3", "W0.4", "W0.5"]
    for rank_ops in ops:
        assert [o[1:] for o in rank_ops if o[0] == "W"] == [o[1:] for o in rank_ops if o[0] == "I"]


@pytest.mark.parametrize(
    ("schedule", "pp", "mb", "needle"),
    [
        ("dualpipe", 5, 20, "even --pp"),
        ("dualpipe", 8, 15, "even --micro-batches"),
        ("dualpipe", 8, 14, "--micro-batches >= 2 x --pp = 16"),
        ("dualpipev", 7, 20, "even number of stages"),
        ("dualpipev", 8, 7, "--micro-batches >= --pp (number of stages) = 8"),
        ("1f1b", 0, 4, "--pp 0"),
        ("zb1p", 4, 0, "--micro-batches 0"),
        ("gpipe", 4, 8, "dualpipe, dualpipev, 1f1b, zb1p or interleaved"),
        ("1f1b", 2000, 1000, "too large"),
    ],
)
def test_schedule_requirements_are_named(schedule: str, pp: int, mb: int, needle: str) -> None:
    with pytest.raises(InputError) as info:
        schedule_ops(schedule, pp, mb)
    assert needle in as_read(info)


def test_smallest_valid_sizes() -> None:
    assert len(schedule_ops("dualpipe", 2, 4)) == 2
    assert len(schedule_ops("dualpipev", 2, 2)) == 1
    assert schedule_ops("1f1b", 1, 1) == [["F0.0", "B0.0"]]


_names = st.one_of(
    st.builds(lambda k, d, m: f"{k}{d}.{m}", st.sampled_from("FBIW"), st.integers(0, 1), st.integers(0, 999)),
    st.builds(lambda d, m, e, k: f"F{d}.{m}&B{e}.{k}", st.integers(0, 1), st.integers(0, 999),
              st.integers(0, 1), st.integers(0, 999)),
)


@settings(max_examples=60, deadline=None)
@given(_names)
def test_op_names_round_trip(name: str) -> None:
    assert parse_op(name).name == name


@pytest.mark.parametrize("bad", ["", "X0.1", "F0", "B0.1&F1.2", "F0.1&B1.2&W0.0", "F-1.2"])
def test_bad_op_names(bad: str) -> None:
    with pytest.raises(InputError, match="bad op name"):
        parse_op(bad)
