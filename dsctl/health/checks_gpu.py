"""GPU and NVLink checks (G1-G21) over a :class:`NodeSnapshot`. Each returns findings for problems and SKIPs only;
the runner adds one OK line per check that found nothing. Thresholds cite DCGM/NVSentinel (docs/health.md)."""

from __future__ import annotations

import math

from dsctl.health.expectations import PCIE_REPLAYS_PER_LANE_PER_MIN, Expectations, ProfileMismatch, find_sku
from dsctl.health.model import NVLINK_COUNTERS, THIS_CHECK, Finding, Gpu, NodeSnapshot, Severity, Unavailable, ok

CRIT, WARN, INFO, SKIP = Severity.CRIT, Severity.WARN, Severity.INFO, Severity.SKIP

NVLINK_DEVICE_TYPE_SWITCH = 2
FABRIC_STATES = {0: "NOT_SUPPORTED", 1: "NOT_STARTED", 2: "IN_PROGRESS", 3: "COMPLETED"}
#: fabric health mask fields (shift, width, values that are bad) from nvml.h NVML_GPU_FABRIC_HEALTH_MASK_*
FABRIC_HEALTH_FIELDS = {
    "DEGRADED_BW": (0, 0x3, {1}),
    "ROUTE_RECOVERY": (2, 0x3, {1}),
    "ROUTE_UNHEALTHY": (4, 0x3, {1}),
    "ACCESS_TIMEOUT_RECOVERY": (6, 0x3, {1}),
    "INCORRECT_CONFIGURATION": (8, 0xF, {2, 3, 4, 5, 6, 7, 8}),
}
RECOVERY_ACTIONS = {0: "NONE", 1: "GPU_RESET", 2: "NODE_REBOOT", 3: "DRAIN_P2P", 4: "DRAIN_AND_RESET",
                    5: "RECOVER_IMEX_DOMAIN", 6: "BUS_RESET", 7: "SYSTEM_REBOOT"}
REASON_SW_THERMAL, REASON_HW_THERMAL = 0x20, 0x40
REASON_HW_SLOWDOWN, REASON_POWER_BRAKE = 0x8, 0x80
THERMAL_MARGIN_C = 5
NVLINK_CRC_CRIT_PER_S = 100.0  # DCGM_LIMIT_MAX_NVLINK_CRC_ERROR
REMAP_UNC_WARN = 512  # DCGM: uncorrectable remapped rows >= 512


def _live(snap: NodeSnapshot) -> list[Gpu]:
    return [g for g in snap.gpus if g.lost is None and not _lost(g)]


def _lost(gpu: Gpu) -> bool:
    return gpu.lost is not None or (isinstance(gpu.name, Unavailable) and gpu.name.kind == "gpu_lost")


def _sub(gpu: Gpu) -> str:
    return f"gpu{gpu.index}"


def _on_gpu(check: str, severity: Severity, gpu: Gpu, observed: str, expected: str, message: str, remedy: str = "",
            *, subject: str | None = None, value: float | None = None, unit: str = "") -> Finding:
    """A finding about one GPU: subject ``gpu<index>`` (or ``subject``), ``gpu`` its index."""
    return Finding(check, severity, subject or _sub(gpu), observed, expected, message, remedy, gpu=gpu.index,
                   value=value, unit=unit)


def _skip(check: str, gpu: Gpu, value: Unavailable, what: str) -> Finding:
    return _on_gpu(check, SKIP, gpu, str(value), "-", f"{what} not readable ({value.code} from {value.source})")


def g1_nvml(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    if snap.nvml is not None:
        return [Finding(THIS_CHECK, WARN, "node", str(snap.nvml), "nvmlInit succeeds",
                        f"NVML permission denied (nvmlInit: {snap.nvml.code}): no GPU was checked",
                        "run as root, or give this user access to /dev/nvidia* (device cgroup, container "
                        "--gpus)")]
    if isinstance(snap.driver_version, Unavailable):
        sev = WARN if snap.driver_version.kind == "no_permission" else CRIT
        return [Finding(THIS_CHECK, sev, "node", str(snap.driver_version), "driver version readable",
                        f"NVML answered {snap.driver_version.code} for the driver version",
                        "run as root or check /dev/nvidia* permissions")]
    return []


def g2_count(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    count = snap.device_count
    if isinstance(count, Unavailable):
        return [Finding(THIS_CHECK, CRIT, "node", str(count), "GPU count", f"nvmlDeviceGetCount failed: {count.code}",
                        "check the driver with nvidia-smi")]
    short = exp.num_gpus is not None and count < exp.num_gpus
    on_pci = len(snap.pci_gpus)
    hidden = bool(snap.pci_gpus) and on_pci > count
    if short and hidden:
        return [Finding(THIS_CHECK, CRIT, "node", f"{count} in NVML, {on_pci} on PCI", f"{exp.num_gpus} GPUs",
                        f"NVML sees {count} of {exp.num_gpus} GPUs; {on_pci} are on the PCI bus: a GPU is present but "
                        "not usable", exp.profile_remedy("check dmesg for NVRM errors and Xid 79; reset the GPU or "
                                                         "reboot"))]
    if short:
        return [Finding(THIS_CHECK, CRIT, "node", f"{count} GPUs", f"{exp.num_gpus} GPUs",
                        f"NVML sees {count} of {exp.num_gpus} GPUs (a GPU fell off the bus or was not enumerated)",
                        exp.profile_remedy("check dmesg for Xid 79, reseat or RMA the GPU, then reboot"))]
    if hidden:
        return [Finding(THIS_CHECK, CRIT, "node", f"{count} in NVML", f"{on_pci} on PCI",
                        f"{on_pci} NVIDIA GPUs on the PCI bus but NVML enumerates {count}",
                        "a GPU is present but not usable: check dmesg for NVRM errors")]
    return []


def g3_reachable(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for gpu in snap.gpus:
        if _lost(gpu):
            why = gpu.lost if gpu.lost is not None else gpu.name
            out.append(_on_gpu(THIS_CHECK, CRIT, gpu, str(why), "reachable",
                               f"GPU {gpu.index} does not answer NVML ({getattr(why, 'code', '?')}): Xid 79 class",
                               "drain the node; GPU reset or reboot; RMA if it recurs"))
    return out


def g4_sku(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    live = _live(snap)
    names = sorted({str(g.name) for g in live})
    ids = sorted({f"0x{g.pci_device_id:08X}" for g in live if isinstance(g.pci_device_id, int)})
    out = []
    if len(names) > 1 or len(ids) > 1:
        out.append(Finding(THIS_CHECK, WARN, "node", ", ".join(names + ids), "one SKU",
                           "GPUs of different SKUs in one node", "check the node's bill of materials"))
    if live and find_sku(str(live[0].name), live[0].pci_device_id if isinstance(live[0].pci_device_id, int)
                         else None) is None:
        out.append(Finding(THIS_CHECK, INFO, "node", names[0] if names else "?", "a SKU in the table",
                           "unknown GPU SKU: PCIe and power expectations are not checked",
                           "add the SKU to dsctl/health/expectations.py GPU_SKUS"))
    if exp.mismatch is not None:
        out.append(_profile_mismatch(exp.mismatch))
    return out


def _profile_mismatch(m: ProfileMismatch) -> Finding:
    """G4 WARN: the node profile describes other GPUs than the node has."""
    if m.detected_sku is not None:
        links = (f"NVLinks checked against the detected SKU ({m.used_nvlinks} per GPU), not the profile "
                 f"({m.profile_nvlinks})" if m.used_nvlinks != m.profile_nvlinks
                 else f"both expect {m.used_nvlinks} NVLinks per GPU")
        message = f"node profile {m.profile} is for {m.profile_sku} GPUs but this node has {m.detected_sku}: {links}"
    else:
        message = (f"node profile {m.profile} is for {m.profile_sku} GPUs but this node has {m.detected_name} "
                   "(not in the SKU table): counts are still checked against the profile")
    if m.suggested_profile is not None:
        remedy = (f"check with --node-profile {m.suggested_profile}, or omit --node-profile to choose the profile "
                  "from the GPU SKU")
    else:
        remedy = f"omit --node-profile, or write a node profile for {m.detected_name} (dsctl profiles)"
    return Finding(THIS_CHECK, WARN, "node", m.detected, f"{m.profile_gpu_model} (node profile {m.profile})",
                   message, remedy)


def g5_persistence(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for gpu in _live(snap):
        mode = gpu.persistence_mode
        if isinstance(mode, Unavailable):
            out.append(_skip(THIS_CHECK, gpu, mode, "persistence mode"))
        elif mode != 1:
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, "off", "on", "persistence mode is off",
                               "nvidia-smi -pm 1 (or enable nvidia-persistenced)"))
    return out


def g6_nvlink_active(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    expected = exp.num_nvlinks_per_gpu
    for gpu in _live(snap):
        if isinstance(gpu.num_links, Unavailable) or gpu.num_links == 0:
            if expected:
                out.append(_on_gpu(THIS_CHECK, CRIT, gpu, str(gpu.num_links), f"{expected} active links",
                                   "NVLink is not reported on a GPU that should have it",
                                   exp.profile_remedy("check MIG mode, the driver and nvidia-smi nvlink -s")))
            else:
                out.append(_on_gpu(THIS_CHECK, SKIP, gpu, "no NVLink", "-", "no NVLink on this SKU"))
            continue
        active = [link.link for link in gpu.links if link.active is True]
        down = [link.link for link in gpu.links if link.active is not True]
        if expected is not None and len(active) < expected:
            shown = ", ".join(str(i) for i in down[:6]) + (", ..." if len(down) > 6 else "")
            out.append(_on_gpu(THIS_CHECK, CRIT, gpu, f"{len(active)} active", f"{expected} active",
                               f"{expected - len(active)} NVLink(s) down (inactive: {shown})",
                               exp.profile_remedy("drain; reset the GPU; reseat/replace the baseboard or NVSwitch "
                                                  "tray if it persists"), value=len(active), unit="links"))
    return out


def g7_nvlink_peers(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    sets: dict[int, frozenset[str]] = {}
    for gpu in _live(snap):
        active = [link for link in gpu.links if link.active is True]
        if not active:
            continue
        bad = [link.link for link in active if isinstance(link.remote_type, int)
               and link.remote_type != NVLINK_DEVICE_TYPE_SWITCH]
        if bad:
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, f"links {bad} not to a switch", "NVSwitch peers",
                               "NVLink peer is not an NVSwitch", "check nvidia-smi nvlink -R"))
        sets[gpu.index] = frozenset(str(link.remote_bus_id) for link in active if ok(link.remote_bus_id))
    if sets:
        common = max(set(sets.values()), key=lambda s: sum(1 for v in sets.values() if v == s))
        for index, remotes in sorted(sets.items()):
            if remotes != common:
                out.append(Finding(THIS_CHECK, WARN, f"gpu{index}", ", ".join(sorted(remotes)),
                                   ", ".join(sorted(common)),
                                   "this GPU reaches a different NVSwitch set than its peers",
                                   "check nvidia-smi nvlink -R and the fabric manager log", gpu=index))
    return out


def g8_nvlink_errors(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for gpu in _live(snap):
        unreadable = [link for link in gpu.links if link.active is True and not (
            isinstance(link.errors_t0, dict) and isinstance(link.errors_t1, dict))]
        if unreadable:
            first = unreadable[0]
            why = first.errors_t0 if isinstance(first.errors_t0, Unavailable) else first.errors_t1
            out.append(_skip(THIS_CHECK, gpu, why, "NVLink DL error counters"))  # type: ignore[arg-type]
        for link in gpu.links:
            t0, t1 = link.errors_t0, link.errors_t1
            if not isinstance(t0, dict) or not isinstance(t1, dict):
                continue
            raw = {k: t1.get(k, 0) - t0.get(k, 0) for k in NVLINK_COUNTERS}
            subject = f"gpu{gpu.index} link {link.link}"
            back = [k for k in NVLINK_COUNTERS if raw[k] < 0]
            if back:
                hard_back = any(k in ("replay", "recovery") for k in back)
                out.append(counter_reset(THIS_CHECK, WARN if hard_back else INFO, subject,
                                         {k: (t0.get(k, 0), t1.get(k, 0)) for k in back}, gpu=gpu.index))
            delta = {k: max(v, 0) for k, v in raw.items()}
            hard = delta["replay"] + delta["recovery"]
            crc = delta["crc_flit"] + delta["crc_data"]
            crc_per_s = crc / snap.interval_s
            if hard >= 1:
                out.append(_on_gpu(THIS_CHECK, CRIT, gpu, f"+{delta['replay']} replay, +{delta['recovery']} recovery",
                                   "0 in the window", f"NVLink DL replay/recovery errors grew in {snap.interval_s:g} s",
                                   "drain; reset the GPU; replace the link hardware if it recurs", subject=subject,
                                   value=hard, unit="errors"))
            elif crc_per_s >= NVLINK_CRC_CRIT_PER_S:
                out.append(_on_gpu(THIS_CHECK, CRIT, gpu, f"{crc_per_s:.0f} CRC/s", "< 100/s",
                                   "NVLink CRC error rate at or above DCGM's 100/s limit",
                                   "drain; reseat/replace the link hardware", subject=subject, value=crc_per_s,
                                   unit="1/s"))
            elif crc >= 1:
                out.append(_on_gpu(THIS_CHECK, WARN, gpu, f"+{crc} CRC", "0 in the window",
                                   f"NVLink CRC errors grew by {crc} in {snap.interval_s:g} s", "watch the rate",
                                   subject=subject, value=crc, unit="errors"))
    return out


def g9_fabric(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for gpu in _live(snap):
        fabric = gpu.fabric
        if isinstance(fabric, Unavailable) or fabric.state == 0:
            if isinstance(fabric, Unavailable) and fabric.kind != "unsupported":
                out.append(_on_gpu(THIS_CHECK, WARN, gpu, str(fabric), "readable", "fabric state unreadable"))
            else:
                out.append(_on_gpu(THIS_CHECK, SKIP, gpu, "not supported", "-", "no NVSwitch fabric on this GPU"))
            continue
        state = FABRIC_STATES.get(fabric.state, str(fabric.state))
        if fabric.state == 1:
            out.append(_on_gpu(THIS_CHECK, CRIT, gpu, state, "COMPLETED", "fabric not started: CUDA fails with 802",
                               "systemctl start nvidia-fabricmanager (same version as the driver)"))
        elif fabric.state == 2:
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, state, "COMPLETED", "fabric training still in progress",
                               "wait and re-check; see the fabric manager log"))
        elif fabric.status != 0:
            out.append(_on_gpu(THIS_CHECK, CRIT, gpu, f"{state}, status {fabric.status}", "status 0 (SUCCESS)",
                               "fabric registration failed", "check nvidia-fabricmanager logs; reset the GPU"))
        bad = [name for name, (shift, mask, values) in FABRIC_HEALTH_FIELDS.items()
               if ((fabric.health_mask >> shift) & mask) in values]
        if bad:
            out.append(_on_gpu(THIS_CHECK, CRIT, gpu, ", ".join(bad), "clean health mask",
                               "fabric health mask reports a fault", "drain; check NVSwitch and fabric manager"))
    return out


def g10_p2p(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for gpu in _live(snap):
        bad = sorted(peer for peer, status in gpu.p2p_nvlink.items() if isinstance(status, int) and status != 0)
        if bad:
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, f"no NVLink P2P to gpu{', gpu'.join(map(str, bad))}",
                               "P2P OK to every peer", "NVLink peer-to-peer is not available to some peers",
                               "check the fabric manager and nvidia-smi topo -p2p n"))
    return out


def g11_pcie_width(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for gpu in _live(snap):
        pcie = gpu.pcie
        if isinstance(pcie, Unavailable) or not isinstance(pcie.width, int):
            continue
        target = pcie.max_width if isinstance(pcie.max_width, int) else exp.pcie_width
        if exp.pcie_width is not None and target is not None:
            target = max(target, exp.pcie_width)
        if target is not None and pcie.width < target:
            out.append(_on_gpu(THIS_CHECK, CRIT, gpu, f"x{pcie.width}", f"x{target}",
                               f"PCIe link trained at x{pcie.width}: host bandwidth cut",
                               "reseat the GPU/riser; check the slot and cable; RMA if it persists",
                               value=pcie.width, unit="lanes"))
    return out


def g12_pcie_gen(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for gpu in _live(snap):
        pcie = gpu.pcie
        if isinstance(pcie, Unavailable) or not isinstance(pcie.gen, int):
            continue
        if isinstance(pcie.max_gen, int) and isinstance(pcie.gpu_max_gen, int) and pcie.max_gen < pcie.gpu_max_gen:
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, f"host max Gen{pcie.max_gen}", f"Gen{pcie.gpu_max_gen}",
                               "PCIe host-limited: the slot/CPU caps the GPU's generation",
                               "check BIOS PCIe settings and the riser"))
        elif isinstance(pcie.max_gen, int) and pcie.gen < pcie.max_gen:
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, f"Gen{pcie.gen}", f"Gen{pcie.max_gen}",
                               "PCIe link below its max generation (some GPUs down-clock at idle)",
                               "re-check under load (P0); reseat if it stays low"))
    return out


def g13_pcie_replays(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for gpu in _live(snap):
        t0, t1, pcie = gpu.pcie_replay_t0, gpu.pcie_replay_t1, gpu.pcie
        if not isinstance(t0, int) or not isinstance(t1, int) or isinstance(pcie, Unavailable):
            continue
        gen = pcie.gen if isinstance(pcie.gen, int) else 5
        width = pcie.width if isinstance(pcie.width, int) else 16
        limit = math.ceil(PCIE_REPLAYS_PER_LANE_PER_MIN.get(gen, 1.92) * width)
        if t1 < t0:
            out.append(counter_reset(THIS_CHECK, INFO, _sub(gpu), {"pcie_replay": (t0, t1)}, gpu=gpu.index))
            continue
        per_min = (t1 - t0) / snap.interval_s * 60.0
        if per_min > limit:
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, f"{per_min:.0f} replays/min", f"<= {limit}/min",
                               "PCIe replay rate above DCGM's limit for this link",
                               "reseat; check the riser/cable; watch for AER errors", value=per_min, unit="1/min"))
    return out


def g14_ecc_mode(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for gpu in _live(snap):
        ecc = gpu.ecc
        if isinstance(ecc, Unavailable) or isinstance(ecc.mode_current, Unavailable):
            why = ecc if isinstance(ecc, Unavailable) else ecc.mode_current
            out.append(_skip(THIS_CHECK, gpu, why, "ECC mode"))  # type: ignore[arg-type]
            continue
        if ecc.mode_current != 1:
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, "disabled", "enabled", "ECC is disabled",
                               "nvidia-smi -e 1, then reset the GPU"))
        elif isinstance(ecc.mode_pending, int) and ecc.mode_pending != ecc.mode_current:
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, "change pending", "enabled", "ECC mode change pending a reset",
                               "reset the GPU"))
    return out


def g15_ecc_errors(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for gpu in _live(snap):
        ecc = gpu.ecc
        if isinstance(ecc, Unavailable):
            continue
        vol = sum(v for v in (ecc.volatile_dram, ecc.volatile_sram) if isinstance(v, int))
        agg = sum(v for v in (ecc.aggregate_dram, ecc.aggregate_sram) if isinstance(v, int))
        if vol > 0:
            out.append(_on_gpu(THIS_CHECK, CRIT, gpu, f"{vol} volatile uncorrected", "0",
                               "uncorrectable ECC errors since driver load (DCGM: FAIL)",
                               "drain; reset the GPU; check row remapping; RMA if it recurs", value=vol, unit="errors"))
        elif ecc.sram_threshold_exceeded == 1:
            out.append(_on_gpu(THIS_CHECK, CRIT, gpu, "SRAM threshold exceeded", "not exceeded",
                               "SRAM ECC error threshold exceeded", "drain and RMA the GPU"))
        elif agg > 0:
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, f"{agg} aggregate uncorrected", "0",
                               "uncorrectable ECC errors in the GPU's lifetime", "watch; RMA if the count grows",
                               value=agg, unit="errors"))
    return out


def g16_row_remap(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for gpu in _live(snap):
        rows = gpu.remapped_rows
        if isinstance(rows, Unavailable):
            out.append(_skip(THIS_CHECK, gpu, rows, "row remapping (Ampere+, not under MIG)"))
            continue
        hist = rows.histogram if isinstance(rows.histogram, dict) else {}
        if rows.failure:
            out.append(_on_gpu(THIS_CHECK, CRIT, gpu, "remap failure", "no failure",
                               "row remapping failed (Xid 64): memory cannot be repaired", "drain and RMA the GPU"))
        elif rows.pending:
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, "remap pending", "none pending",
                               "a row remap is pending (Xid 63): takes effect after a GPU reset",
                               "drain, then reset the GPU (nvidia-smi -r) or reboot"))
        elif rows.uncorrectable >= REMAP_UNC_WARN:
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, f"{rows.uncorrectable} uncorrectable rows",
                               f"< {REMAP_UNC_WARN}",
                               "many rows remapped for uncorrectable errors", "plan an RMA"))
        elif hist.get("none", 0) > 0 or hist.get("low", 0) > 0:
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, f"{hist.get('none', 0)} banks none, {hist.get('low', 0)} low",
                               "0", "memory banks running out of spare rows", "plan an RMA"))
    return out


RETIRED_PAGES_CRIT = 63  # DCGM_LIMIT_MAX_RETIRED_PAGES: SBE + DBE retired pages


def g17_retired_pages(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    """Pre-Ampere page retirement. Ampere and newer answer NotSupported (they remap rows, G16): one SKIP saying so."""
    out = []
    for gpu in _live(snap):
        pages = gpu.retired_pages
        if isinstance(pages, Unavailable):
            if pages.kind == "unsupported" and not isinstance(gpu.remapped_rows, Unavailable):
                out.append(_on_gpu(THIS_CHECK, SKIP, gpu, "not supported", "-",
                                   "retired pages: not used on this GPU (it remaps rows instead, G16)"))
            else:
                out.append(_skip(THIS_CHECK, gpu, pages, "retired pages"))
            continue
        total = pages.single_bit + pages.double_bit
        shown = f"{total} retired ({pages.single_bit} SBE, {pages.double_bit} DBE)"
        if total >= RETIRED_PAGES_CRIT:
            out.append(_on_gpu(THIS_CHECK, CRIT, gpu, shown, f"< {RETIRED_PAGES_CRIT}",
                               f"{total} memory pages retired: at DCGM's limit of {RETIRED_PAGES_CRIT}",
                               "drain and RMA the GPU", value=total, unit="pages"))
        elif pages.pending == 1:
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, f"{shown}, retirement pending", "none pending",
                               "a page retirement is pending: takes effect after a reboot / GPU reset",
                               "drain, then reset the GPU or reboot"))
    return out


def counter_reset(check: str, severity: Severity, subject: str, counters: dict[str, tuple[int, int]],
                  gpu: int | None = None) -> Finding:
    """A counter that went backwards between the samples (reset, or a wrapped narrow counter): its rate is unknown,
    which is reported instead of being read as zero errors. ``gpu``: the GPU index when it is one GPU's counter."""
    shown = ", ".join(f"{name} {a} -> {b}" for name, (a, b) in counters.items())
    return Finding(check, severity, subject, shown, "t1 >= t0", "counter went backwards: reset or wrap, rate unknown",
                   "re-check: a reset (driver reload, perfquery -R) hides the errors of this window", gpu=gpu)


def g18_recovery(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for gpu in _live(snap):
        action = gpu.recovery_action
        if isinstance(action, Unavailable) or action == 0:
            continue
        name = RECOVERY_ACTIONS.get(action, str(action))
        sev = WARN if action == 3 else CRIT
        out.append(_on_gpu(THIS_CHECK, sev, gpu, name, "NONE", f"the driver asks for GPU recovery action {name}",
                           "drain the node and perform the requested action"))
    return out


def g19_thermal(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for gpu in _live(snap):
        th = gpu.thermal
        reasons = gpu.clocks_event_reasons
        if isinstance(reasons, int) and reasons & (REASON_SW_THERMAL | REASON_HW_THERMAL):
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, f"clock event reasons 0x{reasons:x}", "no thermal slowdown",
                               "GPU is thermally slowing down", "check airflow, fans and inlet temperature"))
        elif (not isinstance(th, Unavailable) and isinstance(th.gpu_c, int) and isinstance(th.slowdown_c, int)
              and th.gpu_c >= th.slowdown_c - THERMAL_MARGIN_C):
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, f"{th.gpu_c} C", f"< {th.slowdown_c - THERMAL_MARGIN_C} C",
                               f"within {THERMAL_MARGIN_C} C of the slowdown threshold ({th.slowdown_c} C)",
                               "check airflow and fans", value=th.gpu_c, unit="C"))
    return out


def g20_power(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for gpu in _live(snap):
        pw = gpu.power
        reasons = gpu.clocks_event_reasons
        if isinstance(pw, Unavailable) or isinstance(pw.usage_mw, Unavailable):
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, "unreadable", "readable", "power draw cannot be read (DCGM)",
                               "check the driver and board"))
            continue
        default = pw.default_limit_mw if isinstance(pw.default_limit_mw, int) else None
        if exp.default_power_w is not None:
            default = max(default or 0, int(exp.default_power_w * 1000))
        if isinstance(pw.limit_mw, int) and default and pw.limit_mw < default:
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, f"{pw.limit_mw / 1000:.0f} W limit", f"{default / 1000:.0f} W",
                               "power limit capped below the default", "nvidia-smi -pl to restore the default",
                               value=pw.limit_mw / 1000, unit="W"))
        if isinstance(reasons, int) and reasons & REASON_POWER_BRAKE:
            out.append(_on_gpu(THIS_CHECK, CRIT, gpu, "HW power brake", "none", "hardware power brake asserted",
                               "check the PSUs and the node's power-brake signal"))
        elif isinstance(reasons, int) and reasons & REASON_HW_SLOWDOWN:
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, "HW slowdown", "none", "hardware slowdown asserted",
                               "check power and cooling"))
    return out


def g21_inforom(snap: NodeSnapshot, exp: Expectations) -> list[Finding]:
    out = []
    for gpu in _live(snap):
        if gpu.inforom_valid is False:
            out.append(_on_gpu(THIS_CHECK, WARN, gpu, "corrupted", "valid", "InfoROM is corrupted (DCGM WARN)",
                               "flash the InfoROM or RMA"))
    return out
