"""The narrow interfaces the health sampler talks to; implementations return plain frozen dataclasses."""

from __future__ import annotations

from typing import Protocol

from dsctl.errors import EnvironmentMissing
from dsctl.health.model import DriverFacts, Gpu, Nic, NvLink, PciDevice, Reading, Unavailable


class LibraryMissing(EnvironmentMissing):
    """NVML (libnvidia-ml.so.1) or the driver is absent or mismatched: exit 3."""


class NvmlNoPermission(Exception):
    """``nvmlInit`` answered NO_PERMISSION (``/dev/nvidia*`` not accessible): no GPU can be read, G1 reports it."""

    def __init__(self, why: Unavailable) -> None:
        super().__init__(why.code)
        self.why = why


class GpuBackend(Protocol):
    """GPU facts. ``gpu(i)`` reads everything once (counters at t0); ``counters(i)`` re-reads the counters (t1)."""

    def start(self) -> None:
        """Initialise the library; raise :class:`LibraryMissing` when it cannot be loaded and
        :class:`NvmlNoPermission` when the caller may not open the devices."""

    def stop(self) -> None:
        """Release the library."""

    def driver_version(self) -> Reading[str]:
        """Driver version string, e.g. ``550.54.15``."""

    def device_count(self) -> Reading[int]:
        """Number of GPUs NVML enumerates."""

    def gpu(self, index: int) -> Gpu:
        """Every reading for GPU ``index``; a lost GPU comes back with ``lost`` set, never as an exception."""

    def counters(self, index: int, links: tuple[NvLink, ...]) -> tuple[tuple[NvLink, ...], Reading[int]]:
        """Re-read NVLink DL error counters into ``errors_t1`` of ``links`` and the PCIe replay counter."""

    def p2p_nvlink(self, index: int, peer: int) -> Reading[int]:
        """nvmlDeviceGetP2PStatus(index, peer, NVLINK): 0 is OK."""


class RdmaSource(Protocol):
    """sysfs facts: GPU PCI functions, RDMA devices and ports, GPUDirect RDMA module."""

    def pci_gpus(self) -> tuple[PciDevice, ...]:
        """NVIDIA 3D/VGA controllers (vendor 0x10de, class 0x03xxxx) under /sys/bus/pci/devices."""

    def pci_device(self, bdf: str) -> Reading[PciDevice]:
        """One PCI function by Linux BDF (``0000:18:00.0``)."""

    def nics(self) -> tuple[Nic, ...]:
        """Every /sys/class/infiniband device with counters at t0 (``counters_t1`` empty until ``recount``)."""

    def recount(self, nics: tuple[Nic, ...]) -> tuple[Nic, ...]:
        """The same NICs with ``counters_t1`` read now."""

    def nvidia_peermem(self) -> bool:
        """True when /sys/module/nvidia_peermem exists."""

    def driver_facts(self) -> DriverFacts:
        """NVIDIA driver flavour and options (/proc/driver/nvidia) and GDRCopy's gdrdrv module."""
