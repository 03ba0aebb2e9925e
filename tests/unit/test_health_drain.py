"""Drain safety shared by every dsctl command: reason prefix, foreign reasons, circuit breaker."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.health.drain import (
    MAX_REASON_CHARS,
    REASON_PREFIX,
    NodeState,
    is_ours,
    parse_max_drain,
    plan_drain,
    reason,
    with_results,
)


def test_reason_has_the_fixed_prefix_and_stays_one_bounded_line() -> None:
    got = reason("burnin", "nic node0147:mlx5_3 at 50% of 400 Gb/s")
    assert got == "dsctl:burnin nic node0147:mlx5_3 at 50% of 400 Gb/s"
    long = reason("G9", 'x"\n' * 300, more=3)
    assert len(long) <= MAX_REASON_CHARS and long.endswith("... (+3 more)") and "\n" not in long


@given(st.text(), st.text())
def test_any_reason_is_printable_ascii_with_the_prefix(code: str, text: str) -> None:
    got = reason(code, text)
    assert got.startswith(REASON_PREFIX) and len(got) <= MAX_REASON_CHARS
    assert all(c.isascii() and c.isprintable() and c not in "\"'`\\" for c in got)
    assert is_ours(got)


@pytest.mark.parametrize(("text", "size", "nodes"), [("4", 1000, 4), ("0", 10, 0), ("10%", 256, 25),
                                                     ("10%", 8, 1), ("50%", 8, 4), ("100%", 3, 3)])
def test_max_drain_counts_and_percentages(text: str, size: int, nodes: int) -> None:
    assert parse_max_drain(text).nodes(size) == nodes


@pytest.mark.parametrize("text", ["-1", "0%", "150%", "ten", "", "2.5"])
def test_bad_max_drain_is_an_input_error(text: str) -> None:
    with pytest.raises(InputError, match="--max-drain"):
        parse_max_drain(text)


def test_foreign_reasons_are_never_overwritten_and_ours_are_updated() -> None:
    states = {"n1": NodeState(True, "bad DIMM, ticket 4411"), "n2": NodeState(True, "dsctl:G6 crit gpu3"),
              "n3": NodeState(False, ""), "n4": NodeState(False, "nhc: eth0 down")}
    wanted = [(n, reason("burnin", f"nic {n}:mlx5_0")) for n in ("n1", "n2", "n3", "n4")]
    plan = plan_drain(wanted, states, 100, parse_max_drain("10"))
    assert [(s.node, s.action) for s in plan.steps] == [("n1", "foreign"), ("n2", "update"), ("n3", "drain"),
                                                        ("n4", "foreign")]
    assert [s.node for s in plan.runnable] == ["n2", "n3"]
    assert plan.steps[0].current_reason == "bad DIMM, ticket 4411"
    assert "2 left alone" in plan.message


def test_the_circuit_breaker_holds_every_node() -> None:
    wanted = [(f"n{i}", reason("burnin", "x")) for i in range(5)]
    plan = plan_drain(wanted, {}, 20, parse_max_drain("20%"))
    assert plan.tripped and plan.limit == 4 and plan.wanted == 5
    assert not plan.runnable and {s.action for s in plan.steps} == {"held"}
    assert "nothing drained" in plan.message and "--max-drain 20%" in plan.message
    assert not plan_drain(wanted[:4], {}, 20, parse_max_drain("20%")).tripped


def test_results_mark_each_node() -> None:
    plan = plan_drain([("n1", "dsctl:a b"), ("n2", "dsctl:a c")], {}, 10, parse_max_drain("5"))
    done = with_results(plan, {"n1": None, "n2": "Invalid node name specified"})
    assert done.ran and [(s.node, s.done, s.error) for s in done.steps] == [
        ("n1", True, ""), ("n2", False, "Invalid node name specified")]
    assert done.to_data()["nodes"][0]["command"] == ["scontrol", "update", "NodeName=n1", "State=DRAIN",
                                                     "Reason=dsctl:a b"]
