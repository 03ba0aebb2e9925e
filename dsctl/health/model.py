"""Plain-data snapshots of one node (GPUs through NVML, NICs through sysfs) and the findings checks return.

Every reading is either a plain value or :class:`Unavailable` (NotSupported, NoPermission, GPU lost, file missing):
"not supported" is a value, never an exception. Nothing here knows about pynvml or ctypes.
Units: power in milliwatts (``_mw``), temperatures in degrees Celsius (``_c``), intervals in seconds (``_s``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar, Union

T = TypeVar("T")


@dataclass(frozen=True)
class Unavailable:
    """A reading that could not be taken.

    ``kind`` is one of ``unsupported``, ``no_permission``, ``gpu_lost``, ``library_missing``, ``error``, ``missing``
    (sysfs file absent); ``code`` is the NVML error name (``NOT_SUPPORTED``, ``GPU_IS_LOST``...) or ``MISSING``;
    ``source`` is the NVML function or sysfs file that failed.
    """

    kind: str
    code: str
    source: str = ""

    def __str__(self) -> str:
        return f"n/a ({self.code.lower()})"


# a value or the reason it is missing
Reading = Union[T, Unavailable]


def ok(value: object) -> bool:
    """True when ``value`` is a real reading, not :class:`Unavailable`."""
    return not isinstance(value, Unavailable)


NVLINK_COUNTERS = ("replay", "recovery", "crc_flit", "crc_data")


@dataclass(frozen=True)
class NvLink:
    """One NVLink of one GPU. ``active`` from nvmlDeviceGetNvLinkState; counters are DL error totals at t0/t1."""

    link: int
    active: Reading[bool]
    version: Reading[int]
    remote_type: Reading[int]
    remote_bus_id: Reading[str]
    errors_t0: Reading[dict[str, int]]
    errors_t1: Reading[dict[str, int]]


@dataclass(frozen=True)
class GpuFabricInfo:
    """nvmlDeviceGetGpuFabricInfoV: state 0 n/a, 1 not started, 2 in progress, 3 completed; status an nvmlReturn."""

    state: int
    status: int
    health_mask: int


@dataclass(frozen=True)
class Pcie:
    """GPU PCIe link: generations and widths (lanes) now and at most; ``gpu_max_gen`` is the GPU's own maximum."""

    gen: Reading[int]
    max_gen: Reading[int]
    gpu_max_gen: Reading[int]
    width: Reading[int]
    max_width: Reading[int]


@dataclass(frozen=True)
class Ecc:
    """ECC mode (1 enabled) and uncorrected error totals (volatile = since driver load, aggregate = lifetime)."""

    mode_current: Reading[int]
    mode_pending: Reading[int]
    volatile_dram: Reading[int]
    aggregate_dram: Reading[int]
    volatile_sram: Reading[int]
    aggregate_sram: Reading[int]
    sram_threshold_exceeded: Reading[int]


@dataclass(frozen=True)
class RemappedRows:
    """nvmlDeviceGetRemappedRows plus the row-remapper histogram (banks with max/high/partial/low/no spare rows)."""

    correctable: int
    uncorrectable: int
    pending: int
    failure: int
    histogram: Reading[dict[str, int]]


@dataclass(frozen=True)
class RetiredPages:
    """Pre-Ampere page retirement: pages retired for multiple single-bit and for double-bit ECC errors
    (nvmlDeviceGetRetiredPages per cause) and whether a retirement waits for a reboot (PendingStatus)."""

    single_bit: int
    double_bit: int
    pending: Reading[int]


@dataclass(frozen=True)
class Thermal:
    """GPU temperature and its slowdown/shutdown thresholds, degrees C."""

    gpu_c: Reading[int]
    slowdown_c: Reading[int]
    shutdown_c: Reading[int]


@dataclass(frozen=True)
class Power:
    """Power draw and limits in milliwatts."""

    usage_mw: Reading[int]
    limit_mw: Reading[int]
    default_limit_mw: Reading[int]


@dataclass(frozen=True)
class Gpu:
    """Everything read about one GPU; ``lost`` is set when even its handle could not be obtained (Xid 79 class).

    ``pcie_replay_t0/t1`` are PCIe replay counter samples ``interval_s`` apart. ``p2p_nvlink`` maps a peer GPU index
    to nvmlDeviceGetP2PStatus(NVLINK) (0 = OK). ``bus_id`` uses the Linux form ``0000:18:00.0``.
    """

    index: int
    lost: Unavailable | None = None
    name: Reading[str] = Unavailable("gpu_lost", "GPU_IS_LOST")
    uuid: Reading[str] = Unavailable("gpu_lost", "GPU_IS_LOST")
    serial: Reading[str] = Unavailable("gpu_lost", "GPU_IS_LOST")
    bus_id: Reading[str] = Unavailable("gpu_lost", "GPU_IS_LOST")
    pci_device_id: Reading[int] = Unavailable("gpu_lost", "GPU_IS_LOST")
    persistence_mode: Reading[int] = Unavailable("gpu_lost", "GPU_IS_LOST")
    num_links: Reading[int] = Unavailable("gpu_lost", "GPU_IS_LOST")
    links: tuple[NvLink, ...] = ()
    fabric: Reading[GpuFabricInfo] = Unavailable("gpu_lost", "GPU_IS_LOST")
    pcie: Reading[Pcie] = Unavailable("gpu_lost", "GPU_IS_LOST")
    pcie_replay_t0: Reading[int] = Unavailable("gpu_lost", "GPU_IS_LOST")
    pcie_replay_t1: Reading[int] = Unavailable("gpu_lost", "GPU_IS_LOST")
    ecc: Reading[Ecc] = Unavailable("gpu_lost", "GPU_IS_LOST")
    remapped_rows: Reading[RemappedRows] = Unavailable("gpu_lost", "GPU_IS_LOST")
    retired_pages: Reading[RetiredPages] = Unavailable("gpu_lost", "GPU_IS_LOST")
    thermal: Reading[Thermal] = Unavailable("gpu_lost", "GPU_IS_LOST")
    power: Reading[Power] = Unavailable("gpu_lost", "GPU_IS_LOST")
    clocks_event_reasons: Reading[int] = Unavailable("gpu_lost", "GPU_IS_LOST")
    recovery_action: Reading[int] = Unavailable("gpu_lost", "GPU_IS_LOST")
    inforom_valid: Reading[bool] = Unavailable("gpu_lost", "GPU_IS_LOST")
    p2p_nvlink: dict[int, Reading[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class PciDevice:
    """A PCI function seen in sysfs: Linux BDF, the bridge chain above it (``pci0000:15``, ``0000:15:01.0``...),
    NUMA node (-1 unknown), vendor and class ids."""

    bdf: str
    chain: tuple[str, ...]
    numa_node: int
    vendor: int = 0
    pci_class: int = 0


@dataclass(frozen=True)
class RoceGid:
    """One non-zero entry of an Ethernet (RoCE) port's GID table: ``ports/<n>/gids/<index>`` (``fe80:0000:...`` or
    ``0000:...:ffff:0a00:0011`` for IPv4 10.0.0.17), its type from ``gid_attrs/types/<index>`` (``RoCE v2`` or
    ``IB/RoCE v1``) and the netdev from ``gid_attrs/ndevs/<index>``."""

    index: int
    gid: str
    type: Reading[str]
    ndev: Reading[str]


@dataclass(frozen=True)
class IbPort:
    """One RDMA port from /sys/class/infiniband/<dev>/ports/<n>: raw kernel strings plus counters at t0/t1.

    ``counters_*`` merge ``counters/`` and ``hw_counters/`` (hw ones keep their own names); missing files are absent.
    Ethernet (RoCE) ports also carry their non-zero GIDs and the ``/sys/class/net/<dev>/operstate`` of every netdev
    those GIDs name (``up``, ``down``...); both stay empty on InfiniBand ports, which are not read for them.
    """

    device: str
    port: int
    state: Reading[str]
    phys_state: Reading[str]
    rate: Reading[str]
    link_layer: Reading[str]
    lid: Reading[str]
    sm_lid: Reading[str]
    counters_t0: dict[str, int]
    counters_t1: dict[str, int]
    gids: tuple[RoceGid, ...] = ()
    netdev_operstate: dict[str, Reading[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Nic:
    """An RDMA device: identity, PCI placement and link, and its ports."""

    name: str
    hca_type: Reading[str]
    fw_ver: Reading[str]
    pci: Reading[PciDevice]
    pcie_speed: Reading[str]
    pcie_max_speed: Reading[str]
    pcie_width: Reading[int]
    pcie_max_width: Reading[int]
    ports: tuple[IbPort, ...]


@dataclass(frozen=True)
class HostFacts:
    """Host identity read with psutil (live) or carried in a record; ``None`` where it could not be read.

    ``memory_total_bytes`` is physical RAM in bytes; ``boot_time_s`` is the boot instant in seconds since the Unix
    epoch (UTC); ``num_logical_cpus`` counts hardware threads.
    """

    hostname: str | None = None
    kernel_release: str | None = None
    num_logical_cpus: int | None = None
    memory_total_bytes: int | None = None
    boot_time_s: float | None = None


@dataclass(frozen=True)
class DriverFacts:
    """What GPUDirect RDMA and DeepEP's IBGDA path need from the NVIDIA kernel driver, read from
    ``/proc/driver/nvidia/version`` (``open_kernel_module``: the open GPU kernel modules, which DMA-BUF needs),
    ``/proc/driver/nvidia/params`` (``Key: value`` lines, quotes stripped) and ``/sys/module/gdrdrv`` (GDRCopy)."""

    open_kernel_module: Reading[bool]
    params: Reading[dict[str, str]]
    gdrdrv: bool


@dataclass(frozen=True)
class NodeSnapshot:
    """One sampled node: NVML view (driver, GPUs), sysfs view (GPU PCI functions, RDMA NICs, peermem) and the host
    facts (``host``; ``None`` when a record predates them).

    ``interval_s`` 0 means one sample only (``counters_t1`` equal ``t0``; rate checks are skipped). ``nvml`` is set
    when ``nvmlInit`` itself answered an error that is not "library missing" (NO_PERMISSION): no GPU was read.
    ``kernel_log`` is kernel-log text carried by a record (G22); ``driver`` the NVIDIA driver facts (None when not
    read); ``source`` says where the readings came from (:attr:`dsctl.health.source.SourceChoice.origin`)."""

    hostname: str
    driver_version: Reading[str]
    device_count: Reading[int]
    gpus: tuple[Gpu, ...]
    pci_gpus: tuple[PciDevice, ...]
    nics: tuple[Nic, ...]
    nvidia_peermem: bool
    interval_s: float
    nvml: Unavailable | None = None
    host: HostFacts | None = None
    kernel_log: str | None = None
    driver: DriverFacts | None = None
    source: str = ""


class Severity(Enum):
    """Finding severity, worst first: CRIT drain/fix, WARN degraded, INFO reported, SKIP not supported, OK pass."""

    CRIT = "CRIT"
    WARN = "WARN"
    INFO = "INFO"
    SKIP = "SKIP"
    OK = "OK"

    @property
    def rank(self) -> int:
        return SEVERITY_ORDER.index(self)


SEVERITY_ORDER = [Severity.CRIT, Severity.WARN, Severity.INFO, Severity.SKIP, Severity.OK]


#: the check id a check function gives its findings: :func:`dsctl.health.api.run_checks` stamps the id the check
#: table (``dsctl.health.checks.CHECKS``) gives that function, so an id is written in one place only
THIS_CHECK = "?"


@dataclass(frozen=True)
class Finding:
    """One result line: check id (G6, R3...), severity, subject (``gpu3``, ``gpu3 link 7``, ``mlx5_2/1``, ``node``).

    ``observed``/``expected`` are the text people read; the typed facts behind them are fields: ``gpu`` the NVML
    index of the one GPU the finding is about (None: the node, a NIC, several GPUs), ``value`` the measured number
    where there is one, in ``unit`` (``links``, ``lanes``, ``1/s``, ``1/min``, ``C``, ``W``, ``Gb/s``, ``errors``,
    ``pages``...). ``gpu_uuid``/``gpu_serial`` identify that GPU (NVML) where known.
    """

    check: str
    severity: Severity
    subject: str
    observed: str
    expected: str
    message: str
    remedy: str = ""
    gpu_uuid: str | None = None
    gpu_serial: str | None = None
    gpu: int | None = None
    value: float | None = None
    unit: str = ""
