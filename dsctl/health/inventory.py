"""``dsctl health show``: what is in the node (GPUs, NVLinks, RDMA NICs) and which NIC each GPU pairs with."""

from __future__ import annotations

from dataclasses import dataclass

from dsctl.health.checks_rdma import AFFINITY_LEVELS, affinity, parse_rate
from dsctl.health.expectations import find_sku
from dsctl.health.model import Gpu, HostFacts, NodeSnapshot, PciDevice, Unavailable


@dataclass(frozen=True)
class GpuRow:
    """One GPU: index, name, Linux bus id, NUMA node, NVLinks (active / the SKU's link count: an H800 shows 8/8 although
    NVML lists 18 link slots, 10 of them disabled by design), nearest compute NIC and PCIe level."""

    index: int
    name: str
    bus_id: str
    numa_node: int
    nvlinks: str
    nic: str
    level: str


@dataclass(frozen=True)
class NicRow:
    """One RDMA device: name, bus id, NUMA node, link layer, state, rate in Gb/s, firmware."""

    name: str
    bus_id: str
    numa_node: int
    link_layer: str
    state: str
    rate_gbps: float | None
    fw_ver: str


@dataclass(frozen=True)
class Inventory:
    """Result of ``dsctl health show``; ``host`` is None when a record carries no host facts."""

    hostname: str
    driver_version: str | None
    gpus: tuple[GpuRow, ...]
    nics: tuple[NicRow, ...]
    host: HostFacts | None = None


def _text(value: object) -> str:
    return str(value) if not isinstance(value, Unavailable) else "n/a"


def _links_expected(gpu: Gpu) -> int:
    """The NVLinks the GPU's SKU has (H800 8, H100 18); NVML's link slot count for a SKU not in the table."""
    sku = find_sku(gpu.name if isinstance(gpu.name, str) else None,
                   gpu.pci_device_id if isinstance(gpu.pci_device_id, int) else None)
    if sku is not None and sku.num_nvlinks:
        return sku.num_nvlinks
    return gpu.num_links if isinstance(gpu.num_links, int) else 0


def build(snap: NodeSnapshot) -> Inventory:
    """Pair each GPU with its nearest NIC (best affinity level, then name)."""
    by_bdf = {d.bdf: d for d in snap.pci_gpus}
    nic_pci = [(n.name, n.pci) for n in snap.nics if isinstance(n.pci, PciDevice)]
    gpus = []
    for gpu in snap.gpus:
        dev = by_bdf.get(gpu.bus_id) if isinstance(gpu.bus_id, str) else None
        nic, level = "-", "-"
        if dev is not None and nic_pci:
            rank, nic = min((AFFINITY_LEVELS.index(affinity(dev, pci)), name) for name, pci in nic_pci)
            level = AFFINITY_LEVELS[rank]
        active = sum(1 for link in gpu.links if link.active is True)
        links = f"{active}/{_links_expected(gpu)}" if isinstance(gpu.num_links, int) else "n/a"
        gpus.append(GpuRow(gpu.index, "LOST" if gpu.lost is not None else _text(gpu.name), _text(gpu.bus_id),
                           dev.numa_node if dev else -1, links, nic, level))
    nics = []
    for n in snap.nics:
        port = n.ports[0] if n.ports else None
        rate = parse_rate(port.rate) if port is not None and isinstance(port.rate, str) else None
        nics.append(NicRow(n.name, n.pci.bdf if isinstance(n.pci, PciDevice) else "n/a",
                           n.pci.numa_node if isinstance(n.pci, PciDevice) else -1,
                           _text(port.link_layer) if port else "n/a", _text(port.state) if port else "n/a",
                           rate[0] if rate else None, _text(n.fw_ver)))
    return Inventory(snap.hostname, snap.driver_version if isinstance(snap.driver_version, str) else None,
                     tuple(gpus), tuple(nics), snap.host)
