"""nccl-tests reports: real output from public sources (tests/data/health/real, README there). Expected numbers are
computed here from the published rows, not read back from dsctl."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.health.perf.nccltests import is_nccl_tests, parse_nccl_tests

REAL = Path(__file__).resolve().parents[1] / "data" / "health" / "real"
H100 = "nccl-tests-309-h100-2x8-all-reduce.txt"
HEADER = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
          "busbw #wrong")


def read(name: str) -> str:
    return (REAL / name).read_text()


def table_rows(text: str) -> list[list[str]]:
    """The published rows, split by whitespace (lines that start with a digit after spaces)."""
    return [line.split() for line in text.splitlines() if line.strip()[:1].isdigit()]


def test_h100_two_nodes_all_reduce_ranks_hosts_and_rows() -> None:
    text = read(H100)
    (run,) = parse_nccl_tests(text, "results.log")
    # named by the mpirun line (all_reduce_perf_mpi); MPI's xpmem warnings between "# Using devices" and the rank
    # lines and the "NCCL version" line are skipped
    assert run.collective == "all_reduce" and run.named_by == "the text"
    assert run.num_ranks == 16 and run.hosts == ("bm-h100-01", "bm-h100-02")
    assert (run.num_nodes, run.gpus_per_node, run.gpu_models) == (2, 8, ("NVIDIA H100 80GB HBM3",))
    assert [r.rank for r in run.ranks] == list(range(16)) and run.ranks[9].bus_id == "0000:3b:00"
    published = table_rows(text)
    assert [r.size_bytes for r in run.rows] == [int(f[0]) for f in published] == [8 * 2 ** k for k in range(32)]
    last = published[-1]
    assert run.largest.best_busbw_bytes_per_s == max(float(last[7]), float(last[11])) * 1e9  # 469.21 GB/s
    assert (run.largest.dtype, run.largest.redop, run.largest.root) == ("float", "sum", -1)
    assert run.out_of_bounds == 0 and run.largest.wrong == 0


def test_h100_columns_obey_the_nccl_tests_formulas() -> None:
    (run,) = parse_nccl_tests(read(H100), H100)
    factor = 2 * (16 - 1) / 16  # all_reduce busbw = algbw x 2(n-1)/n
    for row in run.rows:
        for p in (row.out_of_place, row.in_place):
            assert p is not None
            assert p.algbw_bytes_per_s == pytest.approx(row.size_bytes / (p.time_us * 1e-6), rel=5e-3, abs=6e6)
            # both printed with 2 decimals: each off by up to 0.005 GB/s
            assert p.busbw_bytes_per_s == pytest.approx(p.algbw_bytes_per_s * factor, rel=5e-3, abs=1.5e7)
    every_busbw = [p.busbw_bytes_per_s for r in run.rows for p in (r.out_of_place, r.in_place) if p is not None]
    # the footer's average is the mean busbw over both passes and every size
    assert run.avg_busbw_bytes_per_s == pytest.approx(sum(every_busbw) / len(every_busbw), rel=1e-3)


def test_h200_one_gpu_per_node_all_reduce_after_open_mpi_warnings() -> None:
    name = "nccl-tests-dranet-h200-2x1-all-reduce.txt"
    text = read(name)
    (run,) = parse_nccl_tests(text, "launcher.log")
    assert run.collective == "all_reduce" and run.named_by == "the text"  # the "+ mpirun ... all_reduce_perf" line
    assert run.hosts == ("nccl-test-dranet-1gpu-1nic-worker-0", "nccl-test-dranet-1gpu-1nic-worker-1")
    assert (run.num_ranks, run.num_nodes, run.gpus_per_node, run.gpu_models) == (2, 2, 1, ("NVIDIA H200",))
    published = table_rows(text)
    assert [r.size_bytes for r in run.rows] == [int(f[0]) for f in published] == [1024 << k for k in range(24)]
    assert run.largest.best_busbw_bytes_per_s == max(float(published[-1][7]), float(published[-1][11])) * 1e9
    # two ranks: busbw = algbw x 2(2-1)/2 = algbw, printed identically on every row
    assert all(float(f[6]) == float(f[7]) and float(f[10]) == float(f[11]) for f in published)
    every_busbw = [p.busbw_bytes_per_s for r in run.rows for p in (r.out_of_place, r.in_place) if p is not None]
    assert run.avg_busbw_bytes_per_s == pytest.approx(sum(every_busbw) / len(every_busbw), rel=1e-3)


def test_b200_all_gather_named_by_the_file_with_redop_none() -> None:
    name = "nccl-tests-dranet-b200-2x8-all-gather.txt"
    (run,) = parse_nccl_tests(read(name), name)
    assert run.collective == "all_gather" and run.named_by == "the file name"
    assert (run.num_ranks, run.num_nodes, run.gpus_per_node) == (16, 2, 8)
    assert {(r.dtype, r.redop, r.root) for r in run.rows} == {("float", "none", -1)}
    for row in run.rows:
        assert row.count * 4 * 16 == row.size_bytes  # size is the gathered buffer: 16 ranks x count floats
        for p in (row.out_of_place, row.in_place):
            assert p is not None
            assert p.algbw_bytes_per_s == pytest.approx(row.size_bytes / (p.time_us * 1e-6), rel=5e-3, abs=6e6)
            # all_gather busbw = algbw x (n-1)/n
            assert p.busbw_bytes_per_s == pytest.approx(p.algbw_bytes_per_s * 15 / 16, rel=5e-3, abs=1.5e7)
    assert run.largest.best_busbw_bytes_per_s == pytest.approx(260.03e9)


def test_old_layout_error_column_and_alltoall_without_redop_text() -> None:
    (ar,) = parse_nccl_tests(read("nccl-tests-78-v100-8x8-all-reduce-old.txt"), "x/all-reduce-old.txt")
    assert ar.collective == "all_reduce" and not ar.ranks and ar.num_nodes == 0
    assert [(r.size_bytes, r.redop, r.root) for r in ar.rows] == [(268435456, "sum", None), (536870912, "sum", None)]
    assert ar.rows[0].out_of_place.error == 2e-06 and ar.rows[0].out_of_place.wrong is None
    assert ar.avg_busbw_bytes_per_s == pytest.approx(4.32178e9)
    (a2a,) = parse_nccl_tests(read("nccl-tests-78-v100-8x8-alltoall-old.txt"), "x/alltoall-old.txt")
    assert a2a.collective == "alltoall"
    assert [(r.count, r.dtype, r.redop, r.out_of_place.time_us) for r in a2a.rows] == [
        (1048576, "float", "", 520935.0), (2097152, "float", "", 1041974.0)]
    assert a2a.rows[1].in_place is not None and a2a.rows[1].in_place.error == 1.0


def test_h800_alltoall_with_elided_rank_lines_and_a_row_cut_short() -> None:
    (run,) = parse_nccl_tests(read("nccl-1531-h800-8x8-alltoall-excerpt.txt"), "nccl-1531-alltoall.txt")
    assert run.collective == "alltoall" and run.ranks_elided
    assert [r.rank for r in run.ranks] == [0, 1, 2, 61, 62, 63] and run.num_ranks == 64
    assert run.hosts == ("GPU-NODE09", "GPU-NODE16")
    assert (run.gpus_per_node, run.num_nodes) == (8, 64 // 8)  # devices 0..7 per host, 64 ranks
    (row,) = run.rows
    assert row.in_place is None and (row.redop, row.root) == ("none", -1)
    assert row.out_of_place.busbw_bytes_per_s == 24.44e9 and row.best_busbw_bytes_per_s == 24.44e9
    # alltoall busbw = algbw x (n-1)/n: 24.83 x 63/64
    assert row.out_of_place.busbw_bytes_per_s == pytest.approx(24.83e9 * 63 / 64, rel=1e-3)


def test_sendrecv_named_by_its_command_line_with_n_a_wrong() -> None:
    # written here, not a recording (no licensed real sendrecv_perf report was found; tests/data/health/real/README.md):
    # a fenced block of notes, the command line naming the test, no rank lines, in-place #wrong printed as N/A
    rows = [("134217728", "33554432", "1211.2", "110.81", "1211.8", "110.76"),
            ("1073741824", "268435456", "5412.0", "198.40", "5409.3", "198.50")]
    text = "\n".join(["Tested on one node of 8 GPUs:", "```", "./build/sendrecv_perf -b 128M -e 1G -f 2 -g 8", HEADER]
                     + [f"  {s}  {c}  float  sum  -1  {t1}  {bw1}  {bw1}  0  {t2}  {bw2}  {bw2}  N/A"
                        for s, c, t1, bw1, t2, bw2 in rows] + ["```", ""])
    (run,) = parse_nccl_tests(text, "nccl.md")
    assert run.collective == "sendrecv" and run.named_by == "the text"
    assert run.largest.size_bytes == 1 << 30
    assert run.largest.in_place is not None and run.largest.in_place.wrong is None
    assert run.largest.out_of_place.wrong == 0
    assert run.largest.best_busbw_bytes_per_s == 198.50e9
    # sendrecv busbw = algbw (factor 1)
    assert all(r.out_of_place.busbw_bytes_per_s == r.out_of_place.algbw_bytes_per_s for r in run.rows)


def test_name_line_of_new_releases_and_per_iteration_columns() -> None:
    header = ("#       size         count      type   redop    root     time   algbw   busbw #wrong   i_min   i_max   "
              "i_p99   i_cv%     time   algbw   busbw #wrong   i_min   i_max   i_p99   i_cv%")
    row = ("  1073741824     268435456     float     sum      -1   2750.1  390.43  683.26      0   2701.0   2790.2   "
           "2788.0    0.50   2745.9  391.03  684.30      0   2700.1   2789.9   2788.1    0.40")
    text = "\n".join(["# nccl-tests version 2.17.1 nccl-headers=22803 nccl-library=22803",
                      "# Collective test starting: ./build/all_gather_perf",
                      "#  Rank  0 Group  0 Pid 1 on node001 device  0 [0000:18:00] NVIDIA H800", header, row])
    (run,) = parse_nccl_tests(text, "results.log")
    assert run.collective == "all_gather" and run.named_by == "the text"
    assert run.largest.out_of_place.busbw_bytes_per_s == 683.26e9
    assert run.largest.in_place is not None and run.largest.in_place.busbw_bytes_per_s == 684.30e9


def test_two_tests_in_one_log_are_two_reports() -> None:
    a = read("nccl-tests-78-v100-8x8-all-reduce-old.txt")
    b = read("nccl-tests-78-v100-8x8-alltoall-old.txt")
    runs = parse_nccl_tests("$ ./build/all_reduce_perf -b 256M\n" + a + "$ ./build/alltoall_perf -b 256M\n" + b, "x")
    assert [r.collective for r in runs] == ["all_reduce", "alltoall"]
    assert [len(r.rows) for r in runs] == [2, 2]


def test_wrong_elements_are_counted() -> None:
    row = "  1073741824  268435456  float  sum  -1   2750.1  390.43  683.26      3   2745.9  391.03  684.30      4"
    (run,) = parse_nccl_tests(HEADER + "\n" + row + "\n# Out of bounds values : 2 FAILED\n", "all_reduce.log")
    assert run.largest.wrong == 7 and run.out_of_bounds == 2


def test_no_table_is_one_input_error() -> None:
    assert not is_nccl_tests("NCCL INFO Bootstrap : Using eth0\n")
    with pytest.raises(InputError, match="no nccl-tests result table"):
        parse_nccl_tests(HEADER + "\n# Out of bounds values : 0 OK\n", "empty.log")


@given(st.text(max_size=300), st.lists(st.text(alphabet="0123456789.-eE NA/#sumflot", max_size=90), max_size=6))
def test_any_text_parses_or_is_an_input_error(noise: str, lines: list[str]) -> None:
    text = noise + "\n" + HEADER + "\n" + "\n".join(lines)
    try:
        runs = parse_nccl_tests(text, "x")
    except InputError as exc:
        assert "\n" not in exc.message
        return
    for run in runs:
        for row in run.rows:
            assert row.size_bytes >= 0 and row.best_busbw_bytes_per_s >= 0


@given(st.text(max_size=80))
def test_rank_lines_keep_any_host_text_as_one_field(host: str) -> None:
    name = "".join(ch for ch in host if not ch.isspace())[:40] or "h"
    line = f"#  Rank  3 Group  0 Pid 42 on {name} device  3 [0000:18:00] NVIDIA H800"
    text = line + "\n" + HEADER + "\n  1024  256  float  sum  -1  10.0  0.10  0.18  0  10.0  0.10  0.18  0\n"
    runs = parse_nccl_tests(text, "all_reduce.log")
    assert all(r.host == name for r in runs[0].ranks)


def test_a_huge_line_is_skipped_not_split() -> None:
    line = "# size " + "algbw busbw time " * 200_000  # 3.4 MB on one line
    assert not is_nccl_tests(line)
    with pytest.raises(InputError, match="no nccl-tests result table"):
        parse_nccl_tests(line + "\n", "huge.log")


@pytest.mark.parametrize("tag", ["[1,0]<stdout>:", "0: ", "  12: "])
def test_launcher_tags_in_front_of_every_line_are_taken_off(tag: str) -> None:
    text = read(H100)
    (plain,) = parse_nccl_tests(text, H100)
    (tagged,) = parse_nccl_tests("".join(tag + line for line in text.splitlines(keepends=True)), H100)
    assert tagged == plain
