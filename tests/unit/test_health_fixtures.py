"""Every fake-node fixture, replayed through the real NVML adapter (over the strict fake module) and a rendered sysfs
tree, produces exactly its intended finding and nothing else; recording a replayed node round-trips."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import yaml

from dsctl.commands._common import profile_store
from dsctl.commands.health import take_snapshot
from dsctl.health import api
from dsctl.health.model import Finding, NodeSnapshot, Severity
from dsctl.health.record import snapshot_record

DATA = Path(__file__).resolve().parents[1] / "data" / "health"
ALL_AREAS = ("gpu", "nvlink", "rdma")


@functools.cache
def replay(name: str) -> NodeSnapshot:
    """Snapshots are frozen, so one replay per fixture serves every test."""
    return take_snapshot(DATA / f"{name}.yaml", None, None, ALL_AREAS)


def report_for(snap: NodeSnapshot, node: str | None = None) -> api.HealthReport:
    store = profile_store()
    exp = api.choose_expectations(snap, store.node(node) if node else None, store.node)
    return api.run_checks(snap, exp)


def problems(report: api.HealthReport) -> list[tuple[str, str, str]]:
    return [(f.check, f.severity.value, f.subject) for f in report.findings
            if f.severity in (Severity.CRIT, Severity.WARN, Severity.INFO)]


EXPECTED = {
    "nvlink_link_down": [("G6", "CRIT", "gpu3")],
    "nvlink_replay_growth": [("G8", "CRIT", "gpu5 link 2")],
    "fabric_not_started": [("G9", "CRIT", f"gpu{i}") for i in range(8)],
    "row_remap_pending": [("G16", "WARN", "gpu2")],
    "row_remap_failure": [("G16", "CRIT", "gpu6")],
    "volatile_dbe": [("G15", "CRIT", "gpu6")],
    "pcie_x8_degraded": [("G11", "CRIT", "gpu1")],
    "pcie_gen4_host_limited": [("G12", "WARN", "gpu0")],
    "xid79_gpu_lost": [("G3", "CRIT", "gpu4")],
    "ib_port_down": [("R2", "CRIT", "mlx5_3/1")],
    "ib_rate_hdr_downgrade": [("R3", "CRIT", "mlx5_5/1")],
    "ib_symbol_error_burst": [("R6", "CRIT", "mlx5_1/1")],
    "nic_wrong_numa": [("R9", "WARN", "gpu2")],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_fires_exactly_its_finding(name: str) -> None:
    report = report_for(replay(name))
    assert problems(report) == EXPECTED[name]
    worst = EXPECTED[name][0][1]
    assert report.exit_code == (1 if worst == "CRIT" else 0)


@pytest.mark.parametrize("name", ["hgx_h100_healthy", "hgx_h800_healthy"])
def test_healthy_nodes_have_no_warn_or_crit(name: str) -> None:
    report = report_for(replay(name))
    assert problems(report) == []
    assert report.summary["crit"] == report.summary["warn"] == report.summary["skip"] == 0
    assert report.summary["ok"] == 30
    assert report.exit_code == 0


def test_h800_expectations_come_from_the_profile_and_sku_table() -> None:
    snap = replay("hgx_h800_healthy")
    report = report_for(snap)
    assert report.node["expectations"] == "node profile h800-hgx + SKU H800-SXM"
    assert sum(1 for link in snap.gpus[0].links if link.active is True) == 8


def test_h800_node_checked_against_the_h100_profile_fails_on_links() -> None:
    report = report_for(replay("hgx_h800_healthy"), node="h100-hgx")
    assert {(c, s) for c, s, _ in problems(report)} == {("G6", "CRIT")}
    assert len(problems(report)) == 8


def test_l40s_not_supported_paths_are_skips_not_failures() -> None:
    snap = replay("pcie_l40s_no_nvlink")
    assert isinstance(snap.gpus[0].num_links, object) and snap.gpus[0].links == ()
    report = report_for(snap)
    assert problems(report) == []
    skipped = {f.check for f in report.findings if f.severity is Severity.SKIP}
    assert {"G6", "G7", "G8", "G9", "G10", "R1"} <= skipped
    g6 = next(f for f in report.findings if f.check == "G6")
    assert g6.subject == "gpu0, gpu1, gpu2, gpu3"


def test_lost_gpu_is_a_finding_and_other_gpus_still_checked() -> None:
    snap = replay("xid79_gpu_lost")
    lost = snap.gpus[4]
    assert lost.lost is not None and lost.lost.kind == "gpu_lost" and lost.lost.code == "GPU_IS_LOST"
    assert all(g.lost is None for i, g in enumerate(snap.gpus) if i != 4)
    assert set(snap.gpus[0].p2p_nvlink) == {1, 2, 3, 5, 6, 7}


def test_rate_checks_use_the_second_sample() -> None:
    snap = replay("nvlink_replay_growth")
    link = snap.gpus[5].links[2]
    assert link.errors_t0 == {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0}
    assert link.errors_t1 == {"replay": 3, "recovery": 0, "crc_flit": 0, "crc_data": 0}
    burst = replay("ib_symbol_error_burst")
    port = next(n for n in burst.nics if n.name == "mlx5_1").ports[0]
    assert (port.counters_t0["symbol_error"], port.counters_t1["symbol_error"]) == (0, 500)
    assert port.counters_t1["port_xmit_data"] - port.counters_t0["port_xmit_data"] == 100_000_000


@pytest.mark.parametrize("name", ["hgx_h800_healthy", "xid79_gpu_lost", "pcie_l40s_no_nvlink", "ib_port_down",
                                  "nvlink_replay_growth"])
def test_record_round_trips(name: str, tmp_path: Path) -> None:
    first = replay(name)
    path = tmp_path / "node.yaml"
    path.write_text(yaml.safe_dump(snapshot_record(first), sort_keys=False), encoding="utf-8")
    again = take_snapshot(path, None, None, ALL_AREAS)
    assert again.gpus == first.gpus
    assert again.nics == first.nics
    assert again.pci_gpus == first.pci_gpus
    assert again.driver_version == first.driver_version and again.interval_s == first.interval_s

    def key(fs: tuple[Finding, ...]) -> list[tuple[str, str, str, str]]:
        return [(f.check, f.severity.value, f.subject, f.observed) for f in fs]

    assert key(report_for(again).findings) == key(report_for(first).findings)


def test_every_fixture_file_is_covered() -> None:
    names = {p.stem for p in DATA.glob("*.yaml")}
    assert names == set(EXPECTED) | {"hgx_h100_healthy", "hgx_h800_healthy", "pcie_l40s_no_nvlink"}


def test_gpu_missing_from_nvml_but_on_pci_is_crit(tmp_path: Path) -> None:
    data = yaml.safe_load((DATA / "hgx_h800_healthy.yaml").read_text(encoding="utf-8"))
    data["device_count"] = 7
    path = tmp_path / "seven.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    report = report_for(take_snapshot(path, None, None, ALL_AREAS))
    g2 = [(f.severity.value, f.observed, f.expected) for f in report.findings if f.check == "G2"]
    assert g2 == [("CRIT", "7 GPUs", "8 GPUs"), ("CRIT", "7 in NVML", "8 on PCI")]
    assert {f.check for f in report.findings if f.severity is Severity.CRIT} == {"G2"}
