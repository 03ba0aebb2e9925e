"""The sysfs renderer writes the kernel's exact formats and the reader parses them back (tmp_path trees)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from dsctl.health.backends.sysfs import SysfsReader, render_sysfs, write_counters
from dsctl.health.fixture import normalize

DATA = Path(__file__).resolve().parents[1] / "data" / "health"


def node(name: str = "hgx_h800_healthy") -> dict:  # type: ignore[type-arg]
    return normalize(yaml.safe_load((DATA / f"{name}.yaml").read_text(encoding="utf-8")), name)


def test_rendered_tree_uses_kernel_formats(tmp_path: Path) -> None:
    render_sysfs(node(), tmp_path)
    port = tmp_path / "sys/class/infiniband/mlx5_0/ports/1"
    assert (port / "state").read_text() == "4: ACTIVE\n"
    assert (port / "phys_state").read_text() == "5: LinkUp\n"
    assert (port / "rate").read_text() == "400 Gb/sec (4X NDR)\n"
    assert (port / "lid").read_text() == "0x11\n"
    assert (port / "counters/symbol_error").read_text() == "0\n"
    assert (port / "hw_counters/rnr_nak_retry_err").read_text() == "0\n"
    device = tmp_path / "sys/class/infiniband/mlx5_0/device"
    chain = "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0"
    assert os.path.realpath(device).endswith(chain)
    assert (device / "current_link_speed").read_text() == "32.0 GT/s PCIe\n"
    gpu = tmp_path / "sys/bus/pci/devices/0000:18:00.0"
    assert (gpu / "vendor").read_text() == "0x10de\n" and (gpu / "class").read_text() == "0x030200\n"
    assert (tmp_path / "sys/module/nvidia_peermem").is_dir()


def test_reader_parses_the_tree_and_the_second_sample(tmp_path: Path) -> None:
    data = node("ib_symbol_error_burst")
    render_sysfs(data, tmp_path)
    reader = SysfsReader(tmp_path)
    gpus = reader.pci_gpus()
    assert [g.bdf for g in gpus][:2] == ["0000:18:00.0", "0000:2a:00.0"] and len(gpus) == 8
    assert gpus[0].chain == ("pci0000:15", "0000:15:01.0", "0000:16:00.0", "0000:17:00.0") and gpus[0].numa_node == 0
    nics = reader.nics()
    assert [n.name for n in nics] == [f"mlx5_{i}" for i in range(9)]
    nic = nics[1]
    assert (nic.hca_type, nic.fw_ver, nic.pcie_width, nic.pcie_max_width) == ("MT4129", "28.39.2048", 16, 16)
    write_counters(data, tmp_path, "t1")
    again = reader.recount(nics)
    p = again[1].ports[0]
    assert (p.counters_t0["symbol_error"], p.counters_t1["symbol_error"]) == (0, 500)
    assert again[0].ports[0].counters_t1["symbol_error"] == 0


def test_no_pma_counter_and_missing_files_are_not_supported(tmp_path: Path) -> None:
    data = node()
    data["nics"][0]["missing"] = ["rate", "fw_ver"]
    render_sysfs(data, tmp_path)
    (tmp_path / "sys/class/infiniband/mlx5_0/ports/1/counters/VL15_dropped").write_text("N/A (no PMA)\n")
    nic = SysfsReader(tmp_path).nics()[0]
    assert nic.ports[0].rate.__class__.__name__ == "Unavailable"
    assert nic.fw_ver.__class__.__name__ == "Unavailable"
    assert "VL15_dropped" not in nic.ports[0].counters_t0


def test_empty_root_has_nothing(tmp_path: Path) -> None:
    reader = SysfsReader(tmp_path)
    assert reader.nics() == () and reader.pci_gpus() == () and reader.nvidia_peermem() is False
