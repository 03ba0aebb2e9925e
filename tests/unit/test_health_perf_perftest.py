"""perftest (ib_write_bw / ib_send_bw) reports quoted from linux-rdma/perftest issues (tests/data/health/perftest)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.health.burnin.perftest import best_average_gbps, parse_perftest

DATA = Path(__file__).resolve().parents[1] / "data" / "health" / "perftest"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_gbits_report_with_one_row() -> None:
    (row,) = parse_perftest(read("perftest-273-write-post-list-gbits.txt"), "x")
    assert (row.size_bytes, row.iterations, row.peak_gbps, row.average_gbps, row.msg_rate_mpps) == (
        8, 224958464, 0.0, 0.48, 7.498617)


def test_size_sweep_keeps_every_row_and_the_largest_size_counts() -> None:
    rows = parse_perftest(read("perftest-132-write-sweep-gbits.txt"), "x")
    assert [r.size_bytes for r in rows] == [2, 4, 8]
    assert rows[0].peak_gbps == 0.042350 and rows[1].average_gbps == 0.084457
    assert best_average_gbps(rows) == 0.17


def test_megabytes_are_mebibytes_per_second() -> None:
    (row,) = parse_perftest(read("perftest-65-send-mbytes.txt"), "x")
    assert row.average_gbps == pytest.approx(5544.28 * 8 * 2 ** 20 / 1e9)  # 46.5 Gb/s


def test_no_table_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no perftest result table"):
        parse_perftest("Couldn't connect to 10.0.0.1:18515\n", "client.log")


@given(st.text())
def test_any_text_parses_or_is_an_input_error(text: str) -> None:
    try:
        rows = parse_perftest(text, "x")
    except InputError:
        return
    assert all(r.average_gbps >= 0 for r in rows)
