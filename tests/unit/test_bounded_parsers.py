"""Issue 33 item 4: one bounded-integer rule (names.bounded_int) and no backtracking patterns on input text.

Each regression names what it did before: a 4,400-digit number exited 4 (ValueError from int()), a regex with two
ways to split a run took seconds to minutes. The time bounds are generous (each input took 6-275 s before).
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.names import MAX_INTEGER_DIGITS, bounded_int, last_digit_run
from dsctl.topology.counters import COUNTER_DIGITS, LID_DIGITS, parse_ibdiagnet_pm, parse_perfquery, parse_thresholds
from dsctl.topology.lldp import PORT_DIGITS, parse_lldp

HUGE = "9" * 4400
EXAMPLES = int(os.environ.get("DSCTL_HOSTILE_EXAMPLES", "200"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TEXT = st.one_of(st.text(max_size=40), st.text(alphabet="0123456789 x.-:'()#\t", max_size=80),
                 st.integers(0, 6000).map(lambda n: "9" * n))


# ----------------------------------------------------------------------------------------------- bounded_int

def test_bounded_int_reads_what_int_reads_within_the_bound() -> None:
    assert bounded_int(" 42 ", "x") == 42
    assert bounded_int("0x1f", "x", base=0) == 31 and bounded_int("17", "x", base=0) == 17
    assert bounded_int("0x15b3", "x", base=16) == 0x15B3 and bounded_int("15b3", "x", base=16) == 0x15B3
    assert bounded_int("-1", "x", signed=True) == -1
    assert bounded_int("9" * MAX_INTEGER_DIGITS, "x") == int("9" * MAX_INTEGER_DIGITS)


@pytest.mark.parametrize("text", ["", " ", "-1", "1.5", "\u00b9", "\u0663", "1_000", "0x", "12a", "+", "--1"])
def test_bounded_int_refuses_what_is_no_whole_number(text: str) -> None:
    with pytest.raises(InputError, match=r"^f line 3: n .* is not a whole number"):
        bounded_int(text, "f line 3: n")


def test_bounded_int_counts_digits_before_int() -> None:
    with pytest.raises(InputError, match="a number of 4,400 digits is out of range \\(at most 30\\)"):
        bounded_int(HUGE, "f: n")
    with pytest.raises(InputError, match="at most 5"):
        bounded_int("123456", "Lid", 5)


@PROPERTY
@given(text=TEXT, base=st.sampled_from([0, 10, 16]), signed=st.booleans())
def test_bounded_int_returns_an_int_or_raises_input_error(text: str, base: int, signed: bool) -> None:
    try:
        value = bounded_int(text, "x", base=base, signed=signed)
    except InputError:
        return
    assert isinstance(value, int) and len(str(abs(value))) <= MAX_INTEGER_DIGITS * 2


@PROPERTY
@given(text=TEXT)
def test_last_digit_run_is_the_regex_it_replaces(text: str) -> None:
    found = re.search(r"([0-9]+)[^0-9]*$", text)
    assert last_digit_run(text) == (found.span(1) if found else None)


def test_last_digit_run_is_linear() -> None:
    """Before: ``(\\d+)\\D*$`` with re.search on 480 KB of digits then ``x1`` took 275 s."""
    text = "9" * 480_000 + "x1"
    start = time.monotonic()
    assert last_digit_run(text) == (len(text) - 1, len(text))
    assert time.monotonic() - start < 2


# ---------------------------------------------------------------------------------------------- perfquery

def _perfquery(lid: str = "1719", port: str = "1", value: str = "0") -> str:
    return (f"# Port counters: Lid {lid} port {port} (CapMask: 0x5300)\nPortSelect:......................1\n"
            f"SymbolErrorCounter:..............{value}\nLinkDownedCounter:...............2\n")


def test_perfquery_reads_blocks() -> None:
    rows = parse_perfquery(_perfquery(value="0x10") + _perfquery("3", "2", "7"), "pq")
    assert [(r.lid, r.port, r.symbol_errors, r.link_downed) for r in rows] == [(1719, 1, 16, 2), (3, 2, 7, 2)]


@pytest.mark.parametrize(("text", "needle"), [
    (_perfquery(lid=HUGE), f"pq line 1: Lid: a number of 4,400 digits is out of range (at most {LID_DIGITS})"),
    (_perfquery(port=HUGE), "pq line 1: port: a number of 4,400 digits"),
    (_perfquery(value=HUGE), f"pq line 3: SymbolErrorCounter: a number of 4,400 digits is out of range (at most "
                             f"{COUNTER_DIGITS})"),
    (_perfquery(value="12x"), "pq line 3: SymbolErrorCounter '12x' is not a whole number"),
])
def test_perfquery_numbers_are_bounded_before_int(text: str, needle: str) -> None:
    """Before: a 4,400-digit Lid raised ValueError from int() outside any handler: exit 4."""
    with pytest.raises(InputError) as info:
        parse_perfquery(text, "pq")
    assert needle in str(info.value)


def test_perfquery_field_lines_are_split_without_backtracking() -> None:
    """``:\\.*\\s*(\\S+)\\s*$`` let the dots match two ways: a long line of dots then two words backtracked."""
    line = "SymbolErrorCounter:" + "." * 200_000 + "a b\n"
    start = time.monotonic()
    rows = parse_perfquery(_perfquery() + line * 3, "pq")
    assert time.monotonic() - start < 2 and rows[0].symbol_errors == 0


def test_ibdiagnet_pm_cells_are_bounded() -> None:
    db = ("START_PM_INFO\nNodeGUID,PortNumber,SymbolErrorCounter\n0x1,1,5\n0x1,2," + HUGE + "\nEND_PM_INFO\n")
    with pytest.raises(InputError, match="line 4: symbolerrorcounter: a number of 4,400 digits"):
        parse_ibdiagnet_pm(db, "db")
    with pytest.raises(InputError, match="line 3: a PM_INFO row has 2 cells, the header 3"):
        parse_ibdiagnet_pm("START_PM_INFO\nNodeGUID,PortNumber,SymbolErrorCounter\n0x1,1\nEND_PM_INFO\n", "db")


def test_threshold_counts_are_bounded() -> None:
    with pytest.raises(InputError, match="--threshold symbol_errors: a number of 4,400 digits"):
        parse_thresholds([f"symbol_errors={HUGE}"])
    assert parse_thresholds(["symbol_errors=0"]).symbol_errors == 0


@PROPERTY
@example(lid=HUGE, port="1", value="0", junk="")
@example(lid="1", port="1", value="0", junk="X:" + "." * 5000 + "a b")
@given(lid=TEXT, port=TEXT, value=TEXT, junk=TEXT)
def test_property_perfquery_exit_0_or_2(lid: str, port: str, value: str, junk: str) -> None:
    """perfquery with any Lid, port, counter and junk line: rows or InputError, nothing else."""
    text = f"# Port counters: Lid {lid} port {port}\nSymbolErrorCounter:....{value}\n{junk}\n" + _perfquery()
    try:
        rows = parse_perfquery(text, "pq")
    except InputError as exc:
        assert "\n" not in str(exc).strip()
        return
    assert all(0 <= r.lid < 10**LID_DIGITS for r in rows)


# --------------------------------------------------------------------------------------------------- LLDP

def _lldp(port_id: str, descr: str = "") -> str:
    port = {"id": {"type": "ifname", "value": port_id}}
    if descr:
        port["descr"] = descr  # type: ignore[assignment]
    return json.dumps({"lldp": {"interface": [{"mlx5_0": {"via": "LLDP", "chassis": {
        "p0-leaf01": {"id": {"type": "mac", "value": "0c:42:a1:00:00:01"}}}, "port": port}}]}})


def test_lldp_port_is_the_last_number() -> None:
    for label, port in (("swp17", "17"), ("Eth1/017", "17"), ("17", "17"), ("swp17s0x", "0"), ("none", "none")):
        end = parse_lldp(_lldp(label), "lldp/node0001.json").links[0].b
        assert end.port == port


def test_lldp_port_of_4400_digits_is_one_line_naming_the_file() -> None:
    """Before: str(int(found.group(1))) raised ValueError: exit 4."""
    with pytest.raises(InputError, match=rf"n1.json: interface 'mlx5_0' neighbour port .* a number of 4,400 digits is "
                                         rf"out of range \(at most {PORT_DIGITS}\)"):
        parse_lldp(_lldp("swp" + HUGE), "n1.json")


def test_lldp_port_regex_does_not_backtrack() -> None:
    """Before: 480 KB of digits then ``x1`` took 275 s in ``(\\d+)\\D*$``."""
    start = time.monotonic()
    end = parse_lldp(_lldp("9" * 480_000 + "x1"), "n1.json").links[0].b
    assert end.port == "1" and time.monotonic() - start < 5


@PROPERTY
@example(port_id="swp" + HUGE, descr="")
@example(port_id="9" * 20_000 + "x1", descr="9" * 20_000)
@given(port_id=TEXT, descr=TEXT)
def test_property_lldp_exit_0_or_2(port_id: str, descr: str) -> None:
    try:
        fabric = parse_lldp(_lldp(port_id, descr), "lldp/node0001.json")
    except InputError as exc:
        assert "\n" not in str(exc).strip()
        return
    assert len(fabric.links) == 1 and 0 <= fabric.links[0].b.port_num < 10**PORT_DIGITS


# ------------------------------------------------------------------------------------------ other parsers

@pytest.mark.parametrize("parse", ["bytes", "count", "rate"])
def test_number_patterns_do_not_split_a_digit_run_two_ways(parse: str) -> None:
    """Before: ``\\d+\\.?\\d*`` (units) 44 s and ``[0-9]*\\.?[0-9]+`` (storage rates) 16 s for 20,000 / 10,000
    digits and a letter that is no unit."""
    from dsctl import units
    from dsctl.storage.api import _RATE

    text = "9" * 200_000 + "!"
    start = time.monotonic()
    if parse == "rate":
        assert _RATE.match(text) is None
        assert _RATE.match(" 1.5 GiB/s").groups() == ("1.5", "G", "i", "B")  # type: ignore[union-attr]
    else:
        with pytest.raises(units.QuantityError):
            (units.parse_bytes if parse == "bytes" else units.parse_count)(text)
        assert units.parse_bytes("1.5 GiB") == 1.5 * 2**30 and units.parse_count(".5K") == 500.0
        assert units.parse_count("3.") == 3.0
    assert time.monotonic() - start < 2


def test_ports_report_descriptions_split_in_one_scan() -> None:
    """Before: ``'(.*)'\\s+-\\s+'(.*)'\\s*\\)`` took 6 s for a 40 KB line of ``' - '``; the split stays at the last
    separator, as the greedy regex put it."""
    from dsctl.topology.ibformats import _ports_line, is_ports_report

    head = "CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( '"
    assert _ports_line(head + "o0001 HCA-1' - 'ib-i1l1s01' )")[10:] == ("o0001 HCA-1", "ib-i1l1s01")  # type: ignore
    assert _ports_line(head + "a' - ' - 'b' )")[10:] == ("a' - ", "b")  # type: ignore[index]
    start = time.monotonic()
    assert not is_ports_report(head + "' - '" * 100_000 + "x")
    assert _ports_line(head + "' - '" * 100_000 + "' )") is not None
    assert time.monotonic() - start < 2


def test_other_input_integers_are_bounded() -> None:
    from dsctl.health.checks_rdma import _kernel_at_least
    from dsctl.health.xid import parse_xids
    from dsctl.inputs import parse_limit
    from dsctl.runners.slurm import parse_job
    from dsctl.topology.observed import _COMMENT

    assert parse_xids(f"NVRM: Xid (PCI:0000:18:00): {HUGE}, pid=1\nNVRM: Xid (PCI:0000:18:00): 79, x") == [
        ("0000:18:00", 79)]
    assert _kernel_at_least(f"{HUGE}.1-generic", (5, 12)) is None
    assert _kernel_at_least("5.15.0-91-generic", (5, 12)) is True
    assert parse_job("1", f"JobState=FAILED ExitCode={HUGE}:0").exit_code is None
    assert parse_job("1", "JobState=FAILED ExitCode=0:9").exit_code == 137
    with pytest.raises(InputError, match="not a byte count"):
        parse_limit(HUGE, "DSCTL_MAX_INPUT_BYTES")
    assert parse_limit("+1_000", "x") == 1000
    assert _COMMENT.match(f'"x" lid {HUGE} 4xNDR') is None


def test_schedule_op_and_rate_numbers_are_bounded() -> None:
    """A pipeline op name or an ibstat rate with 4,400 digits reached int(): ValueError, exit 4."""
    from dsctl.health.checks_rdma import RATE_RE
    from dsctl.launch.schedule.ops import parse_op

    with pytest.raises(InputError, match="bad op name"):
        parse_op(f"F{HUGE}.1")
    assert parse_op("F3.1&B2.0").kind == "FB"
    assert RATE_RE.match(f"400 Gb/sec ({HUGE}X NDR)") is None
    assert RATE_RE.match("400 Gb/sec (4X NDR)").group(2) == "4"  # type: ignore[union-attr]
