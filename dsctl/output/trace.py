"""Table (human) view of ``dsctl trace overlap``: per-rank overlap, the worst rank, per-collective breakdown."""

from __future__ import annotations

from collections.abc import Iterable

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from dsctl.output.registry import table_renderer
from dsctl.trace.overlap import OverlapMetrics, OverlapResult, RankOverlap

#: collectives listed per rank (by exposed time); JSON lists all
MAX_COLLECTIVE_ROWS = 10
#: with more ranks than this, per-step and per-collective tables are shown for the worst rank only
MAX_DETAIL_RANKS = 4


def _ms(us: float) -> str:
    return f"{us / 1e3:,.3f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _metric_cells(m: OverlapMetrics) -> list[str]:
    return [_ms(m.wall_us), _ms(m.compute_busy_us), _ms(m.comm_busy_us), _ms(m.overlapped_us),
            _ms(m.exposed_comm_us), _ms(m.idle_us), _pct(m.overlap_ratio), _pct(m.exposed_comm_fraction)]


_METRIC_HEADERS = ["wall", "compute", "comm", "overlap", "exposed", "idle", "hidden", "exp/wall"]


def _compact_table(title: str, labels: list[str], rows: list[tuple[list[str], str | None]]) -> Group:
    """Title line, then label columns and the metric columns; light borders and no column ever truncates a number,
    so the table stays readable at 80 columns (label text folds instead)."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 0))
    headers = labels + _METRIC_HEADERS
    for i, name in enumerate(headers):
        width = max([len(name), *(len(cells[i]) for cells, _ in rows)])
        if i < len(labels):
            table.add_column(name, overflow="fold", min_width=len(name))
        else:
            table.add_column(name, justify="right", no_wrap=True, min_width=width)
    for cells, style in rows:
        table.add_row(*cells, style=style)
    return Group(Text(title), table)


def _ranks_table(result: OverlapResult) -> Group:
    worst = result.worst_rank
    step_texts = [",".join(str(s) for s in row.steps) if len(row.steps) <= 6 else f"{len(row.steps)} steps"
                  for row in result.ranks]
    shared = len(set(step_texts)) <= 1
    steps = str(result.steps)
    if shared and step_texts and step_texts[0] and step_texts[0] != steps:
        steps += f" = {step_texts[0]}"
    title = f"Compute / communication overlap, ms (steps: {steps}; hidden = overlap / comm, exp = exposed)"
    labels = ["rank", "device"] + ([] if shared else ["steps"])
    rows = []
    for row, steps in zip(result.ranks, step_texts, strict=True):
        is_worst = worst is not None and worst["rank"] == row.rank and worst["device"] == row.device \
            and worst["source"] == row.source
        label = [str(row.rank), row.device] + ([] if shared else [steps or "all"])
        rows.append((label + _metric_cells(row.metrics), "bold red" if is_worst else None))
    return _compact_table(title, labels, rows)


def _steps_table(row: RankOverlap) -> Group:
    rows: list[tuple[list[str], str | None]] = [
        (["all" if step.step is None else str(step.step), *_metric_cells(step.metrics)], None)
        for step in row.per_step]
    return _compact_table(f"rank {row.rank} {row.device}: per step, ms", ["step"], rows)


def _collectives_table(row: RankOverlap) -> Table:
    shown = row.collectives[:MAX_COLLECTIVE_ROWS]
    more = len(row.collectives) - len(shown)
    title = f"rank {row.rank} {row.device}: communication by collective" + (f" (top {len(shown)})" if more else "")
    table = Table(title=title, title_justify="left")
    for name in ("collective", "count", "total ms", "mean ms", "exposed ms", "exposed share"):
        # names fold rather than end in "…": two DeepEP kernels often share a long prefix
        table.add_column(name, justify="left" if name == "collective" else "right",
                         overflow="fold" if name == "collective" else "ellipsis")
    for c in shown:
        table.add_row(c.name, f"{c.count:,}", _ms(c.total_us), _ms(c.mean_us), _ms(c.exposed_us),
                      _pct(c.exposed_us / c.total_us if c.total_us > 0 else None))
    return table


@table_renderer(OverlapResult)
def _render(result: OverlapResult) -> Iterable[RenderableType]:
    yield _ranks_table(result)
    if result.worst_rank is not None:
        w = result.worst_rank
        yield Text(f"worst rank: {w['rank']} {w['device']} ({w['source']}), exposed communication "
                   f"{_ms(float(w['exposed_comm_us']))} ms", style="bold")  # type: ignore[arg-type]
    detail = result.ranks
    if len(result.ranks) > MAX_DETAIL_RANKS and result.worst_rank is not None:
        w = result.worst_rank
        detail = [r for r in result.ranks
                  if (r.rank, r.device, r.source) == (w["rank"], w["device"], w["source"])]
        yield Text(f"details below for the worst rank only ({len(result.ranks)} ranks); --format json has every "
                   "rank", style="italic")
    for row in detail:
        if row.per_step:
            yield _steps_table(row)
        if row.collectives:
            yield _collectives_table(row)
    notes = sorted({n for row in result.ranks for n in row.notes} | set(result.notes))
    for note in notes:
        yield Text(f"note: {note}", style="italic")
