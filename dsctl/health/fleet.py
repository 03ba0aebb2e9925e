"""One fleet verdict from many ``dsctl health check --format json`` reports: a status per node, one table of
findings, the nodes to drain with a one-line Slurm reason each.

Pure: the reports arrive as parsed JSON objects (or a reason why a node gave none); nothing here runs a process.
A node is ``crit`` with any CRIT finding, else ``warn`` with any WARN finding, else ``healthy`` (INFO, SKIP and OK
lines do not count); ``unreachable`` when it gave no usable report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from dsctl.errors import InputError
from dsctl.health.drain import MAX_REASON_CHARS, REASON_PREFIX, drain_argv, one_line, reason  # noqa: F401  (re-exported)
from dsctl.units import DAY_S

if TYPE_CHECKING:
    from dsctl.health.api import HealthReport

STATUSES = ("healthy", "warn", "crit", "unreachable")
#: severities listed in the fleet's findings table (INFO/SKIP/OK stay in the per-node reports)
LISTED = ("CRIT", "WARN")


@dataclass(frozen=True)
class NodeInput:
    """One node's answer: the parsed report, or ``None`` and why there is none."""

    node: str
    report: Mapping[str, Any] | None
    reason: str = ""


@dataclass(frozen=True)
class FleetFinding:
    """One CRIT or WARN line of one node, or the node's ``unreachable`` line (check ``-``)."""

    node: str
    check: str
    severity: str
    subject: str
    message: str


@dataclass(frozen=True)
class NodeVerdict:
    """A node's status and counts of CRIT and WARN findings; ``reason`` explains ``unreachable``."""

    node: str
    status: str
    num_crit: int = 0
    num_warn: int = 0
    reason: str = ""


@dataclass(frozen=True)
class DrainAction:
    """A node to drain and the one-line reason (``dsctl:G6 crit gpu3 1 NVLink(s) down (inactive: 7)``)."""

    node: str
    reason: str
    done: bool | None = None  # None: printed only; True/False: scontrol ran and succeeded or not
    error: str = ""

    @property
    def argv(self) -> tuple[str, ...]:
        return drain_argv(self.node, self.reason)


@dataclass(frozen=True)
class FleetReport:
    """Result of ``dsctl health fleet``. ``summary`` counts nodes per status (plus ``nodes``, the total);
    ``timeout_s`` is the per-node limit, ``wall_s`` the run's wall time in seconds."""

    summary: dict[str, int]
    nodes: tuple[NodeVerdict, ...]
    findings: tuple[FleetFinding, ...]
    drain: tuple[DrainAction, ...]
    drained: bool = False
    timeout_s: float = 0.0
    wall_s: float = 0.0
    exit_code: int = field(default=0, metadata={"output": False})
    #: what the drain did or why it did nothing (circuit breaker, reasons set by others); "" without --drain
    drain_note: str = ""

    def to_data(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "timeout_s": self.timeout_s,
            "wall_s": round(self.wall_s, 3),
            "nodes": [{"node": v.node, "status": v.status, "num_crit": v.num_crit, "num_warn": v.num_warn,
                       "reason": v.reason} for v in self.nodes],
            "findings": [{"node": f.node, "check": f.check, "severity": f.severity, "subject": f.subject,
                          "message": f.message} for f in self.findings],
            "drain": [{"node": d.node, "reason": d.reason, "command": list(d.argv), "done": d.done,
                       **({"error": d.error} if d.error else {})} for d in self.drain],
            "drained": self.drained,
            "drain_note": self.drain_note,
        }


#: HealthCheckProgram is killed after 60 s; the counter interval must leave room for start-up and scontrol
MAX_SLURM_INTERVAL_S = 30.0
#: longest per-node timeout a fleet run accepts (seconds): a day
MAX_FLEET_TIMEOUT_S = DAY_S


def slurm_check_interval(interval_s: float | None) -> float:
    """The counter interval of a Slurm HealthCheckProgram run (``slurm_healthcheck``): 10 s unless given, at most
    :data:`MAX_SLURM_INTERVAL_S` so the run ends within Slurm's 60 s."""
    if interval_s is None:
        return 10.0
    if interval_s > MAX_SLURM_INTERVAL_S:
        raise InputError(f"{interval_s:g} with {{slurm_healthcheck}}: at most {MAX_SLURM_INTERVAL_S:g} s",
                         field="interval_s", mentions=("slurm_healthcheck",),
                         hint="Slurm kills HealthCheckProgram after 60 s")
    return interval_s


def check_fleet_options(timeout_s: float, launch_timeout_s: float, interval_s: float | None,
                        from_record: bool) -> None:
    """``health fleet``: both timeouts seconds in (0, :data:`MAX_FLEET_TIMEOUT_S`]; a counter interval only when
    the nodes sample (not ``from_record``), positive and below the per-node timeout."""
    if not 0 < timeout_s <= MAX_FLEET_TIMEOUT_S or not 0 < launch_timeout_s <= MAX_FLEET_TIMEOUT_S:
        raise InputError(f"and {{launch_timeout_s}} must be seconds in (0, {MAX_FLEET_TIMEOUT_S:.0f}]",
                         field="timeout_s", mentions=("launch_timeout_s",))
    if interval_s is not None and from_record:
        raise InputError("does not apply to {from_record}", field="interval_s", mentions=("from_record",),
                         hint="each record carries the interval its two counter samples were taken apart")
    if interval_s is not None and not 0 < interval_s < timeout_s:
        raise InputError(f"{interval_s:g} must be positive and below {{timeout_s}} {timeout_s:g}",
                         field="interval_s", mentions=("timeout_s",))


def drain_reason(findings: Iterable[Mapping[str, Any]]) -> str:
    """``dsctl:G6 crit gpu3 1 NVLink(s) down (inactive: 7)``: the first CRIT finding, ``(+N more)`` for the rest,
    cut to ``MAX_REASON_CHARS`` (:func:`dsctl.health.drain.reason`)."""
    crit = [f for f in findings if f.get("severity") == "CRIT"]
    if not crit:
        return ""
    first = crit[0]
    return reason(str(first.get("check", "?")), f"crit {first.get('subject', '')} {first.get('message', '')}",
                  len(crit) - 1)


def self_drain_reason(report: HealthReport) -> str | None:
    """NHC's convention for ``health check --slurm-healthcheck``: the reason to drain this node with when
    ``report`` has a CRIT finding (:func:`drain_reason`), None for a node to leave alone."""
    if report.exit_code == 0 or not report.summary.get("crit"):
        return None
    return drain_reason({"check": f.check, "severity": f.severity.value, "subject": f.subject, "message": f.message}
                        for f in report.findings)


def report_problem(report: Mapping[str, Any]) -> str:
    """Why a JSON document is not a dsctl health report ('' when it is one)."""
    findings = report.get("findings")
    if not isinstance(findings, list):
        return "answer is not a dsctl health report (no findings list)"
    if not all(isinstance(f, dict) and isinstance(f.get("severity"), str) for f in findings):
        return "answer is not a dsctl health report (a finding without severity)"
    return ""


def digest(report: Mapping[str, Any]) -> dict[str, Any]:
    """What :func:`judge` reads of a node's answer: its listed (CRIT/WARN) findings with the four fields used;
    the fleet runner keeps only this of each node's (up to 16 MiB) document. A document that is not a health
    report digests to one that :func:`report_problem` refuses the same way."""
    problem = report_problem(report)
    if problem:
        return {} if "no findings" in problem else {"findings": [{}]}
    return {"findings": [{key: f[key] for key in ("check", "severity", "subject", "message") if key in f}
                         for f in report["findings"] if f["severity"] in LISTED]}


def judge(item: NodeInput) -> tuple[NodeVerdict, list[FleetFinding], DrainAction | None]:
    """One node's verdict, its listed findings and its drain action (CRIT only)."""
    if item.report is None or report_problem(item.report):
        why = item.reason if item.report is None else report_problem(item.report)
        why = one_line(why) or "no answer"
        return (NodeVerdict(item.node, "unreachable", reason=why),
                [FleetFinding(item.node, "-", "UNREACHABLE", "node", why)], None)
    listed = [f for f in item.report["findings"] if f["severity"] in LISTED]
    num_crit = sum(1 for f in listed if f["severity"] == "CRIT")
    num_warn = len(listed) - num_crit
    status = "crit" if num_crit else "warn" if num_warn else "healthy"
    rows = [FleetFinding(item.node, str(f.get("check", "?")), f["severity"], str(f.get("subject", "")),
                         str(f.get("message", ""))) for f in listed]
    action = DrainAction(item.node, drain_reason(listed)) if num_crit else None
    return NodeVerdict(item.node, status, num_crit, num_warn), rows, action


def aggregate(items: Iterable[NodeInput], *, timeout_s: float = 0.0, wall_s: float = 0.0) -> FleetReport:
    """The fleet verdict; findings sorted CRIT, WARN, UNREACHABLE, then by node order of ``items``.

    Exit code 1 when any node is ``crit`` or ``unreachable`` (a WARN alone passes, as for ``health check``).
    """
    verdicts: list[NodeVerdict] = []
    rows: list[FleetFinding] = []
    drains: list[DrainAction] = []
    for item in items:
        verdict, found, action = judge(item)
        verdicts.append(verdict)
        rows.extend(found)
        if action is not None:
            drains.append(action)
    counts = dict.fromkeys(STATUSES, 0)
    for v in verdicts:
        counts[v.status] += 1
    rank = {"CRIT": 0, "WARN": 1, "UNREACHABLE": 2}
    rows.sort(key=lambda f: rank[f.severity])  # stable: node order kept within a severity
    summary = {"nodes": len(verdicts), **counts}
    failed = counts["crit"] > 0 or counts["unreachable"] > 0
    return FleetReport(summary, tuple(verdicts), tuple(rows), tuple(drains), False, timeout_s, wall_s,
                       1 if failed else 0)


def with_drain_results(report: FleetReport, results: Mapping[str, str | None], note: str = "") -> FleetReport:
    """The report after the drain: ``results`` maps node -> error text (``None`` = drained); a node missing from
    ``results`` was not drained (breaker or a foreign reason: ``note`` says which)."""
    done = tuple(DrainAction(d.node, d.reason, results[d.node] is None, results[d.node] or "")
                 if d.node in results else DrainAction(d.node, d.reason, False, "not drained: " + (note or "held"))
                 for d in report.drain)
    return replace(report, drain=done, drained=True, drain_note=note)

