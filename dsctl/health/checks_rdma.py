"""RDMA checks (R1-R11) over the sysfs part of a :class:`NodeSnapshot`. Counter thresholds are NVSentinel defaults,
always on deltas between the two samples, never absolute values."""

from __future__ import annotations

import re

from dsctl.health.checks_gpu import counter_reset
from dsctl.health.expectations import Expectations
from dsctl.health.model import THIS_CHECK, Finding, IbPort, Nic, NodeSnapshot, PciDevice, Severity, Unavailable
from dsctl.names import ascii_digits

CRIT, WARN, INFO, SKIP = Severity.CRIT, Severity.WARN, Severity.INFO, Severity.SKIP

RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec\s*\(([0-9]{1,3})X\s*([A-Z0-9]+)\)")  # width: 1-3 digits
SPEED_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s")
#: delta > 0 in the window -> CRIT (NVSentinel fatal counters)
FATAL_COUNTERS = ("link_downed", "excessive_buffer_overrun_errors", "local_link_integrity_errors",
                  "rnr_nak_retry_err")
#: (counter, limit, per seconds, label) -> WARN above the rate
DEGRADATION_LIMITS = (
    ("link_error_recovery", 5.0, 60.0, "/min"),
    ("port_rcv_errors", 10.0, 1.0, "/s"),
    ("port_xmit_discards", 100.0, 1.0, "/s"),
    ("local_ack_timeout_err", 1.0, 1.0, "/s"),
    ("roce_slow_restart", 10.0, 1.0, "/s"),
)
SYMBOL_ERROR_CRIT_PER_H = 120.0  # IBTA BER 1e-12 bound
#: PMA error counters are narrow and saturate (stop at their maximum) instead of wrapping: kernel sysfs.c widths
SATURATED_AT = {"symbol_error": 2**16 - 1, "link_error_recovery": 2**8 - 1, "link_downed": 2**8 - 1,
                "port_rcv_errors": 2**16 - 1, "port_xmit_discards": 2**16 - 1,
                "local_link_integrity_errors": 2**4 - 1, "excessive_buffer_overrun_errors": 2**4 - 1}
AFFINITY_LEVELS = ["PIX", "PXB", "PHB", "NODE", "SYS"]


def parse_rate(text: str) -> tuple[float, int, str] | None:
    """``"400 Gb/sec (4X NDR)"`` -> (400.0, 4, "NDR"); None if the kernel string does not match."""
    m = RATE_RE.match(text)
    return (float(m.group(1)), int(m.group(2)), m.group(3)) if m else None


def parse_gt_s(text: str) -> float | None:
    """``"32.0 GT/s PCIe"`` or ``"32 GT/s"`` -> 32.0."""
    m = SPEED_RE.match(text)
    return float(m.group(1)) if m else None


def state_code(text: object) -> int | None:
    """``"4: ACTIVE"`` -> 4."""
    if not isinstance(text, str) or ":" not in text:
        return None
    head = text.split(":", 1)[0].strip()
    return int(head) if ascii_digits(head) else None


def _is_compute(nic: Nic, exp: Expectations) -> bool:
    layer = (exp.compute_link_layer or "infiniband").lower()
    return any(isinstance(p.link_layer, str) and p.link_layer.lower() == layer for p in nic.ports) or (
        not nic.ports and layer == "infiniband")


def compute_nics(snap: NodeSnapshot, exp: Expectations) -> list[Nic]:
    """NICs whose link layer is the profile's compute link layer (InfiniBand by default)."""
    return [n for n in snap.nics if _is_compute(n, exp)]


def _ports(snap: NodeSnapshot, exp: Expectations) -> list[IbPort]:
    return [p for n in compute_nics(snap, exp) for p in n.ports]


def _psub(port: IbPort) -> str:
    return f"{port.device}/{port.port}"


def r1_nic_count(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    nics = [n for n in compute_nics(snap, exp) if not isinstance(n.pci, Unavailable)]
    if exp.num_compute_nics is None:
        return [Finding(THIS_CHECK, SKIP, "node", f"{len(nics)} compute NICs", "-",
                        "no node profile: NIC count not checked")]
    if len(nics) < exp.num_compute_nics:
        return [Finding(THIS_CHECK, CRIT, "node", f"{len(nics)} compute NICs", f"{exp.num_compute_nics}",
                        f"{exp.num_compute_nics - len(nics)} compute NIC(s) missing from /sys/class/infiniband",
                        exp.profile_remedy("check mst status / lspci; reseat or replace the HCA; "
                                           "reload mlx5_core"))]
    return []


def r2_port_state(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for port in _ports(snap, exp):
        state, phys = state_code(port.state), state_code(port.phys_state)
        if state == 4 and phys == 5:
            continue
        shown = f"{port.state} / {port.phys_state}"
        if state == 1 or phys in (1, 3) or state is None or phys is None:
            out.append(Finding(THIS_CHECK, CRIT, _psub(port), shown, "4: ACTIVE / 5: LinkUp", "RDMA port is down",
                               "check the cable/transceiver and the switch port; ibstat"))
        else:
            out.append(Finding(THIS_CHECK, WARN, _psub(port), shown, "4: ACTIVE / 5: LinkUp",
                               "RDMA port not active yet (waiting for the SM, or training)",
                               "check the subnet manager; re-check in a minute"))
    return out


def r3_rate(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for port in _ports(snap, exp):
        if state_code(port.state) != 4 or not isinstance(port.rate, str):
            continue
        parsed = parse_rate(port.rate)
        if parsed is None:
            out.append(Finding(THIS_CHECK, WARN, _psub(port), port.rate, "e.g. 400 Gb/sec (4X NDR)", "unparsable rate"))
            continue
        if exp.compute_nic_gbps is not None and parsed[0] < exp.compute_nic_gbps:
            out.append(Finding(THIS_CHECK, CRIT, _psub(port), port.rate, f"{exp.compute_nic_gbps:g} Gb/sec",
                               "port trained below the expected rate: this node straggles every collective",
                               exp.profile_remedy("check the cable/transceiver type and the switch port speed"),
                               value=parsed[0], unit="Gb/s"))
    return out


def r4_lid(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for port in _ports(snap, exp):
        if not (isinstance(port.link_layer, str) and port.link_layer == "InfiniBand") or state_code(port.state) != 4:
            continue
        zero = [f"{name} {value}" for name, value in (("lid", port.lid), ("sm_lid", port.sm_lid))
                if isinstance(value, str) and _hex(value) == 0]
        if zero:
            out.append(Finding(THIS_CHECK, WARN, _psub(port), ", ".join(zero), "non-zero",
                               f"{' and '.join(z.split()[0] for z in zero)} 0: no subnet manager assigned it",
                               "check the subnet manager (sminfo; opensm running on the fabric?)"))
    return out


def _hex(text: str) -> int | None:
    try:
        return int(text, 16)
    except ValueError:
        return None


def _delta(port: IbPort, name: str) -> int | None:
    """Growth of a counter between the samples; None when it was not read twice or went backwards (see
    :func:`_backwards`)."""
    if name not in port.counters_t0 or name not in port.counters_t1:
        return None
    d = port.counters_t1[name] - port.counters_t0[name]
    return d if d >= 0 else None


def _backwards(port: IbPort, names: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    return {n: (port.counters_t0[n], port.counters_t1[n]) for n in names
            if n in port.counters_t0 and n in port.counters_t1 and port.counters_t1[n] < port.counters_t0[n]}


def _saturated(check: str, severity: Severity, port: IbPort, names: tuple[str, ...]) -> list[Finding]:
    """A PMA counter stuck at its maximum counts nothing more: a delta of 0 would read as healthy."""
    stuck = [n for n in names if n in SATURATED_AT and port.counters_t1.get(n) == SATURATED_AT[n]]
    if not stuck:
        return []
    return [Finding(check, severity, _psub(port), ", ".join(f"{n} {SATURATED_AT[n]}" for n in stuck),
                    "below the counter's maximum", "counter saturated at its maximum: rate unknown",
                    "clear the port counters (perfquery -x -R) and re-check")]


def r5_fatal_counters(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for port in _ports(snap, exp):
        back = _backwards(port, FATAL_COUNTERS)
        if back:  # a fatal counter that was reset may have hidden a link flap: WARN, not silence
            out.append(counter_reset(THIS_CHECK, WARN, _psub(port), back))
        out.extend(_saturated(THIS_CHECK, WARN, port, FATAL_COUNTERS))
        grew = {n: d for n in FATAL_COUNTERS if (d := _delta(port, n)) is not None and d > 0}
        if grew:
            out.append(Finding(THIS_CHECK, CRIT, _psub(port), ", ".join(f"{k} +{v}" for k, v in grew.items()), "+0",
                               f"fatal link counters grew in {snap.interval_s:g} s",
                               "drain; check the cable/transceiver; swap the port"))
    return out


def r6_degradation(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for port in _ports(snap, exp):
        names = ("symbol_error", *(name for name, *_ in DEGRADATION_LIMITS))
        back = _backwards(port, names)
        if back:
            out.append(counter_reset(THIS_CHECK, INFO, _psub(port), back))
        out.extend(_saturated(THIS_CHECK, INFO, port, names))
        sym = _delta(port, "symbol_error")
        if sym is not None and sym > 0:
            per_h = sym / snap.interval_s * 3600.0
            if per_h > SYMBOL_ERROR_CRIT_PER_H:
                out.append(Finding(THIS_CHECK, CRIT, _psub(port),
                                   f"symbol_error +{sym} ({sym / snap.interval_s:.1f}/s)",
                                   f"<= {SYMBOL_ERROR_CRIT_PER_H:g}/h",
                                   "symbol error rate above the IBTA 1e-12 BER bound",
                                   "clean/replace the cable or transceiver"))
                continue
        for name, limit, per_s, label in DEGRADATION_LIMITS:
            d = _delta(port, name)
            if d is None:
                continue
            rate = d / snap.interval_s * per_s
            if rate > limit:
                out.append(Finding(THIS_CHECK, WARN, _psub(port), f"{name} {rate:.1f}{label}", f"<= {limit:g}{label}",
                                   f"{name} rate above the NVSentinel limit", "watch; check the link"))
    return out


def r7_nic_pcie(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for nic in compute_nics(snap, exp):
        width, top_width = nic.pcie_width, nic.pcie_max_width
        if isinstance(width, int) and isinstance(top_width, int) and width < top_width:
            out.append(Finding(THIS_CHECK, CRIT, nic.name, f"x{nic.pcie_width}", f"x{nic.pcie_max_width}",
                               "NIC PCIe link narrower than its maximum", "reseat the HCA"))
        cur = parse_gt_s(nic.pcie_speed) if isinstance(nic.pcie_speed, str) else None
        top = parse_gt_s(nic.pcie_max_speed) if isinstance(nic.pcie_max_speed, str) else None
        if cur is not None and top is not None and cur < top:
            out.append(Finding(THIS_CHECK, WARN, nic.name, f"{cur:g} GT/s", f"{top:g} GT/s",
                               "NIC PCIe link below its maximum speed", "check BIOS PCIe settings; reseat"))
    return out


def r8_firmware(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    versions: dict[str, list[str]] = {}
    for nic in compute_nics(snap, exp):
        if isinstance(nic.fw_ver, str):
            versions.setdefault(nic.fw_ver, []).append(nic.name)
    if len(versions) > 1:
        shown = "; ".join(f"{v}: {', '.join(names)}" for v, names in sorted(versions.items()))
        return [Finding(THIS_CHECK, WARN, "node", shown, "one firmware version", "compute NICs run mixed firmware",
                        "flash every HCA to the same firmware (mlxfwmanager)")]
    return []


def affinity(gpu: PciDevice, nic: PciDevice) -> str:
    """nvidia-smi topo style level between two PCI functions from their sysfs bridge chains:
    PIX (at most one bridge each below a shared switch), PXB (more bridges), PHB (only the root port/complex
    shared), NODE (different root complex, same NUMA node), SYS (different NUMA node)."""
    shared = 0
    for a, b in zip(gpu.chain, nic.chain, strict=False):
        if a != b:
            break
        shared += 1
    if shared == 0:
        return "NODE" if gpu.numa_node == nic.numa_node and gpu.numa_node >= 0 else "SYS"
    if shared <= 2:  # pciDDDD:BB and at most the root port
        return "PHB"
    below = max(len(gpu.chain) - shared, len(nic.chain) - shared)
    return "PIX" if below <= 1 else "PXB"


def r9_affinity(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    by_bdf = {d.bdf: d for d in snap.pci_gpus}
    nics = [(n.name, n.pci) for n in compute_nics(snap, exp) if isinstance(n.pci, PciDevice)]
    if not nics:
        return []
    for gpu in snap.gpus:
        if gpu.lost is not None or not isinstance(gpu.bus_id, str) or gpu.bus_id not in by_bdf:
            continue
        dev = by_bdf[gpu.bus_id]
        levels = sorted((AFFINITY_LEVELS.index(affinity(dev, pci)), name) for name, pci in nics)
        best, name = AFFINITY_LEVELS[levels[0][0]], levels[0][1]
        if levels[0][0] > AFFINITY_LEVELS.index("PXB"):
            out.append(Finding(THIS_CHECK, WARN, f"gpu{gpu.index}", f"nearest NIC {name} at {best}", "a NIC at PIX/PXB",
                               "no compute NIC under this GPU's PCIe switch: GPUDirect RDMA crosses the CPU",
                               "check NIC slot placement and NUMA; compare nvidia-smi topo -m", gpu=gpu.index))
    return out


DMABUF_MIN_KERNEL = (5, 12)  # DMA-BUF import of GPU memory by RDMA drivers
PEER_MAPPING_OVERRIDE = re.compile(r"(?:^|;)\s*PeerMappingOverride\s*=\s*(?:1|0x0*1)\s*(?:;|$)")


def _kernel_at_least(release: str | None, wanted: tuple[int, int]) -> bool | None:
    """``5.15.0-91-generic`` >= (5, 12)? None when the release is unknown or unparsable."""
    m = re.match(r"([0-9]{1,4})\.([0-9]{1,4})(?![0-9])", release or "")  # bounded before int()
    return (int(m.group(1)), int(m.group(2))) >= wanted if m else None


def dmabuf_ready(snap: NodeSnapshot) -> bool:
    """GPUDirect RDMA through DMA-BUF: the open GPU kernel modules and a kernel >= 5.12 (unknown kernel: assumed)."""
    if snap.driver is None or snap.driver.open_kernel_module is not True:
        return False
    kernel = _kernel_at_least(snap.host.kernel_release if snap.host else None, DMABUF_MIN_KERNEL)
    return kernel is not False


def r10_peermem(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    """GPUDirect RDMA needs nvidia_peermem loaded, or DMA-BUF (open kernel modules, Linux >= 5.12)."""
    if not compute_nics(snap, exp) or not snap.gpus or snap.nvidia_peermem or dmabuf_ready(snap):
        return []
    flavour = "unknown driver flavour"
    if snap.driver is not None and isinstance(snap.driver.open_kernel_module, bool):
        flavour = "open kernel module" if snap.driver.open_kernel_module else "proprietary kernel module (no DMA-BUF)"
    kernel = snap.host.kernel_release if snap.host and snap.host.kernel_release else None
    if kernel and _kernel_at_least(kernel, DMABUF_MIN_KERNEL) is False:
        flavour += f", kernel {kernel} < 5.12 (no DMA-BUF)"
    return [Finding(THIS_CHECK, WARN, "node", f"nvidia_peermem not loaded; {flavour}", "nvidia_peermem or DMA-BUF",
                    "GPUDirect RDMA unavailable: no peer-memory module and no DMA-BUF path",
                    "modprobe nvidia_peermem, or use the open GPU kernel modules on Linux >= 5.12 (DMA-BUF)")]


def r12_ibgda(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    """DeepEP/NVSHMEM IBGDA readiness: the driver options DeepEP's install guide sets
    (``EnableStreamMemOPs: 1``, ``PeerMappingOverride=1`` in ``RegistryDwords``) and GDRCopy's ``gdrdrv`` module."""
    if not snap.gpus:
        return []
    params = snap.driver.params if snap.driver is not None else Unavailable("missing", "MISSING",
                                                                             "/proc/driver/nvidia/params")
    if isinstance(params, Unavailable):
        return [Finding(THIS_CHECK, SKIP, "node", str(params), "-",
                        "IBGDA readiness: /proc/driver/nvidia/params not readable")]
    missing = []
    if params.get("EnableStreamMemOPs", "").strip() != "1":
        missing.append(f"EnableStreamMemOPs: {params.get('EnableStreamMemOPs', 'absent')}")
    if not PEER_MAPPING_OVERRIDE.search(params.get("RegistryDwords", "")):
        missing.append(f"RegistryDwords: {params.get('RegistryDwords', 'absent')!r} lacks PeerMappingOverride=1")
    if snap.driver is not None and not snap.driver.gdrdrv:
        missing.append("gdrdrv not loaded")
    if not missing:
        return []
    return [Finding(THIS_CHECK, WARN, "node", "; ".join(missing),
                    "EnableStreamMemOPs: 1, PeerMappingOverride=1, gdrdrv loaded",
                    "DeepEP/NVSHMEM IBGDA is not ready: internode expert-parallel kernels cannot run",
                    'options nvidia NVreg_EnableStreamMemOPs=1 NVreg_RegistryDwords="PeerMappingOverride=1;" in '
                    "/etc/modprobe.d/nvidia.conf, update the initramfs and reboot; install GDRCopy (modprobe gdrdrv)")]


ROCE_V2 = "RoCE v2"
#: netdev operstates that cannot carry traffic -> CRIT; any other non-"up" state (unknown, dormant, testing) -> WARN
OPERSTATE_DOWN = frozenset({"down", "lowerlayerdown", "notpresent"})


def roce_ports(snap: NodeSnapshot, exp: Expectations) -> list[IbPort]:
    """Compute ports whose link layer is Ethernet (RoCE)."""
    return [p for p in _ports(snap, exp) if isinstance(p.link_layer, str) and p.link_layer == "Ethernet"]


def r11_roce(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    """RoCE ports: a ``RoCE v2`` GID must exist (no v2 GID -> CRIT: RoCE v2 traffic, which NCCL uses over a routed
    fabric, cannot be addressed), and the netdev those GIDs name must be ``up`` (down -> CRIT, other states or a
    netdev missing from /sys/class/net -> WARN)."""
    out = []
    for port in roce_ports(snap, exp):
        v2 = [g for g in port.gids if isinstance(g.type, str) and g.type.strip() == ROCE_V2]
        if not v2:
            types = sorted({g.type for g in port.gids if isinstance(g.type, str)})
            shown = (f"{len(port.gids)} GIDs, types: {', '.join(types) or 'unreadable'}" if port.gids
                     else "no non-zero GID")
            out.append(Finding(THIS_CHECK, CRIT, _psub(port), shown, f"a {ROCE_V2} GID",
                               "RoCE port has no RoCE v2 GID: RoCE v2 (routable) traffic cannot use it",
                               "check the HCA's RoCE mode (firmware and driver: RoCE v2 off?) and the netdev's "
                               "addresses (ip addr); NCCL_IB_GID_INDEX must name a RoCE v2 GID"))
        named = v2 or list(port.gids)
        ndevs = sorted({g.ndev for g in named if isinstance(g.ndev, str)})
        if named and not ndevs:
            out.append(Finding(THIS_CHECK, WARN, _psub(port), "no netdev in gid_attrs/ndevs", "a netdev",
                               "the port's GIDs name no netdev: its link cannot be checked",
                               "check the mlx5 netdev (ip link) and the RDMA device's net/ folder"))
        for dev in ndevs:
            state = port.netdev_operstate.get(dev, Unavailable("missing", "MISSING", f"/sys/class/net/{dev}"))
            if state == "up":
                continue
            if isinstance(state, Unavailable):
                out.append(Finding(THIS_CHECK, WARN, f"{_psub(port)} {dev}", str(state), "operstate up",
                                   f"netdev {dev} named by the GID table has no /sys/class/net entry",
                                   "check the netdev (ip link show); reload mlx5_core"))
                continue
            sev = CRIT if state.strip().lower() in OPERSTATE_DOWN else WARN
            out.append(Finding(THIS_CHECK, sev, f"{_psub(port)} {dev}", f"operstate {state}", "operstate up",
                               f"RoCE netdev {dev} is not up", f"ip link set {dev} up; check the cable and the "
                               "switch port"))
    return out
