"""Table view of ``dsctl trace stragglers``: ranking, most skewed collectives, critical path."""

from __future__ import annotations

from collections.abc import Iterable

from rich import box
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from dsctl.output.registry import table_renderer
from dsctl.trace.place import PlaceReport
from dsctl.trace.skew import StragglerResult


def _table(title: str, headers: list[str], rows: list[list[str]]) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for i, name in enumerate(headers):
        table.add_column(name, justify="left" if i == 0 and not name.startswith("rank") else "right",
                         overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


@table_renderer(StragglerResult)
def _render(result: StragglerResult) -> Iterable[RenderableType]:
    yield Text(f"{result.num_ranks} ranks, {result.num_matched:,} collectives matched; clocks aligned on "
               f"collective ends: {result.align == 'ends'} (largest offset {result.max_clock_offset_us / 1e3:,.3f} ms)")
    yield _table("Stragglers: ranks the others waited for (ms)", ["rank", "device", "times last", "wait caused",
                                                                  "share", "clock offset"],
                 [[str(s.rank), s.device, f"{s.times_last:,}", f"{s.wait_caused_us / 1e3:,.3f}",
                   f"{s.share_of_wait:.1%}", f"{s.clock_offset_us / 1e3:,.3f}"] for s in result.stragglers])
    yield _table("Most skewed collectives (ms)", ["collective", "#", "ranks", "skew", "wait", "last rank"],
                 [[c.label, str(c.index), str(c.num_ranks), f"{c.skew_us / 1e3:,.3f}", f"{c.wait_us / 1e3:,.3f}",
                   f"{c.last_rank} {c.last_device}"] for c in result.collectives])
    yield _table("Critical path: whose compute between collectives set the time (ms)",
                 ["rank", "device", "segments", "critical"],
                 [[str(r.rank), r.device, f"{r.segments:,}", f"{r.critical_us / 1e3:,.3f}"]
                  for r in result.critical_ranks])
    yield _table("Critical segments with the most slack (ms)", ["after", "before", "rank", "compute", "slack"],
                 [[s.after, s.before, f"{s.rank} {s.device}", f"{s.compute_us / 1e3:,.3f}",
                   f"{s.slack_us / 1e3:,.3f}"] for s in result.critical_segments])
    if result.placement is not None:
        yield from _placement(result, result.placement)
    for note in result.notes:
        yield Text(f"note: {note}", style="italic")


def _place_row(r: dict[str, object], slow: bool) -> list[str]:
    return [str(r["rank"]) + (" *" if slow else ""), str(r["node_name"] or f"#{r['node']}"), str(r["gpu"]),
            str(r["nic"] or "-"), str(r["plane"]), str(r["leaf"] or "-"), str(r["pp_stage"]), str(r["ep_group"]),
            str(r["dp_group"])]


def _placement(result: StragglerResult, report: PlaceReport) -> Iterable[RenderableType]:
    """Where the stragglers are and where the slow ones concentrate (narrow tables: 80 columns fit)."""
    slow = {int(str(r["rank"])) for r in report.slow_ranks}
    yield Text(f"{report.num_slow} of {report.num_ranks:,} ranks are slow (* below; lateness far above the "
               "median)")
    rows = [_place_row(s.place, s.rank in slow) for s in result.stragglers if s.place is not None]
    shown = {s.rank for s in result.stragglers}
    rows += [_place_row(r, True) for r in report.slow_ranks if int(str(r["rank"])) not in shown]
    yield _table("Stragglers in place", ["rank", "node", "gpu", "nic", "plane", "leaf", "pp", "ep", "dp"], rows)
    if report.concentrations:
        yield _table("Where the slow ranks concentrate (p = how likely by chance)",
                     ["where", "group", "slow", "of", "p", "nodes"],
                     [[c.kind, c.group, f"{c.num_slow:,}", f"{c.num_ranks:,}", f"{c.p_value:.1e}",
                       f"{len(c.nodes):,}"] for c in report.concentrations])
    elif report.num_slow:
        yield Text("no concentration: the slow ranks are spread over the cluster")
    if report.suspect_hostlist:
        yield Text(f"suspect nodes: {report.suspect_hostlist}")
    for what, names in (("suspect leaf switches", report.suspect_switches),
                        ("suspect planes", [str(p) for p in report.suspect_planes])):
        if names:
            yield Text(f"{what}: {', '.join(names)}")
    for note in report.notes:
        yield Text(f"note: {note}", style="italic")
