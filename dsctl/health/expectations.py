"""What a healthy node looks like: a data table keyed by GPU SKU, combined with the node profile's counts.

Sources: docs/health.md and the reference sheet (H100: 18 NVLink 4 links, PCIe Gen5 x16, 700 W default limit;
H800: 8 links [unconfirmed on hardware]; ConnectX-7 NDR: 400 Gb/s, PCIe 32 GT/s x16).
"""

from __future__ import annotations

import re
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


def sku_for_profile(profile: NodeProfile) -> GpuSku | None:
    """The SKU row a node profile describes, from its ``gpu.model``: an exact NVML name of a row, else the row whose
    model token (``H800`` of ``H800-SXM``) is a word of it (``NVIDIA H800 SXM5``), else the row that names this
    profile as its default. None when the model maps to no row (then it is not compared with the GPUs)."""
    for sku in GPU_SKUS:
        if profile.gpu_model in sku.names:
            return sku
    words = {w for w in re.split(r"[\s_/()-]+", profile.gpu_model.upper()) if w}
    for sku in GPU_SKUS:
        if sku.key.split("-")[0].upper() in words:
            return sku
    for sku in GPU_SKUS:
        if sku.node_profile == profile.name:
            return sku
    return None


@dataclass(frozen=True)
class ProfileMismatch:
    """A node profile whose GPU model is not the GPU SKU detected on the node.

    ``detected_sku`` is None when the GPUs are not in the SKU table. ``profile_nvlinks`` / ``used_nvlinks`` are the
    NVLinks per GPU the profile states and the number the checks use (the detected SKU's when it is known).
    """

    profile: str
    profile_gpu_model: str
    profile_sku: str
    detected_name: str
    detected_sku: str | None
    suggested_profile: str | None
    profile_nvlinks: int
    used_nvlinks: int

    @property
    def detected(self) -> str:
        """``NVIDIA H800 80GB HBM3 (H800-SXM)``, or the bare name for an SKU not in the table."""
        return f"{self.detected_name} ({self.detected_sku})" if self.detected_sku else self.detected_name

    @property
    def hint(self) -> str:
        """One clause for the remedy of every profile-driven finding."""
        return (f"or the node profile is wrong: {self.profile} describes {self.profile_gpu_model}, "
                f"the GPUs are {self.detected}")


@dataclass(frozen=True)
class Expectations:
    """Targets the checks compare against. ``None`` means "not known: do not check" (shown as SKIP/INFO).

    ``mismatch`` is set when the node profile's GPU model is not the detected SKU (G4 WARN); the NVLink count then
    comes from the detected SKU, and the other profile-driven findings (G2, G6, R1, R3) add a hint to their remedy.
    """

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
    mismatch: ProfileMismatch | None = None

    def profile_remedy(self, remedy: str) -> str:
        """``remedy``, plus the "node profile is wrong" hint when the profile does not match the GPUs."""
        return f"{remedy}; {self.mismatch.hint}" if self.mismatch is not None else remedy


def expectations_for(profile: NodeProfile | None, sku: GpuSku | None,
                     detected_name: str | None = None) -> Expectations:
    """Merge the node profile (counts, NIC rate, links per GPU) with the SKU row (PCIe, power).

    ``detected_name`` is the NVML name of the node's GPUs (None when no GPU answered). When the profile's GPU model
    maps to an SKU row other than ``sku`` (or the GPUs are not in the table at all), the mismatch is recorded and,
    if ``sku`` is known, NVLinks per GPU come from ``sku``: links the GPU does not have are not "down".
    """
    parts = []
    mismatch = None
    nvlinks = profile.num_nvlinks_per_gpu if profile else (sku.num_nvlinks if sku else None)
    if profile is not None:
        parts.append(f"node profile {profile.name}")
        wanted = sku_for_profile(profile)
        if wanted is not None and detected_name is not None and (sku is None or sku.key != wanted.key):
            used = sku.num_nvlinks if sku is not None else profile.num_nvlinks_per_gpu
            mismatch = ProfileMismatch(profile.name, profile.gpu_model, wanted.key, detected_name,
                                       sku.key if sku else None, sku.node_profile if sku else None,
                                       profile.num_nvlinks_per_gpu, used)
            nvlinks = used
            parts[-1] += f" (for {wanted.key}: does not match the GPUs)"
    if sku is not None:
        parts.append(f"SKU {sku.key}")
        if mismatch is not None:
            parts[-1] += " (NVLinks per GPU from the SKU)"
    return Expectations(
        source=" + ".join(parts) or "none (no profile, unknown SKU)",
        num_gpus=profile.num_gpus if profile else None,
        num_nvlinks_per_gpu=nvlinks,
        pcie_gen=sku.pcie_gen if sku else None,
        pcie_width=sku.pcie_width if sku else None,
        default_power_w=sku.default_power_w if sku else None,
        num_compute_nics=profile.num_compute_nics if profile else None,
        compute_nic_gbps=profile.compute_nic_gbps if profile else None,
        compute_link_layer=profile.compute_link_layer if profile else None,
        mismatch=mismatch,
    )
