"""Issue 10 items 4-5 and issue 15 (class 1, counter resets) for dsctl health: the fake NVML signature contract,
record paths confined to their folder, typed record fields, counters that go backwards, one-sample runs, GPU
identity on findings, DMA-BUF and IBGDA readiness."""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import itertools
import os
from pathlib import Path
from typing import Any

import pynvml
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsctl.commands.health import take_snapshot
from dsctl.errors import InputError
from dsctl.health import api
from dsctl.health.backends.fake import FakeNvml
from dsctl.health.backends.sysfs import render_sysfs
from dsctl.health.model import NodeSnapshot, Severity
from dsctl.health.record.format import normalize
from dsctl.health.record.write import snapshot_record
from dsctl.profiles.loader import ENV_VAR, ProfileStore
from dsctl.safepath import safe_join

DATA = Path(__file__).resolve().parents[1] / "data" / "health"
ALL = ("gpu", "nvlink", "rdma")
RESET = "counter went backwards: reset or wrap, rate unknown"


@functools.cache
def raw(name: str) -> dict[str, Any]:
    data = yaml.safe_load((DATA / f"{name}.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def record(name: str) -> dict[str, Any]:
    return copy.deepcopy(raw(name))


def replay_data(data: dict[str, Any], tmp_path: Path, interval_s: float | None = None) -> NodeSnapshot:
    path = tmp_path / "node.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return take_snapshot(path, None, interval_s, ALL)


def report(snap: NodeSnapshot, expect_gpus: int | None = None) -> api.HealthReport:
    store = ProfileStore.from_environment({ENV_VAR: str(DATA / "profiles")})
    return api.run_checks(snap, api.choose_expectations(snap, None, store.node, expect_gpus=expect_gpus))


def problems(rep: api.HealthReport) -> list[tuple[str, str, str]]:
    return [(f.check, f.severity.value, f.subject) for f in rep.findings
            if f.severity in (Severity.CRIT, Severity.WARN, Severity.INFO)]


# ---- the fake NVML module: signatures, not only names -----------------------------------------------------------

def _shape(fn: Any, skip_self: bool) -> list[tuple[str, str, bool]]:
    params = list(inspect.signature(fn).parameters.values())[1 if skip_self else 0:]
    return [(p.name, p.kind.name, p.default is inspect.Parameter.empty) for p in params]


@pytest.mark.parametrize("name", FakeNvml.implemented())
def test_fake_function_has_the_real_pynvml_signature(name: str) -> None:
    """Parameter names, kinds, count and which have defaults match nvidia-ml-py, so the adapter's calls (positional
    or by keyword) bind the same way on the fake and on a GPU node."""
    assert _shape(getattr(FakeNvml, name), skip_self=True) == _shape(getattr(pynvml, name), skip_self=False)


def test_the_signature_test_would_catch_a_renamed_parameter() -> None:
    def nvmlDeviceGetNvLinkState(self: Any, handle: Any, link: int) -> int:
        return 0

    assert _shape(nvmlDeviceGetNvLinkState, True) != _shape(pynvml.nvmlDeviceGetNvLinkState, False)


# ---- issue 15 class 1: every record field that becomes a path stays inside the temporary folder -----------------

HOSTILE = ["/tmp/dsctl-escape", "../../../dsctl-escape", "mlx5_0/../../../../dsctl-escape", "..", ""]


def _nic_field(data: dict[str, Any], field: str, value: Any) -> None:
    nic = data["infiniband"]["devices"][0]
    if field in ("counters_t0", "counters_t1", "hw_counters_t0", "hw_counters_t1"):
        nic[field] = {value: 1}
    elif field == "netdevs":
        nic["netdevs"] = {value: "up"}
    elif field == "gids.ndev":
        nic["gids"] = [{"index": 1, "gid": "fe80:0000:0000:0000:0000:0000:0000:0001", "type": "RoCE v2",
                        "ndev": value}]
    elif field == "gids.index":
        nic["gids"] = [{"index": value, "gid": "fe80:0000:0000:0000:0000:0000:0000:0001"}]
    else:
        nic[field] = value


NIC_PATH_FIELDS = ["name", "bdf", "pci_path", "port", "counters_t0", "counters_t1", "hw_counters_t0",
                   "hw_counters_t1", "netdevs", "gids.ndev", "gids.index"]


@pytest.mark.parametrize("field", NIC_PATH_FIELDS)
@pytest.mark.parametrize("value", HOSTILE)
def test_nic_fields_that_become_paths_are_refused(tmp_path: Path, field: str, value: str) -> None:
    data = record("hgx_h800_healthy")
    _nic_field(data, field, value)
    root = tmp_path / "root"
    with pytest.raises(InputError) as err:
        render_sysfs(normalize(data, "evil.yaml"), root)
    top = field.split(".")[0]
    assert f"evil.yaml: infiniband.devices[0].{top}" in str(err.value) or "infiniband.devices[0]" in str(err.value)
    assert not (tmp_path / "dsctl-escape").exists() and not Path("/tmp/dsctl-escape").exists()


@pytest.mark.parametrize("value", ["/tmp/dsctl-escape", "pci0000:15/../../../dsctl-escape", "pci0000:15/evil"])
def test_gpu_pci_path_is_a_bridge_chain_only(tmp_path: Path, value: str) -> None:
    data = record("hgx_h100_healthy")
    data["gpus"][2]["pci_path"] = value
    with pytest.raises(InputError, match=r"gpus\[2\]\.pci_path"):
        render_sysfs(normalize(data, "evil.yaml"), tmp_path / "root")


@pytest.mark.parametrize(("field", "value"), [("bus", 256), ("device", -1), ("domain", 2**40)])
def test_gpu_pci_numbers_are_bounded(field: str, value: int) -> None:
    data = record("hgx_h100_healthy")
    data["gpus"][0]["pci"] = {field: value}
    with pytest.raises(InputError, match=rf"gpus\[0\]\.pci\.{field}"):
        normalize(data, "evil.yaml")


def test_the_renderer_confines_paths_even_without_validation(tmp_path: Path) -> None:
    """Second line of defence: render_sysfs joins through safe_join, so a node dict that skipped normalize (or a
    future field the validator forgets) still cannot leave the root."""
    node = normalize(record("hgx_h800_healthy"), "ok.yaml")
    node["nics"][0]["counters_t0"] = {str(tmp_path / "victim"): 7}
    (tmp_path / "victim").write_text("keep\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"infiniband\.devices\[0\]\.counters_t0"):
        render_sysfs(node, tmp_path / "root")
    assert (tmp_path / "victim").read_text(encoding="utf-8") == "keep\n"
    node = normalize(record("hgx_h800_healthy"), "ok.yaml")
    node["nics"][1]["name"] = "../../../escaped"
    with pytest.raises(InputError, match=r"infiniband\.devices\[1\]\.name"):
        render_sysfs(node, tmp_path / "root2")
    assert not (tmp_path / "escaped").exists()


def test_safe_join_rules(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sys").mkdir(parents=True)
    assert safe_join(root, "sys", "class", "a_b") == root / "sys" / "class" / "a_b"
    for bad in ("/etc/passwd", "..", "a/../..", "a//b", "", "a\0b", "./x"):
        with pytest.raises(InputError, match=r"field\.x"):
            safe_join(root, "sys", bad, field="field.x")
    (tmp_path / "outside").mkdir()
    (root / "sys" / "link").symlink_to(tmp_path / "outside")
    with pytest.raises(InputError, match="leads outside"):
        safe_join(root, "sys", "link", "file", field="f")
    (root / "sys" / "inner").symlink_to(root / "sys")
    assert safe_join(root, "sys", "inner", "file") == root / "sys" / "inner" / "file"


# ---- typed record fields: wrong types are bad input (exit 2), never a crash -------------------------------------

@pytest.mark.parametrize(("path", "value", "needle"), [
    ("gpus.0.pcie", {"width": "x16"}, "gpus[0].pcie.width must be an integer"),
    ("gpus.1.pci", {"bus": "ab"}, "gpus[1].pci.bus must be an integer"),
    ("gpus.2.nvlink", {"state": ["up"] * 18}, "gpus[2].nvlink.state must be an integer or a list of integers"),
    ("gpus.3", {"persistence_mode": 1.5}, "gpus[3].persistence_mode must be an integer"),
    ("gpus.3", {"serial": 1234}, "gpus[3].serial must be a string"),
    ("gpus.0.ecc", {"volatile_dram": 2**70}, "gpus[0].ecc.volatile_dram must be an integer"),
    ("gpus.0", {"errors": {"nvmlDeviceGetPowerUsage": ["NOT_SUPPORTED"]}}, "gpus[0].errors maps"),
    ("infiniband.devices.0", {"counters_t1": {"symbol_error": "12"}}, "counters_t1.symbol_error must be an integer"),
    ("infiniband.devices.0", {"counters_t0": {"symbol_error": -1}}, "counters_t0.symbol_error must be an integer"),
    ("infiniband.devices.0", {"port": "one"}, "devices[0].port must be an integer"),
    ("infiniband.devices.0", {"numa_node": "0"}, "devices[0].numa_node must be an integer"),
    ("infiniband.devices.0", {"lid": "zz"}, "devices[0].lid 'zz' is not a LID"),
    ("infiniband.devices.0", {"pcie": {"current_link_width": "x8"}}, "pcie.current_link_width must be an integer"),
])
def test_non_integer_fields_are_input_errors(path: str, value: dict[str, Any], needle: str) -> None:
    data = record("hgx_h800_healthy")
    target: Any = data
    for part in path.split("."):
        target = target[int(part)] if part.isdigit() else target.setdefault(part, {})
    target.update(value)
    with pytest.raises(InputError) as err:
        normalize(data, "typed.yaml")
    assert needle in str(err.value)


def test_duplicate_nic_names_are_refused() -> None:
    data = record("hgx_h800_healthy")
    data["infiniband"]["devices"][1]["name"] = "mlx5_0"
    with pytest.raises(InputError, match=r"devices\[1\]\.name 'mlx5_0' appears twice"):
        normalize(data, "dup.yaml")


# ---- counters that go backwards ----------------------------------------------------------------------------------

def test_nvlink_and_pcie_counters_going_backwards_are_reported(tmp_path: Path) -> None:
    data = record("hgx_h100_healthy")
    data["gpus"][2]["nvlink"] = {"errors_t0": {"replay": [0, 9] + [0] * 16, "recovery": 0, "crc_flit": 0,
                                               "crc_data": 0},
                                 "errors_t1": {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0}}
    data["gpus"][4]["nvlink"] = {"errors_t0": {"replay": 0, "recovery": 0, "crc_flit": [0] * 17 + [40],
                                               "crc_data": 0},
                                 "errors_t1": {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0}}
    data["gpus"][6]["pcie_replay"] = {"t0": 300, "t1": 2}
    rep = report(replay_data(data, tmp_path))
    assert problems(rep) == [("G8", "WARN", "gpu2 link 1"), ("G8", "INFO", "gpu4 link 17"),
                             ("G13", "INFO", "gpu6")]
    assert all(f.message == RESET for f in rep.findings if f.severity is not Severity.OK)
    assert rep.findings[0].observed == "replay 9 -> 0"


def test_fatal_ib_counter_reset_is_a_warn_not_zero_errors(tmp_path: Path) -> None:
    data = record("hgx_h800_healthy")
    data["infiniband"]["devices"][6].update(counters_t0={"link_downed": 3}, counters_t1={"link_downed": 0})
    rep = report(replay_data(data, tmp_path))
    assert problems(rep) == [("R5", "WARN", "mlx5_6/1")]
    assert rep.findings[0].message == RESET and rep.findings[0].observed == "link_downed 3 -> 0"


@pytest.mark.parametrize(("counter", "top", "expected"), [
    ("symbol_error", 65535, ("R6", "INFO", "mlx5_5/1")),
    ("link_downed", 255, ("R5", "WARN", "mlx5_5/1")),
    ("symbol_error", 65534, None),
])
def test_saturated_pma_counters_are_not_read_as_healthy(tmp_path: Path, counter: str, top: int,
                                                        expected: tuple[str, str, str] | None) -> None:
    data = record("hgx_h800_healthy")
    data["infiniband"]["devices"][5].update(counters_t0={counter: top}, counters_t1={counter: top})
    rep = report(replay_data(data, tmp_path))
    assert problems(rep) == ([expected] if expected else [])
    if expected:
        assert rep.findings[0].message == "counter saturated at its maximum: rate unknown"


def test_degradation_counter_reset_fixture_is_info() -> None:
    snap = take_snapshot(DATA / "ib_counter_reset.yaml", None, None, ALL)
    rep = report(snap)
    assert [(f.message, f.observed) for f in rep.findings if f.severity is Severity.INFO] == [
        (RESET, "symbol_error 40000 -> 12")]


# ---- --interval 0 ------------------------------------------------------------------------------------------------

def test_one_sample_skips_every_rate_check() -> None:
    snap = take_snapshot(DATA / "nvlink_replay_growth.yaml", None, 0.0, ALL)
    assert snap.interval_s == 0
    link = snap.gpus[5].links[2]
    assert link.errors_t0 == link.errors_t1
    rep = report(snap)
    assert problems(rep) == []
    skipped = {f.check: f for f in rep.findings if f.severity is Severity.SKIP}
    assert set(skipped) == {"G8", "G13", "R5", "R6"}
    assert all("--interval-s 0 takes one sample" in f.message for f in skipped.values())
    assert rep.verdict == "pass"


# ---- GPU identity, --expect-gpus, nothing checked ---------------------------------------------------------------

def test_gpu_findings_carry_uuid_and_serial() -> None:
    rep = report(take_snapshot(DATA / "nvlink_link_down.yaml", None, None, ALL))
    g6 = rep.findings[0]
    assert (g6.check, g6.subject) == ("G6", "gpu3")
    assert g6.gpu_uuid == "GPU-h1000000-0000-0000-0000-000000000003"
    assert g6.gpu_serial == raw("nvlink_link_down")["gpus"][3]["serial"]
    data = rep.to_data()["findings"][0]
    assert (data["gpu_uuid"], data["gpu_serial"]) == (g6.gpu_uuid, g6.gpu_serial)
    node_level = [f for f in rep.findings if f.subject == "node"]
    assert node_level and all(f.gpu_uuid is None for f in node_level)


def test_serial_not_supported_is_none_not_an_error(tmp_path: Path) -> None:
    data = record("nvlink_link_down")
    del data["gpus"][3]["serial"]
    rep = report(replay_data(data, tmp_path))
    assert rep.findings[0].gpu_uuid is not None and rep.findings[0].gpu_serial is None


@pytest.mark.parametrize(("expect", "found"), [(8, [("G2", "CRIT", "node")]), (4, [])])
def test_expect_gpus_overrides_the_count(expect: int, found: list[tuple[str, str, str]]) -> None:
    snap = take_snapshot(DATA / "pcie_l40s_no_nvlink.yaml", None, None, ALL)
    rep = report(snap, expect_gpus=expect)
    assert problems(rep) == found
    assert f"--expect-gpus {expect}" in rep.node["expectations"]


def test_only_rdma_without_nics_or_profile_checks_nothing() -> None:
    snap = take_snapshot(DATA / "pcie_l40s_no_nvlink.yaml", None, None, ("rdma",))
    store = ProfileStore.from_environment({ENV_VAR: str(DATA / "profiles")})
    rep = api.run_checks(snap, api.choose_expectations(snap, None, store.node), areas=("rdma",))
    assert rep.summary["ok"] == 0 and rep.exit_code == 0
    assert rep.verdict == "nothing checked"


def test_nvml_permission_denied_is_one_g1_warn_and_gpu_checks_skip() -> None:
    rep = report(take_snapshot(DATA / "nvml_permission_denied.yaml", None, None, ALL))
    assert problems(rep) == [("G1", "WARN", "node")]
    skipped = {f.check: f.message for f in rep.findings if f.severity is Severity.SKIP}
    gpu_checks = {c for c in skipped if c.startswith("G")}
    assert len(gpu_checks) == 19 and all("NO_PERMISSION" in skipped[c] for c in gpu_checks)
    assert {"R9", "R10", "R12"} <= set(skipped)  # about the GPUs: not "OK" when no GPU was read
    assert {f.check for f in rep.findings if f.severity is Severity.OK} >= {"R2", "R3", "R5", "R6"}


# ---- GPUDirect RDMA: peermem or DMA-BUF; IBGDA readiness ---------------------------------------------------------

def test_dmabuf_node_needs_no_peermem(tmp_path: Path) -> None:
    assert raw("hgx_h200_healthy")["nvidia_peermem"] is False
    data = record("hgx_h200_healthy")
    data["host"]["kernel_release"] = "5.4.0-150-generic"
    rep = report(replay_data(data, tmp_path))
    assert problems(rep) == [("R10", "WARN", "node")]
    assert "kernel 5.4.0-150-generic < 5.12" in rep.findings[0].observed


@pytest.mark.parametrize(("params", "gdrdrv", "ready"), [
    ({"EnableStreamMemOPs": 1, "RegistryDwords": "PeerMappingOverride=0x1;"}, True, True),
    ({"EnableStreamMemOPs": 1, "RegistryDwords": "RMSomething=4;PeerMappingOverride=1"}, True, True),
    ({"EnableStreamMemOPs": 1, "RegistryDwords": "PeerMappingOverride=10;"}, True, False),
    ({"EnableStreamMemOPs": 1, "RegistryDwords": "PeerMappingOverride=1;"}, False, False),
    ({"RegistryDwords": "PeerMappingOverride=1;"}, True, False),
])
def test_ibgda_readiness(tmp_path: Path, params: dict[str, Any], gdrdrv: bool, ready: bool) -> None:
    data = record("hgx_h100_healthy")
    data["nvidia_driver"]["params"] = params
    data["gdrdrv"] = gdrdrv
    rep = report(replay_data(data, tmp_path))
    assert problems(rep) == ([] if ready else [("R12", "WARN", "node")])


def test_ibgda_without_driver_params_is_a_skip(tmp_path: Path) -> None:
    data = record("hgx_h100_healthy")
    del data["nvidia_driver"]
    rep = report(replay_data(data, tmp_path))
    r12 = [f for f in rep.findings if f.check == "R12"]
    assert [(f.severity, f.message) for f in r12] == [
        (Severity.SKIP, "IBGDA readiness: /proc/driver/nvidia/params not readable")]


# ---- record round trip of the new readings ----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["retired_pages_pending", "nvml_permission_denied", "xid_48", "hgx_h200_healthy",
                                  "ib_counter_reset"])
def test_new_readings_round_trip_through_a_record(tmp_path: Path, name: str) -> None:
    first = take_snapshot(DATA / f"{name}.yaml", None, None, ALL)
    again = replay_data(snapshot_record(first), tmp_path)
    assert again.gpus == first.gpus and again.nics == first.nics
    assert (again.nvml, again.kernel_log, again.driver) == (first.nvml, first.kernel_log, first.driver)
    assert problems(report(again)) == problems(report(first))


HOSTILE_TEXT = st.lists(st.sampled_from([*"ab0_.-:/ \n", "\0", "\\", "..", "/tmp", "\u00e9"]), max_size=12).map("".join)
CASES = itertools.count()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from([*NIC_PATH_FIELDS, "gpu.pci_path"]), HOSTILE_TEXT)
def test_any_name_either_is_refused_or_stays_inside_the_root(tmp_path: Path, field: str, name: str) -> None:
    """Property: whatever text a record puts in a field that becomes a path, the renderer either refuses it (exit 2)
    or writes only below its root; nothing appears next to the root."""
    data = record("hgx_h800_healthy")
    if field == "gpu.pci_path":
        data["gpus"][0]["pci_path"] = name
    else:
        _nic_field(data, field, name)
    case = tmp_path / f"case{next(CASES)}"
    root = case / "root"
    root.mkdir(parents=True)
    with contextlib.suppress(InputError):
        render_sysfs(normalize(data, "prop.yaml"), root)
    assert [p.name for p in case.iterdir()] == ["root"]
    for path in root.rglob("*"):
        assert os.path.realpath(path).startswith(os.path.realpath(root) + os.sep)


def test_xid_79_names_the_lost_gpu_by_its_pci_slot(tmp_path: Path) -> None:
    data = record("xid79_gpu_lost")
    data["kernel_log"] = "[ 8123.4] NVRM: Xid (PCI:0000:9a:00): 79, pid=1, name=python3, GPU has fallen off the bus.\n"
    rep = report(replay_data(data, tmp_path))
    assert problems(rep) == [("G3", "CRIT", "gpu4"), ("G22", "CRIT", "gpu4")]
