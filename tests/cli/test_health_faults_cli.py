"""dsctl health through the real entry point for issue 10 items 4-5 and issue 15 class 1: topo, --expect-gpus,
--interval 0, nothing-checked verdict, GPU identity in JSON, hostile records (paths, types, huge numbers)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

DATA = Path(__file__).resolve().parents[1] / "data" / "health"
Cli = Callable[..., Any]


def rec(name: str) -> str:
    return str(DATA / f"{name}.yaml")


def write(tmp_path: Path, data: dict[str, Any]) -> str:
    path = tmp_path / "node.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load(Path(rec(name)).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_topo_json_matrix_and_planes(cli: Cli) -> None:
    r = cli("health", "topo", "--from-record", rec("hgx_h800_healthy"), "-f", "json")
    assert r.exit_code == 0, r.stderr
    data = r.json()
    labels = [d["label"] for d in data["devices"]]
    assert labels == [f"GPU{i}" for i in range(8)] + [f"NIC{i}" for i in range(9)]
    m = data["matrix"]
    assert m["GPU0"]["GPU0"] == "X" and m["GPU0"]["GPU7"] == "NV8"
    assert m["GPU0"]["NIC0"] == "PIX" and m["GPU0"]["NIC4"] == "SYS" and m["GPU0"]["NIC1"] == "NODE"
    assert all(m[a][b] == m[b][a] for a in labels for b in labels)
    planes = [(p["nic"], p["gpu"], p["level"], p["plane"]) for p in data["planes"]]
    assert planes == [(f"mlx5_{i}", i, "PIX", i) for i in range(8)]  # mlx5_8 is the Ethernet storage NIC


def test_topo_pairs_a_misplaced_nic_without_displacing_its_neighbours(cli: Cli) -> None:
    data = cli("health", "topo", "--from-record", rec("nic_wrong_numa"), "-f", "json").json()
    planes = {p["nic"]: (p["gpu"], p["level"]) for p in data["planes"]}
    assert planes["mlx5_2"] == (2, "SYS") and planes["mlx5_3"] == (3, "PIX")


def test_topo_table_fits_80_columns_and_has_a_legend(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = cli("health", "topo", "--from-record", rec("hgx_h100_healthy")).stdout
    assert "GPU0 X    NV18" in out and "NIC0: mlx5_0" in out and "PIX = at most one PCIe bridge" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_topo_of_a_roce_node_uses_the_profiles_link_layer(cli: Cli) -> None:
    r = cli("--profiles-dir", str(DATA / "profiles"), "health", "topo", "--from-record", rec("roce_no_v2_gid"),
            "--node-profile", "h800-roce", "-f", "json")
    data = r.json()
    assert data["compute_link_layer"] == "ethernet"
    assert [p["nic"] for p in data["planes"]] == [f"mlx5_{i}" for i in range(9)]


def test_only_rdma_with_nothing_to_check_does_not_pass(cli: Cli) -> None:
    r = cli("health", "check", "--from-record", rec("pcie_l40s_no_nvlink"), "--only", "rdma")
    assert r.exit_code == 0
    assert "NOTHING CHECKED" in r.stdout and "PASS" not in r.stdout
    j = cli("health", "check", "--from-record", rec("pcie_l40s_no_nvlink"), "--only", "rdma", "-f", "json").json()
    assert j["verdict"] == "nothing checked" and j["summary"]["ok"] == 0


def test_expect_gpus(cli: Cli) -> None:
    r = cli("health", "check", "--from-record", rec("pcie_l40s_no_nvlink"), "--expect-gpus", "8", "-f", "json")
    assert r.exit_code == 1
    g2 = [f for f in r.json()["findings"] if f["check"] == "G2"]
    assert [(f["severity"], f["observed"], f["expected"]) for f in g2] == [("CRIT", "4 GPUs", "8 GPUs")]
    assert cli("health", "check", "--from-record", rec("pcie_l40s_no_nvlink"), "--expect-gpus", "4").exit_code == 0
    assert cli("health", "check", "--from-record", rec("pcie_l40s_no_nvlink"), "--expect-gpus", "65").exit_code == 2


def test_interval_0_replays_one_sample(cli: Cli) -> None:
    r = cli("health", "check", "--from-record", rec("ib_link_downed"), "--interval-s", "0", "-f", "json")
    assert r.exit_code == 0, r.stderr
    data = r.json()
    assert data["node"]["interval_s"] == 0
    r5 = next(f for f in data["findings"] if f["check"] == "R5")
    assert r5["severity"] == "SKIP" and "--interval-s 0" in r5["message"]
    assert cli("health", "check", "--from-record", rec("ib_link_downed")).exit_code == 1


def test_findings_name_the_gpu_uuid_and_serial(cli: Cli) -> None:
    data = cli("health", "check", "--from-record", rec("row_remap_failure"), "-f", "json").json()
    g16 = data["findings"][0]
    assert (g16["check"], g16["subject"]) == ("G16", "gpu6")
    assert g16["gpu_uuid"] == "GPU-h1000000-0000-0000-0000-000000000006"
    assert g16["gpu_serial"] == load("row_remap_failure")["gpus"][6]["serial"]


def test_record_keeps_the_new_readings(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "again.yaml"
    assert cli("health", "record", "--from-record", rec("retired_pages_limit"), "--out", str(out)).exit_code == 0
    again = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert again["gpus"][5]["retired_pages"] == {"single_bit": 41, "double_bit": 22, "pending": 0}
    assert again["nvidia_driver"]["params"]["EnableStreamMemOPs"] == "1" and again["gdrdrv"] is True
    assert "kernel_log" in again
    r = cli("health", "check", "--from-record", str(out), "-f", "json")
    assert [(f["check"], f["severity"]) for f in r.json()["findings"] if f["severity"] == "CRIT"] == [("G17", "CRIT")]


def test_counter_named_with_an_absolute_path_writes_nothing_outside(cli: Cli, tmp_path: Path) -> None:
    """Issue 15's example: a counter named with an absolute path used to overwrite that file with its value."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    data = load("hgx_h800_healthy")
    data["infiniband"]["devices"][0]["counters_t0"] = {str(victim): 7}
    for command in ("check", "show", "record", "topo"):
        args = ["--out", str(tmp_path / "out.yaml")] if command == "record" else []
        r = cli("health", command, "--from-record", write(tmp_path, data), *args)
        assert r.exit_code == 2, (command, r.stderr)
        assert "infiniband.devices[0].counters_t0" in r.stderr and "Traceback" not in r.stderr
        assert victim.read_text(encoding="utf-8") == "precious\n"
    assert not (tmp_path / "out.yaml").exists()


@pytest.mark.parametrize(("where", "value", "needle"), [
    ("name", "../../../../tmp/dsctl-escape", "infiniband.devices[2].name"),
    ("netdevs", {"../../etc": "up"}, "infiniband.devices[2].netdevs"),
    ("pci_path", "pci0000:15/../../..", "infiniband.devices[2].pci_path"),
])
def test_hostile_nic_names_exit_2(cli: Cli, tmp_path: Path, where: str, value: Any, needle: str) -> None:
    data = load("hgx_h800_healthy")
    data["infiniband"]["devices"][2][where] = value
    r = cli("health", "check", "--from-record", write(tmp_path, data))
    assert r.exit_code == 2 and needle in r.stderr and "Traceback" not in r.stderr
    assert not Path("/tmp/dsctl-escape").exists()


@pytest.mark.parametrize(("text", "needle"), [
    ("gpus:\n- {index: 0, pcie: {width: x16}}\n", "gpus[0].pcie.width must be an integer"),
    ("infiniband: {devices: [{name: mlx5_0, bdf: '0000:18:00.0', counters_t0: {symbol_error: lots}}]}\n",
     "counters_t0.symbol_error must be an integer"),
    ("device_count: " + "9" * 5000 + "\n", "unreadable YAML value: Exceeds the limit (4300 digits)"),
    ("gpus:\n- {index: 0, pci: {bus: " + "1" * 400 + "}}\n", "gpus[0].pci.bus is an integer of 400 digits"),
])
def test_non_integer_record_fields_exit_2_not_4(cli: Cli, tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    r = cli("health", "check", "--from-record", str(path))
    assert r.exit_code == 2 and needle in r.stderr, r.stderr


def test_record_can_replay_a_node_without_a_driver(cli: Cli, tmp_path: Path) -> None:
    data = load("hgx_h100_healthy")
    data["nvml_init_error"] = "LIBRARY_NOT_FOUND"
    r = cli("health", "check", "--from-record", write(tmp_path, data))
    assert r.exit_code == 3 and "LIBRARY_NOT_FOUND" in r.stderr
    topo = cli("health", "topo", "--from-record", write(tmp_path, data), "-f", "json")
    assert topo.exit_code == 0, topo.stderr  # topo falls back to the PCI view
    assert topo.json()["matrix"]["GPU0"]["GPU1"] == "NODE"
    data["nvml_init_error"] = "NO_PERMISSON"
    r = cli("health", "check", "--from-record", write(tmp_path, data))
    assert r.exit_code == 2 and "nvml_init_error: unknown NVML error 'NO_PERMISSON'" in r.stderr
