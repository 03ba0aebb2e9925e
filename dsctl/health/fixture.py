"""The fake-node record format (``tests/data/health/*.yaml``, written by ``dsctl health record``): validation and
default merging. Pure dict logic: the command layer or a test parses the YAML and passes the dict in.

Top level: ``schema``, ``hostname``, ``driver_version``, ``device_count`` (default: number of ``gpus``),
``interval_s``, ``gpu_defaults`` (deep-merged under every entry of ``gpus``), ``gpus``, ``infiniband``
(``defaults`` deep-merged under every entry of ``devices``), ``nvidia_peermem``, ``comment``, ``host`` (optional
host facts: hostname, kernel_release, num_logical_cpus, memory_total_bytes, boot_time_s). See docs/health.md.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from typing import Any

from dsctl.errors import InputError

SCHEMA = "dsctl.health.node/v1"
MAX_GPUS = 64  # NVML enumerates at most 64 devices per node; a bigger device_count is a typo
BDF = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
ANY = "*"  # a map with free keys (counter names, function names, peer indexes)

COUNTERS = {"replay": None, "recovery": None, "crc_flit": None, "crc_data": None}
GPU_KEYS: dict[str, Any] = {
    "index": None, "name": None, "uuid": None, "numa_node": None, "pci_path": None,
    "pci": {"domain": None, "bus": None, "device": None, "device_id": None},
    "persistence_mode": None,
    "pcie": {"gen": None, "max_gen": None, "gpu_max_gen": None, "width": None, "max_width": None},
    "pcie_replay": {"t0": None, "t1": None},
    "nvlink": {"num_links": None, "state": None, "version": None, "remote_type": None, "remote_bus_id": None,
               "errors_t0": COUNTERS, "errors_t1": COUNTERS},
    "fabric": {"state": None, "status": None, "health_mask": None},
    "ecc_mode": None,
    "ecc": {"volatile_dram": None, "aggregate_dram": None, "volatile_sram": None, "aggregate_sram": None,
            "sram_threshold_exceeded": None},
    "remapped_rows": {"correctable": None, "uncorrectable": None, "pending": None, "failure": None},
    "remap_histogram": {"max": None, "high": None, "partial": None, "low": None, "none": None},
    "temperature": {"gpu": None, "slowdown": None, "shutdown": None},
    "power": {"usage_mw": None, "limit_mw": None, "default_limit_mw": None},
    "clocks_event_reasons": None, "recovery_action": None, "p2p_nvlink": None,
    "errors": ANY,
}
NIC_KEYS: dict[str, Any] = {
    "name": None, "bdf": None, "numa_node": None, "pci_path": None, "hca_type": None, "fw_ver": None,
    "board_id": None, "port": None, "link_layer": None, "state": None, "phys_state": None, "rate": None,
    "lid": None, "sm_lid": None,
    "pcie": {"current_link_speed": None, "max_link_speed": None, "current_link_width": None, "max_link_width": None},
    "counters_t0": ANY, "counters_t1": ANY, "hw_counters_t0": ANY, "hw_counters_t1": ANY, "missing": None,
    "gids": None, "netdevs": ANY,
}
GID_KEYS = ("index", "gid", "type", "ndev")
TOP_KEYS: dict[str, Any] = {
    "schema": None, "hostname": None, "driver_version": None, "device_count": None, "interval_s": None,
    "gpu_defaults": GPU_KEYS, "gpus": None, "infiniband": {"defaults": NIC_KEYS, "devices": None},
    "nvidia_peermem": None, "comment": None,
    "host": {"hostname": None, "kernel_release": None, "num_logical_cpus": None, "memory_total_bytes": None,
             "boot_time_s": None},
}

#: host facts: key -> accepted types (older records have no ``host`` section at all)
HOST_TYPES: dict[str, tuple[type, ...]] = {
    "hostname": (str,), "kernel_release": (str,), "num_logical_cpus": (int,), "memory_total_bytes": (int,),
    "boot_time_s": (int, float),
}


def _host(data: Mapping[str, Any], source: str) -> dict[str, Any] | None:
    """The validated ``host`` section, or None when the record has none."""
    host = data.get("host")
    if host is None:
        return None
    out: dict[str, Any] = {}
    for key, types in HOST_TYPES.items():
        value = host.get(key)
        if value is None:
            out[key] = None
        elif types == (str,) and isinstance(value, str):
            out[key] = value
        elif (types != (str,) and isinstance(value, (int, float)) and not isinstance(value, bool)
              and isinstance(value, types) and 0 <= value < float("inf")):
            out[key] = float(value) if key == "boot_time_s" else value
        else:
            kind = "a string" if types == (str,) else "a finite non-negative number"
            raise InputError(f"{source}: host.{key} must be {kind}, got {value!r}")
    return out


def _check_keys(data: Any, schema: Any, where: str, source: str) -> None:
    if schema is None or schema == ANY:
        if schema == ANY and not isinstance(data, Mapping):
            raise InputError(f"{source}: {where} must be a mapping")
        return
    if not isinstance(data, Mapping):
        raise InputError(f"{source}: {where} must be a mapping, got {type(data).__name__}")
    for key, value in data.items():
        if key not in schema:
            raise InputError(f"{source}: unknown key {where}.{key}" if where else f"{source}: unknown key {key}",
                             hint=f"valid keys here: {', '.join(sorted(schema))}")
        _check_keys(value, schema[key], f"{where}.{key}" if where else str(key), source)


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``: mappings merge recursively, anything else (lists too) replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def normalize(data: Any, source: str = "fixture") -> dict[str, Any]:
    """Validate a fake-node record and expand the defaults.

    Returns ``{hostname, driver_version, device_count, interval_s, gpus: [full dicts], nics: [full dicts],
    nvidia_peermem, host: dict or None}``. Unknown keys raise :class:`InputError` naming ``source`` and the key path.
    """
    if not isinstance(data, Mapping):
        raise InputError(f"{source}: a fake-node record must be a YAML mapping of {', '.join(TOP_KEYS)}",
                         hint="write one with 'dsctl health record --out node.yaml'")
    _check_keys(data, TOP_KEYS, "", source)
    schema = data.get("schema", SCHEMA)
    if schema != SCHEMA:
        raise InputError(f"{source}: schema {schema!r} is not supported", hint=f"use schema: {SCHEMA}")
    gpus_in = data.get("gpus", [])
    if not isinstance(gpus_in, list):
        raise InputError(f"{source}: gpus must be a list of per-GPU mappings")
    defaults = data.get("gpu_defaults", {}) or {}
    gpus = []
    for i, entry in enumerate(gpus_in):
        _check_keys(entry, GPU_KEYS, f"gpus[{i}]", source)
        merged = deep_merge(defaults, entry)
        merged.setdefault("index", i)
        gpus.append(merged)
    ib = data.get("infiniband", {}) or {}
    nic_defaults = ib.get("defaults", {}) or {}
    devices = ib.get("devices", []) or []
    if not isinstance(devices, list):
        raise InputError(f"{source}: infiniband.devices must be a list")
    nics = []
    for i, entry in enumerate(devices):
        _check_keys(entry, NIC_KEYS, f"infiniband.devices[{i}]", source)
        nic = deep_merge(nic_defaults, entry)
        for key in ("name", "bdf"):
            if key not in nic:
                raise InputError(f"{source}: infiniband.devices[{i}] needs {key}")
        if not isinstance(nic["bdf"], str) or not BDF.fullmatch(nic["bdf"]):
            raise InputError(f"{source}: infiniband.devices[{i}].bdf {nic['bdf']!r} is not a PCI address",
                             hint="use the Linux form domain:bus:device.function, e.g. 0000:18:00.0")
        _check_gids(nic.get("gids"), f"infiniband.devices[{i}].gids", source)
        nics.append(nic)
    interval = data.get("interval_s", 10.0)
    if (not isinstance(interval, (int, float)) or isinstance(interval, bool) or not math.isfinite(interval)
            or interval <= 0):
        raise InputError(f"{source}: interval_s must be a positive number of seconds, got {interval!r}")
    count = data.get("device_count", len(gpus))
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_GPUS:
        raise InputError(f"{source}: device_count must be an integer from 0 to {MAX_GPUS}, got {count!r}")
    return {
        "hostname": str(data.get("hostname", "fake-node")),
        "driver_version": str(data.get("driver_version", "550.54.15")),
        "device_count": count,
        "interval_s": float(interval),
        "gpus": gpus,
        "nics": nics,
        "nvidia_peermem": bool(data.get("nvidia_peermem", True)),
        "host": _host(data, source),
    }


def _check_gids(gids: Any, where: str, source: str) -> None:
    """``gids``: a list of ``{index: int >= 0, gid: str, type: str, ndev: str}`` (type and ndev optional)."""
    if gids is None:
        return
    if not isinstance(gids, list):
        raise InputError(f"{source}: {where} must be a list of {{index, gid, type, ndev}} mappings")
    for j, gid in enumerate(gids):
        if not isinstance(gid, Mapping) or set(gid) - set(GID_KEYS):
            raise InputError(f"{source}: {where}[{j}] must be a mapping with keys {', '.join(GID_KEYS)}")
        index = gid.get("index")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0 or not isinstance(gid.get("gid"), str):
            raise InputError(f"{source}: {where}[{j}] needs index (an integer >= 0) and gid (a string)",
                             hint="e.g. {index: 3, gid: '0000:0000:0000:0000:0000:ffff:0a00:0011', type: RoCE v2, "
                                  "ndev: ens1np0}")


def per_link(value: Any, link: int, what: str, source: str) -> Any:
    """A per-link fixture value: a scalar applies to every link, a list gives one value per link."""
    if isinstance(value, list):
        if link >= len(value):
            raise InputError(f"{source}: {what} lists {len(value)} links, link {link} has no value")
        return value[link]
    return value
