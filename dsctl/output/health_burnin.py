"""Views of ``dsctl health burn-in``: the table, the Prometheus textfile, the files of ``--out-dir``."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

import numpy as np
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from dsctl.health.burnin.api import BurninResult
from dsctl.health.burnin.judge import MIN_FLOWS_FOR_STATS
from dsctl.health.burnin.reports import REPORTS_SOURCE
from dsctl.output.prometheus import Exposition
from dsctl.output.registry import table_renderer

TEXTFILE_NAME = "dsctl_burnin.prom"
#: evidence rows shown per finding in the table (JSON has them all)
SHOWN_EVIDENCE = 3


def summary_lines(result: BurninResult) -> list[str]:
    d = result.design
    tested = len(result.selected) or result.num_nodes
    if result.source == REPORTS_SOURCE:  # judged from reports (--from-perf): no probe round ran
        rule = "" if len(result.rounds) < MIN_FLOWS_FOR_STATS else \
            f" and more than {result.mad_k:g} MADs below the reports' median"
        return [
            f"burn-in of {result.plan}: {result.kind}, {len(result.selected):,} of {result.num_nodes:,} nodes "
            f"covered by {len(result.rounds)} judged report(s), {result.source}",
            f"coverage {d.coverage.fraction:.1%} of the covered nodes' links and cable directions",
            f"slow = below {result.fraction:.0%} of what 'dsctl health perf' expects on this plan{rule}",
        ]
    return [
        f"burn-in of {result.plan}: {result.kind}, {tested:,} of {result.num_nodes:,} nodes, "
        f"{result.num_planes} plane(s), {result.source}",
        f"rounds: {result.rounds_run} run ({len(d.rounds)} designed; every cable at line rate after "
        f"{d.covering_rounds}, lower bound {d.lower_bound}; budget {result.round_budget}); "
        f"coverage {d.coverage.fraction:.1%} of cable directions",
        f"slow = below {result.fraction:.0%} of the simulated expectation and more than {result.mad_k:g} MADs "
        "below the round's median",
    ]


@table_renderer(BurninResult)
def _burnin(result: BurninResult) -> Iterable[RenderableType]:
    for k, line in enumerate(summary_lines(result)):
        yield Text(line, style="bold" if k == 0 else "")
    if result.injected:
        yield Text("injected: " + "; ".join(result.injected))
    for note in result.notes:
        yield Text(note, style="yellow")
    rounds = Table(title="rounds", title_justify="left")
    for column in ("round", "kind", "flows", "expected Gb/s", "median measured/expected", "slow", "flaky"):
        rounds.add_column(column, justify="left" if column in ("round", "kind") else "right")
    for r in result.rounds:
        rounds.add_row(r.name, r.kind, f"{r.num_flows:,}", f"{r.expected_gbps:,.0f}", f"{r.median_ratio:.1%}",
                       str(r.num_slow), str(r.num_flaky))
    yield rounds
    if result.design.coverage.uncovered:
        yield Text("not driven at line rate: " + ", ".join(result.design.coverage.uncovered), style="yellow")
    if result.findings:
        table = Table(title="findings", title_justify="left")
        for column in ("kind", "subject", "measured/expected", "evidence"):
            table.add_column(column, overflow="fold")
        for f in result.findings:
            shown = [f"{e.round}: {e.flow} {e.measured_gbps:,.0f} of {e.expected_gbps:,.0f} Gb/s"
                     + (" (some repeats)" if e.flaky else "") for e in f.evidence[:SHOWN_EVIDENCE]]
            if len(f.evidence) > SHOWN_EVIDENCE:
                shown.append(f"... {len(f.evidence) - SHOWN_EVIDENCE} more flows")
            kind = f.kind + (" (flapping)" if f.flapping else "")
            table.add_row(Text(kind, style="bold red"), Text(f"{f.subject}\n{f.note}"), f"{f.ratio:.0%}",
                          Text("\n".join(shown)))
        yield table
    if result.drain is not None:
        yield Text(f"drain: {result.drain.message}", style="bold")
        for s in result.drain.steps:
            if s.done is None and s.action in ("drain", "update"):
                yield Text("  " + shlex.join(s.argv), no_wrap=True, overflow="ignore")  # pasted whole: never wrapped
            elif s.action == "foreign":
                yield Text(f"  {s.node}: left alone, reason set by someone else: {s.current_reason}")
            elif s.action == "held":
                yield Text(f"  {s.node}: held by the circuit breaker")
            else:
                yield Text(f"  {s.node}: drained ({s.reason})" if s.done else f"  {s.node}: FAILED ({s.error})",
                           style="" if s.done else "bold red")
    elif result.drain_wanted():
        yield Text("to drain (rerun with --drain):", style="bold")
        for node, why in result.drain_wanted():
            yield Text(f"  {node}: {why}")
    verdict = f"FAIL: {len(result.findings)} finding(s)" if result.findings else "PASS: no slow flow"
    yield Text(verdict, style="bold red" if result.findings else "bold green")


def prometheus_text(result: BurninResult, now_s: float) -> str:
    """Per-NIC measured bandwidth (lowest median over the rounds) and one series per finding."""
    out = Exposition()
    out.add("burnin_last_run_timestamp_seconds", [], now_s)
    out.add("burnin_rounds", [], float(result.rounds_run))
    out.add("burnin_coverage_ratio", [], result.design.coverage.fraction)
    out.add("burnin_findings", [], float(len(result.findings)))
    k = len(result.nic_names)
    ran = ~(np.isnan(result.nic_send_gbps) & np.isnan(result.nic_recv_gbps))
    for ep in np.flatnonzero(ran).tolist():  # only NICs some round drove (a plan may list millions that none did)
        node, nic = divmod(ep, k) if k else (0, 0)
        labels = [("node", result.node_names[node]), ("nic", result.nic_names[nic]),
                  ("plane", str(result.nic_plane[nic]))] if k else []
        for name, value in (("burnin_nic_send_bytes_per_second", result.nic_send_gbps[ep]),
                            ("burnin_nic_receive_bytes_per_second", result.nic_recv_gbps[ep])):
            if value == value:  # not NaN: the NIC ran in some round
                out.add(name, labels, float(value) * 1e9 / 8)
    for f in result.findings:
        out.add("burnin_finding_ratio", [("kind", f.kind), ("subject", f.subject), ("node", f.node)], f.ratio)
    return out.text()


def out_files(result: BurninResult, json_text: str, prom_text: str) -> dict[str, str]:
    """The files of ``--out-dir DIR``: burnin.json, the Prometheus text, one SVG per plane."""
    files = {"burnin.json": json_text, TEXTFILE_NAME: prom_text}
    for plane, svg in result.svgs.items():
        files[f"plane{plane}.svg"] = svg
    return files
