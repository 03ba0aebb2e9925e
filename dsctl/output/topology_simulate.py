"""Table view of ``dsctl topology simulate``."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from dsctl.output.registry import table_renderer
from dsctl.topology.sim import RateSpread, SimResult
from dsctl.units import human_bytes


def _time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:,.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:,.2f} ms"
    return f"{seconds * 1e6:,.1f} us"


def _spread(s: RateSpread) -> str:
    """min / median / max in GB/s (the values are bytes/s)."""
    return f"{s.min / 1e9:,.1f} / {s.median / 1e9:,.1f} / {s.max / 1e9:,.1f}"


def _ranges(values: list[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``1-3, 5``."""
    runs: list[list[int]] = []
    for v in values:
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


@table_renderer(SimResult)
def _simulate(result: SimResult) -> Iterable[RenderableType]:
    head = Table(title=f"{result.kind} simulation: {result.num_gpus:,} GPUs on {result.num_nodes:,} nodes, "
                 f"{result.num_planes} plane(s), {result.routing} routing", show_header=False, title_justify="left")
    head.add_column("item", style="bold", no_wrap=True)
    head.add_column("value", overflow="fold")
    rows = [
        ("per-GPU GB/s", f"{_spread(result.gpu_bytes_per_s)} (min / median / max; bytes to other nodes / time)"),
        ("bound", f"NIC line rate {result.nic_bytes_per_s / 1e9:,.1f} GB/s per GPU"
                  + (f" (EP payload at {result.nic_efficiency:.0%}: "
                     f"{result.nic_bytes_per_s * result.nic_efficiency / 1e9:,.1f} GB/s)"
                     if result.nic_efficiency < 1 else "")
                  + (f"; bisection {result.bisection_bytes_per_s / 1e9:,.1f} GB/s "
                     f"({result.bisection_bytes_per_s * 8 / 1e12:,.1f} Tb/s)"
                     if result.bisection_bytes_per_s else "")),
        ("completion", f"{_time(result.completion_s)} (lower bound {_time(result.lower_bound_s)}: busiest link "
                       "at full rate)"),
        ("NVLink", f"{result.nvlink_bytes_per_s / 1e9:,.0f} GB/s per direction; busiest at "
                   f"{result.nvlink_max_utilisation:.0%} on average"),
    ]
    if result.failed:
        shown = ", ".join(result.failed[:6]) + (f" (+{len(result.failed) - 6} more)" if len(result.failed) > 6 else "")
        rows.append(("failed", shown))
    if result.unroutable_flows:
        rows.append(("unroutable", f"{result.unroutable_flows:,} flows have no live path (left out)"))
    for key, value in rows:
        head.add_row(key, value)
    yield head
    if len(result.jobs) > 1 or result.jobs[0].note or result.jobs[0].algbw_bytes_per_s:
        jobs = Table(title="jobs", title_justify="left")
        for col in ("job", "GPUs", "GB/s min/med/max", "completion", "algbw GB/s"):
            jobs.add_column(col, justify="left" if col == "job" else "right", overflow="fold")
        for j in result.jobs:
            size = f" {human_bytes(j.size_bytes)}" if j.size_bytes else ""
            jobs.add_row(f"{j.name} ({j.workload}{size})", f"{j.num_gpus:,}", _spread(j.gpu_bytes_per_s),
                         _time(j.completion_s), f"{j.algbw_bytes_per_s / 1e9:,.1f}" if j.algbw_bytes_per_s else "-")
        yield jobs
        for j in result.jobs:
            if j.note:
                yield Text(f"{j.name}: {j.note}", style="dim")
            if j.logical_bytes_per_s.max > 0:
                yield Text(f"{j.name}: DeepEP logical GB/s {_spread(j.logical_bytes_per_s)} (min / median / max; "
                           "logical bytes / time); the GB/s column is physical (bytes to other nodes / time)")
    planes = Table(title="planes", title_justify="left")
    for col in ("plane", "flows", "rounds", "busiest", "mean up", "GB/s min/med/max"):
        planes.add_column(col, justify="right")
    for p in result.planes:
        planes.add_row(str(p.plane), f"{p.flows:,}", f"{p.rounds:,}", f"{p.max_utilisation:.0%}",
                       f"{p.mean_uplink_utilisation:.0%}", _spread(p.gpu_bytes_per_s))
    yield planes
    if result.mirrored_planes:
        yield Text(f"symmetry: plane(s) {_ranges(result.mirrored_planes)} have plane 0's wiring and flows; "
                   "solved once and mapped (exactly what solving each gives)", style="dim")
    hot = Table(title="hottest links", title_justify="left")
    hot.add_column("link", overflow="fold")
    hot.add_column("use", justify="right", no_wrap=True)
    hot.add_column("GB/s", justify="right", no_wrap=True)
    for link in result.hottest_links:
        hot.add_row(link.name, f"{link.utilisation:.0%}", f"{link.bytes_per_s / 1e9:,.1f}")
    yield hot
