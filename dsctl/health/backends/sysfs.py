"""RDMA and PCI facts from sysfs under an injectable root (``--sysfs-root``, default ``/``), and the renderer that
writes a fake node's sysfs tree in exactly the kernel formats (``4: ACTIVE``, ``400 Gb/sec (4X NDR)``, ``0x1a``...).

Paths read: ``sys/bus/pci/devices/<bdf>`` (symlink into ``sys/devices/pciDDDD:BB/...``; files ``vendor``, ``class``,
``numa_node``, ``current_link_speed``, ``max_link_speed``, ``current_link_width``, ``max_link_width``),
``sys/class/infiniband/<dev>/{hca_type,fw_ver,device}``, ``.../ports/<n>/{state,phys_state,rate,link_layer,lid,
sm_lid,counters/*,hw_counters/*}``, on Ethernet (RoCE) ports also ``gids/<i>``, ``gid_attrs/{types,ndevs}/<i>`` and
``sys/class/net/<ndev>/operstate``, ``sys/module/{nvidia_peermem,gdrdrv}`` and
``proc/driver/nvidia/{version,params}``.

The renderer joins every name taken from a record under its root with :func:`dsctl.safepath.safe_join`: a record
can never write outside the temporary folder, whatever its NIC, netdev or counter names say.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsctl.errors import InputError
from dsctl.health.model import DriverFacts, IbPort, Nic, PciDevice, Reading, RoceGid, Unavailable
from dsctl.names import ascii_digits, bounded_int
from dsctl.safepath import safe_join

NVIDIA_VENDOR = 0x10DE
OPEN_MODULE_MARK = "Open Kernel Module"  # /proc/driver/nvidia/version of the open GPU kernel modules
NETDEV_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def parse_params(text: str) -> dict[str, str]:
    """``/proc/driver/nvidia/params`` lines ``EnableStreamMemOPs: 1`` / ``RegistryDwords: "PeerMappingOverride=1;"``
    -> {name: value without quotes}."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out[key.strip()] = value.strip().strip('"')
    return out


def _read(path: Path) -> Reading[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return Unavailable("missing", "MISSING", str(path))


def _read_int(path: Path, base: int = 10) -> Reading[int]:
    text = _read(path)
    if isinstance(text, Unavailable):
        return text
    try:
        return bounded_int(text, str(path), base=base, signed=True)
    except InputError:
        return Unavailable("error", "UNPARSABLE", str(path))


def _counters(folder: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    if not folder.is_dir():
        return out
    for item in sorted(folder.iterdir()):
        value = _read_int(item)
        if not isinstance(value, Unavailable):  # "N/A (no PMA)" and unreadable files are "not supported"
            out[item.name] = value
    return out


class SysfsReader:
    """RdmaSource over a sysfs tree rooted at ``root`` (``/`` on a live node, a temp dir in tests)."""

    def __init__(self, root: Path | str = "/") -> None:
        self.root = Path(root)

    def _pci_from_dir(self, bdf: str, path: Path) -> Reading[PciDevice]:
        if not path.exists():
            return Unavailable("missing", "MISSING", str(path))
        real = Path(os.path.realpath(path))
        devices = Path(os.path.realpath(self.root / "sys" / "devices"))
        try:
            parts = real.relative_to(devices).parts
        except ValueError:
            parts = (real.name,)
        numa = _read_int(real / "numa_node")
        vendor = _read_int(real / "vendor", 16)
        klass = _read_int(real / "class", 16)
        return PciDevice(bdf=bdf, chain=tuple(parts[:-1]), numa_node=numa if isinstance(numa, int) else -1,
                         vendor=vendor if isinstance(vendor, int) else 0,
                         pci_class=klass if isinstance(klass, int) else 0)

    def pci_device(self, bdf: str) -> Reading[PciDevice]:
        return self._pci_from_dir(bdf, self.root / "sys" / "bus" / "pci" / "devices" / bdf)

    def pci_gpus(self) -> tuple[PciDevice, ...]:
        folder = self.root / "sys" / "bus" / "pci" / "devices"
        if not folder.is_dir():
            return ()
        out = []
        for entry in sorted(folder.iterdir()):
            dev = self._pci_from_dir(entry.name, entry)
            if isinstance(dev, PciDevice) and dev.vendor == NVIDIA_VENDOR and (dev.pci_class >> 16) == 0x03:
                out.append(dev)
        return tuple(out)

    def nics(self) -> tuple[Nic, ...]:
        folder = self.root / "sys" / "class" / "infiniband"
        if not folder.is_dir():
            return ()
        return tuple(self._nic(entry) for entry in sorted(folder.iterdir()))

    def _nic(self, path: Path) -> Nic:
        device = path / "device"
        pci: Reading[PciDevice]
        if device.exists():
            bdf = Path(os.path.realpath(device)).name
            pci = self._pci_from_dir(bdf, device)
        else:
            pci = Unavailable("missing", "MISSING", str(device))
        ports = []
        ports_dir = path / "ports"
        if ports_dir.is_dir():
            for port_dir in sorted(ports_dir.iterdir(), key=lambda p: int(p.name) if ascii_digits(p.name) else 0):
                layer = _read(port_dir / "link_layer")
                gids = self._gids(port_dir) if layer == "Ethernet" else ()
                ndevs = sorted({g.ndev for g in gids if isinstance(g.ndev, str)})
                ports.append(IbPort(
                    device=path.name, port=int(port_dir.name) if ascii_digits(port_dir.name) else 0,
                    state=_read(port_dir / "state"), phys_state=_read(port_dir / "phys_state"),
                    rate=_read(port_dir / "rate"), link_layer=layer,
                    lid=_read(port_dir / "lid"), sm_lid=_read(port_dir / "sm_lid"),
                    counters_t0=self._port_counters(port_dir), counters_t1={}, gids=gids,
                    netdev_operstate={dev: self._sys_read(f"class/net/{dev}/operstate") for dev in ndevs}))
        return Nic(name=path.name, hca_type=_read(path / "hca_type"), fw_ver=_read(path / "fw_ver"), pci=pci,
                   pcie_speed=_read(device / "current_link_speed"), pcie_max_speed=_read(device / "max_link_speed"),
                   pcie_width=_read_int(device / "current_link_width"),
                   pcie_max_width=_read_int(device / "max_link_width"), ports=tuple(ports))

    def _sys_read(self, rel: str) -> Reading[str]:
        """``<root>/sys/<rel>``; a failure names ``/sys/<rel>`` (not the root), so a replayed record compares equal."""
        value = _read(self.root / "sys" / rel)
        return Unavailable(value.kind, value.code, f"/sys/{rel}") if isinstance(value, Unavailable) else value

    def _gids(self, port_dir: Path) -> tuple[RoceGid, ...]:
        """Non-zero GID table entries with their type and netdev. Unused entries read as all zeros (their
        ``gid_attrs`` files fail with EINVAL), so they are skipped."""
        folder = port_dir / "gids"
        if not folder.is_dir():
            return ()
        rel = f"class/infiniband/{port_dir.parent.parent.name}/ports/{port_dir.name}/gid_attrs"
        out = []
        for entry in sorted((e for e in folder.iterdir() if ascii_digits(e.name)), key=lambda e: int(e.name)):
            gid = _read(entry)
            if isinstance(gid, Unavailable) or not gid.replace(":", "").strip("0"):
                continue
            out.append(RoceGid(int(entry.name), gid, self._sys_read(f"{rel}/types/{entry.name}"),
                               self._sys_read(f"{rel}/ndevs/{entry.name}")))
        return tuple(out)

    @staticmethod
    def _port_counters(port_dir: Path) -> dict[str, int]:
        return {**_counters(port_dir / "counters"), **_counters(port_dir / "hw_counters")}

    def recount(self, nics: tuple[Nic, ...]) -> tuple[Nic, ...]:
        folder = self.root / "sys" / "class" / "infiniband"
        return tuple(dataclasses.replace(nic, ports=tuple(
            dataclasses.replace(p, counters_t1=self._port_counters(folder / nic.name / "ports" / str(p.port)))
            for p in nic.ports)) for nic in nics)

    def nvidia_peermem(self) -> bool:
        return (self.root / "sys" / "module" / "nvidia_peermem").exists()

    def driver_facts(self) -> DriverFacts:
        version = _read(self.root / "proc" / "driver" / "nvidia" / "version")
        params = _read(self.root / "proc" / "driver" / "nvidia" / "params")
        return DriverFacts(
            open_kernel_module=version if isinstance(version, Unavailable) else OPEN_MODULE_MARK in version,
            params=params if isinstance(params, Unavailable) else parse_params(params),
            gdrdrv=(self.root / "sys" / "module" / "gdrdrv").exists())


def _netdev_name(name: str) -> bool:
    """A netdev name read from ``gid_attrs/ndevs`` is used as a path component only when it is a plain name."""
    return bool(name) and name not in (".", "..") and set(name) <= NETDEV_CHARS


# ---- renderer (fake node -> sysfs tree) ---------------------------------------------------------------------------

def _write(path: Path, text: str) -> None:
    parent = str(path.parent)
    if not os.path.isdir(parent):
        os.makedirs(parent, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")


def _pci_dir(root: Path, chain: str, bdf: str, field: str) -> Path:
    return safe_join(root, "sys", "devices", chain, bdf, field=field)


def _link_pci(root: Path, bdf: str, target: Path, field: str) -> None:
    link = safe_join(root, "sys", "bus", "pci", "devices", bdf, field=field)
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to(target)


def gpu_bdf(gpu: Mapping[str, Any]) -> str:
    pci = gpu.get("pci", {})
    return f"{int(pci.get('domain', 0)):04x}:{int(pci.get('bus', 0)):02x}:{int(pci.get('device', 0)):02x}.0"


def render_sysfs(node: Mapping[str, Any], root: Path) -> None:
    """Write the sysfs tree of a normalized fake node (see :func:`dsctl.health.record.format.normalize`) under ``root``,
    with counters at t0. Files listed in a NIC's ``missing`` are left out. Every path built from a record value
    goes through :func:`safe_join` (InputError naming the record field if it would leave ``root``)."""
    root = Path(root)
    (root / "sys" / "class" / "infiniband").mkdir(parents=True, exist_ok=True)
    (root / "sys" / "bus" / "pci" / "devices").mkdir(parents=True, exist_ok=True)
    for i, gpu in enumerate(node["gpus"]):
        if "pci" not in gpu:
            continue
        bdf = gpu_bdf(gpu)
        chain = gpu.get("pci_path") or f"pci{bdf[:7]}"
        target = _pci_dir(root, chain, bdf, f"gpus[{i}].pci_path")
        _write(target / "vendor", f"0x{NVIDIA_VENDOR:04x}")
        _write(target / "device", f"0x{(int(gpu['pci'].get('device_id', 0)) >> 16) & 0xFFFF:04x}")
        _write(target / "class", "0x030200")
        _write(target / "numa_node", str(gpu.get("numa_node", -1)))
        _link_pci(root, bdf, target, f"gpus[{i}].pci")
    for i, nic in enumerate(node["nics"]):
        where = f"infiniband.devices[{i}]"
        missing = set(nic.get("missing") or [])
        if "device" in missing:
            continue  # the whole RDMA device vanished
        bdf = str(nic["bdf"])
        target = _pci_dir(root, str(nic.get("pci_path") or f"pci{bdf[:7]}"), bdf, f"{where}.pci_path")
        _write(target / "vendor", "0x15b3")
        _write(target / "class", "0x020700")
        _write(target / "numa_node", str(nic.get("numa_node", -1)))
        for key, value in (nic.get("pcie") or {}).items():
            if key not in missing:
                _write(target / key, str(value))
        _link_pci(root, bdf, target, f"{where}.bdf")
        dev = safe_join(root, "sys", "class", "infiniband", str(nic["name"]), field=f"{where}.name")
        dev.mkdir(parents=True, exist_ok=True)
        (dev / "device").symlink_to(target)
        for key in ("hca_type", "fw_ver", "board_id"):
            if key in nic and key not in missing:
                _write(dev / key, str(nic[key]))
        _write(dev / "node_type", "1: CA")
        port = safe_join(dev, "ports", str(nic.get("port", 1)), field=f"{where}.port")
        for key in ("state", "phys_state", "rate", "link_layer", "lid", "sm_lid"):
            if key in nic and key not in missing:
                _write(port / key, str(nic[key]))
        for j, gid in enumerate(nic.get("gids") or []):
            index = str(gid["index"])
            _write(safe_join(port, "gids", index, field=f"{where}.gids[{j}].index"), str(gid["gid"]))
            for key, folder in (("type", "types"), ("ndev", "ndevs")):
                if key in gid:
                    _write(safe_join(port, "gid_attrs", folder, index, field=f"{where}.gids[{j}].index"),
                           str(gid[key]))
        for netdev, operstate in (nic.get("netdevs") or {}).items():
            _write(safe_join(root, "sys", "class", "net", str(netdev), "operstate", field=f"{where}.netdevs"),
                   str(operstate))
    write_counters(node, root, "t0")
    if node.get("nvidia_peermem"):
        (root / "sys" / "module" / "nvidia_peermem").mkdir(parents=True, exist_ok=True)
    if node.get("gdrdrv"):
        (root / "sys" / "module" / "gdrdrv").mkdir(parents=True, exist_ok=True)
    driver = node.get("nvidia_driver")
    if driver is not None:
        proc = root / "proc" / "driver" / "nvidia"
        if "open_kernel_module" in driver:
            flavour = OPEN_MODULE_MARK if driver["open_kernel_module"] else "Kernel Module"
            _write(proc / "version", f"NVRM version: NVIDIA UNIX {flavour} for x86_64  {node['driver_version']}  "
                                     "Release Build  (dvs-builder@U16-I3-B03-4-3)")
        params = driver.get("params")
        if params is not None:
            _write(proc / "params", "\n".join(f'{k}: "{v}"' if isinstance(v, str) and not ascii_digits(v)
                                               else f"{k}: {v}" for k, v in params.items()))


def write_counters(node: Mapping[str, Any], root: Path, phase: str) -> None:
    """Write every NIC's ``counters/`` and ``hw_counters/``: all ``*_t0`` values for t0; for t1 only the counters
    whose ``*_t1`` value differs (the others keep their t0 value, as an idle counter would)."""
    for i, nic in enumerate(node["nics"]):
        if "device" in set(nic.get("missing") or []):
            continue
        where = f"infiniband.devices[{i}]"
        port = safe_join(Path(root), "sys", "class", "infiniband", str(nic["name"]), "ports", str(nic.get("port", 1)),
                         field=f"{where}.name")
        for folder in ("counters", "hw_counters"):
            base = dict(nic.get(f"{folder}_t0") or {})
            later = dict(nic.get(f"{folder}_{phase}") or {}) if phase != "t0" else {}
            values = base if phase == "t0" else {k: v for k, v in later.items() if base.get(k) != v}
            for name, value in values.items():
                _write(safe_join(port, folder, str(name), field=f"{where}.{folder}_{phase}"), str(value))
