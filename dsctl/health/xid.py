"""G22: Xid history from kernel-log text (``journalctl -k -b`` or ``dmesg`` output, passed in as text).

Lines look like ``NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python, GPU has fallen off the bus.``
Severity map (DCGM "devastating" Xids and subsystem lists; application Xids per the k8s device plugin).
"""

from __future__ import annotations

import re

from dsctl.health.model import Finding, NodeSnapshot, Severity

XID_CHECK_ID = "G22"
XID_RE = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.\d)?\): "
                    r"([0-9]{1,9})(?![0-9])")  # an Xid is a few digits: a longer run is no Xid line
XID_CRIT = frozenset({48, 64, 74, 79, 95, 119, 120, 140})
XID_INFO = frozenset({13, 31, 43, 45, 68})
XID_MEANING = {13: "graphics engine exception", 31: "MMU fault", 43: "GPU stopped processing", 45: "preemptive cleanup",
               48: "double-bit ECC error", 63: "row remap / page retirement pending", 64: "row remap failure",
               68: "NVDEC exception", 74: "NVLink error", 79: "GPU fallen off the bus", 92: "high SBE rate",
               94: "contained ECC error", 95: "uncontained ECC error", 119: "GSP RPC timeout", 120: "GSP error",
               140: "ECC unrecovered error"}
#: what to do, by severity (the text itself: the hint must not point at a file the installed package lacks)
XID_ACTION = {
    Severity.CRIT: "drain the node; reset the GPU (nvidia-smi -r) or reboot, and replace it if the Xid returns",
    Severity.WARN: "hardware event: watch for repeats (dsctl health check --kernel-log) and drain if it recurs",
    Severity.INFO: "usually the application's fault (bad memory access, killed job): check the job's own log",
}


def xid_severity(xid: int) -> Severity:
    """CRIT for devastating Xids, INFO for application Xids, WARN for every other (hardware) Xid."""
    if xid in XID_CRIT:
        return Severity.CRIT
    if xid in XID_INFO:
        return Severity.INFO
    return Severity.WARN


def parse_xids(text: str) -> list[tuple[str, int]]:
    """(bus id ``0000:18:00``, Xid) per matching line, in order."""
    out = []
    for match in XID_RE.finditer(text):
        bus = match.group(1).lower()
        domain, rest = bus.split(":", 1)
        out.append((f"{int(domain, 16):04x}:{rest}", int(match.group(2))))
    return out


def xid_findings(text: str, snap: NodeSnapshot) -> list[Finding]:
    """One finding per (GPU, Xid) with its count; the GPU is named by index when its bus id is known."""
    by_bus = {str(g.bus_id)[:-2]: g.index for g in snap.gpus if isinstance(g.bus_id, str)}
    # a lost GPU has no NVML bus id: when the PCI GPUs NVML could not name are exactly as many as the lost GPUs,
    # pair them in order (NVML enumerates in PCI bus order), so "Xid 79 on gpu4" names the lost GPU, not a PCI address
    named = {str(g.bus_id) for g in snap.gpus if isinstance(g.bus_id, str)}
    spare = sorted(d.bdf for d in snap.pci_gpus if d.bdf not in named)
    lost = [g for g in snap.gpus if not isinstance(g.bus_id, str)]
    if spare and len(spare) == len(lost):
        by_bus.update({bdf[:-2]: g.index for bdf, g in zip(spare, lost, strict=True)})
    counts: dict[tuple[str, int], tuple[int | None, int]] = {}
    for bus, xid in parse_xids(text):
        gpu = by_bus.get(bus)
        key = (f"gpu{gpu}" if gpu is not None else f"PCI {bus}", xid)
        counts[key] = (gpu, counts.get(key, (None, 0))[1] + 1)
    out = []
    for (subject, xid), (gpu, n) in sorted(counts.items()):
        meaning = XID_MEANING.get(xid, "see NVIDIA's Xid catalogue")
        out.append(Finding(XID_CHECK_ID, xid_severity(xid), subject, f"Xid {xid} x{n}", "no Xid",
                           f"kernel log has Xid {xid} ({meaning})", XID_ACTION[xid_severity(xid)], gpu=gpu,
                           value=n, unit="events"))
    return out
