"""Every health check, declared once: its id, title, area (what ``--only`` selects) and when it does not apply.

:func:`dsctl.health.api.run_checks` walks :data:`CHECKS` in this order (the report order). A check whose
precondition fails reports one SKIP line (``needs_links``, ``needs_ports``, ``needs_gpus``, ``rate``) or is left
out entirely (``roce_only``, ``retirement_only``), so that an OK always means "looked and found nothing".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dsctl.health import checks_gpu as g
from dsctl.health import checks_rdma as r
from dsctl.health.expectations import Expectations
from dsctl.health.model import Finding, NodeSnapshot
from dsctl.health.xid import XID_CHECK_ID

CheckFn = Callable[[NodeSnapshot, Expectations], list[Finding]]


@dataclass(frozen=True)
class Check:
    """One check. ``fn`` is None for G22 (Xid history), which scans the kernel log instead of the snapshot.

    ``needs_links``: SKIP without an NVLink; ``needs_ports``: SKIP without a compute RDMA port; ``needs_gpus``: an
    RDMA check about the GPUs (affinity, GPUDirect, IBGDA), SKIP when NVML did not list them; ``rate``: measured
    on counter deltas, SKIP with one sample (``--interval-s 0``); ``roce_only``: left out unless a compute port is
    Ethernet; ``retirement_only``: left out unless a GPU reports retired pages (pre-Ampere).
    """

    id: str
    title: str
    area: str
    fn: CheckFn | None
    needs_links: bool = False
    needs_ports: bool = False
    needs_gpus: bool = False
    rate: bool = False
    roce_only: bool = False
    retirement_only: bool = False


CHECKS: tuple[Check, ...] = (
    Check("G1", "NVML usable", "gpu", g.g1_nvml),
    Check("G2", "GPU count", "gpu", g.g2_count),
    Check("G3", "GPUs reachable", "gpu", g.g3_reachable),
    Check("G4", "one SKU", "gpu", g.g4_sku),
    Check("G5", "persistence mode", "gpu", g.g5_persistence),
    Check("G6", "NVLinks active", "nvlink", g.g6_nvlink_active),
    Check("G7", "NVLink peers", "nvlink", g.g7_nvlink_peers, needs_links=True),
    Check("G8", "NVLink errors", "nvlink", g.g8_nvlink_errors, needs_links=True, rate=True),
    Check("G9", "NVSwitch fabric", "nvlink", g.g9_fabric),
    Check("G10", "NVLink P2P", "nvlink", g.g10_p2p, needs_links=True),
    Check("G11", "PCIe width", "gpu", g.g11_pcie_width),
    Check("G12", "PCIe generation", "gpu", g.g12_pcie_gen),
    Check("G13", "PCIe replays", "gpu", g.g13_pcie_replays, rate=True),
    Check("G14", "ECC mode", "gpu", g.g14_ecc_mode),
    Check("G15", "ECC errors", "gpu", g.g15_ecc_errors),
    Check("G16", "row remapping", "gpu", g.g16_row_remap),
    Check("G17", "retired pages", "gpu", g.g17_retired_pages, retirement_only=True),
    Check("G18", "recovery action", "gpu", g.g18_recovery),
    Check("G19", "thermal", "gpu", g.g19_thermal),
    Check("G20", "power", "gpu", g.g20_power),
    Check("G21", "InfoROM", "gpu", g.g21_inforom),
    Check("R1", "compute NIC count", "rdma", r.r1_nic_count),
    Check("R2", "port state", "rdma", r.r2_port_state, needs_ports=True),
    Check("R3", "port rate", "rdma", r.r3_rate, needs_ports=True),
    Check("R4", "LID / SM", "rdma", r.r4_lid, needs_ports=True),
    Check("R5", "fatal link counters", "rdma", r.r5_fatal_counters, needs_ports=True, rate=True),
    Check("R6", "degradation counters", "rdma", r.r6_degradation, needs_ports=True, rate=True),
    Check("R7", "NIC PCIe link", "rdma", r.r7_nic_pcie, needs_ports=True),
    Check("R8", "NIC firmware", "rdma", r.r8_firmware, needs_ports=True),
    Check("R9", "GPU-NIC affinity", "rdma", r.r9_affinity, needs_ports=True, needs_gpus=True),
    Check("R10", "GPUDirect RDMA", "rdma", r.r10_peermem, needs_ports=True, needs_gpus=True),
    Check("R11", "RoCE GID and netdev", "rdma", r.r11_roce, needs_ports=True, roce_only=True),
    Check("R12", "IBGDA readiness", "rdma", r.r12_ibgda, needs_ports=True, needs_gpus=True),
    Check(XID_CHECK_ID, "Xid history", "gpu", None),
)
BY_ID: dict[str, Check] = {c.id: c for c in CHECKS}
#: report order of the check ids
ORDER: dict[str, int] = {c.id: i for i, c in enumerate(CHECKS)}


def area_of(check_id: str) -> str:
    """``gpu``, ``nvlink`` or ``rdma`` (what ``--only`` filters on) for a finding's check id, from the table above;
    an id not in the table is ``rdma`` for an ``R..`` id, else ``gpu``."""
    check = BY_ID.get(check_id)
    if check is not None:
        return check.area
    return "rdma" if check_id.startswith("R") else "gpu"
