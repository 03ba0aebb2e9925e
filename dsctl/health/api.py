"""Run the checks over a snapshot and build the report the ``dsctl health`` commands print."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from dsctl.errors import InputError, one_of
from dsctl.health.checks import CHECKS, ORDER, Check, area_of
from dsctl.health.checks_rdma import compute_nics, roce_ports
from dsctl.health.expectations import Expectations, expectations_for, find_sku
from dsctl.health.metrics import Sample, node_samples
from dsctl.health.model import SEVERITY_ORDER, Finding, NodeSnapshot, Severity, Unavailable
from dsctl.health.xid import XID_CHECK_ID, xid_findings
from dsctl.profiles.schema import NodeProfile

AREAS = ("gpu", "nvlink", "rdma")
FAIL_ON = {"crit": Severity.CRIT, "warn": Severity.WARN}



def all_checks() -> list[Check]:
    """Every check that reads the snapshot, in report order (G22, the kernel-log scan, runs separately)."""
    return [c for c in CHECKS if c.fn is not None]


def parse_only(text: str | None) -> tuple[str, ...]:
    """``--only gpu,nvlink`` -> ("gpu", "nvlink"); None/empty means every area."""
    if not text:
        return AREAS
    parts = tuple(p.strip().lower() for p in text.split(",") if p.strip())
    bad = [p for p in parts if p not in AREAS]
    if bad or not parts:
        shown = ", ".join(bad) if bad else repr(text)
        raise InputError(f": unknown area {shown}", field="only", hint=f"use a comma list of {one_of(AREAS)}")
    return parts


def parse_fail_on(text: str) -> Severity:
    key = text.strip().lower()
    if key not in FAIL_ON:
        raise InputError(f": {text!r} is not valid", field="fail_on", hint=f"use {one_of(list(FAIL_ON))}")
    return FAIL_ON[key]


def choose_expectations(snap: NodeSnapshot, profile: NodeProfile | None,
                        lookup: Callable[[str], NodeProfile], expect_gpus: int | None = None) -> Expectations:
    """Targets from ``--node-profile`` if given, else from the node profile named by the detected SKU's table row, else
    from the SKU row alone (counts then unchecked). ``expect_gpus`` (``--expect-gpus``) overrides the GPU count."""
    live = [g for g in snap.gpus if g.lost is None and isinstance(g.name, str)]
    sku = None
    name = None
    if live:
        first = live[0]
        name = str(first.name)
        sku = find_sku(name, first.pci_device_id if isinstance(first.pci_device_id, int) else None)
    if profile is None and sku is not None and sku.node_profile is not None:
        profile = lookup(sku.node_profile)
    exp = expectations_for(profile, sku, name)
    if expect_gpus is not None:
        exp = dataclasses.replace(exp, num_gpus=expect_gpus, source=f"{exp.source}; --expect-gpus {expect_gpus}")
    return exp


def _collapse_skips(findings: list[Finding]) -> list[Finding]:
    """One SKIP line per (check, message) with the subjects joined, instead of eight identical lines."""
    out: list[Finding] = []
    groups: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        if f.severity is Severity.SKIP:
            groups.setdefault((f.check, f.message), []).append(f)
        else:
            out.append(f)
    for (check, message), items in groups.items():
        subjects = ", ".join(i.subject for i in items)
        gpus = {i.gpu for i in items}
        out.append(Finding(check, Severity.SKIP, subjects, items[0].observed, items[0].expected, message,
                           gpu=gpus.pop() if len(gpus) == 1 else None))
    return out


@dataclass(frozen=True)
class HealthReport:
    """Result of ``dsctl health check``: findings worst first, a count per severity, and what was checked."""

    node: dict[str, Any]
    findings: tuple[Finding, ...]
    summary: dict[str, int]
    fail_on: str
    exit_code: int = field(default=0, metadata={"output": False})
    metrics: tuple[Sample, ...] = ()
    verdict: str = "pass"

    def to_data(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "summary": self.summary,
            "fail_on": self.fail_on,
            "verdict": self.verdict,
            "findings": [
                {"check": f.check, "severity": f.severity.value, "area": area_of(f.check), "subject": f.subject,
                 "observed": f.observed, "expected": f.expected, "message": f.message, "remedy": f.remedy,
                 "gpu": f.gpu, "gpu_uuid": f.gpu_uuid, "gpu_serial": f.gpu_serial, "value": f.value, "unit": f.unit}
                for f in self.findings
            ],
            "metrics": [g.to_data() for g in self.metrics],
        }


def _with_gpu_ids(findings: list[Finding], snap: NodeSnapshot) -> list[Finding]:
    """Findings about one GPU (``Finding.gpu``) carry its NVML UUID and serial where known."""
    ids = {g.index: (g.uuid if isinstance(g.uuid, str) else None, g.serial if isinstance(g.serial, str) else None)
           for g in snap.gpus}
    out = []
    for f in findings:
        uuid, serial = ids.get(f.gpu, (None, None)) if f.gpu is not None else (None, None)
        out.append(dataclasses.replace(f, gpu_uuid=uuid, gpu_serial=serial) if uuid or serial else f)
    return out


def run_checks(snap: NodeSnapshot, exp: Expectations, *, areas: Iterable[str] = AREAS,
               fail_on: Severity = Severity.CRIT, kernel_log: str | None = None) -> HealthReport:
    """Every check of the selected areas; a check with no findings contributes one OK line.

    ``kernel_log`` (text of ``journalctl -k`` / ``dmesg``) adds G22 (Xid history). Exit code 1 when any finding is
    at or above ``fail_on``.
    """
    selected = set(areas)
    findings: list[Finding] = []
    sampled_gpus = not (isinstance(snap.device_count, Unavailable) and snap.device_count.code == "NOT_SAMPLED")
    checks = [c for c in all_checks() if c.area in selected and (c.area == "rdma" or sampled_gpus)]
    if kernel_log is None:
        kernel_log = snap.kernel_log
    has_links = any(g.links for g in snap.gpus if g.lost is None)
    has_ports = bool(compute_nics(snap, exp))
    retiring = any(not isinstance(g.retired_pages, Unavailable) for g in snap.gpus if g.lost is None)
    roce = bool(roce_ports(snap, exp)) or (exp.compute_link_layer or "").lower() == "ethernet"
    for check in checks:
        check_id, title = check.id, check.title
        if (check.roce_only and not roce) or (check.retirement_only and not retiring):
            continue
        if snap.nvml is not None and check.area != "rdma" and check_id != "G1":
            findings.append(Finding(check_id, Severity.SKIP, "node", str(snap.nvml), "-",
                                    f"{title}: not checked (nvmlInit answered {snap.nvml.code})"))
            continue
        if check.needs_gpus and (not sampled_gpus or snap.nvml is not None):
            why = "--only without gpu" if not sampled_gpus else f"nvmlInit answered {snap.nvml.code}"  # type: ignore[union-attr]
            findings.append(Finding(check_id, Severity.SKIP, "node", "GPUs not read", "-",
                                    f"{title}: not checked, the GPUs were not read ({why})"))
            continue
        if check.rate and snap.interval_s == 0:
            findings.append(Finding(check_id, Severity.SKIP, "node", "one sample", "two samples",
                                    f"{title}: not measured (--interval-s 0 takes one sample; rates need two)"))
            continue
        if check.needs_links and not has_links:
            findings.append(Finding(check_id, Severity.SKIP, "node", "no NVLink", "-", f"{title}: no NVLinks"))
            continue
        if check.needs_ports and not has_ports:
            findings.append(Finding(check_id, Severity.SKIP, "node", "no compute NIC", "-",
                                    f"{title}: no compute RDMA ports"))
            continue
        got = [dataclasses.replace(f, check=check_id) for f in check.fn(snap, exp)] if check.fn is not None else []
        if not got:
            got = [Finding(check_id, Severity.OK, "node", "ok", "-", f"{title}: ok")]
        elif all(f.severity is Severity.SKIP for f in got) and check.area != "rdma":
            live = [g for g in snap.gpus if g.lost is None]
            if len(got) < len(live):  # some GPUs were checked and passed
                got.append(Finding(check_id, Severity.OK, "node", "ok", "-", f"{title}: ok where supported"))
        findings.extend(got)
    if kernel_log is not None and "gpu" in selected and snap.nvml is None:
        got = xid_findings(kernel_log, snap)
        findings.extend(got or [Finding(XID_CHECK_ID, Severity.OK, "node", "no Xid", "-", "Xid history: none")])
    findings = _collapse_skips(_with_gpu_ids(findings, snap))
    findings.sort(key=lambda f: (f.severity.rank, ORDER.get(f.check, 99), f.subject))
    summary = {s.value.lower(): sum(1 for f in findings if f.severity is s) for s in SEVERITY_ORDER}
    failed = any(f.severity.rank <= fail_on.rank for f in findings)
    gpus = [g for g in snap.gpus if g.lost is None]
    node = {
        "hostname": snap.hostname,
        "driver_version": snap.driver_version if isinstance(snap.driver_version, str) else None,
        "num_gpus": snap.device_count if isinstance(snap.device_count, int) else None,
        "gpu_name": str(gpus[0].name) if gpus else None,
        "num_nics": len(snap.nics),
        "interval_s": snap.interval_s,
        "expectations": exp.source,
        "source": snap.source,
        "areas": sorted(selected),
        "host": dataclasses.asdict(snap.host) if snap.host is not None else None,
    }
    checked = any(f.severity is not Severity.SKIP for f in findings)
    verdict = "fail" if failed else "pass" if checked else "nothing checked"
    return HealthReport(node=node, findings=tuple(findings), summary=summary, fail_on=fail_on.value.lower(),
                        exit_code=1 if failed else 0, metrics=node_samples(snap), verdict=verdict)
