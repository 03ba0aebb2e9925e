"""Check thresholds, parsers and the PCIe affinity classifier on hand-built snapshots (no backend)."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.health import api
from dsctl.health.checks import area_of
from dsctl.health.checks_gpu import g8_nvlink_errors, g9_fabric, g13_pcie_replays, g18_recovery, g20_power
from dsctl.health.checks_rdma import affinity, parse_gt_s, parse_rate, r6_degradation, state_code
from dsctl.health.expectations import Expectations, expectations_for, find_sku, sku_for_profile
from dsctl.health.model import Gpu, GpuFabricInfo, IbPort, Nic, NodeSnapshot, NvLink, PciDevice, Pcie, Power, Severity
from dsctl.health.xid import parse_xids, xid_findings, xid_severity

EXP = Expectations("test", 8, 18, 5, 16, 700.0, 8, 400.0, "infiniband")
ZERO = {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0}


def snap(gpus: tuple[Gpu, ...] = (), nics: tuple[Nic, ...] = (), interval_s: float = 10.0) -> NodeSnapshot:
    return NodeSnapshot("h", "550", len(gpus), gpus, (), nics, True, interval_s)


def link_gpu(t1: dict[str, int]) -> Gpu:
    link = NvLink(0, True, 6, 2, "0000:05:00.0", ZERO, t1)
    return Gpu(index=0, name="NVIDIA H100 80GB HBM3", links=(link,), num_links=1)


def test_nvlink_crc_thresholds_follow_dcgm() -> None:
    warn = g8_nvlink_errors(snap((link_gpu({**ZERO, "crc_flit": 5}),)), EXP)
    assert [(f.severity, f.subject) for f in warn] == [(Severity.WARN, "gpu0 link 0")]
    crit = g8_nvlink_errors(snap((link_gpu({**ZERO, "crc_data": 1000}),)), EXP)  # 100/s over 10 s
    assert crit[0].severity is Severity.CRIT and "100" in crit[0].observed
    replay = g8_nvlink_errors(snap((link_gpu({**ZERO, "recovery": 1}),)), EXP)
    assert replay[0].severity is Severity.CRIT


def test_pcie_replay_rate_limit_is_31_per_minute_at_gen5_x16() -> None:
    base = Gpu(index=0, name="x", pcie=Pcie(5, 5, 5, 16, 16), pcie_replay_t0=100)
    ok = dataclasses.replace(base, pcie_replay_t1=105)  # 30/min over 10 s
    bad = dataclasses.replace(base, pcie_replay_t1=106)  # 36/min
    assert g13_pcie_replays(snap((ok,)), EXP) == []
    found = g13_pcie_replays(snap((bad,)), EXP)
    assert found[0].severity is Severity.WARN and found[0].expected == "<= 31/min"


def test_fabric_health_mask_decoding() -> None:
    healthy = 2 | 2 << 2 | 2 << 4 | 2 << 6 | 1 << 8
    gpu = Gpu(index=0, name="x", fabric=GpuFabricInfo(3, 0, healthy))
    assert g9_fabric(snap((gpu,)), EXP) == []
    degraded = dataclasses.replace(gpu, fabric=GpuFabricInfo(3, 0, healthy & ~0x3 | 1))
    assert g9_fabric(snap((degraded,)), EXP)[0].observed == "DEGRADED_BW"
    progress = dataclasses.replace(gpu, fabric=GpuFabricInfo(2, 0, 0))
    assert g9_fabric(snap((progress,)), EXP)[0].severity is Severity.WARN


def test_recovery_action_drain_p2p_is_warn_others_crit() -> None:
    gpu = Gpu(index=0, name="x", recovery_action=3)
    assert g18_recovery(snap((gpu,)), EXP)[0].severity is Severity.WARN
    assert g18_recovery(snap((dataclasses.replace(gpu, recovery_action=2),)), EXP)[0].observed == "NODE_REBOOT"


def test_power_cap_and_brake() -> None:
    gpu = Gpu(index=0, name="x", power=Power(300000, 500000, 700000), clocks_event_reasons=0x80)
    found = g20_power(snap((gpu,)), EXP)
    assert [(f.severity, f.observed) for f in found] == [(Severity.WARN, "500 W limit"), (Severity.CRIT,
                                                                                          "HW power brake")]


def port(t0: dict[str, int], t1: dict[str, int]) -> Nic:
    p = IbPort("mlx5_0", 1, "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand", "0x11", "0x1", t0, t1)
    return Nic("mlx5_0", "MT4129", "28.39.2048", PciDevice("0000:19:00.0", ("pci0000:15",), 0), "32.0 GT/s PCIe",
               "32.0 GT/s PCIe", 16, 16, (p,))


def test_rdma_degradation_rates() -> None:
    assert r6_degradation(snap(nics=(port({"port_rcv_errors": 0}, {"port_rcv_errors": 100}),)), EXP) == []
    found = r6_degradation(snap(nics=(port({"port_rcv_errors": 0}, {"port_rcv_errors": 101}),)), EXP)
    assert found[0].severity is Severity.WARN and found[0].observed == "port_rcv_errors 10.1/s"
    sym = r6_degradation(snap(nics=(port({"symbol_error": 10}, {"symbol_error": 11}),), interval_s=3600), EXP)
    assert sym == []  # 1/h is within 120/h
    assert r6_degradation(snap(nics=(port({"symbol_error": 0}, {"symbol_error": 1}),)), EXP)[0].severity is \
        Severity.CRIT  # one error in 10 s reads as 360/h


def test_kernel_rate_and_state_strings() -> None:
    assert parse_rate("400 Gb/sec (4X NDR)") == (400.0, 4, "NDR")
    assert parse_rate("200 Gb/sec (2X NDR)") == (200.0, 2, "NDR")
    assert parse_rate("56 Gb/sec (4X FDR)") == (56.0, 4, "FDR")
    assert parse_rate("garbage") is None
    assert parse_gt_s("32.0 GT/s PCIe") == parse_gt_s("32 GT/s") == 32.0
    assert state_code("4: ACTIVE") == 4 and state_code("5: LinkUp") == 5 and state_code("weird") is None


def test_affinity_levels() -> None:
    root = ("pci0000:15", "0000:15:01.0", "0000:16:00.0")
    gpu = PciDevice("0000:18:00.0", (*root, "0000:17:00.0"), 0)
    assert affinity(gpu, PciDevice("0000:19:00.0", (*root, "0000:17:01.0"), 0)) == "PIX"
    assert affinity(gpu, PciDevice("0000:1a:00.0", (*root, "0000:17:02.0", "0000:1b:00.0"), 0)) == "PXB"
    assert affinity(gpu, PciDevice("0000:20:00.0", ("pci0000:15", "0000:15:02.0"), 0)) == "PHB"
    assert affinity(gpu, PciDevice("0000:30:00.0", ("pci0000:2e", "0000:2e:01.0"), 0)) == "NODE"
    assert affinity(gpu, PciDevice("0000:c2:00.0", ("pci0000:c0", "0000:c0:01.0"), 1)) == "SYS"


chains = st.lists(st.sampled_from(["pci0000:15", "0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:17:01.0"]),
                  min_size=1, max_size=5).map(tuple)


@settings(max_examples=60, deadline=None)
@given(chains, chains, st.integers(-1, 1), st.integers(-1, 1))
def test_affinity_is_symmetric_and_a_known_level(a: tuple[str, ...], b: tuple[str, ...], na: int, nb: int) -> None:
    x, y = PciDevice("x", a, na), PciDevice("y", b, nb)
    assert affinity(x, y) == affinity(y, x)
    assert affinity(x, y) in ("PIX", "PXB", "PHB", "NODE", "SYS")


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 1600), st.sampled_from([1, 2, 4, 8, 12]), st.sampled_from(["HDR", "NDR", "XDR", "EDR"]))
def test_parse_rate_round_trips_kernel_format(gbps: int, width: int, speed: str) -> None:
    assert parse_rate(f"{gbps} Gb/sec ({width}X {speed})") == (float(gbps), width, speed)


def test_xid_parsing_and_severity() -> None:
    text = ("[  12.3] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
            "[  13.0] NVRM: Xid (PCI:0000:2a:00): 13, pid=99, Graphics Exception\n"
            "[  14.0] NVRM: Xid (PCI:0000:2a:00): 13, pid=99, Graphics Exception\n"
            "[  15.0] NVRM: Xid (PCI:0000:3a:00): 63, pid=0, row remap pending\n")
    assert parse_xids(text) == [("0000:18:00", 79), ("0000:2a:00", 13), ("0000:2a:00", 13), ("0000:3a:00", 63)]
    assert (xid_severity(79), xid_severity(13), xid_severity(63)) == (Severity.CRIT, Severity.INFO, Severity.WARN)
    gpus = tuple(Gpu(index=i, name="x", bus_id=b) for i, b in enumerate(["0000:18:00.0", "0000:2a:00.0"]))
    found = xid_findings(text, snap(gpus))
    assert [(f.subject, f.severity, f.observed) for f in found] == [
        ("PCI 0000:3a:00", Severity.WARN, "Xid 63 x1"), ("gpu0", Severity.CRIT, "Xid 79 x1"),
        ("gpu1", Severity.INFO, "Xid 13 x2")]


def test_sku_table_lookup() -> None:
    assert find_sku(None, 0x233010DE).key == "H100-SXM"  # type: ignore[union-attr]
    assert find_sku("NVIDIA H800 80GB HBM3", None).num_nvlinks == 8  # type: ignore[union-attr]
    assert find_sku("NVIDIA Tesla T4", 0x1EB810DE) is None


def test_fail_on_warn_and_only_parsing() -> None:
    gpu = Gpu(index=0, name="x", persistence_mode=0)
    s = snap((gpu,))
    one = dataclasses.replace(EXP, num_gpus=1)
    report = api.run_checks(s, one, areas=("gpu",), fail_on=Severity.CRIT)
    assert report.summary["crit"] == 0 and report.summary["warn"] >= 1 and report.exit_code == 0
    assert api.run_checks(s, one, areas=("gpu",), fail_on=Severity.WARN).exit_code == 1
    assert all(area_of(f.check) in ("gpu", "nvlink") for f in report.findings)
    assert api.parse_only("gpu, rdma") == ("gpu", "rdma")
    assert api.parse_only(None) == api.AREAS


def test_profiles_map_to_their_sku_rows() -> None:
    from dsctl.commands._common import profile_store
    store = profile_store()
    assert {n: getattr(sku_for_profile(store.node(n)), "key", None) for n in ("h800-hgx", "h100-hgx", "h200-hgx")} \
        == {"h800-hgx": "H800-SXM", "h100-hgx": "H100-SXM", "h200-hgx": "H200-SXM"}
    custom = dataclasses.replace(store.node("h800-hgx"), name="my-box", gpu_model="NVIDIA L40S")
    assert sku_for_profile(custom) is find_sku("NVIDIA L40S", None)
    odd = dataclasses.replace(store.node("h800-hgx"), name="my-box", gpu_model="Some Accelerator")
    assert sku_for_profile(odd) is None
    assert expectations_for(odd, find_sku("NVIDIA H100 80GB HBM3", None), "NVIDIA H100 80GB HBM3").mismatch is None


def test_unknown_gpus_under_a_known_profile_keep_its_counts_and_hint() -> None:
    from dsctl.commands._common import profile_store
    from dsctl.health.checks_gpu import g4_sku, g6_nvlink_active
    exp = expectations_for(profile_store().node("h100-hgx"), None, "NVIDIA A100-SXM4-80GB")
    assert exp.mismatch is not None and exp.mismatch.detected_sku is None
    assert exp.num_nvlinks_per_gpu == 18
    links = tuple(NvLink(i, i < 12, 4, 2, "0000:05:00.0", ZERO, ZERO) for i in range(12))
    gpu = Gpu(index=0, name="NVIDIA A100-SXM4-80GB", pci_device_id=0x20B210DE, links=links, num_links=12)
    node = snap((gpu,))
    g6 = g6_nvlink_active(node, exp)
    assert [(f.severity, f.observed) for f in g6] == [(Severity.CRIT, "12 active")]
    assert "node profile is wrong: h100-hgx describes NVIDIA H100 80GB HBM3" in g6[0].remedy
    g4 = {f.severity: f for f in g4_sku(node, exp)}
    assert set(g4) == {Severity.INFO, Severity.WARN}
    assert "not in the SKU table" in g4[Severity.WARN].message


def test_no_mismatch_without_a_gpu_name() -> None:
    from dsctl.commands._common import profile_store
    exp = expectations_for(profile_store().node("h100-hgx"), None, None)
    assert exp.mismatch is None and exp.num_nvlinks_per_gpu == 18


def test_check_ids_are_written_only_in_the_check_table() -> None:
    """A check function's findings carry the id the table gives it (run_checks stamps it): no G../R.. literal in
    the check bodies, and every finding of a report names a check of the table."""
    import re
    from pathlib import Path

    from dsctl.health.checks import BY_ID

    health = Path(__file__).resolve().parents[2] / "dsctl" / "health"
    for body in ("checks_gpu.py", "checks_rdma.py"):
        assert not re.search(r'"[GR]\d+"', (health / body).read_text()), body
    assert "?" not in BY_ID
    gpu = Gpu(index=0, name="x", persistence_mode=0)
    report = api.run_checks(snap((gpu,)), dataclasses.replace(EXP, num_gpus=1), areas=("gpu", "nvlink", "rdma"))
    g5 = [f for f in report.findings if f.message.startswith("persistence mode is off")]
    assert [f.check for f in g5] == ["G5"]
    assert all(f.check in BY_ID for f in report.findings)
