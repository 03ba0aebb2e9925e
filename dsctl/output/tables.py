"""The one rule for tables on a narrow terminal: no column is dropped or cut, at any width (80 columns included).

:func:`fit` is applied by :func:`dsctl.output.emit.emit` to every table a view yields, just before printing:

1. a table whose natural width fits the terminal is printed as the view made it;
2. otherwise every column may wrap (``overflow="fold"``, ``no_wrap=False``) and gets a fixed width: its
   natural width up to a common cap, never below its longest word, so the widest columns wrap, between words,
   and nothing is cut to ``…``;
3. a table that cannot fit even so (too many columns for the width: rich would give the last ones no width at all)
   is printed as one block per row, ``header  value`` lines, so every value still shows.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text


def _width(console: Console, table: Table) -> Measurement:
    """The table's unclamped (minimum, maximum) width: each column's longest word / longest line plus padding,
    plus the borders (rich's own measurement clamps both to the terminal, which hides a table that cannot fit)."""
    options = console.options.update(width=1 << 16)
    try:
        columns = [table._measure_column(console, options, column) for column in table.columns]
        extra = table._extra_width
    except AttributeError:  # a rich without these: its clamped measurement (worse, never wrong in the fit case)
        return Measurement.get(console, console.options, table)
    return Measurement(sum(c.minimum for c in columns) + extra, sum(c.maximum for c in columns) + extra)


def fit(table: Table, console: Console) -> RenderableType:
    """``table`` made to show every column and value in ``console.width`` (see the module docstring)."""
    width = console.width
    if table.width is not None or _width(console, table).maximum <= width:
        return table
    for column in table.columns:
        column.no_wrap = False
        column.overflow = "fold"
        column.max_width = None
    if _width(console, table).minimum <= width:
        _share_width(console, table, width)
        return table
    return as_records(table)


def _share_width(console: Console, table: Table, width: int) -> None:
    """Give each column of ``table`` a fixed width: its natural width capped at one common limit, chosen as large
    as the terminal allows, but never below the column's longest word. So narrow columns keep their natural width
    and only the widest wrap, as rich does, except that rich's own squeeze can go below a column's longest word
    and fold a one-word header such as ``num_redundant_experts``."""
    options = console.options.update(width=1 << 16)
    try:
        measured = [table._measure_column(console, options, column) for column in table.columns]
        padding = [table._get_padding_width(column._index) for column in table.columns]
        room = width - table._extra_width
    except AttributeError:  # a rich without these: leave the squeeze to rich
        return
    lows = [m.minimum for m in measured]
    highs = [m.maximum for m in measured]

    def widths(cap: int) -> list[int]:
        return [min(high, max(low, cap)) for low, high in zip(lows, highs, strict=True)]

    if sum(lows) > room:
        return
    cap_lo, cap_hi = 0, max(highs)  # the largest cap whose widths fit: widths(cap) grows with cap
    while cap_lo < cap_hi:
        mid = (cap_lo + cap_hi + 1) // 2
        cap_lo, cap_hi = (mid, cap_hi) if sum(widths(mid)) <= room else (cap_lo, mid - 1)
    shares = widths(cap_lo)
    left = room - sum(shares)
    for i, share in enumerate(shares):  # what is left: one more to columns held at the cap, left to right
        if left > 0 and share == cap_lo < highs[i]:
            shares[i] += 1
            left -= 1
    for column, share, pad in zip(table.columns, shares, padding, strict=True):
        column.width = max(1, share - pad)


def _cell_text(cell: Any) -> Any:
    return cell if isinstance(cell, (str, Text)) else Text(str(cell)) if not hasattr(cell, "__rich_console__") \
        else cell


def as_records(table: Table) -> Table:
    """``table`` as one block per row: a two-column table (header, value), rows separated by a line."""
    records = Table(title=table.title, title_justify=table.title_justify, show_header=False, box=box.SIMPLE_HEAD,
                    caption=table.caption)
    records.add_column("field", style="bold", overflow="fold")
    records.add_column("value", overflow="fold")
    headers = [column.header if isinstance(column.header, (str, Text)) else str(column.header)
               for column in table.columns]
    num_rows = max((len(column._cells) for column in table.columns), default=0)
    for row in range(num_rows):
        for header, column in zip(headers, table.columns, strict=True):
            cell = column._cells[row] if row < len(column._cells) else ""
            records.add_row(header or "", _cell_text(cell))
        if row < num_rows - 1:
            records.add_section()
    return records
