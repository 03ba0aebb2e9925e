"""Prometheus text exposition (format 0.0.4) of health results, for node_exporter's textfile collector.

Every series carries a ``node`` label (the host name for ``check``, the Slurm node name for ``fleet``) so that
files from several nodes, or one fleet file, never collide.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from dsctl.health.api import HealthReport
from dsctl.health.fleet import STATUSES, FleetReport
from dsctl.health.metrics import Sample

PREFIX = "dsctl_health_"
TEXTFILE_NAME = "dsctl_health.prom"

HELP = {
    "last_run_timestamp_seconds": "Unix time the health check finished.",
    "node_status": "1 for the node's status (healthy, warn, crit, unreachable), 0 for the others.",
    "findings": "Number of findings of the last check by severity.",
    "finding": "One series per CRIT, WARN, INFO or SKIP finding (value 1).",
    "nvlink_active_links": "NVLinks of the GPU that are active.",
    "nvlink_errors_per_second": "NVLink DL error counter growth over the sampling interval, summed over links.",
    "rdma_port_state": "RDMA port state number from sysfs (4 = ACTIVE, 1 = DOWN).",
    "rdma_port_rate_bytes_per_second": "RDMA port link rate.",
    "rdma_port_errors_per_second": "RDMA port error counter growth over the sampling interval.",
    "rdma_port_errors_total": "RDMA port error counter (sysfs counters/ and hw_counters/) at the second sample.",
    "nvlink_errors_total": "NVLink DL error counters at the second sample, summed over the GPU's links.",
    "fleet_nodes": "Nodes of the last fleet run by status.",
    "fleet_run_duration_seconds": "Wall time of the last fleet run.",
}


_LABEL_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n"}
_NEEDS_ESCAPE = re.compile(r'[\\"\n\r\x00-\x08\x0b\x0c\x0e-\x1f\x7f]')


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\r":
        return "\\n"  # a line break of its own (CR or CRLF): the format's only line-break escape
    return _LABEL_ESCAPES.get(char, "\ufffd")  # other control characters have no escape: replaced


def escape(value: str) -> str:
    """A label value as the exposition format (0.0.4) wants it: backslash, double quote and newline escaped
    (``\\``, ``\"``, ``\n``); a carriage return (alone or in CRLF) becomes ``\n`` too, since a raw CR ends the line
    for line-based readers; other control characters, which the format cannot escape, become U+FFFD."""
    if not _NEEDS_ESCAPE.search(value):
        return value
    return _NEEDS_ESCAPE.sub(_escape_char, value.replace("\r\n", "\n"))


def number(value: float) -> str:
    value = float(value)
    if value.is_integer():
        return str(int(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class Exposition:
    """Series grouped by metric name, written as one ``# HELP``/``# TYPE`` block per name."""

    def __init__(self) -> None:
        self.series: dict[str, list[str]] = {}
        self._seen: set[str] = set()

    def add(self, name: str, labels: Iterable[tuple[str, str]], value: float) -> None:
        """One sample; a series (name and label set) already added is kept once, the first value wins
        (Prometheus rejects a scrape with a duplicate series: a finding listed twice, a node named twice)."""
        body = ",".join(f'{key}="{escape(str(val))}"' for key, val in labels)
        series = f"{PREFIX}{name}{{{body}}}"
        if series in self._seen:
            return
        self._seen.add(series)
        self.series.setdefault(name, []).append(f"{series} {number(value)}")

    def text(self) -> str:
        lines: list[str] = []
        for name, rows in self.series.items():
            lines.append(f"# HELP {PREFIX}{name} {HELP.get(name, name.replace('_', ' ') + '.')}")
            kind = "counter" if name.endswith("_total") else "gauge"
            lines.append(f"# TYPE {PREFIX}{name} {kind}")
            lines.extend(rows)
        return "\n".join(lines) + "\n"


def node_status(summary: Mapping[str, int]) -> str:
    return "crit" if summary.get("crit") else "warn" if summary.get("warn") else "healthy"


def _node_series(out: Exposition, node: str, status: str, findings: Iterable[Mapping[str, Any]],
                 samples: Iterable[Sample], summary: Mapping[str, int] | None) -> None:
    for name in STATUSES:
        out.add("node_status", [("node", node), ("status", name)], 1.0 if name == status else 0.0)
    if summary is not None:
        for severity, count in summary.items():
            out.add("findings", [("node", node), ("severity", severity)], float(count))
    for f in findings:
        if f["severity"] != "OK":
            out.add("finding", [("node", node), ("check", f["check"]), ("severity", f["severity"].lower()),
                                ("subject", f["subject"])], 1.0)
    for g in samples:
        out.add(g.name, [("node", node), *g.labels], g.value)


def render_check(report: HealthReport, now_s: float) -> str:
    """The textfile of one node's check finished at ``now_s`` (Unix seconds)."""
    node = str(report.node.get("hostname") or "unknown")
    out = Exposition()
    out.add("last_run_timestamp_seconds", [("node", node)], now_s)
    findings = [{"check": f.check, "severity": f.severity.value, "subject": f.subject} for f in report.findings]
    _node_series(out, node, node_status(report.summary), findings, report.metrics, report.summary)
    return out.text()


def render_fleet(report: FleetReport, now_s: float) -> str:
    """One textfile for the whole fleet: counts, a status per node, one series per finding. The nodes' raw
    readings stay in each node's own textfile (``check --textfile-dir``): 2,048 nodes x ~270 series would be
    half a million series in one file."""
    out = Exposition()
    out.add("last_run_timestamp_seconds", [], now_s)
    out.add("fleet_run_duration_seconds", [], report.wall_s)
    for name in STATUSES:
        out.add("fleet_nodes", [("status", name)], float(report.summary[name]))
    by_node: dict[str, list[dict[str, str]]] = {}
    for f in report.findings:
        if f.check != "-":
            by_node.setdefault(f.node, []).append({"check": f.check, "severity": f.severity, "subject": f.subject})
    for verdict in report.nodes:
        _node_series(out, verdict.node, verdict.status, by_node.get(verdict.node, ()),
                     (), None)
    return out.text()
