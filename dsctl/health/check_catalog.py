"""What each health check reads and how it judges, in words: ``dsctl health checks`` lists them, and
docs/health.md's check table is this text (a test keeps the two equal). Check ids, titles and areas live in
:mod:`dsctl.health.checks`; this module only describes them."""

from __future__ import annotations

from dataclasses import dataclass

from dsctl.health.checks import CHECKS


@dataclass(frozen=True)
class CheckInfo:
    """One check as a reader sees it: ``name`` (what the docs call it), ``reads`` (the NVML calls, sysfs files or
    logs it looks at) and ``judges`` (severity per condition, thresholds and their sources)."""

    id: str
    title: str
    area: str
    name: str
    reads: str
    judges: str


#: check id -> (name, reads, judges), in markdown (backticks around API and file names)
TEXT: dict[str, tuple[str, str, str]] = {
    "G1": (
        "NVML usable",
        "`nvmlInit`, driver version",
        'library missing -> exit 3; `nvmlInit` NoPermission -> WARN "NVML permission denied" (every other G '
        "check SKIP, R9/R10/R12 SKIP); driver version NoPermission -> WARN, other error -> CRIT",
    ),
    "G2": (
        "GPU count",
        "`nvmlDeviceGetCount` vs profile (or `--expect-gpus`); NVIDIA class-0x03 functions in `/sys/bus/pci/devices`",
        "fewer than expected, or more on PCI than in NVML -> one CRIT naming both counts",
    ),
    "G3": (
        "GPU reachable",
        "`nvmlDeviceGetHandleByIndex`, name",
        "GpuIsLost / Unknown (Xid 79 class) -> CRIT",
    ),
    "G4": (
        "one SKU, matching the profile",
        "name, `pciDeviceId`, profile `gpu.model`",
        "mixed -> WARN; SKU not in the table -> INFO; node profile for another GPU model -> WARN (see Expectations)",
    ),
    "G5": (
        "persistence mode",
        "`nvmlDeviceGetPersistenceMode`",
        "off -> WARN",
    ),
    "G6": (
        "NVLinks active",
        "`NVML_FI_DEV_NVLINK_LINK_COUNT` (field 91), `nvmlDeviceGetNvLinkState` per link",
        "active < profile's `links_per_gpu` (H100 18, H800 8) -> CRIT (DCGM: link down = FAIL); no NVLink on "
        "a SKU without it -> SKIP",
    ),
    "G7": (
        "NVLink peers",
        "`nvmlDeviceGetNvLinkRemoteDeviceType`, `...RemotePciInfo`",
        "active link not to an NVSwitch, or a GPU reaching a different NVSwitch set than the majority -> WARN",
    ),
    "G8": (
        "NVLink errors",
        "`nvmlDeviceGetNvLinkErrorCounter` (DL replay, recovery, CRC flit, CRC data), two samples",
        "replay+recovery delta >= 1 -> CRIT; CRC >= 100/s -> CRIT; CRC delta >= 1 -> WARN (DCGM); a counter "
        "going backwards -> WARN (replay/recovery) or INFO (CRC)",
    ),
    "G9": (
        "NVSwitch fabric",
        "`nvmlDeviceGetGpuFabricInfoV`",
        "NOT_STARTED or status != SUCCESS -> CRIT (CUDA error 802); IN_PROGRESS -> WARN; health mask "
        "DEGRADED_BW / ROUTE_RECOVERY / ROUTE_UNHEALTHY / ACCESS_TIMEOUT_RECOVERY true or "
        "INCORRECT_CONFIGURATION set -> CRIT; NotSupported -> SKIP",
    ),
    "G10": (
        "NVLink P2P",
        "`nvmlDeviceGetP2PStatus(i, j, NVML_P2P_CAPS_INDEX_NVLINK)`",
        "not OK -> WARN",
    ),
    "G11": (
        "PCIe width",
        "`nvmlDeviceGetCurrPcieLinkWidth` vs max and SKU (x16)",
        "lower -> CRIT (DCGM diag requires 16)",
    ),
    "G12": (
        "PCIe generation",
        "current / max (`nvmlDeviceGetMaxPcieLinkGeneration`) / GPU max",
        'system max < GPU max -> WARN "host-limited"; current < max -> WARN (may be idle down-clocking)',
    ),
    "G13": (
        "PCIe replays",
        "`nvmlDeviceGetPcieReplayCounter`, two samples",
        "rate > `ceil(rate_per_lane[gen] x width)` per minute (Gen5 x16: 31/min) -> WARN; counter going "
        "backwards -> INFO",
    ),
    "G14": (
        "ECC mode",
        "`nvmlDeviceGetEccMode`",
        "disabled or change pending -> WARN",
    ),
    "G15": (
        "ECC errors",
        "`nvmlDeviceGetMemoryErrorCounter(UNCORRECTED, VOLATILE/AGGREGATE, DRAM)`, `nvmlDeviceGetSramEccErrorStatus`",
        "volatile uncorrected > 0 -> CRIT (DCGM FAIL); SRAM threshold exceeded -> CRIT; aggregate > 0 -> WARN",
    ),
    "G16": (
        "row remapping",
        "`nvmlDeviceGetRemappedRows`, `...RowRemapperHistogram`",
        "failure -> CRIT (Xid 64); pending -> WARN (Xid 63, reset needed); uncorrectable rows >= 512 -> WARN;"
        " banks with low/no spare rows -> WARN; NotSupported (MIG, pre-Ampere) -> SKIP",
    ),
    "G17": (
        "retired pages (pre-Ampere)",
        "`nvmlDeviceGetRetiredPages` (multiple SBE, DBE), `...RetiredPagesPendingStatus`",
        "SBE+DBE pages >= 63 -> CRIT (DCGM); retirement pending -> WARN. Left out (no line) unless a GPU "
        "answers: Ampere and newer say NotSupported (they remap rows, G16)",
    ),
    "G18": (
        "recovery action",
        "field `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION` (230)",
        "DRAIN_P2P -> WARN; GPU_RESET / NODE_REBOOT / DRAIN_AND_RESET / newer actions -> CRIT",
    ),
    "G19": (
        "thermal",
        "`nvmlDeviceGetTemperatureV`, slowdown threshold, clock event reasons",
        "SW/HW thermal slowdown bit, or within 5 C of slowdown -> WARN",
    ),
    "G20": (
        "power",
        "`nvmlDeviceGetPowerUsage`, enforced / default limit, event reasons",
        "unreadable -> WARN (DCGM); limit below default (700 W on H100/H800) -> WARN; HW power brake -> CRIT;"
        " HW slowdown -> WARN",
    ),
    "G21": (
        "InfoROM",
        "`nvmlDeviceValidateInforom`",
        "CorruptedInforom -> WARN (DCGM)",
    ),
    "G22": (
        "Xid history",
        "`--kernel-log FILE` (text of `journalctl -k -b` / `dmesg`), lines `NVRM: Xid (PCI:0000:18:00): 79, ...`",
        "48/64/74/79/95/119/120/140 -> CRIT; 13/31/43/45/68 (application) -> INFO; any other -> WARN",
    ),
    "R1": (
        "compute NIC count",
        "`/sys/class/infiniband/*` with the profile's link layer",
        "fewer than `compute_nics.count` -> CRIT",
    ),
    "R2": (
        "port state",
        "`ports/N/state`, `phys_state`",
        "`1: DOWN`, `3: Disabled`, `1: Sleep` -> CRIT; INIT/ARMED/Polling/LinkErrorRecovery -> WARN",
    ),
    "R3": (
        "port rate",
        "`ports/N/rate` (`400 Gb/sec (4X NDR)`)",
        "below the profile's rate -> CRIT (a half-bandwidth node straggles every collective)",
    ),
    "R4": (
        "LID / SM",
        "`lid`, `sm_lid` (InfiniBand, ACTIVE ports)",
        "either `0x0` -> one WARN per port (no subnet manager)",
    ),
    "R5": (
        "fatal counters",
        "`link_downed`, `excessive_buffer_overrun_errors`, `local_link_integrity_errors`, "
        "`hw_counters/rnr_nak_retry_err`",
        "delta > 0 -> CRIT (NVSentinel); going backwards -> WARN (a reset may hide a flap)",
    ),
    "R6": (
        "degradation counters",
        "`symbol_error`, `link_error_recovery`, `port_rcv_errors`, `port_xmit_discards`, "
        "`local_ack_timeout_err`, `roce_slow_restart`",
        "symbol errors > 120/h -> CRIT (IBTA BER 1e-12); link_error_recovery > 5/min, port_rcv_errors > 10/s,"
        " port_xmit_discards > 100/s, local_ack_timeout_err > 1/s, roce_slow_restart > 10/s -> WARN; going "
        "backwards -> INFO",
    ),
    "R7": (
        "NIC PCIe",
        "`device/current_link_width`, `max_link_width`, `..._speed` (`32.0 GT/s PCIe`)",
        "narrower -> CRIT; slower -> WARN",
    ),
    "R8": (
        "NIC firmware",
        "`fw_ver`",
        "mixed across compute NICs -> WARN",
    ),
    "R9": (
        "GPU-NIC affinity",
        "PCIe bridge chains of the GPU and every compute NIC",
        "nearest compute NIC worse than PXB (PHB/NODE/SYS) -> WARN: GPUDirect RDMA crosses the CPU",
    ),
    "R10": (
        "GPUDirect RDMA",
        "`/sys/module/nvidia_peermem`; DMA-BUF: `/proc/driver/nvidia/version` says `Open Kernel Module` and "
        "the kernel is >= 5.12",
        'neither peermem nor DMA-BUF -> WARN "GPUDirect RDMA unavailable"',
    ),
    "R11": (
        "RoCE GID and netdev (Ethernet compute ports only)",
        "`ports/N/gids/<i>` (non-zero), `gid_attrs/types/<i>`, `gid_attrs/ndevs/<i>`, "
        "`/sys/class/net/<ndev>/operstate`",
        "no `RoCE v2` GID -> CRIT; the netdev named by the RoCE v2 GIDs `down` / `lowerlayerdown` / "
        "`notpresent` -> CRIT, other non-`up` state or no `/sys/class/net` entry -> WARN; GIDs naming no "
        "netdev -> WARN",
    ),
    "R12": (
        "DeepEP / NVSHMEM IBGDA readiness",
        "`/proc/driver/nvidia/params` (`EnableStreamMemOPs: 1`, `RegistryDwords` containing "
        "`PeerMappingOverride=1`, or `=0x1`), `/sys/module/gdrdrv` (GDRCopy)",
        "any missing -> WARN (remedy: `options nvidia NVreg_EnableStreamMemOPs=1 "
        'NVreg_RegistryDwords="PeerMappingOverride=1;"`, initramfs, reboot; `modprobe gdrdrv`); params '
        "unreadable -> SKIP",
    ),
}


@dataclass(frozen=True)
class CheckCatalog:
    """Every check of ``dsctl health check``, in report order."""

    checks: tuple[CheckInfo, ...]


def check_catalog() -> CheckCatalog:
    """The catalog of :data:`dsctl.health.checks.CHECKS` with the text of :data:`TEXT`."""
    return CheckCatalog(tuple(CheckInfo(c.id, c.title, c.area, *TEXT[c.id]) for c in CHECKS))
