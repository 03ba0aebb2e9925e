"""health burn-in judged from perftest / nccl-tests reports (dsctl.health.burnin.reports): placement on the plan,
footprints counted here from the plan's shape, localisation to a node only on evidence, nothing drained for
reports that name no plan node. Real reports: tests/data/health/real (nccl-tests-309 2 x 8 H100, google/dranet B200
and H200, the elided NVIDIA/nccl#1531 excerpt)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dsctl.errors import InputError
from dsctl.health.burnin.reports import REPORTS_SOURCE, run_reports
from dsctl.health.burnin.request import BurninRequest
from dsctl.profiles.loader import ProfileStore
from dsctl.topology.sim.graph import NIC_DOWN, NIC_UP, NVL_IN, NVL_OUT, build_graph

STORE = ProfileStore()
H800, H100 = STORE.node("h800-hgx"), STORE.node("h100-hgx")
REAL = Path(__file__).resolve().parents[1] / "data" / "health" / "real"
HEADER = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
          "busbw #wrong")
#: h800-hgx all_reduce on 2 x 8 GPUs: min(8 NICs x 400 Gb/s x 0.88 = 352 GB/s, NVLink 160 x 8/7) = 182.9 GB/s
H800_RING = 160e9 * 8 / 7
GOOD, SLOW = 180.0, 90.0


def report(hosts: list[str], busbw: float, gpus: int = 8, name: str = "all_reduce", wrong: int = 0) -> str:
    """An nccl-tests report in the tool's layout (written here, not a recording)."""
    lines = [f"# Collective test starting: {name}_perf"]
    lines += [f"#  Rank {n * gpus + g:2d} Group  0 Pid {100 + g} on {host} device {g:2d} [0000:18:00] NVIDIA H800"
              for n, host in enumerate(hosts) for g in range(gpus)]
    size = 8 << 30
    lines += ["#", HEADER, f"  {size}  {size // 4}  float  sum  -1  47535  180.71  {busbw:.2f}  {wrong}  47743  "
              f"179.92  {busbw:.2f}  0"]
    return "\n".join(lines) + "\n"


PERFTEST = (" RDMA_Write BW Test\n Dual-port       : OFF\t\tDevice         : mlx5_3\n Link type       : IB\n"
            " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
            " 65536      5000             150.00            150.00\t\t     0.70\n")


def plan(tmp_path_factory: pytest.TempPathFactory, *args: str) -> str:
    from tests.conftest import run_cli

    out = tmp_path_factory.mktemp("plan") / "p"
    assert run_cli("topology", "plan", *args, "--out-dir", str(out)).exit_code == 0
    return (out / "plan.json").read_text()


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> str:
    """16 nodes of h800-hgx, 8 planes of 4 leaves (4 nodes each) and 2 spines."""
    return plan(tmp_path_factory, "-N", "16", "--radix", "8")


def burn(plan_text: str, files: list[tuple[str, str]], profile=H800, fraction: float = 0.9):  # type: ignore[no-untyped-def]
    return run_reports(plan_text, "plan.json", BurninRequest(fraction=fraction), files, profile)


def test_the_real_h100_report_is_placed_on_its_two_nodes_and_covers_their_links(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    text = plan(tmp_path_factory, "-N", "4", "--node-profile", "h100-hgx", "--node-name", "bm-h100-{n:02d}")
    path = REAL / "nccl-tests-309-h100-2x8-all-reduce.txt"
    result = burn(text, [(str(path), path.read_text())], H100)
    assert result.source == REPORTS_SOURCE and result.exit_code == 0 and not result.findings
    assert result.selected == ("bm-h100-01", "bm-h100-02")
    # the largest row (17179869184 B): out-of-place busbw 469.23, in-place 468.73 GB/s (the file);
    # h100-hgx on 2 nodes: 8 NICs x 400 Gb/s x 0.88 = 352 GB/s (NVLink 360 x 8/7 is higher)
    (rnd,) = result.rounds
    assert rnd.median_ratio == pytest.approx(469.23 / 352.0, rel=1e-4)
    assert rnd.expected_gbps == pytest.approx(352.0 * 8)
    # a single-tier plan (one leaf per plane): 2 nodes x 8 NICs x 2 directions + 16 GPUs x NVLink out/in
    graph = build_graph(text, "p", H100.nvlink_bytes_per_s / 2)
    covered = ~np.isnan(result.link_ratio)
    kinds = graph.link_kind[covered]
    assert np.count_nonzero(np.isin(kinds, (NIC_UP, NIC_DOWN))) == 32
    assert np.count_nonzero(np.isin(kinds, (NVL_OUT, NVL_IN))) == 32
    assert covered.sum() == 64 and result.design.coverage.fraction == 1.0
    assert result.to_data()["nodes_tested"] == 2


def test_a_node_in_every_slow_report_whose_partners_are_proven_is_the_finding(tiered: str) -> None:
    result = burn(tiered, [("ab.log", report(["node0001", "node0002"], SLOW)),
                           ("ac.log", report(["node0001", "node0003"], SLOW)),
                           ("bc.log", report(["node0002", "node0003"], GOOD))])
    assert [(f.kind, f.subject, f.node) for f in result.findings] == [("node", "node0001", "node0001")]
    (finding,) = result.findings
    assert finding.ratio == pytest.approx(SLOW * 1e9 / H800_RING)
    assert [e.round for e in finding.evidence] == ["ab.log", "ac.log"]
    assert result.drain_wanted() == [("node0001", f"dsctl:burnin node node0001 at {SLOW * 1e9 / H800_RING:.0%} "
                                                  "of expected")]
    assert [r.num_slow for r in result.rounds] == [1, 1, 0] and result.exit_code == 1


def test_one_slow_report_alone_blames_nobody(tiered: str) -> None:
    result = burn(tiered, [("ab.log", report(["node0001", "node0002"], SLOW))])
    (finding,) = result.findings
    assert finding.kind == "ambiguous" and finding.node == "" and result.drain_wanted() == []
    assert {"node0001", "node0002"} <= set(finding.candidates)


def test_a_slow_pair_of_proven_nodes_on_two_leaves_suspects_only_cables(tiered: str) -> None:
    # node0001..0004 share leaf 1 of every plane, node0005..0008 leaf 2: 1-2 and 5-6 prove the four nodes'
    # NICs and NVLink without a spine cable; 1-5 crosses the spines on every plane
    result = burn(tiered, [("12.log", report(["node0001", "node0002"], GOOD)),
                           ("56.log", report(["node0005", "node0006"], GOOD)),
                           ("15.log", report(["node0001", "node0005"], SLOW))])
    assert result.drain_wanted() == []
    (finding,) = result.findings
    assert finding.node == "" and finding.candidates
    assert all("spine" in name for name in finding.candidates)


def test_reports_that_name_no_plan_node_are_judged_and_never_drained(tiered: str) -> None:
    result = burn(tiered, [("ib.log", PERFTEST), ("x.log", report(["gpu-a", "gpu-b"], SLOW))])
    assert [(f.kind, f.node) for f in result.findings] == [("unplaced", ""), ("unplaced", "")]
    # perftest: 150 Gb/s of 400 x 0.88
    assert result.findings[0].ratio == pytest.approx(150 / (400 * 0.88))
    assert "names no host" in result.findings[0].note and "'gpu-a' is not a node" in result.findings[1].note
    assert result.drain_wanted() == [] and result.selected == () and result.exit_code == 1


def test_wrong_elements_count_as_nothing_through(tiered: str) -> None:
    result = burn(tiered, [("ab.log", report(["node0001", "node0002"], GOOD, wrong=3)),
                           ("bc.log", report(["node0002", "node0003"], GOOD))])
    (finding,) = result.findings
    assert finding.kind == "node" and finding.node == "node0001" and finding.ratio == 0.0


def test_many_reports_use_the_probe_rule_a_uniformly_slow_fabric_is_no_node(tiered: str) -> None:
    pairs = [(f"node{a:04d}", f"node{b:04d}") for a in range(1, 17) for b in (a % 16 + 1,)]
    uniform = burn(tiered, [(f"{a}-{b}.log", report([a, b], 0.8 * H800_RING / 1e9)) for a, b in pairs])
    assert len(uniform.rounds) == 16 and not uniform.findings  # all at 80%: not an outlier of its peers
    one = [(f"{a}-{b}.log", report([a, b], SLOW if "node0007" in (a, b) else GOOD)) for a, b in pairs]
    found = burn(tiered, one)
    assert [(f.kind, f.node) for f in found.findings] == [("node", "node0007")]


def test_not_judged_reports_are_noted_and_partial_nodes_prove_nothing(tiered: str) -> None:
    small = report(["node0001", "node0002"], GOOD).replace(str(8 << 30), str(1 << 20), 1)
    one_gpu = report(["node0002", "node0003"], GOOD, gpus=1)
    result = burn(tiered, [("small.log", small), ("one.log", one_gpu),
                           ("ab.log", report(["node0001", "node0003"], SLOW))])
    assert any("small.log" in n and "not judged" in n for n in result.notes)
    # one GPU of 8 per node proves nothing, so the slow 1-3 report stays ambiguous
    assert [f.kind for f in result.findings] == ["ambiguous"] and result.drain_wanted() == []


def renamed_plan(tmp_path_factory: pytest.TempPathFactory, profile: str, names: tuple[str, str]) -> str:
    """A 2-node plan whose nodes carry the host names of a real report (topology plan numbers nodes from 1)."""
    text = plan(tmp_path_factory, "-N", "2", "--node-profile", profile)
    return text.replace('"node0001"', f'"{names[0]}"').replace('"node0002"', f'"{names[1]}"')


def test_the_real_b200_all_gather_below_the_profile_blames_neither_node_alone(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    text = renamed_plan(tmp_path_factory, "b200-hgx", ("nccl-gib-test-0", "nccl-gib-test-1"))
    path = REAL / "nccl-tests-dranet-b200-2x8-all-gather.txt"
    result = burn(text, [(str(path), path.read_text())], STORE.node("b200-hgx"))
    # largest row 8589934592 B: busbw 260.03 out-of-place, 259.25 in-place (the file); b200-hgx: 8 NICs x 400 Gb/s
    # x 0.88 = 352 GB/s (NVLink 720 x 8/7 is higher)
    ratio = 260.03 / 352.0
    (finding,) = result.findings
    assert finding.kind == "ambiguous" and finding.ratio == pytest.approx(ratio, rel=1e-4)
    assert set(finding.candidates) == {"nccl-gib-test-0", "nccl-gib-test-1"}
    assert result.drain_wanted() == [] and result.selected == ("nccl-gib-test-0", "nccl-gib-test-1")


def test_the_real_one_gpu_per_node_report_suspects_and_proves_nothing(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    hosts = ("nccl-test-dranet-1gpu-1nic-worker-0", "nccl-test-dranet-1gpu-1nic-worker-1")
    text = renamed_plan(tmp_path_factory, "h200-hgx", hosts)
    path = REAL / "nccl-tests-dranet-h200-2x1-all-reduce.txt"
    result = burn(text, [(str(path), path.read_text())], STORE.node("h200-hgx"))
    # 8589934592 B: busbw 31.89 / 31.88 GB/s (the file) against one GPU's NIC, 400 Gb/s x 0.88 = 44 GB/s
    (rnd,) = result.rounds
    assert rnd.median_ratio == pytest.approx(31.89 / 44.0, rel=1e-4) and rnd.num_slow == 1
    (finding,) = result.findings
    assert finding.kind == "ambiguous" and set(finding.candidates) == set(hosts) and result.drain_wanted() == []
    # one GPU of 8: every NIC and NVLink link of both nodes is suspect (which NIC device 0 used is not certain)
    graph = build_graph(text, "p", STORE.node("h200-hgx").nvlink_bytes_per_s / 2)
    covered = ~np.isnan(result.link_ratio)
    assert np.count_nonzero(covered & np.isin(graph.link_kind, (NIC_UP, NIC_DOWN))) == 2 * 8 * 2
    assert np.count_nonzero(covered & np.isin(graph.link_kind, (NVL_OUT, NVL_IN))) == 2 * 8 * 2


def test_the_real_elided_h800_excerpt_is_noted_not_judged(tiered: str) -> None:
    path = REAL / "nccl-1531-h800-8x8-alltoall-excerpt.txt"
    with pytest.raises(InputError) as caught:
        burn(tiered, [(str(path), path.read_text())])
    # the excerpt's only row is 8388608 B (8 MiB): bus bandwidth still grows with size, not judged
    assert caught.value.field == "reports" and "no report could be judged" in caught.value.message
    assert "below 1 GiB" in caught.value.message


def test_a_hostile_host_name_is_shown_quoted_and_never_drained(tiered: str) -> None:
    host = "node0001\x1b[2J{0}"
    result = burn(tiered, [("x.log", report([host, "node0002"], SLOW))])
    (finding,) = result.findings
    assert finding.kind == "unplaced" and finding.node == "" and result.drain_wanted() == []
    assert "\x1b" not in finding.note and "'node0001\\x1b[2J{0}'" in finding.note
    assert "\x1b" not in finding.evidence[0].flow


def test_an_alltoall_too_wide_to_route_is_judged_but_not_placed(tmp_path_factory: pytest.TempPathFactory) -> None:
    text = plan(tmp_path_factory, "-N", "96")
    hosts = [f"node{n:04d}" for n in range(1, 93)]
    # 92 x 91 node pairs x 8 rails = 66,976 NIC pairs, above MAX_ROUTED_FLOWS (65,536); 91 nodes would be 65,520
    result = burn(text, [("a2a.log", report(hosts, 1.0, name="alltoall"))])
    (finding,) = result.findings
    assert finding.kind == "unplaced" and "92 nodes x 8 rails: more than 65,536 NIC pairs" in finding.note
    assert result.drain_wanted() == [] and result.selected == ()
