"""Table (human) view of ``dsctl trace overlap``: per-rank overlap, the rank with the most exposed communication,
per-collective breakdown."""

from __future__ import annotations

from collections.abc import Iterable

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from dsctl.output.registry import table_renderer
from dsctl.trace.explain import ExplainResult
from dsctl.trace.overlap import OverlapMetrics, OverlapResult, RankOverlap

#: collectives listed per rank (by exposed time); JSON lists all
MAX_COLLECTIVE_ROWS = 10
#: with more ranks than this, per-step and per-collective tables are shown for the worst rank only
MAX_DETAIL_RANKS = 4
#: with more rank rows than this, the table lists the worst ranks only (after the spread)
MAX_RANK_ROWS = 16


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


def _ranks_table(result: OverlapResult, ranks: list[RankOverlap], more: str) -> Group:
    worst = result.worst_rank
    step_texts = [",".join(str(s) for s in row.steps) if len(row.steps) <= 6 else f"{len(row.steps)} steps"
                  for row in ranks]
    shared = len(set(step_texts)) <= 1
    steps = str(result.steps)
    if shared and step_texts and step_texts[0] and step_texts[0] != steps:
        steps += f" = {step_texts[0]}"
    title = f"Compute / communication overlap, ms (steps: {steps}; hidden = overlap / comm, exp = exposed){more}"
    labels = ["rank", "device"] + ([] if shared else ["steps"])
    rows = []
    for row, steps in zip(ranks, step_texts, strict=True):
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


def _short(name: str, width: int = 60) -> str:
    """A kernel name without ``void`` and its parameter list, cut to ``width``; JSON keeps the full name."""
    name = name.removeprefix("void ")
    depth = 0
    for i, ch in enumerate(name):
        depth += (ch == "<") - (ch == ">")
        if ch == "(" and depth == 0 and i > 0:
            name = name[:i]
            break
    return name if len(name) <= width else name[:width - 3] + "..."


def _categories_table(row: RankOverlap) -> Table:
    table = Table(title=f"rank {row.rank} {row.device}: kernel categories (HTA), ms", title_justify="left",
                  box=box.SIMPLE_HEAD)
    for name in ("category", "busy", "kernel sum", "kernels", "share"):
        table.add_column(name, justify="left" if name == "category" else "right")
    for c in row.categories:
        table.add_row(c.category, _ms(c.busy_us), _ms(c.kernel_us), f"{c.num_kernels:,}", _pct(c.share))
    return table


def _kernels_table(row: RankOverlap) -> Table:
    table = Table(title=f"rank {row.rank} {row.device}: top {len(row.top_kernels)} kernels by summed time",
                  title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("kernel", overflow="fold")
    for name in ("class", "count", "total ms"):
        table.add_column(name, justify="left" if name == "class" else "right", no_wrap=True)
    for k in row.top_kernels:
        table.add_row(_short(k.name), k.cls, f"{k.count:,}", _ms(k.total_us))
    return table


def _spread_table(result: OverlapResult) -> Table:
    table = Table(title=f"Across {len(result.ranks)} ranks, ms", title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("figure", "min", "median", "p95", "max"):
        table.add_column(name, justify="left" if name == "figure" else "right", no_wrap=True)
    for figure, stats in (result.spread or {}).items():
        if figure.endswith("_us"):
            cells = [_ms(stats[k]) for k in ("min", "median", "p95", "max")]
        else:
            cells = [_pct(stats[k]) for k in ("min", "median", "p95", "max")]
        table.add_row(figure, *cells)
    return table


@table_renderer(ExplainResult)
def _render_explain(result: ExplainResult) -> Iterable[RenderableType]:
    table = Table(title=f"Kernel classes over {result.num_ranks} rank(s): {len(result.names)} distinct names",
                  title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("name", overflow="fold")
    for name in ("class", "rule", "count", "total ms"):
        table.add_column(name, justify="right" if name in ("count", "total ms") else "left", no_wrap=True)
    for r in result.names:
        table.add_row(_short(r.name, 90), r.cls, r.rule, f"{r.count:,}", _ms(r.total_us))
    yield table
    yield Text("time per class: " + ", ".join(f"{k} {_ms(v)} ms" for k, v in sorted(result.class_totals_us.items())))


@table_renderer(OverlapResult)
def _render(result: OverlapResult) -> Iterable[RenderableType]:
    if len(result.ranks) > MAX_RANK_ROWS:
        shown = {(w["rank"], w["device"], w["source"]) for w in result.worst_ranks}
        yield _ranks_table(result, [r for r in result.ranks if (r.rank, r.device, r.source) in shown],
                           f" (the {len(shown)} most exposed of {len(result.ranks)} rows; --format json has all)")
    else:
        yield _ranks_table(result, result.ranks, "")
    if result.spread:
        yield _spread_table(result)
    if result.worst_rank is not None:
        w = result.worst_rank
        yield Text(f"most exposed communication: rank {w['rank']} {w['device']} ({w['source']}), "
                   f"{_ms(float(w['exposed_comm_us']))} ms (the rank that waits most, "  # type: ignore[arg-type]
                   "often not the straggler: trace stragglers names the rank the others wait for)", style="bold")
    detail = result.ranks
    if len(result.ranks) > MAX_DETAIL_RANKS and result.worst_rank is not None:
        w = result.worst_rank
        detail = [r for r in result.ranks
                  if (r.rank, r.device, r.source) == (w["rank"], w["device"], w["source"])]
        yield Text(f"details below for the rank with the most exposed communication only ({len(result.ranks)} "
                   "ranks); --format json has every rank", style="italic")
    for row in detail:
        if row.per_step:
            yield _steps_table(row)
        if row.collectives:
            yield _collectives_table(row)
        if row.basis == "gpu_kernels":
            yield _categories_table(row)
        if row.top_kernels:
            yield _kernels_table(row)
    notes = sorted({n for row in result.ranks for n in row.notes} | set(result.notes))
    for note in notes:
        yield Text(f"note: {note}", style="italic")
