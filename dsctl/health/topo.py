"""``dsctl health topo``: the GPU/NIC matrix of ``nvidia-smi topo -m`` from a snapshot, and the network plane each
compute NIC serves.

Cells between two devices: ``X`` itself, ``NV<n>`` two GPUs joined by NVLink (``n`` = the fewer active links of the
two, as every HGX link reaches the NVSwitch fabric), else the PCIe level of :func:`affinity`: PIX, PXB, PHB, NODE,
SYS. Planes: GPUs and compute NICs are paired best level first over the whole node (ties: lower GPU index, then NIC
name), and the NIC paired with GPU *i* serves network plane *i* (the multi-plane / rail-optimised convention of the
node profiles: compute NIC *i* pairs with GPU *i*). NICs that serve no GPU (storage, management) have no plane.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dsctl.health.checks_rdma import AFFINITY_LEVELS, affinity, compute_nics
from dsctl.health.expectations import Expectations
from dsctl.health.model import NodeSnapshot, PciDevice


@dataclass(frozen=True)
class TopoDevice:
    """One row/column of the matrix: ``GPU3`` / ``NIC0``, the NVML index or RDMA name, bus id, NUMA node."""

    label: str
    name: str
    bus_id: str
    numa_node: int


@dataclass(frozen=True)
class PlaneRow:
    """A compute NIC, the GPU it is paired with (None: serves no GPU), their PCIe level and the plane (= GPU index)."""

    nic: str
    gpu: int | None
    level: str
    numa_node: int
    plane: int | None


@dataclass(frozen=True)
class TopoMatrix:
    """Result of ``dsctl health topo``. ``cells[i][j]`` is the link between ``devices[i]`` and ``devices[j]``."""

    hostname: str
    devices: tuple[TopoDevice, ...]
    cells: tuple[tuple[str, ...], ...]
    planes: tuple[PlaneRow, ...]
    compute_link_layer: str

    def to_data(self) -> dict[str, Any]:
        return {
            "hostname": self.hostname,
            "devices": [{"label": d.label, "name": d.name, "bus_id": d.bus_id, "numa_node": d.numa_node}
                        for d in self.devices],
            "matrix": {a.label: {b.label: self.cells[i][j] for j, b in enumerate(self.devices)}
                       for i, a in enumerate(self.devices)},
            "compute_link_layer": self.compute_link_layer,
            "planes": [{"nic": p.nic, "gpu": p.gpu, "level": p.level, "numa_node": p.numa_node, "plane": p.plane}
                       for p in self.planes],
        }


def _gpus(snap: NodeSnapshot) -> list[tuple[int, PciDevice | None, int]]:
    """(NVML index, PCI function, active NVLinks) per GPU; without NVML, the PCI GPUs in bus order."""
    by_bdf = {d.bdf: d for d in snap.pci_gpus}
    if snap.gpus:
        return [(g.index, by_bdf.get(g.bus_id) if isinstance(g.bus_id, str) else None,
                 sum(1 for link in g.links if link.active is True)) for g in snap.gpus]
    return [(i, d, 0) for i, d in enumerate(snap.pci_gpus)]


def _level(a: PciDevice | None, b: PciDevice | None) -> str:
    return affinity(a, b) if a is not None and b is not None else "-"


def build_topo(snap: NodeSnapshot, exp: Expectations) -> TopoMatrix:
    """The matrix over every GPU and every RDMA device, and the plane of each compute NIC."""
    gpus = _gpus(snap)
    nics = sorted(snap.nics, key=lambda n: n.name)
    pcis: list[PciDevice | None] = [pci for _, pci, _ in gpus]
    pcis += [n.pci if isinstance(n.pci, PciDevice) else None for n in nics]
    links = [active for _, _, active in gpus] + [0] * len(nics)
    devices = [TopoDevice(f"GPU{index}", f"gpu{index}", pci.bdf if pci else "n/a", pci.numa_node if pci else -1)
               for index, pci, _ in gpus]
    devices += [TopoDevice(f"NIC{i}", n.name, n.pci.bdf if isinstance(n.pci, PciDevice) else "n/a",
                           n.pci.numa_node if isinstance(n.pci, PciDevice) else -1) for i, n in enumerate(nics)]
    num_gpus = len(gpus)
    cells = []
    for i in range(len(devices)):
        row = []
        for j in range(len(devices)):
            if i == j:
                row.append("X")
            elif i < num_gpus and j < num_gpus and links[i] and links[j]:
                row.append(f"NV{min(links[i], links[j])}")
            else:
                row.append(_level(pcis[i], pcis[j]))
        cells.append(tuple(row))
    compute = {n.name for n in compute_nics(snap, exp)}
    # best pairs first over the whole node, so one misplaced NIC does not push its neighbours off their PIX NIC
    pairs = sorted((AFFINITY_LEVELS.index(affinity(pci, n.pci)), index, n.name) for index, pci, _ in gpus
                   for n in nics if n.name in compute and isinstance(n.pci, PciDevice) and pci is not None)
    taken: dict[str, tuple[int, str]] = {}
    paired: set[int] = set()
    for rank, index, name in pairs:
        if name not in taken and index not in paired:
            taken[name] = (index, AFFINITY_LEVELS[rank])
            paired.add(index)
    planes = tuple(PlaneRow(n.name, taken[n.name][0] if n.name in taken else None,
                            taken[n.name][1] if n.name in taken else "-",
                            n.pci.numa_node if isinstance(n.pci, PciDevice) else -1,
                            taken[n.name][0] if n.name in taken else None)
                   for n in nics if n.name in compute)
    return TopoMatrix(snap.hostname, tuple(devices), tuple(cells), planes,
                      (exp.compute_link_layer or "infiniband").lower())
