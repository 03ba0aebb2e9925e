"""Every fake-node fixture, replayed through the real NVML adapter (over the strict fake module) and a rendered sysfs
tree, produces exactly its intended finding and nothing else; recording a replayed node round-trips."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from dsctl.commands.health import take_snapshot
from dsctl.health import api
from dsctl.health.model import Finding, NodeSnapshot, Severity
from dsctl.health.record.write import snapshot_record
from dsctl.profiles.loader import ENV_VAR, ProfileStore

DATA = Path(__file__).resolve().parents[1] / "data" / "health"
ALL_AREAS = ("gpu", "nvlink", "rdma")


@functools.cache
def replay(name: str) -> NodeSnapshot:
    """Snapshots are frozen, so one replay per fixture serves every test."""
    return take_snapshot(DATA / f"{name}.yaml", None, None, ALL_AREAS)


#: the fault matrix (written by generate_fixtures.py): fault, record, node profile, exact expected findings
MATRIX = yaml.safe_load((DATA / "matrix.yaml").read_text(encoding="utf-8"))
EXPECTED = {row["record"]: [tuple(e) for e in row["expect"]] for row in MATRIX}
#: fixtures checked against a node profile of tests/data/health/profiles rather than the one the SKU picks
FIXTURE_NODE = {row["record"]: row["node"] for row in MATRIX if row.get("node")}
BASELINES = ["hgx_h100_healthy", "hgx_h800_healthy", "hgx_h200_healthy"]


def report_for(snap: NodeSnapshot, node: str | None = None) -> api.HealthReport:
    store = ProfileStore.from_environment({ENV_VAR: str(DATA / "profiles")})
    exp = api.choose_expectations(snap, store.node(node) if node else None, store.node)
    return api.run_checks(snap, exp)


def problems(report: api.HealthReport) -> list[tuple[str, str, str]]:
    return [(f.check, f.severity.value, f.subject) for f in report.findings
            if f.severity in (Severity.CRIT, Severity.WARN, Severity.INFO)]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_fixtures", DATA / "generate_fixtures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_matrix_has_30_faults_and_3_baselines() -> None:
    faults = [row for row in MATRIX if row["expect"]]
    assert len(faults) >= 30
    assert [row["record"] for row in MATRIX if not row["expect"]] == BASELINES
    assert len({row["record"] for row in MATRIX}) == len(MATRIX)
    listed = {row["fault"] for row in MATRIX}
    for xid in (48, 63, 64, 74, 79, 92, 94, 95, 119):
        assert f"Xid {xid} in the kernel log" in listed


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_fires_exactly_its_finding(name: str) -> None:
    report = report_for(replay(name), FIXTURE_NODE.get(name))
    assert problems(report) == EXPECTED[name]
    worst = min((Severity(e[1]) for e in EXPECTED[name]), key=lambda s: s.rank, default=Severity.OK)
    assert report.exit_code == (1 if worst is Severity.CRIT else 0)
    assert ("R11" in {f.check for f in report.findings}) is (name in FIXTURE_NODE)  # RoCE only


def test_docs_matrix_table_matches_the_fixtures() -> None:
    """docs/health.md carries the fault matrix; it must be the table generated from matrix.yaml, and every file the
    generator writes must be what is checked in (rerun generate_fixtures.py after changing it)."""
    gen = _generator()
    docs = (DATA.parents[2] / "docs" / "health.md").read_text(encoding="utf-8")
    assert gen.TABLE_START in docs and gen.TABLE_END in docs
    table = docs.split(gen.TABLE_START, 1)[1].split(gen.TABLE_END, 1)[0].strip("\n")
    assert table == gen.matrix_table(MATRIX).strip("\n")
    stale = [path.name for path, text in gen.rendered().items() if path.read_text(encoding="utf-8") != text]
    assert stale == []


@pytest.mark.parametrize("name", BASELINES)
def test_healthy_nodes_have_no_warn_or_crit(name: str) -> None:
    report = report_for(replay(name))
    assert problems(report) == []
    assert report.summary["crit"] == report.summary["warn"] == report.summary["skip"] == 0
    assert "G17" not in {f.check for f in report.findings}  # Hopper remaps rows (G16) instead of retiring pages
    assert report.summary["ok"] == 32
    assert report.exit_code == 0 and report.verdict == "pass"


def test_h800_expectations_come_from_the_profile_and_sku_table() -> None:
    snap = replay("hgx_h800_healthy")
    report = report_for(snap)
    assert report.node["expectations"] == "node profile h800-hgx + SKU H800-SXM"
    assert sum(1 for link in snap.gpus[0].links if link.active is True) == 8


@pytest.mark.parametrize(("name", "node", "detected", "profile_model", "links"), [
    ("hgx_h800_healthy", "h100-hgx", "NVIDIA H800 80GB HBM3 (H800-SXM)", "NVIDIA H100 80GB HBM3", "(8 per GPU)"),
    ("hgx_h100_healthy", "h800-hgx", "NVIDIA H100 80GB HBM3 (H100-SXM)", "NVIDIA H800 SXM5", "(18 per GPU)"),
])
def test_mismatched_profile_is_one_g4_warn_not_links_down(name: str, node: str, detected: str, profile_model: str,
                                                          links: str) -> None:
    report = report_for(replay(name), node=node)
    assert problems(report) == [("G4", "WARN", "node")]
    g4 = report.findings[0]
    assert (g4.observed, g4.expected) == (detected, f"{profile_model} (node profile {node})")
    assert f"node profile {node} is for" in g4.message and links in g4.message
    assert "--node-profile h" in g4.remedy
    assert "does not match the GPUs" in report.node["expectations"]
    assert report.exit_code == 0
    assert report.summary == {"crit": 0, "warn": 1, "info": 0, "skip": 0, "ok": 31}


def test_mismatched_profile_still_finds_a_real_link_down() -> None:
    """An H100 with one link down, checked against the H800 profile (8 links): the SKU's 18 still apply."""
    report = report_for(replay("nvlink_link_down"), node="h800-hgx")
    assert problems(report) == [("G6", "CRIT", "gpu3"), ("G4", "WARN", "node")]
    g6 = report.findings[0]
    assert g6.expected == "18 active" and "node profile is wrong" in g6.remedy


def test_same_link_count_mismatch_says_so() -> None:
    report = report_for(replay("hgx_h100_healthy"), node="h200-hgx")
    assert problems(report) == [("G4", "WARN", "node")]
    assert "both expect 18 NVLinks per GPU" in report.findings[0].message


def test_mismatched_profile_adds_its_hint_to_count_findings() -> None:
    report = report_for(replay("pcie_l40s_no_nvlink"), node="h800-hgx")
    assert problems(report) == [("G2", "CRIT", "node"), ("R1", "CRIT", "node"), ("G4", "WARN", "node")]
    hint = "or the node profile is wrong: h800-hgx describes NVIDIA H800 SXM5, the GPUs are NVIDIA L40S (L40S)"
    assert all(hint in f.remedy for f in report.findings[:2])
    g4 = report.findings[2]
    assert "0 per GPU" in g4.message and g4.remedy.startswith("omit --node")
    assert {f.check for f in report.findings if f.severity is Severity.SKIP} >= {"G6", "G7", "G8", "G10"}


def test_matching_profile_has_no_hint() -> None:
    report = report_for(replay("nvlink_link_down"), node="h100-hgx")
    assert problems(report) == [("G6", "CRIT", "gpu3")]
    assert "profile" not in report.findings[0].remedy


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
                                  "nvlink_replay_growth", "roce_no_v2_gid"])
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

    node = FIXTURE_NODE.get(name)
    assert key(report_for(again, node).findings) == key(report_for(first, node).findings)


def test_every_fixture_file_is_covered() -> None:
    names = {p.stem for p in DATA.glob("*.yaml")}
    assert names == set(EXPECTED) | {"pcie_l40s_no_nvlink", "matrix"}


def test_gpu_missing_from_nvml_but_on_pci_is_crit(tmp_path: Path) -> None:
    data = yaml.safe_load((DATA / "hgx_h800_healthy.yaml").read_text(encoding="utf-8"))
    data["device_count"] = 7
    path = tmp_path / "seven.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    report = report_for(take_snapshot(path, None, None, ALL_AREAS))
    g2 = [(f.severity.value, f.observed, f.expected) for f in report.findings if f.check == "G2"]
    assert g2 == [("CRIT", "7 in NVML, 8 on PCI", "8 GPUs")]
    assert {f.check for f in report.findings if f.severity is Severity.CRIT} == {"G2"}


def roce_variant(tmp_path: Path, device: int, **changes: object) -> NodeSnapshot:
    """roce_no_v2_gid with mlx5_4 given back its RoCE v2 GIDs, then ``changes`` applied to NIC ``device``."""
    data = yaml.safe_load((DATA / "roce_no_v2_gid.yaml").read_text(encoding="utf-8"))
    healthy = yaml.safe_load((DATA / "roce_no_v2_gid.yaml").read_text(encoding="utf-8"))["infiniband"]["devices"][3]
    gids = [{**g, "ndev": "ens5np0", "gid": g["gid"].replace(":fe03:", ":fe04:").replace(":0a03:", ":0a04:")}
            for g in healthy["gids"]]
    data["infiniband"]["devices"][4]["gids"] = gids
    data["infiniband"]["devices"][device].update(changes)
    path = tmp_path / "roce.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return take_snapshot(path, None, None, ALL_AREAS)


def test_healthy_roce_node_passes_r11(tmp_path: Path) -> None:
    snap = roce_variant(tmp_path, 0)
    port = next(n for n in snap.nics if n.name == "mlx5_4").ports[0]
    assert [(g.index, g.type) for g in port.gids] == [(0, "IB/RoCE v1"), (1, "RoCE v2"), (2, "IB/RoCE v1"),
                                                      (3, "RoCE v2")]
    assert port.netdev_operstate == {"ens5np0": "up"}
    report = report_for(snap, "h800-roce")
    assert problems(report) == []
    assert ("R11", Severity.OK) in {(f.check, f.severity) for f in report.findings}
    assert report.summary == {"crit": 0, "warn": 0, "info": 0, "skip": 0, "ok": 33}


@pytest.mark.parametrize(("netdevs", "expected"), [
    ({"ens3np0": "down"}, [("R11", "CRIT", "mlx5_2/1 ens3np0")]),
    ({"ens3np0": "dormant"}, [("R11", "WARN", "mlx5_2/1 ens3np0")]),
    ({}, [("R11", "WARN", "mlx5_2/1 ens3np0")]),
])
def test_roce_netdev_must_be_up(tmp_path: Path, netdevs: dict[str, str],
                                expected: list[tuple[str, str, str]]) -> None:
    report = report_for(roce_variant(tmp_path, 2, netdevs=netdevs), "h800-roce")
    assert problems(report) == expected
    if not netdevs:
        assert report.findings[0].observed == "n/a (missing)"
        assert "/sys/class/net" in report.findings[0].message


def test_roce_gids_without_a_netdev_warn(tmp_path: Path) -> None:
    data = yaml.safe_load((DATA / "roce_no_v2_gid.yaml").read_text(encoding="utf-8"))
    gids = [{k: v for k, v in g.items() if k != "ndev"} for g in data["infiniband"]["devices"][1]["gids"]]
    report = report_for(roce_variant(tmp_path, 1, gids=gids, netdevs={}), "h800-roce")
    assert problems(report) == [("R11", "WARN", "mlx5_1/1")]


def test_roce_port_without_any_gid_is_crit(tmp_path: Path) -> None:
    report = report_for(roce_variant(tmp_path, 6, gids=[], netdevs={}), "h800-roce")
    assert problems(report) == [("R11", "CRIT", "mlx5_6/1")]
    assert report.findings[0].observed == "no non-zero GID"


def test_roce_profile_on_an_ib_node_checks_only_its_ethernet_port() -> None:
    report = report_for(replay("hgx_h800_healthy"), "h800-roce")
    # only the storage NIC mlx5_8 is Ethernet (so it counts as compute), and its fixture carries no GID table
    crit = [p for p in problems(report) if p[1] == "CRIT"]
    assert crit == [("R1", "CRIT", "node"), ("R11", "CRIT", "mlx5_8/1")]
    assert next(f for f in report.findings if f.check == "R11").observed == "no non-zero GID"
