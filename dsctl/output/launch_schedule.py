"""Table view of ``dsctl launch schedule``: summary, per-rank figures, an ASCII timeline and the op order."""

from __future__ import annotations

import math
from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from dsctl.launch.schedule import ScheduleResult
from dsctl.output.generic import format_scalar
from dsctl.output.registry import table_renderer

_MAX_COLUMNS = 160
#: the table view lists each rank's op order only up to this many ops in all (JSON/YAML always list every op)
MAX_TABLE_OPS = 1_000
#: ASCII timeline characters per op kind, (direction 0, direction 1)
_CHARS = {"F": "Ff", "B": "Bb", "I": "Ii", "W": "Ww"}
_STYLES = {"F": "dark_orange", "B": "green", "I": "green3", "W": "blue", "#": "bold magenta"}


def _num(value: float | None) -> str:
    return format_scalar(value)


def _resolution(result: ScheduleResult, max_columns: int) -> float:
    """Columns per time unit: the finest of 1, 2, 4 that puts every op edge on the grid and fits the width,
    else the largest of 4, 2, 1, 1/2, 1/4, 1/5, 1/10, ... that fits."""
    fit = max_columns / max(result.makespan, 1e-9)
    times = [t for row in result.timeline for _, s, e in row for t in (s, e)]
    for res in (1.0, 2.0, 4.0):
        if res <= fit and all(math.isclose(t * res, round(t * res), abs_tol=1e-6) for t in times):
            return res
    for res in (4.0, 2.0, 1.0):
        if res <= fit:
            return res
    scale = 1.0
    for _ in range(400):  # fit >= 1e-308 / 1e-9 for a finite makespan: under 320 rounds, never endless
        for step in (2.0, 4.0, 5.0):
            if 1 / (scale * step) <= fit:
                return 1 / (scale * step)
        scale *= 10
    return 1 / scale


def ascii_timeline(result: ScheduleResult, max_columns: int = _MAX_COLUMNS) -> tuple[list[str], float]:
    """One string per rank, a character per time column, and the columns per time unit.

    An op's first column shows its kind (F, B, I, W; lower case for direction 1; # for an overlapped F&B), its
    other columns ``-``; ``.`` is idle.
    """
    res = _resolution(result, max_columns)
    num_cols = max(1, math.ceil(result.makespan * res - 1e-9))
    rows = []
    for row in result.timeline:
        cells = ["."] * num_cols
        for name, start, end in row:
            if "&" in name:
                char = "#"
            else:
                char = _CHARS[name[0]][int(name[1:].split(".")[0]) % 2]
            first = max(0, math.ceil(start * res - 0.5))
            last = min(num_cols, math.ceil(end * res - 0.5))
            for col in range(first, last):
                cells[col] = char if col == first else "-"

        rows.append("".join(cells))
    return rows, res


@table_renderer(ScheduleResult)
def _render(result: ScheduleResult) -> Iterable[RenderableType]:
    costs = result.costs
    summary = Table(title=f"{result.schedule} pipeline schedule, {result.comm_model} timing model",
                    show_header=False, title_justify="left")
    summary.add_column("key", style="bold")
    summary.add_column("value")
    exact = "exact here" if result.formula_exact else "not exact for these costs"
    difference = _num(result.bubble - result.formula_bubble)
    match = "matches" if result.formula_matches else f"simulation differs by {difference}"
    rows = [
        ("stages / ranks", f"{result.num_stages} stages on {result.num_ranks} ranks"),
        ("micro-batches", str(result.num_micro_batches)),
        ("op costs", f"F={_num(costs.f)}  B={_num(costs.b)}  W={_num(costs.w)}  I=B-W={_num(costs.i)}  "
                     f"F&B={_num(costs.fb_cost)}"),
        ("makespan", _num(result.makespan)),
        ("bubble (max idle over ranks)", _num(result.bubble)),
        ("README formula", f"{_num(result.formula_bubble)}  {result.formula_regime}; {exact}; {match}"),
        ("formula makespan", _num(result.formula_makespan)),
        ("peak activations", f"{result.peak_activations} stage-chunks (max over ranks)"),
    ]
    for key, value in rows:
        summary.add_row(key, value)
    yield summary

    per_rank = Table(title="per rank", title_justify="left")
    for column in ("rank", "ops", "overlapped", "busy", "idle", "peak act."):
        per_rank.add_column(column, justify="right")
    for r in range(result.num_ranks):
        per_rank.add_row(str(r), str(result.num_ops_per_rank[r]), str(result.num_overlapped_per_rank[r]),
                         _num(result.busy_per_rank[r]), _num(result.idle_per_rank[r]),
                         str(result.peak_activations_per_rank[r]))
    yield per_rank

    yield _Timeline(result)

    num_ops = sum(result.num_ops_per_rank)
    if num_ops > MAX_TABLE_OPS:
        yield Text(f"op order per rank: not shown for {num_ops:,} ops (the table lists up to {MAX_TABLE_OPS:,}); "
                   "--format json lists every op and its start and end")
        return
    order = Table(title="op order per rank", title_justify="left")
    order.add_column("rank", justify="right", no_wrap=True)
    order.add_column("ops in execution order")
    for r, ops in enumerate(result.ops):
        order.add_row(str(r), " ".join(ops))
    yield order


class _Timeline:
    """The ASCII timeline, sized to the console width when printed."""

    def __init__(self, result: ScheduleResult) -> None:
        self.result = result

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        result = self.result
        width = len(str(result.num_ranks - 1))
        lines, res = ascii_timeline(result, max(20, min(_MAX_COLUMNS, options.max_width - width - 2)))
        if res > 1:
            unit = f"{_num(res)} columns = 1 time unit"
        else:
            unit = "1 column = 1 time unit" if res == 1 else f"1 column = {_num(1 / res)} time units"
        yield Text(f"timeline ({unit}; F B I W = forward, backward, input-grad, weight-grad; lower case = "
                   "direction 1; # = overlapped F&B; - = the op goes on; . = idle)")
        for r, line in enumerate(lines):
            text = Text(f"r{r:<{width}} ", no_wrap=True, overflow="crop")
            style = "dim"
            for char in line:
                if char != "-":
                    style = _STYLES.get(char.upper(), "dim")
                text.append(char, style=style)
            yield text
