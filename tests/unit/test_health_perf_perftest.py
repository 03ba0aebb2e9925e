"""perftest reports: real output quoted from linux-rdma/perftest issues (tests/data/health/perftest, README there), and
the 24.07+ default layout (MiB/sec) built here from perftest's own format strings."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.health.perf.perftest import is_perftest, parse_perftest

DATA = Path(__file__).resolve().parents[1] / "data" / "health" / "perftest"
#: perftest's units: MB and MiB are 2^20 bytes/s (format_factor 0x100000), Gb 10^9 bit/s
MIB_GBPS = 8 * 2 ** 20 / 1e9
DASHES = "-" * 87
#: src/perftest_parameters.h @00b55b6: RESULT_FMT (24.07+), RESULT_FMT_G, the QoS and per-port variants
RESULT_FMT = " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
RESULT_FMT_G = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
RESULT_FMT_QOS = " #bytes    #sl      #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
RESULT_FMT_PER_PORT = (" #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]   "
                       "BW Port1[MiB/sec]   MsgRate Port1[Mpps]   BW Port2[MiB/sec]   MsgRate Port2[Mpps]")
#: quoted in https://github.com/NVIDIA/nccl-tests/issues/374 (perftest's get_clock.c writes it to stderr)
CPU_LINE = "Conflicting CPU frequency values detected: 3645.037000 != 4299.667000. CPU Frequency is not max"


def report_fmt(size: int, iters: int, peak: float, avg: float, rate: float) -> str:
    """perftest's REPORT_FMT: " %-7lu    %-10" PRIu64 "       %-7.2lf            %-7.2lf\t\t     %-7.6lf"."""
    return f" {size:<7d}    {iters:<10d}       {peak:<7.2f}            {avg:<7.2f}\t\t     {rate:<7.6f}"


def report(title: str, header: str, rows: list[str], device: str = "mlx5_0", link: str = "IB") -> str:
    return "\n".join([DASHES, f"                    {title} BW Test",
                      f" Dual-port       : OFF\t\tDevice         : {device}",
                      " Number of qps   : 1\t\tTransport type : IB", f" Link type       : {link}", DASHES,
                      " local address: LID 0x01 QPN 0x004a PSN 0xbe352e",
                      " remote address: LID 0x02 QPN 0x0049 PSN 0x4601da",
                      DASHES, header, *rows, DASHES]) + "\n"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_gbits_report_with_one_row() -> None:
    (run,) = parse_perftest(read("perftest-273-write-post-list-gbits.txt"), "x")
    (row,) = run.rows
    assert (row.size_bytes, row.iterations, row.peak_gbps, row.average_gbps, row.msg_rate_mpps) == (
        8, 224958464, 0.0, 0.48, 7.498617)
    assert (run.title, run.device, run.link_type, run.unit, run.bidirectional) == (
        "RDMA_Write Post List", "ib0", "Ethernet", "Gb", False)


def test_size_sweep_keeps_every_row_and_the_largest_size_counts() -> None:
    (run,) = parse_perftest(read("perftest-132-write-sweep-gbits.txt"), "x")
    assert [r.size_bytes for r in run.rows] == [2, 4, 8]
    assert run.rows[0].peak_gbps == 0.042350 and run.rows[1].average_gbps == 0.084457
    assert run.largest.average_gbps == 0.17
    assert (run.device, run.local_address, run.remote_address) == ("mlx5_0", "LID 0x02", "LID 0x01")


def test_megabytes_are_mebibytes_per_second() -> None:
    (run,) = parse_perftest(read("perftest-65-send-mbytes.txt"), "x")
    assert run.rows[0].average_gbps == pytest.approx(5544.28 * 8 * 2 ** 20 / 1e9)  # 46.5 Gb/s
    assert (run.title, run.device) == ("", "")


def test_a_report_cut_inside_its_only_row_has_no_table() -> None:
    text = read("perftest-234-write-duration-mbytes-cut.txt")
    assert is_perftest(text)
    with pytest.raises(InputError, match="no perftest result table"):
        parse_perftest(text, "cut.txt")


def test_roce_gids_are_kept_with_the_lids() -> None:
    text = read("perftest-234-write-duration-mbytes-cut.txt").replace(" 65536      664644\n", report_fmt(
        65536, 664644, 0.0, 2842.31, 0.045477) + "\n")
    (run,) = parse_perftest(text, "x")
    assert run.local_address == "LID 0000 GID 00:00:00:00:00:00:00:00:00:00:255:255:10:255:255:05"
    assert run.remote_address.endswith("255:255:10:255:255:04")


def test_mib_header_of_24_07_with_a_cpu_frequency_line_inside_the_table() -> None:
    rows = [CPU_LINE, report_fmt(65536, 5000, 46567.34, 46557.03, 0.744912)]
    (run,) = parse_perftest(report("Send", RESULT_FMT, rows), "x")
    (row,) = run.rows
    assert run.unit == "MiB"
    assert row.average_gbps == pytest.approx(46557.03 * MIB_GBPS)  # 390.5 Gb/s
    assert row.peak_gbps == pytest.approx(46567.34 * MIB_GBPS)
    assert run.warnings == (CPU_LINE,)


def test_sweep_with_a_warning_between_rows_and_each_size_once() -> None:
    sizes = [2 ** k for k in range(1, 24)]
    rows = [report_fmt(s, 5000, s / 100, s / 200, 1.5) for s in sizes]
    rows.insert(5, CPU_LINE)
    (run,) = parse_perftest(report("RDMA_Write", RESULT_FMT_G, rows), "x")
    assert [r.size_bytes for r in run.rows] == sizes
    assert run.largest.size_bytes == 2 ** 23 and run.largest.average_gbps == pytest.approx(2 ** 23 / 200, abs=0.01)


def test_bidirectional_title_sets_the_flag_and_keeps_the_verb() -> None:
    rows = [report_fmt(65536, 5000, 0.0, 740.12, 1.41)]
    (run,) = parse_perftest(report("RDMA_Write Bidirectional", RESULT_FMT_G, rows), "x")
    assert run.bidirectional and run.title == "RDMA_Write"


def test_qos_and_per_port_layouts() -> None:
    qos = " 65536      3           5000           0.00               23000.50                  0.368008"
    (run,) = parse_perftest(report("RDMA_Read", RESULT_FMT_QOS, [qos]), "x")
    assert (run.rows[0].iterations, run.rows[0].average_gbps) == (5000, pytest.approx(23000.50 * MIB_GBPS))
    port = (" 65536      5000         0.00               40000.00\t\t   0.640000        20000.00            "
            "0.320000              20000.00            0.320000")
    (run,) = parse_perftest(report("RDMA_Write", RESULT_FMT_PER_PORT, [port]), "x")
    assert run.rows[0].average_gbps == pytest.approx(40000.0 * MIB_GBPS)


def test_several_reports_in_one_file_each_with_its_title_and_device() -> None:
    text = (report("Send", RESULT_FMT, [report_fmt(65536, 1000, 1.0, 46557.03, 0.7)], device="mlx5_0")
            + report("RDMA_Read", RESULT_FMT_G, [report_fmt(65536, 1000, 328.64, 328.61, 0.6)], device="mlx5_1"))
    runs = parse_perftest(text, "x")
    assert [(r.title, r.device, r.unit) for r in runs] == [("Send", "mlx5_0", "MiB"), ("RDMA_Read", "mlx5_1", "Gb")]
    assert runs[1].largest.average_gbps == 328.61


def test_latency_tables_and_other_text_are_not_bandwidth() -> None:
    lat = (" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   "
           "99% percentile[usec]   99.9% percentile[usec]\n 2       1000          1.24           5.19         1.27\n")
    assert not is_perftest(lat)
    with pytest.raises(InputError, match="no perftest result table"):
        parse_perftest("Couldn't connect to 10.0.0.1:18515\n" + lat, "client.log")


@given(st.text(max_size=400), st.lists(st.text(alphabet="0123456789. \t-eE", max_size=60), max_size=8))
def test_any_text_parses_or_is_an_input_error(noise: str, lines: list[str]) -> None:
    text = noise + "\n" + RESULT_FMT + "\n" + "\n".join(lines)
    try:
        runs = parse_perftest(text, "x")
    except InputError as exc:
        assert "\n" not in exc.message
        return
    assert all(r.average_gbps >= 0 and r.size_bytes >= 0 for run in runs for r in run.rows)


def test_a_huge_row_line_is_skipped_not_split() -> None:
    text = RESULT_FMT + "\n" + " 1" * 2_000_000 + "\n" + report_fmt(65536, 5000, 1.0, 2.0, 0.1) + "\n"
    (run,) = parse_perftest(text, "x")
    assert [r.size_bytes for r in run.rows] == [65536]
