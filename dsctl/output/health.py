"""Table views of dsctl health results."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from dsctl.health.api import HealthReport
from dsctl.health.check_catalog import CheckCatalog
from dsctl.health.inventory import Inventory
from dsctl.output.registry import table_renderer
from dsctl.units import human_bytes


def host_line(host: Mapping[str, Any] | None) -> str:
    """``host: kernel 5.15.0, 224 CPUs, 2.0 TiB RAM, booted 2026-11-02 08:10 UTC`` (empty without host facts)."""
    if not host:
        return ""
    parts = []
    if host.get("kernel_release"):
        parts.append(f"kernel {host['kernel_release']}")
    if host.get("num_logical_cpus") is not None:
        parts.append(f"{host['num_logical_cpus']} CPUs")
    if host.get("memory_total_bytes") is not None:
        parts.append(f"{human_bytes(host['memory_total_bytes'])} RAM")
    if host.get("boot_time_s") is not None:
        booted = datetime.fromtimestamp(host["boot_time_s"], tz=timezone.utc)
        parts.append(f"booted {booted:%Y-%m-%d %H:%M} UTC")
    return "host: " + ", ".join(parts) if parts else ""

IDENTIFIER_COLUMNS = frozenset({"gpu", "bus id", "numa", "nic", "nearest nic", "nvlinks", "level"})
STYLE = {"CRIT": "bold red", "WARN": "yellow", "INFO": "cyan", "SKIP": "dim", "OK": "green"}


@table_renderer(HealthReport)
def _report(report: HealthReport) -> Iterable[RenderableType]:
    node = report.node
    gpus = (f"{node.get('num_gpus')} x {node.get('gpu_name')}, " if node.get("num_gpus") is not None
            else "GPUs not sampled, ")
    driver = f", driver {node.get('driver_version')}" if node.get("driver_version") else ""
    title = (f"health of {node.get('hostname') or 'node'}: {gpus}"
             f"{node.get('num_nics')} RDMA devices{driver}, "
             f"counters over {node.get('interval_s'):g} s; expectations: {node.get('expectations')}")
    host = host_line(node.get("host"))
    if host:
        title += "\n" + host
    problems = [f for f in report.findings if f.severity.value != "OK"]
    passed = [f.check for f in report.findings if f.severity.value == "OK"]
    if problems:
        table = Table(title=title, title_justify="left")
        for column in ("sev", "check", "subject", "observed", "expected", "finding / remedy"):
            table.add_column(column, overflow="fold", no_wrap=column in ("sev", "check"))
        for f in problems:
            text = f.message + (f"\n-> {f.remedy}" if f.remedy and f.severity.value in ("CRIT", "WARN") else "")
            ids = [x for x in (f"SN {f.gpu_serial}" if f.gpu_serial else None, f.gpu_uuid) if x]
            subject = "\n".join([f.subject, *ids])
            table.add_row(Text(f.severity.value, style=STYLE[f.severity.value]), Text(f.check), Text(subject),
                          Text(f.observed), Text(f.expected), Text(text))
        yield table
    else:
        yield Text(title, style="bold")
    if passed:
        yield Text(f"OK: {' '.join(passed)}", style="green")
        yield Text("(dsctl health checks: what each check reads and how it judges)", style="dim")
    s = report.summary
    if report.verdict == "nothing checked":
        yield Text(f"NOTHING CHECKED: every selected check was skipped ({s['skip']} skip); not a pass. Give a node "
                   "profile (--node-profile) or run where the selected hardware is present.", style="bold yellow")
        return
    verdict = "FAIL" if report.exit_code else "PASS"
    yield Text(f"{verdict} (fail on {report.fail_on}): {s['crit']} crit, {s['warn']} warn, {s['info']} info, "
               f"{s['skip']} skip, {s['ok']} ok", style="bold red" if report.exit_code else "bold green")


def _plain_table(rows: list[dict[str, object]], title: str) -> Table:
    """A table whose cells are literal text (bus ids like ``0000:ab:00.0`` must not become emoji or markup)."""
    table = Table(title=title, title_justify="left")
    for column in rows[0] if rows else []:
        # identifiers (bus ids, NIC names) never shrink or fold; free-text columns fold instead at 80 columns
        ident = column in IDENTIFIER_COLUMNS
        width = max([len(column), *(len(str(r[column])) for r in rows)]) if ident else None
        table.add_column(column, no_wrap=ident, overflow="fold", min_width=width)
    for row in rows:
        table.add_row(*(Text("-" if v is None else f"{v:g}" if isinstance(v, float) else str(v))
                        for v in row.values()))
    return table


@table_renderer(Inventory)
def _inventory(inv: Inventory) -> Iterable[RenderableType]:
    host = host_line(dataclasses.asdict(inv.host) if inv.host is not None else None)
    if host:
        yield Text(f"{inv.hostname}: {host}")
    yield _plain_table([{"gpu": g.index, "name": g.name, "bus id": g.bus_id, "numa": g.numa_node,
                         "nvlinks": g.nvlinks, "nearest nic": g.nic, "level": g.level} for g in inv.gpus],
                       title=f"{inv.hostname}: GPUs (driver {inv.driver_version})")
    if inv.nics:
        yield _plain_table([{"nic": n.name, "bus id": n.bus_id, "numa": n.numa_node, "layer": n.link_layer,
                             "state": n.state, "Gb/s": n.rate_gbps, "firmware": n.fw_ver} for n in inv.nics],
                           title="RDMA devices")


@table_renderer(CheckCatalog)
def _render_checks(catalog: CheckCatalog) -> Iterable[RenderableType]:
    table = Table(title="Health checks (dsctl health check; --only gpu,nvlink,rdma selects by area)",
                  title_justify="left")
    for column in ("id", "area", "name", "reads", "judges"):
        table.add_column(column, overflow="fold", no_wrap=column in ("id", "area"))
    for c in catalog.checks:
        table.add_row(Text(c.id), Text(c.area), Text(c.name), Text(c.reads.replace("`", "")),
                      Text(c.judges.replace("`", "")))
    yield table
