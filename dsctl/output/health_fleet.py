"""Table view of dsctl health fleet: one summary line, the problem nodes' findings, the drain commands."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from dsctl.health.fleet import FleetReport
from dsctl.output.health import STYLE
from dsctl.output.registry import table_renderer


def summary_line(report: FleetReport) -> str:
    s = report.summary
    return (f"fleet of {s['nodes']} nodes: {s['healthy']} healthy, {s['warn']} warn, {s['crit']} crit, "
            f"{s['unreachable']} unreachable (per-node timeout {report.timeout_s:g} s, run {report.wall_s:.1f} s)")


@table_renderer(FleetReport)
def _fleet(report: FleetReport) -> Iterable[RenderableType]:
    yield Text(summary_line(report), style="bold")
    if report.findings:
        table = Table(title="findings (CRIT, WARN, unreachable)", title_justify="left")
        for column in ("node", "sev", "check", "subject", "finding"):
            table.add_column(column, overflow="fold", no_wrap=column in ("node", "sev", "check"))
        for f in report.findings:
            sev = "UNREACH" if f.severity == "UNREACHABLE" else f.severity
            table.add_row(Text(f.node), Text(sev, style=STYLE.get(f.severity, "bold magenta")), Text(f.check),
                          Text(f.subject), Text(f.message))
        yield table
    if report.drain_note:
        yield Text(f"drain: {report.drain_note}", style="bold")
    if report.drain:
        if report.drained:
            yield Text("drained:", style="bold")
            for d in report.drain:
                yield Text(f"  {d.node}: {d.reason}" if d.done else f"  {d.node}: FAILED ({d.error})",
                           style="" if d.done else "bold red")
        else:
            yield Text("to drain (rerun with --drain, or run):", style="bold")
            for d in report.drain:
                yield Text("  " + shlex.join(d.argv), no_wrap=True, overflow="ignore")  # pasted whole: never wrapped
    verdict = "FAIL" if report.exit_code else "PASS"
    yield Text(f"{verdict}: {report.summary['crit']} crit, {report.summary['unreachable']} unreachable",
               style="bold red" if report.exit_code else "bold green")
