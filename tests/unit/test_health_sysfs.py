"""The sysfs renderer writes the kernel's exact formats and the reader parses them back (tmp_path trees)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from dsctl.errors import InputError
from dsctl.health.backends.sysfs import SysfsReader, render_sysfs, write_counters
from dsctl.health.model import Unavailable
from dsctl.health.record.format import normalize

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


def test_roce_gid_table_and_netdev_are_rendered_and_read(tmp_path: Path) -> None:
    data = node("roce_no_v2_gid")
    render_sysfs(data, tmp_path)
    port = tmp_path / "sys/class/infiniband/mlx5_0/ports/1"
    assert (port / "gids/3").read_text() == "0000:0000:0000:0000:0000:ffff:0a00:0011\n"
    assert (port / "gid_attrs/types/3").read_text() == "RoCE v2\n"
    assert (port / "gid_attrs/ndevs/3").read_text() == "ens1np0\n"
    assert (tmp_path / "sys/class/net/ens1np0/operstate").read_text() == "up\n"
    # unused table entries read as zeros and their attributes fail: skipped, as on a real port
    (port / "gids/4").write_text("0000:0000:0000:0000:0000:0000:0000:0000\n")
    (port / "gids/5").write_text("fe80:0000:0000:0000:0000:0000:0000:0099\n")  # no type/ndev files
    nic = SysfsReader(tmp_path).nics()[0]
    gids = nic.ports[0].gids
    assert [g.index for g in gids] == [0, 1, 2, 3, 5]
    assert gids[4].type == Unavailable("missing", "MISSING", "/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/5")
    assert nic.ports[0].netdev_operstate == {"ens1np0": "up"}


def test_infiniband_ports_are_not_read_for_gids(tmp_path: Path) -> None:
    data = node()
    data["nics"][0]["gids"] = [{"index": 0, "gid": "fe80:0000:0000:0000:0000:0000:0000:0001", "type": "IB/RoCE v1"}]
    render_sysfs(data, tmp_path)
    port = SysfsReader(tmp_path).nics()[0].ports[0]
    assert port.link_layer == "InfiniBand" and port.gids == () and port.netdev_operstate == {}


@pytest.mark.parametrize(("gids", "needle"), [
    ("fe80::1", "must be a list"),
    ([{"index": 1, "gid": "fe80::1", "kind": "RoCE v2"}], "must be a mapping with keys index, gid, type, ndev"),
    ([{"index": -1, "gid": "fe80::1"}], "needs index (an integer >= 0) and gid"),
    ([{"index": 1}], "needs index (an integer >= 0) and gid"),
])
def test_bad_gid_entries_name_the_device(gids: object, needle: str) -> None:
    raw = yaml.safe_load((DATA / "roce_no_v2_gid.yaml").read_text(encoding="utf-8"))
    raw["infiniband"]["devices"][2]["gids"] = gids
    with pytest.raises(InputError) as err:
        normalize(raw, "roce.yaml")
    assert "roce.yaml: infiniband.devices[2].gids" in str(err.value) and needle in str(err.value)
