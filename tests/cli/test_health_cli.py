"""dsctl health through the real entry point: exit codes, JSON shape, error lines, record/replay."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml
import pytest
import yaml

DATA = Path(__file__).resolve().parents[1] / "data" / "health"
Cli = Callable[..., Any]


def rec(name: str) -> str:
    return str(DATA / f"{name}.yaml")


def test_healthy_node_exits_0_with_stable_json_shape(cli: Cli) -> None:
    r = cli("health", "check", "--from-record", rec("hgx_h800_healthy"), "--format", "json")
    assert r.exit_code == 0, r.stderr
    data = r.json()
    assert set(data) == {"dsctl", "node", "summary", "fail_on", "verdict", "findings", "metrics"}
    assert data["summary"] == {"crit": 0, "warn": 0, "info": 0, "skip": 0, "ok": 32}
    assert data["verdict"] == "pass"
    assert data["node"]["num_gpus"] == 8 and data["node"]["gpu_name"] == "NVIDIA H800 80GB HBM3"
    assert set(data["findings"][0]) == {"check", "severity", "area", "subject", "observed", "expected", "message",
                                        "remedy", "gpu", "gpu_uuid", "gpu_serial", "value", "unit"}
    assert data["node"]["source"].startswith("--from-record ")
    assert data["dsctl"]["exit_code"] == 0


def test_crit_finding_exits_1_and_is_listed_first(cli: Cli) -> None:
    r = cli("health", "check", "--from-record", rec("nvlink_link_down"), "--format", "json")
    assert r.exit_code == 1
    first = r.json()["findings"][0]
    assert (first["check"], first["severity"], first["subject"], first["area"]) == ("G6", "CRIT", "gpu3", "nvlink")
    assert (first["gpu"], first["value"], first["unit"]) == (3, 17, "links")  # typed: no "gpu3" to parse back


def test_fail_on_warn(cli: Cli) -> None:
    assert cli("health", "check", "--from-record", rec("row_remap_pending"), "-f", "json").exit_code == 0
    assert cli("health", "check", "--from-record", rec("row_remap_pending"), "--fail-on", "warn",
               "-f", "json").exit_code == 1


def test_only_filters_areas(cli: Cli) -> None:
    r = cli("health", "check", "--from-record", rec("nvlink_link_down"), "--only", "rdma", "-f", "json")
    assert r.exit_code == 0
    assert {f["area"] for f in r.json()["findings"]} == {"rdma"}


def test_table_output_has_summary_line(cli: Cli) -> None:
    r = cli("health", "check", "--from-record", rec("ib_rate_hdr_downgrade"))
    assert r.exit_code == 1
    assert "200 Gb/sec (4X HDR)" in r.stdout and "FAIL (fail on crit): 1 crit" in r.stdout


def test_kernel_log_adds_xid_findings(cli: Cli, tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text("kernel: NVRM: Xid (PCI:0000:9a:00): 79, pid=1, GPU has fallen off the bus.\n")
    r = cli("health", "check", "--from-record", rec("hgx_h800_healthy"), "--kernel-log", str(log), "-f", "json")
    assert r.exit_code == 1
    g22 = [f for f in r.json()["findings"] if f["check"] == "G22"]
    assert [(f["severity"], f["subject"]) for f in g22] == [("CRIT", "gpu4")]


def test_live_check_without_driver_exits_3_with_one_line(cli: Cli) -> None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has a working NVIDIA driver")
    r = cli("health", "check", "--interval-s", "0.01")
    assert r.exit_code == 3
    assert r.stderr.startswith("error: NVML is not usable on this machine")
    assert "Traceback" not in r.stderr and r.stdout == ""


@pytest.mark.parametrize(("args", "needle"), [
    (["--only", "gpus"], "--only: unknown area gpus"),
    (["--fail-on", "info"], "--fail-on: 'info' is not valid"),
    (["--node-profile", "h900-hgx"], "h900-hgx"),
    (["--interval-s=-1"], "--interval-s must be 0 (one sample, rate checks skipped) or a number of seconds up to 3600"),
    (["--interval-s", "4000"], "--interval-s must be 0 (one sample, rate checks skipped) or a number of seconds up to"),
    (["--interval-s", "5", "--from-record", rec("hgx_h100_healthy")], "--interval-s does not apply to --from-record"),
])
def test_bad_options_exit_2(cli: Cli, args: list[str], needle: str) -> None:
    if "--from-record" not in args:
        args = [*args, "--from-record", rec("hgx_h100_healthy")]
    r = cli("health", "check", *args)
    assert r.exit_code == 2
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_bad_record_files_exit_2_naming_file_and_key(cli: Cli, tmp_path: Path) -> None:
    missing = cli("health", "check", "--from-record", str(tmp_path / "nope.yaml"))
    assert missing.exit_code == 2 and "nope.yaml: file not found" in missing.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("gpus: [\n")
    r = cli("health", "check", "--from-record", str(broken))
    assert r.exit_code == 2 and "is not valid YAML" in r.stderr
    data = yaml.safe_load(Path(rec("hgx_h100_healthy")).read_text())
    data["gpu_defaults"]["ecc"]["volatile_drma"] = 1
    typo = tmp_path / "typo.yaml"
    typo.write_text(yaml.safe_dump(data))
    r = cli("health", "check", "--from-record", str(typo))
    assert r.exit_code == 2
    assert "typo.yaml: unknown key gpu_defaults.ecc.volatile_drma" in r.stderr


def test_record_writes_a_replayable_file(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "node.yaml"
    r = cli("health", "record", "--from-record", rec("volatile_dbe"), "--out", str(out), "-f", "json")
    assert r.exit_code == 0, r.stderr
    assert r.json()["num_gpus"] == 8 and out.exists()
    again = cli("health", "check", "--from-record", str(out), "-f", "json")
    assert again.exit_code == 1
    crit = [(f["check"], f["subject"]) for f in again.json()["findings"] if f["severity"] == "CRIT"]
    assert crit == [("G15", "gpu6")]


def test_record_into_missing_folder_exits_2_without_partial_file(cli: Cli, tmp_path: Path) -> None:
    r = cli("health", "record", "--from-record", rec("hgx_h100_healthy"), "--out", str(tmp_path / "no" / "x.yaml"))
    assert r.exit_code == 2 and "does not exist" in r.stderr
    assert not (tmp_path / "no").exists()


def test_show_pairs_gpus_with_nics(cli: Cli) -> None:
    r = cli("health", "show", "--from-record", rec("nic_wrong_numa"), "-f", "json")
    assert r.exit_code == 0
    gpus = r.json()["gpus"]
    assert [(g["nic"], g["level"]) for g in gpus][:3] == [("mlx5_0", "PIX"), ("mlx5_1", "PIX"), ("mlx5_0", "NODE")]
    assert "0000:ab:00.0" in cli("health", "show", "--from-record", rec("hgx_h800_healthy")).stdout


def test_rdma_only_live_reads_a_sysfs_root(cli: Cli, tmp_path: Path) -> None:
    from dsctl.health.backends.sysfs import render_sysfs, write_counters
    from dsctl.health.record.format import normalize

    node = normalize(yaml.safe_load(Path(rec("ib_port_down")).read_text()), "ib_port_down")
    render_sysfs(node, tmp_path)
    write_counters(node, tmp_path, "t1")
    r = cli("health", "check", "--only", "rdma", "--sysfs-root", str(tmp_path), "--node-profile", "h800-hgx",
            "--interval-s", "0.01", "-f", "json")
    assert r.exit_code == 1, r.stderr
    crit = [(f["check"], f["subject"]) for f in r.json()["findings"] if f["severity"] == "CRIT"]
    assert crit == [("R2", "mlx5_3/1")]


def test_sysfs_root_and_record_exclude_each_other(cli: Cli, tmp_path: Path) -> None:
    r = cli("health", "check", "--from-record", rec("hgx_h100_healthy"), "--sysfs-root", str(tmp_path))
    assert r.exit_code == 2 and "--sysfs-root and --from-record exclude each other" in r.stderr


HOST = {"hostname": "gpu-a17", "kernel_release": "5.15.0-105-generic", "num_logical_cpus": 224,
        "memory_total_bytes": 2 * 1024**4, "boot_time_s": 1793520000.0}


def _with_host(tmp_path: Path, host: Any) -> Path:
    data = yaml.safe_load(Path(rec("hgx_h800_healthy")).read_text())
    data["host"] = host
    path = tmp_path / "with_host.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_record_round_trip_keeps_host_facts(cli: Cli, tmp_path: Path) -> None:
    src = _with_host(tmp_path, HOST)
    out = tmp_path / "again.yaml"
    assert cli("health", "record", "--from-record", str(src), "--out", str(out)).exit_code == 0
    assert yaml.safe_load(out.read_text())["host"] == HOST
    r = cli("health", "check", "--from-record", str(out), "-f", "json")
    assert r.json()["node"]["host"] == HOST
    table = cli("health", "check", "--from-record", str(out)).stdout
    assert "host: kernel 5.15.0-105-generic, 224 CPUs, 2.0 TiB RAM, booted 2026-11-01 08:00 UTC" in table
    assert "224 CPUs" in cli("health", "show", "--from-record", str(out)).stdout
    assert cli("health", "show", "--from-record", str(out), "-f", "json").json()["host"] == HOST


def test_records_without_host_facts_still_replay(cli: Cli) -> None:
    r = cli("health", "check", "--from-record", rec("pcie_l40s_no_nvlink"), "-f", "json")
    assert r.exit_code == 0 and r.json()["node"]["host"] is None


@pytest.mark.parametrize("host, needle", [
    ({"num_logical_cpus": "many"}, "host.num_logical_cpus"),
    ({"memory_total_bytes": -1}, "host.memory_total_bytes"),
    ({"boot_time_s": float("nan")}, "host.boot_time_s"),
    ({"cpus": 4}, "unknown key host.cpus"),
    ([1, 2], "host must be a mapping"),
])
def test_bad_host_facts_exit_2_naming_the_field(cli: Cli, tmp_path: Path, host: Any, needle: str) -> None:
    r = cli("health", "check", "--from-record", str(_with_host(tmp_path, host)))
    assert r.exit_code == 2 and needle in r.stderr and "Traceback" not in r.stderr


def test_live_rdma_check_carries_this_hosts_facts(cli: Cli, tmp_path: Path) -> None:
    r = cli("health", "check", "--only", "rdma", "--sysfs-root", str(tmp_path), "--interval-s", "0.001", "-f", "json")
    host = r.json()["node"]["host"]
    assert host["num_logical_cpus"] >= 1 and host["memory_total_bytes"] > 2**26
    assert host["hostname"] and host["kernel_release"]
    assert 0 < host["boot_time_s"] < time.time()


def test_rdma_only_title_does_not_print_none_for_gpus(cli: Cli, tmp_path: Path) -> None:
    out = cli("health", "check", "--only", "rdma", "--sysfs-root", str(tmp_path), "--interval-s", "0.001").stdout
    assert "None" not in out and "GPUs not sampled" in out


def test_show_table_keeps_bus_ids_whole_at_80_columns(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = cli("health", "show", "--from-record", rec("hgx_h800_healthy")).stdout
    assert "0000:18:00.0" in out and "mlx5_0" in out and "28.39.2048" in out
    assert max(len(line) for line in out.splitlines()) <= 80


@pytest.mark.parametrize("content, needle", [
    (b"\xff\xfe\x00bad", "not UTF-8"),
    (b"interval_s: .nan\n", "interval_s must be 0 (one sample) or a positive number"),
    (b"device_count: 99999999999\n", "device_count must be an integer from 0 to 64"),
    (b"infiniband: {devices: [{name: x, bdf: zz}]}\n", "devices[0].bdf 'zz' is not a PCI address"),
])
def test_more_bad_records_exit_2(cli: Cli, tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    r = cli("health", "show", "--from-record", str(path))
    assert r.exit_code == 2 and needle in r.stderr, r.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "1e9"])
def test_interval_must_be_finite_and_bounded(cli: Cli, tmp_path: Path, value: str) -> None:
    r = cli("health", "check", "--only", "rdma", "--sysfs-root", str(tmp_path), "--interval-s", value)
    assert r.exit_code == 2 and "--interval-s" in r.stderr


def test_record_out_that_is_a_folder_exits_2(cli: Cli, tmp_path: Path) -> None:
    r = cli("health", "record", "--from-record", rec("hgx_h800_healthy"), "--out", str(tmp_path))
    assert r.exit_code == 2 and "is a folder" in r.stderr


def test_record_on_an_unwritable_file_system_exits_2(cli: Cli) -> None:
    r = cli("health", "record", "--from-record", rec("hgx_h800_healthy"), "--out", "/proc/node.yaml")
    assert r.exit_code == 2 and "--out /proc/node.yaml: cannot write" in r.stderr


def test_mismatched_node_profile_is_a_warn_naming_both_models(cli: Cli) -> None:
    args = ("health", "check", "--from-record", rec("hgx_h800_healthy"), "--node", "h100-hgx")
    r = cli(*args, "--format", "json")
    assert r.exit_code == 0, r.stderr
    found = [(f["check"], f["severity"]) for f in r.json()["findings"] if f["severity"] != "OK"]
    assert found == [("G4", "WARN")]
    g4 = r.json()["findings"][0]
    assert "H800-SXM" in g4["observed"] and "NVIDIA H100 80GB HBM3" in g4["expected"]
    assert cli(*args, "--fail-on", "warn").exit_code == 1


def test_roce_fixture_under_a_roce_profile_fires_r11(cli: Cli) -> None:
    r = cli("--profiles-dir", str(DATA / "profiles"), "health", "check", "--from-record", rec("roce_no_v2_gid"),
            "--node-profile", "h800-roce", "--format", "json")
    assert r.exit_code == 1, r.stderr
    data = r.json()
    assert data["node"]["expectations"] == "node profile h800-roce + SKU H800-SXM"
    found = [(f["check"], f["severity"], f["subject"]) for f in data["findings"] if f["severity"] != "OK"]
    assert found == [("R11", "CRIT", "mlx5_4/1")]
    assert data["findings"][0]["observed"] == "2 GIDs, types: IB/RoCE v1"


def test_old_option_spellings_still_work_with_a_deprecation_note(cli: Cli) -> None:
    """--node (health) became --node-profile; the old spelling is a hidden alias for one release."""
    new = cli("health", "check", "--from-record", rec("hgx_h800_healthy"), "--node-profile", "h100-hgx", "-f", "json")
    old = cli("health", "check", "--from-record", rec("hgx_h800_healthy"), "--node=h100-hgx", "-f", "json")
    assert old.exit_code == new.exit_code == 0 and old.stdout == new.stdout
    assert [f["check"] for f in new.json()["findings"] if f["severity"] == "WARN"] == ["G4"]  # the profile applied
    assert old.stderr.splitlines()[0] == "warning: --node is deprecated; use --node-profile"
    assert "warning" not in new.stderr
    assert "--node " not in cli("health", "check", "--help").stdout.replace("--node-profile", "")
