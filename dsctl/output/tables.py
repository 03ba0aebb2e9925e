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
from rich.console import Console, ConsoleOptions, RenderableType
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text


def _padding(table: Table, index: int) -> int:
    """Columns of padding rich adds to column ``index``'s width settings (``width``, ``min_width``,
    ``max_width``), from the table's public ``padding``, ``collapse_padding`` and ``pad_edge``."""
    _, right, _, left = Padding.unpack(table.padding)
    if table.collapse_padding:
        left, right = 0, right
    if not table.pad_edge:
        left = 0 if index == 0 else left
        right = 0 if index == len(table.columns) - 1 else right
    return left + right


def _cell_padding(table: Table, index: int) -> int:
    """Columns of padding around each cell of column ``index`` (collapsed padding shares the gap between two
    columns: a column's left padding is what its neighbour's right padding does not already give)."""
    _, right, _, left = Padding.unpack(table.padding)
    if table.collapse_padding and index > 0:
        left = max(0, left - right)
    if not table.pad_edge:
        left = 0 if index == 0 else left
        right = 0 if index == len(table.columns) - 1 else right
    return left + right


def _border_width(table: Table) -> int:
    """Columns taken by the table's vertical lines: the two edges and one between each pair of columns."""
    if not table.box:
        return 0
    return (2 if table.show_edge else 0) + max(0, len(table.columns) - 1)


def _column_width(console: Console, options: ConsoleOptions, table: Table, index: int) -> Measurement:
    """Column ``index``'s (minimum, maximum) width with its padding: its longest word / longest line over the
    header, the cells and the footer, as rich measures them (``Measurement.get``), clamped by its own width
    settings; a column with nothing to measure is 1 to the whole width, as in rich."""
    column = table.columns[index]
    limit = options.max_width
    pad = _padding(table, index)
    if column.width is not None:
        return Measurement(column.width + pad, column.width + pad).with_maximum(limit)
    renderables = [*([column.header] if table.show_header else []), *column.cells,
                   *([column.footer] if table.show_footer else [])]
    cell_pad = _cell_padding(table, index) if any(Padding.unpack(table.padding)) else 0
    inner = options.update_width(max(1, limit - cell_pad))
    sizes = [Measurement.get(console, inner, cell) for cell in renderables]
    measured = Measurement(max((m.minimum + cell_pad for m in sizes), default=1),
                           max((m.maximum + cell_pad for m in sizes), default=limit)).with_maximum(limit)
    return measured.clamp(None if column.min_width is None else column.min_width + pad,
                          None if column.max_width is None else column.max_width + pad)


def _width(console: Console, table: Table) -> Measurement:
    """The table's unclamped (minimum, maximum) width: each column's longest word / longest line plus padding,
    plus the borders (rich's own measurement clamps both to the terminal, which hides a table that cannot fit)."""
    options = console.options.update(width=1 << 16)
    columns = [_column_width(console, options, table, i) for i in range(len(table.columns))]
    extra = _border_width(table)
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
    measured = [_column_width(console, options, table, i) for i in range(len(table.columns))]
    padding = [_padding(table, i) for i in range(len(table.columns))]
    room = width - _border_width(table)
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
    cells = [list(column.cells) for column in table.columns]
    num_rows = max((len(column) for column in cells), default=0)
    for row in range(num_rows):
        for header, column in zip(headers, cells, strict=True):
            cell = column[row] if row < len(column) else ""
            records.add_row(header or "", _cell_text(cell))
        if row < num_rows - 1:
            records.add_section()
    return records
