"""What a healthy node looks like: a data table keyed by GPU SKU, combined with the node profile's counts.

Sources: docs/health.md and the reference sheet (H100: 18 NVLink 4 links, PCIe Gen5 x16, 700 W default limit;
H800: 8 links [unconfirmed on hardware]; ConnectX-7 NDR: 400 Gb/s, PCIe 32 GT/s x16).
"""

from __future__ import annotations

from dataclasses import dataclass

from dsctl.profiles.schema import NodeProfile


@dataclass(frozen=True)
class GpuSku:
    """Expected values for one GPU SKU. ``pci_device_ids`` hold the upper 16 bits of nvmlPciInfo_t.pciDeviceId."""

    key: str
    names: tuple[str, ...]
    pci_device_ids: tuple[int, ...]
    num_nvlinks: int
    pcie_gen: int
    pcie_width: int
    default_power_w: float
    node_profile: str | None = None


#: data, not code branches: extend this table for new SKUs
GPU_SKUS: tuple[GpuSku, ...] = (
    GpuSku("H100-SXM", ("NVIDIA H100 80GB HBM3",), (0x2330,), 18, 5, 16, 700.0, "h100-hgx"),
    GpuSku("H800-SXM", ("NVIDIA H800 80GB HBM3", "NVIDIA H800"), (0x2324,), 8, 5, 16, 700.0, "h800-hgx"),
    GpuSku("H200-SXM", ("NVIDIA H200", "NVIDIA H200 141GB HBM3e"), (0x2335,), 18, 5, 16, 700.0, "h200-hgx"),
    GpuSku("L40S", ("NVIDIA L40S",), (0x26B9,), 0, 4, 16, 350.0, None),
)

#: PCIe replays per lane per minute at BER 1e-12, by generation (DCGM DcgmGPUHardwareLimits.h)
PCIE_REPLAYS_PER_LANE_PER_MIN = {1: 0.15, 2: 0.3, 3: 0.48, 4: 0.96, 5: 1.92, 6: 3.84}


def find_sku(name: str | None, pci_device_id: int | None) -> GpuSku | None:
    """The SKU row matching an nvmlPciInfo_t.pciDeviceId (e.g. 0x233010DE) or, failing that, the GPU name."""
    if pci_device_id is not None:
        dev = (pci_device_id >> 16) & 0xFFFF
        for sku in GPU_SKUS:
            if dev in sku.pci_device_ids:
                return sku
    if name:
        for sku in GPU_SKUS:
            if name in sku.names:
                return sku
    return None


@dataclass(frozen=True)
class Expectations:
    """Targets the checks compare against. ``None`` means "not known: do not check" (shown as SKIP/INFO)."""

    source: str
    num_gpus: int | None
    num_nvlinks_per_gpu: int | None
    pcie_gen: int | None
    pcie_width: int | None
    default_power_w: float | None
    num_compute_nics: int | None
    compute_nic_gbps: float | None
    compute_link_layer: str | None
    nic_pcie_gt_s: float = 32.0
    nic_pcie_width: int = 16


def expectations_for(profile: NodeProfile | None, sku: GpuSku | None) -> Expectations:
    """Merge the node profile (counts, NIC rate, links per GPU) with the SKU row (PCIe, power)."""
    parts = []
    if profile is not None:
        parts.append(f"node profile {profile.name}")
    if sku is not None:
        parts.append(f"SKU {sku.key}")
    return Expectations(
        source=" + ".join(parts) or "none (no profile, unknown SKU)",
        num_gpus=profile.num_gpus if profile else None,
        num_nvlinks_per_gpu=profile.num_nvlinks_per_gpu if profile else (sku.num_nvlinks if sku else None),
        pcie_gen=sku.pcie_gen if sku else None,
        pcie_width=sku.pcie_width if sku else None,
        default_power_w=sku.default_power_w if sku else None,
        num_compute_nics=profile.num_compute_nics if profile else None,
        compute_nic_gbps=profile.compute_nic_gbps if profile else None,
        compute_link_layer=profile.compute_link_layer if profile else None,
    )
