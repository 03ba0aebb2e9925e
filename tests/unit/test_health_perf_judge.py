"""Judging perftest and nccl-tests reports against the node profiles (dsctl.health.perf.expect / judge). Every
expectation is computed here from the profile's published figures (profiles/nodes/*.yaml)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dsctl.errors import InputError
from dsctl.health.perf.expect import PlanFabric, busbw_expectation, simulated_busbw
from dsctl.health.perf.judge import PerfReport, judge_files
from dsctl.profiles.loader import ProfileStore

STORE = ProfileStore()
H800, H100 = STORE.node("h800-hgx"), STORE.node("h100-hgx")
REAL = Path(__file__).resolve().parents[1] / "data" / "health" / "real"
PERFTEST = Path(__file__).resolve().parents[1] / "data" / "health" / "perftest"
#: profiles/nodes/h800-hgx.yaml: 8 x 400 Gb/s ConnectX-7 at efficiency 0.88, NVLink 160 GB/s per direction
NIC_BYTES = 400e9 / 8 * 0.88
H800_NVLINK, H100_NVLINK = 160e9, 360e9
HEADER = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
          "busbw #wrong")


def ranks(nodes: int, gpus: int, gpu: str = "NVIDIA H800") -> str:
    return "\n".join(f"#  Rank {n * gpus + g:2d} Group  0 Pid {100 + g} on node{n:03d} device {g:2d} [0000:18:00] "
                     f"{gpu}" for n in range(nodes) for g in range(gpus))


def nccl(name: str, nodes: int, gpus: int, busbw: float, wrong: int = 0, size: int = 8 << 30) -> str:
    row = f"  {size}  {size // 4}  float  sum  -1  47535  180.71  {busbw:.2f}  {wrong}  47743  179.92  {busbw:.2f}  0"
    return f"# Collective test starting: {name}_perf\n{ranks(nodes, gpus)}\n#\n{HEADER}\n{row}\n"


def perftest(avg_gbps: float, size: int = 65536, title: str = "RDMA_Write", link: str = "IB",
             device: str = "mlx5_0") -> str:
    return (f"                    {title} BW Test\n Dual-port       : OFF\t\tDevice         : {device}\n"
            f" Link type       : {link}\n"
            " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
            f" {size:<7d}    5000             {avg_gbps:.2f}            {avg_gbps:.2f}\t\t     0.70\n")


def judge(*files: tuple[str, str], profile: str | None = None, fraction: float = 0.9) -> PerfReport:
    return judge_files(list(files), STORE.node(profile) if profile else None, STORE.node, fraction)


def test_ring_collectives_on_h800_are_nvlink_bound_and_on_h100_nic_bound() -> None:
    # H800: min(8 NICs x 44 GB/s = 352, 160 x 8/7 = 182.9) -> NVLink; H100: min(352, 360 x 8/7 = 411.4) -> NICs
    for name in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"):
        assert busbw_expectation(name, 2, 8, 16, H800).bytes_per_s == pytest.approx(H800_NVLINK * 8 / 7)
        assert busbw_expectation(name, 4, 8, 32, H100).bytes_per_s == pytest.approx(8 * NIC_BYTES)
    assert busbw_expectation("all_reduce", 1, 8, 8, H800).bytes_per_s == H800_NVLINK
    # one GPU per node: its own NIC, no NVLink hop
    assert busbw_expectation("all_reduce", 2, 1, 2, H100).bytes_per_s == pytest.approx(NIC_BYTES)


def test_alltoall_and_sendrecv_across_nodes() -> None:
    # alltoall: each GPU's NIC carries (n-G)/n of its buffer; busbw counts (n-1)/n
    assert busbw_expectation("alltoall", 2, 8, 16, H800).bytes_per_s == pytest.approx(NIC_BYTES * 15 / 8)
    assert busbw_expectation("alltoall", 8, 8, 64, H800).bytes_per_s == pytest.approx(NIC_BYTES * 63 / 56)
    assert busbw_expectation("sendrecv", 2, 8, 16, H800).bytes_per_s == pytest.approx(NIC_BYTES)
    for name in ("gather", "alltoallv", ""):
        assert busbw_expectation(name, 2, 8, 16, H800).bytes_per_s == 0


def test_real_h100_all_reduce_is_judged_with_the_profile_its_gpus_name() -> None:
    name = "nccl-tests-309-h100-2x8-all-reduce.txt"
    report = judge((name, (REAL / name).read_text()))
    (result,) = report.results
    assert (result.node_profile, result.verdict, result.nodes) == ("h100-hgx", "ok", ("bm-h100-01", "bm-h100-02"))
    assert result.expected_bytes_per_s == pytest.approx(8 * NIC_BYTES)  # 352 GB/s
    # the better pass at 16 GiB: 469.21 GB/s, above the ring model's 352 (NCCL picks NVLSTree there, NVLink SHARP
    # inside each node, the thread says): a result above the expectation is ok
    assert result.ratio == pytest.approx(469.21e9 / (8 * NIC_BYTES))
    assert report.exit_code == 0
    # the same file judged as an H800 cluster: NVLink-bound expectation 182.9 GB/s, 469.21 is above it
    (as_h800,) = judge((name, (REAL / name).read_text()), profile="h800-hgx").results
    assert as_h800.expected_bytes_per_s == pytest.approx(H800_NVLINK * 8 / 7) and as_h800.verdict == "ok"


def test_real_h200_one_gpu_per_node_is_slow_against_its_nic() -> None:
    name = "nccl-tests-dranet-h200-2x1-all-reduce.txt"
    report = judge((name, (REAL / name).read_text()))
    (result,) = report.results
    # one GPU per node: the ring crosses its one NIC, 400 Gb/s x 0.88 = 44 GB/s; 31.89 GB/s at 8 GiB is 72 %
    assert (result.node_profile, result.verdict) == ("h200-hgx", "slow")
    assert result.expected_bytes_per_s == pytest.approx(NIC_BYTES)
    assert result.ratio == pytest.approx(31.89e9 / NIC_BYTES)
    assert report.exit_code == 1


def test_slow_below_the_fraction_and_ok_at_it() -> None:
    expected = H800_NVLINK * 8 / 7
    slow = judge(("a.log", nccl("all_reduce", 2, 8, expected * 0.89 / 1e9)))
    assert slow.results[0].verdict == "slow" and slow.exit_code == 1
    ok = judge(("a.log", nccl("all_reduce", 2, 8, expected * 0.91 / 1e9)))
    assert ok.results[0].verdict == "ok" and ok.exit_code == 0
    assert judge(("a.log", nccl("all_reduce", 2, 8, expected * 0.89 / 1e9)), fraction=0.8).exit_code == 0


def test_wrong_elements_fail_whatever_the_bandwidth() -> None:
    report = judge(("a.log", nccl("all_reduce", 2, 8, 500.0, wrong=3)))
    assert report.results[0].verdict == "wrong" and report.exit_code == 1


def test_small_sizes_unnamed_tests_and_missing_ranks_are_not_judged() -> None:
    small = judge(("a.log", nccl("all_reduce", 2, 8, 10.0, size=8 << 20))).results[0]
    assert small.verdict == "not_judged" and "below 1 GiB" in small.reason
    gather = judge(("g.log", nccl("gather", 2, 8, 10.0))).results[0]
    assert gather.verdict == "not_judged" and "no model for gather" in gather.reason
    name = "nccl-tests-78-v100-8x8-all-reduce-old.txt"
    old = judge((name, (REAL / name).read_text())).results[0]
    assert old.verdict == "not_judged" and "names no ranks" in old.reason


def test_perftest_against_line_rate_times_efficiency() -> None:
    line = NIC_BYTES * 8 / 1e9  # 352 Gb/s
    ok, slow = (judge(("p.txt", perftest(line * f))).results[0] for f in (0.95, 0.5))
    assert (ok.verdict, slow.verdict) == ("ok", "slow")
    assert slow.expected_bytes_per_s == pytest.approx(NIC_BYTES) and slow.devices == ("mlx5_0",)
    assert slow.measured_bytes_per_s == pytest.approx(line * 0.5 * 1e9 / 8, rel=1e-3)
    bidir = judge(("b.txt", perftest(line * 1.5, title="RDMA_Write Bidirectional"))).results[0]
    assert bidir.expected_bytes_per_s == pytest.approx(2 * NIC_BYTES) and bidir.verdict == "slow"
    assert bidir.test == "RDMA_Write BW bidirectional"


def test_perftest_on_the_roce_storage_nic_of_an_infiniband_node() -> None:
    storage = replace(H800, storage_nic_gbps=200.0)
    report = judge_files([("s.txt", perftest(180.0, link="Ethernet", device="mlx5_8"))], storage, STORE.node)
    (result,) = report.results
    assert result.expected_bytes_per_s == pytest.approx(200e9 / 8 * 0.88) and "storage NIC" in result.reason


def test_real_small_message_perftest_reports_are_not_judged() -> None:
    names = ("perftest-132-write-sweep-gbits.txt", "perftest-273-write-post-list-gbits.txt")
    files = [(name, (PERFTEST / name).read_text()) for name in names]
    report = judge(*files)
    assert [r.verdict for r in report.results] == ["not_judged", "not_judged"]
    assert all("message-rate bound" in r.reason for r in report.results)


def test_a_file_of_neither_kind_and_a_bad_fraction_are_input_errors() -> None:
    with pytest.raises(InputError, match="neither a perftest report"):
        judge(("notes.txt", "hello\n"))
    with pytest.raises(InputError, match=r"^fraction 1\.5 must be in \(0, 1\]$"):
        judge(("p.txt", perftest(300)), fraction=1.5)


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, PlanFabric]:
    from tests.conftest import run_cli

    out: dict[str, PlanFabric] = {}
    for name, args in (("flat16", ("-N", "16")), ("over64", ("-N", "64", "--oversubscription", "4")),
                       ("over12", ("-N", "12", "--radix", "8", "--oversubscription", "3"))):
        folder = tmp_path_factory.mktemp(name)
        assert run_cli("topology", "plan", *args, "--out-dir", str(folder / "p")).exit_code == 0
        out[name] = PlanFabric((folder / "p" / "plan.json").read_text(), name)
    return out


def test_plan_alltoall_simulated_matches_the_closed_form_when_non_blocking(plans: dict[str, PlanFabric]) -> None:
    report = judge_files([("a.log", nccl("alltoall", 2, 8, 80.0))], None, STORE.node, 0.9, plans["flat16"])
    (result,) = report.results
    assert result.expected_bytes_per_s == pytest.approx(NIC_BYTES * 15 / 8) and "simulated on flat16" in result.reason


def test_plan_alltoall_on_an_oversubscribed_fabric_expects_less(plans: dict[str, PlanFabric]) -> None:
    measured = 25.0  # GB/s: slow against the non-blocking closed form, fine on a 4:1 fabric
    closed = judge(("a.log", nccl("alltoall", 64, 8, measured))).results[0]
    assert closed.expected_bytes_per_s == pytest.approx(NIC_BYTES * 511 / 504) and closed.verdict == "slow"
    simulated = judge_files([("a.log", nccl("alltoall", 64, 8, measured))], None, STORE.node, 0.9,
                            plans["over64"]).results[0]
    # 4:1 leaves: each node's 8 NICs share 2 uplinks' worth, so at most ~1/4 of the line rate leaves the leaf
    assert simulated.expected_bytes_per_s is not None
    assert simulated.expected_bytes_per_s < closed.expected_bytes_per_s / 2 and simulated.verdict == "ok"
    # a plan too small for the file falls back to the closed form and says so
    small = judge_files([("a.log", nccl("alltoall", 64, 8, measured))], None, STORE.node, 0.9,
                        plans["flat16"]).results[0]
    assert small.expected_bytes_per_s == closed.expected_bytes_per_s and "not simulated" in small.reason


#: over12: 8 planes of 2 leaves (node0001-0006, node0007-0012), 6 NICs down and 2 uplinks per leaf (radix 8, 3:1)
INTERLEAVED = tuple(f"node{n:04d}" for n in (1, 7, 2, 8, 3, 9, 4, 10, 5, 11, 6, 12))
LINE = 400e9 / 8


def test_plan_ring_collectives_and_sendrecv_on_a_non_blocking_plan_equal_the_closed_forms(
        plans: dict[str, PlanFabric]) -> None:
    for name in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"):
        ring = simulated_busbw(plans["flat16"], H800, name, 2, 8, 8 << 30)
        assert ring.bytes_per_s == pytest.approx(H800_NVLINK * 8 / 7) and "simulated on flat16" in ring.formula
        # h100-hgx NVLink (360 x 8/7) is above the NICs: every rail ring at line rate, 8 x 50 GB/s x 0.88
        assert simulated_busbw(plans["flat16"], H100, name, 4, 8, 8 << 30).bytes_per_s == pytest.approx(8 * NIC_BYTES)
    assert simulated_busbw(plans["flat16"], H800, "sendrecv", 16, 8, 8 << 30).bytes_per_s == pytest.approx(NIC_BYTES)
    # one node, or no model: the closed form, unsimulated
    assert simulated_busbw(plans["flat16"], H800, "all_reduce", 1, 8, 8 << 30).bytes_per_s == H800_NVLINK
    assert simulated_busbw(plans["flat16"], H800, "gather", 2, 8, 8 << 30).bytes_per_s == 0


def test_plan_rings_in_host_order_across_oversubscribed_leaves_expect_less(plans: dict[str, PlanFabric]) -> None:
    # in plan order only the hops 6 -> 7 and 12 -> 1 change leaf: one flow per uplink, line rate on every rail
    in_order = simulated_busbw(plans["over12"], H100, "all_reduce", 12, 8, 8 << 30)
    assert in_order.bytes_per_s == pytest.approx(8 * NIC_BYTES) and "the plan's first 12 nodes" in in_order.formula
    # every hop crosses leaves: a leaf's 6 rail-k NICs send through its 2 uplinks, 1/3 of the line rate each
    crossing = simulated_busbw(plans["over12"], H100, "all_reduce", 12, 8, 8 << 30, INTERLEAVED)
    assert crossing.bytes_per_s == pytest.approx(8 * LINE / 3 * 0.88) and "the file's hosts" in crossing.formula
    assert simulated_busbw(plans["over12"], H800, "all_reduce", 12, 8, 8 << 30, INTERLEAVED).bytes_per_s == \
        pytest.approx(8 * LINE / 3 * 0.88)  # below NVLink's 182.9 GB/s now
    # sendrecv: the one cross-node pair per node (GPU 7 -> next node's GPU 0, relayed onto rail 0) shares the same
    # 2 uplinks among the leaf's 6 nodes
    assert simulated_busbw(plans["over12"], H800, "sendrecv", 12, 8, 8 << 30).bytes_per_s == pytest.approx(NIC_BYTES)
    assert simulated_busbw(plans["over12"], H800, "sendrecv", 12, 8, 8 << 30, INTERLEAVED).bytes_per_s == \
        pytest.approx(LINE / 3 * 0.88)
    # hosts that are not all plan nodes: the plan's first N
    other = simulated_busbw(plans["over12"], H800, "sendrecv", 12, 8, 8 << 30, (*INTERLEAVED[:11], "gpu-x"))
    assert other.bytes_per_s == pytest.approx(NIC_BYTES) and "first 12" in other.formula


def test_judge_files_simulates_a_ring_report_on_the_hosts_it_names(plans: dict[str, PlanFabric]) -> None:
    rows = "\n".join(f"#  Rank {i * 8 + g:3d} Group  0 Pid {g} on {host} device {g:2d} [0000:18:00] NVIDIA H100 "
                     "80GB HBM3" for i, host in enumerate(INTERLEAVED) for g in range(8))
    text = nccl("all_reduce", 1, 1, 150.0).replace(ranks(1, 1), rows)
    (result,) = judge_files([("ar.log", text)], None, STORE.node, 0.9, plans["over12"]).results
    # 150 GB/s: slow against the non-blocking 352, fine against the 117.3 the interleaved hosts can reach
    assert result.expected_bytes_per_s == pytest.approx(8 * LINE / 3 * 0.88) and result.verdict == "ok"
    assert result.nodes == INTERLEAVED
