"""Generic table view of any result: scalars as key/value rows, lists of records as tables."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from rich.console import RenderableType
from rich.table import Table

from dsctl.units import human_bytes


def _flatten(prefix: str, value: Any, rows: list[tuple[str, str]], tables: list[tuple[str, list[Any]]]) -> None:
    if isinstance(value, dict):
        for key, sub in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), sub, rows, tables)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        tables.append((prefix, value))
    elif isinstance(value, list):
        text = ", ".join(format_scalar(v) for v in value[:16])
        rows.append((prefix, text + (f", ... ({len(value)} items)" if len(value) > 16 else "")))
    else:
        rows.append((prefix, format_field(prefix, value)))


def format_field(key: str, value: Any) -> str:
    """A scalar in the unit its key names (the JSON key convention: ``_bytes``, ``_bytes_per_s``, ``_gbps``,
    ``_tflops``): ``hbm_bytes 85899345920`` reads ``80.0 GiB``, as the README's one-unit-per-quantity rule asks."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return format_scalar(value)
    if key.endswith("_bytes_per_s"):
        return f"{value / 1e9:,.1f} GB/s"
    if key.endswith("_bytes"):
        return human_bytes(value)
    if key.endswith("_gbps"):
        return f"{value:,g} Gb/s"
    if key.endswith("_tflops"):
        return f"{value:,g} TFLOPS"
    return format_scalar(value)


def format_scalar(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.6g}" if abs(value) < 1e6 else f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def records_table(records: list[dict[str, Any]], title: str | None = None) -> Table:
    """A table with one row per record and one column per key (keys of the first record first)."""
    columns: list[str] = []
    for record in records:
        for key in record:
            if key not in columns:
                columns.append(key)
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for record in records:
        table.add_row(*(format_scalar(record.get(c)) for c in columns))
    return table


def generic_view(data: Any, title: str | None = None) -> Iterable[RenderableType]:
    """Key/value table of a converted result (see ``to_data``)."""
    if isinstance(data, list) and all(isinstance(v, dict) for v in data):
        yield records_table(data, title)
        return
    rows: list[tuple[str, str]] = []
    tables: list[tuple[str, list[Any]]] = []
    _flatten("", data, rows, tables)
    yield from _emit(rows, tables, title)


def _emit(
    rows: list[tuple[str, str]], tables: list[tuple[str, list[Any]]], title: str | None
) -> Iterator[RenderableType]:
    if rows:
        table = Table(title=title, show_header=False, title_justify="left")
        table.add_column("key", style="bold", overflow="fold")
        table.add_column("value", overflow="fold")
        for key, value in rows:
            table.add_row(key, value)
        yield table
    for name, records in tables:
        yield records_table(records, name)
