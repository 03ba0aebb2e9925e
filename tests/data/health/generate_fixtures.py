"""Regenerate the fake-node fixtures in this folder: ``python tests/data/health/generate_fixtures.py``.

Each fixture is a healthy HGX node (H100: 18 NVLinks, H800: 8 of 18 active [unconfirmed]) with one fault injected.
The YAML files are the source of truth for the tests; this script only saves typing.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
GPU_BUSES = [0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB]
SWITCHES = ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"]
HEALTHY_MASK = 2 | 2 << 2 | 2 << 4 | 2 << 6 | 1 << 8  # every health field FALSE, configuration NONE


def _chain(root_bus: int) -> list[str]:
    return [f"pci0000:{root_bus:02x}", f"0000:{root_bus:02x}:01.0", f"0000:{root_bus + 1:02x}:00.0"]


def hgx(sku: str) -> dict[str, Any]:
    h800 = sku == "h800"
    num_links = 18
    active = 8 if h800 else 18
    split = [2, 2, 2, 2] if h800 else [5, 5, 4, 4]
    remotes = [sw for sw, n in zip(SWITCHES, split, strict=True) for _ in range(n)]
    remotes += [SWITCHES[i % 4] for i in range(num_links - len(remotes))]
    defaults: dict[str, Any] = {
        "name": "NVIDIA H800 80GB HBM3" if h800 else "NVIDIA H100 80GB HBM3",
        "pci": {"domain": 0, "device": 0, "device_id": 0x232410DE if h800 else 0x233010DE},
        "persistence_mode": 1,
        "pcie": {"gen": 5, "max_gen": 5, "gpu_max_gen": 5, "width": 16, "max_width": 16},
        "pcie_replay": {"t0": 0, "t1": 0},
        "nvlink": {
            "num_links": num_links,
            "state": [1] * active + [0] * (num_links - active) if h800 else 1,
            "version": 6, "remote_type": 2, "remote_bus_id": remotes,
            "errors_t0": {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0},
        },
        "fabric": {"state": 3, "status": 0, "health_mask": HEALTHY_MASK},
        "ecc_mode": [1, 1],
        "ecc": {"volatile_dram": 0, "aggregate_dram": 0, "volatile_sram": 0, "aggregate_sram": 0,
                "sram_threshold_exceeded": 0},
        "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": 0, "failure": 0},
        "remap_histogram": {"max": 2560, "high": 0, "partial": 0, "low": 0, "none": 0},
        "temperature": {"gpu": 34, "slowdown": 90, "shutdown": 92},
        "power": {"usage_mw": 71000, "limit_mw": 700000, "default_limit_mw": 700000},
        "clocks_event_reasons": 1,
        "recovery_action": 0,
        "p2p_nvlink": 0,
    }
    gpus = []
    devices = []
    for i, bus in enumerate(GPU_BUSES):
        root = bus - 3
        numa = 0 if i < 4 else 1
        gpus.append({"uuid": f"GPU-{sku}0000-0000-0000-0000-00000000000{i}", "pci": {"bus": bus}, "numa_node": numa,
                     "pci_path": "/".join([*_chain(root), f"0000:{root + 2:02x}:00.0"])})
        devices.append({"name": f"mlx5_{i}", "bdf": f"0000:{root + 4:02x}:00.0", "numa_node": numa,
                        "pci_path": "/".join([*_chain(root), f"0000:{root + 2:02x}:01.0"]), "lid": f"0x{0x11 + i:x}"})
    gpus[3]["pcie_replay"] = {"t0": 7, "t1": 7}  # a healthy node can show old replays: the rate matters
    devices.append({"name": "mlx5_8", "bdf": "0000:0e:00.0", "numa_node": 0, "pci_path": "pci0000:0c/0000:0c:01.0",
                    "link_layer": "Ethernet", "lid": "0x0", "sm_lid": "0x0"})
    return {
        "schema": "dsctl.health.node/v1",
        "hostname": f"fake-{sku}-hgx",
        "driver_version": "550.54.15",
        "interval_s": 10,
        "nvidia_peermem": True,
        "gpu_defaults": defaults,
        "gpus": gpus,
        "infiniband": {
            "defaults": {
                "hca_type": "MT4129", "fw_ver": "28.39.2048", "port": 1, "link_layer": "InfiniBand",
                "state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "400 Gb/sec (4X NDR)", "sm_lid": "0x1",
                "pcie": {"current_link_speed": "32.0 GT/s PCIe", "max_link_speed": "32.0 GT/s PCIe",
                         "current_link_width": 16, "max_link_width": 16},
                "counters_t0": {"symbol_error": 0, "link_error_recovery": 0, "link_downed": 0, "port_rcv_errors": 0,
                                "port_xmit_discards": 0, "local_link_integrity_errors": 0,
                                "excessive_buffer_overrun_errors": 0, "port_xmit_data": 123456789,
                                "port_rcv_data": 987654321},
                "counters_t1": {"port_xmit_data": 223456789, "port_rcv_data": 1087654321},
                "hw_counters_t0": {"rnr_nak_retry_err": 0, "local_ack_timeout_err": 0, "out_of_buffer": 0},
            },
            "devices": devices,
        },
    }


def l40s() -> dict[str, Any]:
    gpus = []
    for i, bus in enumerate([0x17, 0x31, 0xB1, 0xCA]):
        gpus.append({"uuid": f"GPU-l40s0000-0000-0000-0000-00000000000{i}", "pci": {"bus": bus},
                     "numa_node": 0 if i < 2 else 1, "pci_path": "/".join(_chain(bus - 2))})
    not_supported = {fn: "NOT_SUPPORTED" for fn in ("nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetSramEccErrorStatus")}
    return {
        "schema": "dsctl.health.node/v1",
        "hostname": "fake-l40s",
        "driver_version": "550.54.15",
        "interval_s": 10,
        "nvidia_peermem": False,
        "comment": "PCIe L40S box: no NVLink (FieldValues LINK_COUNT -> NOT_SUPPORTED), no fabric, no SRAM status",
        "gpu_defaults": {
            "name": "NVIDIA L40S", "pci": {"domain": 0, "device": 0, "device_id": 0x26B910DE}, "persistence_mode": 1,
            "pcie": {"gen": 4, "max_gen": 4, "gpu_max_gen": 4, "width": 16, "max_width": 16},
            "pcie_replay": {"t0": 0, "t1": 0}, "ecc_mode": [1, 1],
            "ecc": {"volatile_dram": 0, "aggregate_dram": 0},
            "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": 0, "failure": 0},
            "remap_histogram": {"max": 1536, "high": 0, "partial": 0, "low": 0, "none": 0},
            "temperature": {"gpu": 31, "slowdown": 90, "shutdown": 95},
            "power": {"usage_mw": 35000, "limit_mw": 350000, "default_limit_mw": 350000},
            "clocks_event_reasons": 1, "recovery_action": 0, "errors": not_supported,
        },
        "gpus": gpus,
    }


def roce_gids(i: int, v2: bool = True) -> list[dict[str, Any]]:
    """GID table of a RoCE port as mlx5 fills it: the link-local GID and the IPv4-mapped one (10.<i>.0.17), each as
    a RoCE v1 and a RoCE v2 entry (v2 ones left out when ``v2`` is False)."""
    ndev = f"ens{i + 1}np0"
    out = []
    for index, gid in ((0, f"fe80:0000:0000:0000:ba3f:d2ff:fe{i:02x}:1a2b"),
                       (2, f"0000:0000:0000:0000:0000:ffff:0a{i:02x}:0011")):
        out.append({"index": index, "gid": gid, "type": "IB/RoCE v1", "ndev": ndev})
        if v2:
            out.append({"index": index + 1, "gid": gid, "type": "RoCE v2", "ndev": ndev})
    return out


def roce(base: dict[str, Any]) -> dict[str, Any]:
    """The same node with RoCE (Ethernet) compute NICs: no LIDs, a GID table per port and an up netdev each.
    Check it with the RoCE node profile in profiles/ (``--profiles-dir tests/data/health/profiles --node
    h800-roce``); the built-in HGX profiles expect InfiniBand compute NICs."""
    data = copy.deepcopy(base)
    data["infiniband"]["defaults"].update(link_layer="Ethernet", lid="0x0", sm_lid="0x0")
    for i, dev in enumerate(data["infiniband"]["devices"]):
        dev.update(lid="0x0", sm_lid="0x0", gids=roce_gids(i), netdevs={f"ens{i + 1}np0": "up"})
    return data


def variants() -> dict[str, dict[str, Any]]:
    out = {"hgx_h100_healthy": hgx("h100"), "hgx_h800_healthy": hgx("h800"), "pcie_l40s_no_nvlink": l40s()}

    def make(name: str, base: str, comment: str) -> dict[str, Any]:
        data = copy.deepcopy(out[base])
        data["hostname"] = f"fake-{name.replace('_', '-')}"
        data["comment"] = comment
        out[name] = data
        return data

    d = make("nvlink_link_down", "hgx_h100_healthy", "GPU 3 NVLink 7 inactive -> G6 CRIT gpu3")
    d["gpus"][3]["nvlink"] = {"state": [1] * 7 + [0] + [1] * 10}
    d = make("nvlink_replay_growth", "hgx_h100_healthy", "GPU 5 link 2 DL replays +3 in 10 s -> G8 CRIT")
    d["gpus"][5]["nvlink"] = {"errors_t1": {"replay": [0, 0, 3] + [0] * 15, "recovery": 0, "crc_flit": 0,
                                            "crc_data": 0}}
    d = make("fabric_not_started", "hgx_h100_healthy", "nvidia-fabricmanager not running -> G9 CRIT on every GPU")
    d["gpu_defaults"]["fabric"] = {"state": 1, "status": 0, "health_mask": 0}
    d = make("row_remap_pending", "hgx_h100_healthy", "GPU 2 row remap pending (Xid 63) -> G16 WARN")
    d["gpus"][2]["remapped_rows"] = {"correctable": 1, "pending": 1}
    d = make("row_remap_failure", "hgx_h100_healthy", "GPU 6 row remap failure (Xid 64) -> G16 CRIT")
    d["gpus"][6]["remapped_rows"] = {"uncorrectable": 3, "failure": 1}
    d = make("volatile_dbe", "hgx_h800_healthy", "GPU 6 volatile uncorrected DRAM ECC errors -> G15 CRIT")
    d["gpus"][6]["ecc"] = {"volatile_dram": 2, "aggregate_dram": 2}
    d = make("pcie_x8_degraded", "hgx_h100_healthy", "GPU 1 PCIe trained at x8 -> G11 CRIT")
    d["gpus"][1]["pcie"] = {"width": 8}
    d = make("pcie_gen4_host_limited", "hgx_h100_healthy", "GPU 0 slot caps at Gen4 -> G12 WARN (host-limited)")
    d["gpus"][0]["pcie"] = {"gen": 4, "max_gen": 4}
    d = make("xid79_gpu_lost", "hgx_h800_healthy", "GPU 4 fell off the bus (GpuIsLost on every call) -> G3 CRIT")
    d["gpus"][4]["errors"] = {"*": "GPU_IS_LOST"}
    d = make("ib_port_down", "hgx_h800_healthy", "mlx5_3 port 1 DOWN/Disabled -> R2 CRIT")
    d["infiniband"]["devices"][3].update(state="1: DOWN", phys_state="3: Disabled", rate="10 Gb/sec (4X SDR)")
    d = make("ib_rate_hdr_downgrade", "hgx_h800_healthy", "mlx5_5 trained at HDR 200 -> R3 CRIT")
    d["infiniband"]["devices"][5]["rate"] = "200 Gb/sec (4X HDR)"
    d = make("ib_symbol_error_burst", "hgx_h800_healthy", "mlx5_1 symbol_error +500 in 10 s -> R6 CRIT")
    d["infiniband"]["devices"][1]["counters_t1"] = {"symbol_error": 500}
    d = make("nic_wrong_numa", "hgx_h800_healthy", "mlx5_2 sits on the other socket -> R9 WARN gpu2")
    d["infiniband"]["devices"][2].update(numa_node=1, bdf="0000:c2:00.0", pci_path="pci0000:c0/0000:c0:01.0")
    d = make("roce_no_v2_gid", "hgx_h800_healthy",
             "RoCE node (profile h800-roce): mlx5_4 has RoCE v1 GIDs only -> R11 CRIT mlx5_4/1")
    d["infiniband"] = roce(d)["infiniband"]
    d["infiniband"]["devices"][4]["gids"] = roce_gids(4, v2=False)
    return out


def main() -> None:
    for name, data in variants().items():
        text = f"# {data.get('comment', name)}\n" + yaml.safe_dump(data, sort_keys=False, default_flow_style=None,
                                                                    width=120)
        (HERE / f"{name}.yaml").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
