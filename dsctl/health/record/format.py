"""The fake-node record format (``tests/data/health/*.yaml``, written by ``dsctl health record``): validation and
default merging. Pure dict logic: the command layer or a test parses the YAML and passes the dict in.

Top level: ``schema``, ``hostname``, ``driver_version``, ``device_count`` (default: number of ``gpus``),
``interval_s``, ``gpu_defaults`` (deep-merged under every entry of ``gpus``), ``gpus``, ``infiniband``
(``defaults`` deep-merged under every entry of ``devices``), ``nvidia_peermem``, ``comment``, ``host`` (optional
host facts: hostname, kernel_release, num_logical_cpus, memory_total_bytes, boot_time_s), ``kernel_log`` (text
scanned for Xids, G22), ``nvml_init_error`` (an NVML error name ``nvmlInit`` answers, e.g. NO_PERMISSION),
``nvidia_driver`` (``open_kernel_module``, ``params`` of /proc/driver/nvidia/params) and ``gdrdrv``. See
docs/health.md.

Hostile records: every leaf has a type (wrong type -> InputError, exit 2) and every value that becomes a sysfs path
component (NIC, netdev and counter names, PCI bridge chains, port and GID numbers) must match a name pattern in full;
the renderer joins them under its root with :func:`dsctl.safepath.safe_join` besides.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from typing import Any

from dsctl.errors import InputError
from dsctl.names import ascii_digits

SCHEMA = "dsctl.health.node/v1"
MAX_GPUS = 64  # NVML enumerates at most 64 devices per node; a bigger device_count is a typo
BDF = re.compile(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
ROOT_BUS = re.compile(r"pci[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}")
#: names that become one sysfs path component: a letter or digit first, no "/", no "..", at most 64 characters
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
COUNTER_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")
NETDEV = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}")  # Linux IFNAMSIZ 16 with the NUL
HEX_LID = re.compile(r"0x[0-9a-fA-F]{1,8}")
INT_MIN, INT_MAX = -(2**63), 2**64 - 1  # every integer in a record fits a 64-bit NVML or sysfs counter
ANY = "*"  # a map with free keys (function names, peer indexes)
# leaf types: "int", "str", "bool", "ints" (an int or a per-link list of ints), "strs" (a str or a list of str),
# "counters" (a map of counter name -> int), "list" (checked by its own code)

COUNTERS = {"replay": "ints", "recovery": "ints", "crc_flit": "ints", "crc_data": "ints"}
GPU_KEYS: dict[str, Any] = {
    "index": "int", "name": "str", "uuid": "str", "serial": "str", "numa_node": "int", "pci_path": "str",
    "pci": {"domain": "int", "bus": "int", "device": "int", "device_id": "int"},
    "persistence_mode": "int",
    "pcie": {"gen": "int", "max_gen": "int", "gpu_max_gen": "int", "width": "int", "max_width": "int"},
    "pcie_replay": {"t0": "int", "t1": "int"},
    "nvlink": {"num_links": "int", "state": "ints", "version": "ints", "remote_type": "ints",
               "remote_bus_id": "strs", "errors_t0": COUNTERS, "errors_t1": COUNTERS},
    "fabric": {"state": "int", "status": "int", "health_mask": "int"},
    "ecc_mode": "ints",
    "ecc": {"volatile_dram": "int", "aggregate_dram": "int", "volatile_sram": "int", "aggregate_sram": "int",
            "sram_threshold_exceeded": "int"},
    "remapped_rows": {"correctable": "int", "uncorrectable": "int", "pending": "int", "failure": "int"},
    "remap_histogram": {"max": "int", "high": "int", "partial": "int", "low": "int", "none": "int"},
    "retired_pages": {"single_bit": "int", "double_bit": "int", "pending": "int"},
    "temperature": {"gpu": "int", "slowdown": "int", "shutdown": "int"},
    "power": {"usage_mw": "int", "limit_mw": "int", "default_limit_mw": "int"},
    "clocks_event_reasons": "int", "recovery_action": "int", "p2p_nvlink": "p2p",
    "errors": ANY,
}
NIC_KEYS: dict[str, Any] = {
    "name": "str", "bdf": "str", "numa_node": "int", "pci_path": "str", "hca_type": "str", "fw_ver": "str",
    "board_id": "str", "port": "int", "link_layer": "str", "state": "str", "phys_state": "str", "rate": "str",
    "lid": "str", "sm_lid": "str",
    "pcie": {"current_link_speed": "str", "max_link_speed": "str", "current_link_width": "int",
             "max_link_width": "int"},
    "counters_t0": "counters", "counters_t1": "counters", "hw_counters_t0": "counters",
    "hw_counters_t1": "counters", "missing": "strs", "gids": "list", "netdevs": ANY,
}
GID_KEYS = ("index", "gid", "type", "ndev")
TOP_KEYS: dict[str, Any] = {
    "schema": "str", "hostname": "str", "driver_version": "str", "device_count": "int", "interval_s": None,
    "gpu_defaults": GPU_KEYS, "gpus": "list", "infiniband": {"defaults": NIC_KEYS, "devices": "list"},
    "nvidia_peermem": "bool", "comment": "str", "kernel_log": "str", "nvml_init_error": "str",
    "nvidia_driver": {"open_kernel_module": "bool", "params": ANY}, "gdrdrv": "bool",
    "host": {"hostname": None, "kernel_release": None, "num_logical_cpus": None, "memory_total_bytes": None,
             "boot_time_s": None},
}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and INT_MIN <= value <= INT_MAX


def _check_leaf(value: Any, kind: str, where: str, source: str) -> None:
    """Raise InputError (exit 2) naming ``where`` when a leaf value has the wrong type."""
    if kind == "int":
        good = _is_int(value)
    elif kind == "str":
        good = isinstance(value, str)
    elif kind == "bool":
        good = isinstance(value, bool)
    elif kind == "ints":
        good = _is_int(value) or (isinstance(value, list) and all(_is_int(v) for v in value))
    elif kind == "strs":
        good = isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
    elif kind == "p2p":
        good = _is_int(value) or (isinstance(value, Mapping) and all(_is_int(v) for v in value.values()))
    elif kind == "counters":
        if not isinstance(value, Mapping):
            raise InputError(f"{source}: {where} must be a mapping of counter name -> integer")
        for name, count in value.items():
            if not isinstance(name, str) or not COUNTER_NAME.fullmatch(name):
                raise InputError(f"{source}: {where} has a counter named {name!r}",
                                 hint="counter names are sysfs file names: letters, digits and _ only")
            if not _is_int(count) or count < 0:
                raise InputError(f"{source}: {where}.{name} must be an integer from 0 to {INT_MAX}, got {count!r}")
        return
    else:
        return
    if not good:
        what = {"int": "an integer", "str": "a string", "bool": "true or false", "ints": "an integer or a list of "
                "integers", "strs": "a string or a list of strings", "p2p": "an integer or a map of peer -> integer"}
        raise InputError(f"{source}: {where} must be {what[kind]}, got {value!r}")


#: host facts: key -> accepted types (older records have no ``host`` section at all)
HOST_TYPES: dict[str, tuple[type, ...]] = {
    "hostname": (str,), "kernel_release": (str,), "num_logical_cpus": (int,), "memory_total_bytes": (int,),
    "boot_time_s": (int, float),
}


#: host facts: key -> exclusive upper bound (boot_time_s: 10000-01-01T00:00Z, past which no date can be printed)
HOST_LIMITS: dict[str, float] = {"boot_time_s": 253_402_300_800.0}


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
              and isinstance(value, types) and 0 <= value < HOST_LIMITS.get(key, float("inf"))):
            out[key] = float(value) if key == "boot_time_s" else value
        else:
            kind = ("a string" if types == (str,) else "a Unix time in seconds before the year 10000"
                    if key == "boot_time_s" else "a finite non-negative number")
            raise InputError(f"{source}: host.{key} must be {kind}, got {value!r}")
    return out


def _check_keys(data: Any, schema: Any, where: str, source: str) -> None:
    if schema is None or isinstance(schema, str):
        if schema == ANY and not isinstance(data, Mapping):
            raise InputError(f"{source}: {where} must be a mapping")
        if isinstance(schema, str) and schema != ANY:
            _check_leaf(data, schema, where, source)
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


def _check_pci_path(value: Any, where: str, source: str) -> None:
    """``pci0000:15/0000:15:01.0/0000:16:00.0``: a root bus then bridge BDFs, each one path component."""
    if value is None:
        return
    parts = str(value).split("/")
    if not ROOT_BUS.fullmatch(parts[0]) or not all(BDF.fullmatch(p) for p in parts[1:]):
        raise InputError(f"{source}: {where} {value!r} is not a PCI bridge chain",
                         hint="use the sysfs form pciDDDD:BB/DDDD:BB:DD.F/..., e.g. pci0000:15/0000:15:01.0")


def _check_gpu(gpu: Mapping[str, Any], where: str, source: str) -> None:
    _check_pci_path(gpu.get("pci_path"), f"{where}.pci_path", source)
    pci = gpu.get("pci") or {}
    for key, top in (("domain", 0xFFFFFFFF), ("bus", 0xFF), ("device", 0x1F)):
        if key in pci and not 0 <= pci[key] <= top:
            raise InputError(f"{source}: {where}.pci.{key} must be from 0 to {top:#x}, got {pci[key]!r}")
    for key, code in (gpu.get("errors") or {}).items():
        if not isinstance(key, str) or not isinstance(code, str):
            raise InputError(f"{source}: {where}.errors maps an NVML function name to an error name, got "
                             f"{key!r}: {code!r}", hint="e.g. errors: {nvmlDeviceGetPowerUsage: NOT_SUPPORTED}")


def _check_nic(nic: Mapping[str, Any], where: str, source: str) -> None:
    """Every NIC field that becomes a sysfs path component is a plain name (no ``/``, no ``..``)."""
    for key in ("name", "bdf"):
        if key not in nic:
            raise InputError(f"{source}: {where} needs {key}")
    if not isinstance(nic["name"], str) or not NAME.fullmatch(nic["name"]):
        raise InputError(f"{source}: {where}.name {nic['name']!r} is not an RDMA device name",
                         hint="letters, digits, _ . : - (a letter or digit first, at most 64), e.g. mlx5_0")
    if not isinstance(nic["bdf"], str) or not BDF.fullmatch(nic["bdf"]):
        raise InputError(f"{source}: {where}.bdf {nic['bdf']!r} is not a PCI address",
                         hint="use the Linux form domain:bus:device.function, e.g. 0000:18:00.0")
    _check_pci_path(nic.get("pci_path"), f"{where}.pci_path", source)
    port = nic.get("port", 1)
    if not 1 <= port <= 255:
        raise InputError(f"{source}: {where}.port must be a port number from 1 to 255, got {port!r}")
    for key in ("lid", "sm_lid"):
        if key in nic and not HEX_LID.fullmatch(nic[key]):
            raise InputError(f"{source}: {where}.{key} {nic[key]!r} is not a LID", hint="e.g. '0x11' (hex)")
    for dev, state in (nic.get("netdevs") or {}).items():
        if not isinstance(dev, str) or not NETDEV.fullmatch(dev):
            raise InputError(f"{source}: {where}.netdevs has a netdev named {dev!r}",
                             hint="a Linux interface name: 1-15 of letters, digits, _ . -")
        if not isinstance(state, str):
            raise InputError(f"{source}: {where}.netdevs.{dev} must be an operstate string such as up")
    _check_gids(nic.get("gids"), f"{where}.gids", source)


def check_record_numbers(data: Any, source: str) -> None:
    """Record integers fit what NVML and sysfs return, 64 bits (else exit 2, not an overflow deep inside a
    check). Floats are checked where they are used (NaN and inf are named there). Iterative: any depth."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, dict):
            stack.extend((f"{where}.{key}" if where else str(key), value) for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((f"{where}[{index}]", value) for index, value in enumerate(node))
        elif isinstance(node, int) and not isinstance(node, bool) and not -(2**63) <= node < 2**64:
            raise InputError(f"{source}: {where} is an integer of {len(str(abs(node))):,} digits; record values "
                             "are 64-bit integers")
        elif isinstance(node, str) and len(node) > 20 and ascii_digits(node.strip().lstrip("+-")):
            # quoted digits are read as integers by the fake NVML (as sysfs text is by the reader)
            raise InputError(f"{source}: {where} is a number of {len(node.strip()):,} digits; record values are "
                             "64-bit integers")


def normalize(data: Any, source: str = "fixture") -> dict[str, Any]:
    """Validate a fake-node record and expand the defaults.

    Returns ``{hostname, driver_version, device_count, interval_s, gpus: [full dicts], nics: [full dicts],
    nvidia_peermem, host: dict or None, kernel_log, nvml_init_error, nvidia_driver, gdrdrv}``. Unknown keys, values
    of the wrong type and names that would not stay one sysfs path component raise :class:`InputError` naming
    ``source`` and the key path.
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
        _check_gpu(merged, f"gpus[{i}]", source)
        gpus.append(merged)
    ib = data.get("infiniband", {}) or {}
    nic_defaults = ib.get("defaults", {}) or {}
    devices = ib.get("devices", []) or []
    if not isinstance(devices, list):
        raise InputError(f"{source}: infiniband.devices must be a list")
    nics = []
    names: set[str] = set()
    for i, entry in enumerate(devices):
        _check_keys(entry, NIC_KEYS, f"infiniband.devices[{i}]", source)
        nic = deep_merge(nic_defaults, entry)
        _check_nic(nic, f"infiniband.devices[{i}]", source)
        if nic["name"] in names:
            raise InputError(f"{source}: infiniband.devices[{i}].name {nic['name']!r} appears twice")
        names.add(nic["name"])
        nics.append(nic)
    interval = data.get("interval_s", 10.0)
    if (not isinstance(interval, (int, float)) or isinstance(interval, bool) or not math.isfinite(interval)
            or interval < 0):
        raise InputError(f"{source}: interval_s must be 0 (one sample) or a positive number of seconds, "
                         f"got {interval!r}")
    count = data.get("device_count", len(gpus))
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_GPUS:
        raise InputError(f"{source}: device_count must be an integer from 0 to {MAX_GPUS}, got {count!r}")
    driver = data.get("nvidia_driver")
    for key, value in ((driver or {}).get("params") or {}).items():
        if not isinstance(key, str) or not isinstance(value, (str, int)) or isinstance(value, bool):
            raise InputError(f"{source}: nvidia_driver.params maps a parameter name to a string or integer, got "
                             f"{key!r}: {value!r}", hint='e.g. {EnableStreamMemOPs: 1, RegistryDwords: '
                                                      '"PeerMappingOverride=1;"}')
    return {
        "hostname": str(data.get("hostname", "fake-node")),
        "driver_version": str(data.get("driver_version", "550.54.15")),
        "device_count": count,
        "interval_s": float(interval),
        "gpus": gpus,
        "nics": nics,
        "nvidia_peermem": bool(data.get("nvidia_peermem", True)),
        "host": _host(data, source),
        "kernel_log": data.get("kernel_log"),
        "nvml_init_error": data.get("nvml_init_error"),
        "nvidia_driver": driver,
        "gdrdrv": bool(data.get("gdrdrv", False)),
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
        if (not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 2**16
                or not isinstance(gid.get("gid"), str)):
            raise InputError(f"{source}: {where}[{j}] needs index (an integer >= 0) and gid (a string); "
                             "index at most 65535",
                             hint="e.g. {index: 3, gid: '0000:0000:0000:0000:0000:ffff:0a00:0011', type: RoCE v2, "
                                  "ndev: ens1np0}")
        ndev = gid.get("ndev")
        if ndev is not None and (not isinstance(ndev, str) or not NETDEV.fullmatch(ndev)):
            raise InputError(f"{source}: {where}[{j}].ndev {ndev!r} is not a netdev name",
                             hint="a Linux interface name: 1-15 of letters, digits, _ . -")
        if not isinstance(gid.get("type", ""), str):
            raise InputError(f"{source}: {where}[{j}].type must be a string such as RoCE v2")


def per_link(value: Any, link: int, what: str, source: str) -> Any:
    """A per-link fixture value: a scalar applies to every link, a list gives one value per link."""
    if isinstance(value, list):
        if link >= len(value):
            raise InputError(f"{source}: {what} lists {len(value)} links, link {link} has no value")
        return value[link]
    return value
