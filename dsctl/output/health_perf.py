"""Table view of ``dsctl health perf``: one row per judged report, the basis of each verdict below."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from dsctl.health.perf.judge import VERDICTS, PerfReport, PerfResult
from dsctl.output.registry import table_renderer

#: host names shown per row (JSON has them all)
SHOWN_NODES = 4
STYLE = {"ok": "green", "slow": "bold red", "wrong": "bold red", "not_judged": "yellow"}


def rate_text(result: PerfResult, bytes_per_s: float | None) -> str:
    """perftest in Gb/s (as it reports with --report_gbits), nccl-tests in GB/s (its busbw unit)."""
    if bytes_per_s is None:
        return "-"
    if result.tool == "perftest":
        return f"{bytes_per_s * 8 / 1e9:,.1f} Gb/s"
    return f"{bytes_per_s / 1e9:,.1f} GB/s"


def size_text(size_bytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size_bytes >= scale and size_bytes % scale == 0:
            return f"{size_bytes // scale} {unit}"
    return f"{size_bytes} B"


def where_text(result: PerfResult) -> str:
    """The hosts (nccl-tests) or the RDMA device (perftest) a result names; the rest is on its basis line."""
    names = result.nodes or result.devices
    shown = list(names[:SHOWN_NODES]) + ([f"+{len(names) - SHOWN_NODES} more"] if len(names) > SHOWN_NODES else [])
    return ", ".join(shown) or "-"


@table_renderer(PerfReport)
def _perf(report: PerfReport) -> Iterable[RenderableType]:
    counts = ", ".join(f"{sum(r.verdict == v for r in report.results)} {v.replace('_', ' ')}" for v in VERDICTS)
    yield Text(f"health perf: {len(report.results)} result(s): {counts}; slow = below {report.fraction:.0%} of "
               "the expectation", style="bold")
    table = Table(show_lines=False)
    for column in ("file", "test", "nodes / NIC", "size", "measured", "expected", "ratio", "verdict"):
        table.add_column(column, justify="right" if column in ("size", "measured", "expected", "ratio")
                         else "left")
    for r in report.results:
        table.add_row(r.file, r.test, where_text(r), size_text(r.size_bytes), rate_text(r, r.measured_bytes_per_s),
                      rate_text(r, r.expected_bytes_per_s), "-" if r.ratio is None else f"{r.ratio:.0%}",
                      Text(r.verdict.replace("_", " "), style=STYLE.get(r.verdict, "")))
    yield table
    for r in report.results:
        profile = f" (node profile {r.node_profile})" if r.expected_bytes_per_s is not None else ""
        models = f"{' / '.join(r.devices)}, " if r.tool == "nccl-tests" and r.devices else ""
        yield Text(f"{r.file}: {r.test} on {models}{r.path}: {r.reason}{profile}")
        for warning in r.warnings[:3]:
            yield Text(f"  perftest printed: {warning}", style="dim")
