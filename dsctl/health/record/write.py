"""Turn a :class:`NodeSnapshot` into the fake-node record (the YAML ``dsctl health record`` writes and
``--from-record`` / the tests replay). Replaying the record through the fake NVML module and the sysfs renderer
gives back the same snapshot: every :class:`Unavailable` becomes an ``errors`` entry keyed by its NVML source."""

from __future__ import annotations

import dataclasses
from typing import Any

from dsctl.health.model import NVLINK_COUNTERS, Gpu, Nic, NodeSnapshot, PciDevice, Unavailable
from dsctl.health.record.format import SCHEMA

#: mlx5 hw_counters names (kernel drivers/infiniband/hw/mlx5/counters.c); others are PMA counters/
HW_COUNTERS = frozenset({
    "out_of_buffer", "out_of_sequence", "duplicate_request", "rnr_nak_retry_err", "packet_seq_err",
    "implied_nak_seq_err", "local_ack_timeout_err", "rx_write_requests", "rx_read_requests", "rx_atomic_requests",
    "rp_cnp_ignored", "rp_cnp_handled", "np_ecn_marked_roce_packets", "np_cnp_sent", "req_cqe_error",
    "resp_cqe_error", "req_remote_access_errors", "resp_remote_access_errors", "req_cqe_flush_error",
    "resp_cqe_flush_error", "resp_local_length_error", "req_remote_invalid_request", "roce_adp_retrans",
    "roce_adp_retrans_to", "roce_slow_restart", "roce_slow_restart_cnps", "roce_slow_restart_trans",
})


def _squash(values: list[Any]) -> Any:
    """A per-link list, or one scalar when every link has the same value."""
    return values[0] if values and all(v == values[0] for v in values) else values


class _Gpu:
    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.errors: dict[str, str] = {}

    def put(self, path: str, value: Any) -> None:
        """Store ``value`` at a dotted path, or its NVML error in ``errors``."""
        if isinstance(value, Unavailable):
            if value.source and value.code != "NOT_SAMPLED":
                self.errors[value.source] = value.code
            return
        node = self.data
        parts = path.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value


def _chain(dev: PciDevice) -> str:
    return "/".join(dev.chain)


def gpu_record(gpu: Gpu, pci: PciDevice | None) -> dict[str, Any]:
    """One ``gpus[i]`` entry."""
    rec = _Gpu()
    rec.data["index"] = gpu.index
    bdf = pci.bdf if pci is not None else (gpu.bus_id if isinstance(gpu.bus_id, str) else None)
    if bdf is not None:
        domain, bus, rest = bdf.split(":")
        device = rest.split(".")[0]
        rec.data["pci"] = {"domain": int(domain, 16), "bus": int(bus, 16), "device": int(device, 16)}
    if pci is not None:
        rec.data["numa_node"] = pci.numa_node
        rec.data["pci_path"] = _chain(pci)
    if gpu.lost is not None:
        rec.errors[gpu.lost.source or "nvmlDeviceGetHandleByIndex"] = gpu.lost.code
        rec.data["errors"] = rec.errors
        return rec.data
    for key in ("name", "uuid", "persistence_mode", "clocks_event_reasons"):
        rec.put(key, getattr(gpu, key))
    if isinstance(gpu.serial, str):
        rec.data["serial"] = gpu.serial
    elif gpu.serial.code != "NOT_SUPPORTED":  # an absent serial replays as NotSupported
        rec.put("", gpu.serial)
    rec.put("pci.device_id", gpu.pci_device_id)
    rec.put("recovery_action", gpu.recovery_action)
    if gpu.inforom_valid is False:
        rec.errors["nvmlDeviceValidateInforom"] = "CORRUPTED_INFOROM"
    elif isinstance(gpu.inforom_valid, Unavailable):
        rec.put("", gpu.inforom_valid)
    if isinstance(gpu.num_links, int):
        links = gpu.links
        nv: dict[str, Any] = {"num_links": gpu.num_links}
        for key, attr in (("state", "active"), ("version", "version"), ("remote_type", "remote_type"),
                          ("remote_bus_id", "remote_bus_id")):
            values = []
            for link in links:
                value = getattr(link, attr)
                if isinstance(value, Unavailable):
                    rec.put("", value)
                    value = 0 if key != "remote_bus_id" else "0000:00:00.0"
                values.append(int(value) if key == "state" else value)
            if values:
                nv[key] = _squash(values)
        for phase in ("t0", "t1"):
            counters: dict[str, Any] = {}
            for name in NVLINK_COUNTERS:
                values = []
                for link in links:
                    errs = getattr(link, f"errors_{phase}")
                    if isinstance(errs, Unavailable):
                        rec.put("", errs)
                        values.append(0)
                    else:
                        values.append(errs[name])
                if values:
                    counters[name] = _squash(values)
            if counters:
                nv[f"errors_{phase}"] = counters
        rec.data["nvlink"] = nv
    else:
        rec.put("", gpu.num_links)
    if isinstance(gpu.fabric, Unavailable):
        rec.put("", gpu.fabric)
    else:
        rec.data["fabric"] = {"state": gpu.fabric.state, "status": gpu.fabric.status,
                              "health_mask": gpu.fabric.health_mask}
    if not isinstance(gpu.pcie, Unavailable):
        for key in ("gen", "max_gen", "gpu_max_gen", "width", "max_width"):
            rec.put(f"pcie.{key}", getattr(gpu.pcie, key))
    rec.put("pcie_replay.t0", gpu.pcie_replay_t0)
    rec.put("pcie_replay.t1", gpu.pcie_replay_t1)
    if not isinstance(gpu.ecc, Unavailable):
        ecc = gpu.ecc
        if isinstance(ecc.mode_current, Unavailable) or isinstance(ecc.mode_pending, Unavailable):
            rec.put("", ecc.mode_current if isinstance(ecc.mode_current, Unavailable) else ecc.mode_pending)
        else:
            rec.data["ecc_mode"] = [ecc.mode_current, ecc.mode_pending]
        for key in ("volatile_dram", "aggregate_dram", "volatile_sram", "aggregate_sram", "sram_threshold_exceeded"):
            rec.put(f"ecc.{key}", getattr(ecc, key))
    if isinstance(gpu.remapped_rows, Unavailable):
        rec.put("", gpu.remapped_rows)
    else:
        rows = gpu.remapped_rows
        rec.data["remapped_rows"] = {"correctable": rows.correctable, "uncorrectable": rows.uncorrectable,
                                     "pending": rows.pending, "failure": rows.failure}
        rec.put("remap_histogram", rows.histogram)
    if isinstance(gpu.retired_pages, Unavailable):
        if gpu.retired_pages.code != "NOT_SUPPORTED":  # absent replays as NotSupported (Ampere and newer)
            rec.put("", gpu.retired_pages)
    else:
        pages = gpu.retired_pages
        rec.data["retired_pages"] = {"single_bit": pages.single_bit, "double_bit": pages.double_bit}
        rec.put("retired_pages.pending", pages.pending)
    if not isinstance(gpu.thermal, Unavailable):
        rec.put("temperature.gpu", gpu.thermal.gpu_c)
        rec.put("temperature.slowdown", gpu.thermal.slowdown_c)
        rec.put("temperature.shutdown", gpu.thermal.shutdown_c)
    if not isinstance(gpu.power, Unavailable):
        for key in ("usage_mw", "limit_mw", "default_limit_mw"):
            rec.put(f"power.{key}", getattr(gpu.power, key))
    if gpu.p2p_nvlink:
        statuses = {}
        for peer, status in sorted(gpu.p2p_nvlink.items()):
            if isinstance(status, Unavailable):
                rec.put("", status)
            else:
                statuses[peer] = status
        if statuses:
            values = list(statuses.values())
            rec.data["p2p_nvlink"] = values[0] if all(v == values[0] for v in values) else statuses
    if rec.errors:
        rec.data["errors"] = dict(sorted(rec.errors.items()))
    return rec.data


def nic_record(nic: Nic) -> dict[str, Any]:
    """One ``infiniband.devices[i]`` entry (first port only: compute HCAs have one port per PCI function)."""
    data: dict[str, Any] = {"name": nic.name}
    missing: list[str] = []
    if isinstance(nic.pci, PciDevice):
        data.update(bdf=nic.pci.bdf, numa_node=nic.pci.numa_node, pci_path=_chain(nic.pci))
    for key in ("hca_type", "fw_ver"):
        value = getattr(nic, key)
        if isinstance(value, Unavailable):
            missing.append(key)
        else:
            data[key] = value
    pcie = {}
    for key, attr in (("current_link_speed", "pcie_speed"), ("max_link_speed", "pcie_max_speed"),
                      ("current_link_width", "pcie_width"), ("max_link_width", "pcie_max_width")):
        value = getattr(nic, attr)
        if isinstance(value, Unavailable):
            missing.append(key)
        else:
            pcie[key] = value
    data["pcie"] = pcie
    if nic.ports:
        port = nic.ports[0]
        data["port"] = port.port
        for key in ("link_layer", "state", "phys_state", "rate", "lid", "sm_lid"):
            value = getattr(port, key)
            if isinstance(value, Unavailable):
                missing.append(key)
            else:
                data[key] = value
        if port.gids:
            data["gids"] = [{"index": g.index, "gid": g.gid,
                             **{k: v for k, v in (("type", g.type), ("ndev", g.ndev)) if isinstance(v, str)}}
                            for g in port.gids]
        netdevs = {dev: state for dev, state in sorted(port.netdev_operstate.items()) if isinstance(state, str)}
        if netdevs:
            data["netdevs"] = netdevs
        for phase in ("t0", "t1"):
            counters = getattr(port, f"counters_{phase}")
            data[f"counters_{phase}"] = {k: v for k, v in sorted(counters.items()) if k not in HW_COUNTERS}
            data[f"hw_counters_{phase}"] = {k: v for k, v in sorted(counters.items()) if k in HW_COUNTERS}
    if missing:
        data["missing"] = missing
    return data


def snapshot_record(snap: NodeSnapshot) -> dict[str, Any]:
    """The whole fake-node record for ``snap`` (explicit per GPU and per NIC; no defaults section)."""
    by_bdf = {d.bdf: d for d in snap.pci_gpus}
    used = {g.bus_id for g in snap.gpus if isinstance(g.bus_id, str)}
    # PCI GPUs NVML could not name (lost ones) are given to the lost GPUs in order, so the sysfs view survives
    spare = [d for d in snap.pci_gpus if d.bdf not in used]
    gpus = []
    for gpu in snap.gpus:
        pci = by_bdf.get(gpu.bus_id) if isinstance(gpu.bus_id, str) else (spare.pop(0) if spare else None)
        gpus.append(gpu_record(gpu, pci))
    record: dict[str, Any] = {
        "schema": SCHEMA,
        "hostname": snap.hostname,
        "interval_s": snap.interval_s,
        "nvidia_peermem": snap.nvidia_peermem,
    }
    if snap.host is not None:
        record["host"] = dataclasses.asdict(snap.host)
    if snap.nvml is not None:
        record["nvml_init_error"] = snap.nvml.code
    if snap.kernel_log is not None:
        record["kernel_log"] = snap.kernel_log
    if snap.driver is not None:
        driver: dict[str, Any] = {}
        if isinstance(snap.driver.open_kernel_module, bool):
            driver["open_kernel_module"] = snap.driver.open_kernel_module
        if isinstance(snap.driver.params, dict):
            driver["params"] = dict(snap.driver.params)
        if driver:
            record["nvidia_driver"] = driver
        record["gdrdrv"] = snap.driver.gdrdrv
    if isinstance(snap.driver_version, str):
        record["driver_version"] = snap.driver_version
    if isinstance(snap.device_count, int) and snap.device_count != len(gpus):
        record["device_count"] = snap.device_count
    record["gpus"] = gpus
    if snap.nics:
        record["infiniband"] = {"devices": [nic_record(n) for n in snap.nics]}
    return record
