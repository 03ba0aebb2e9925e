"""dsctl's table fitting measures columns through rich's public API only; these tests hold it equal to rich's
own (private) column measurement on random tables, so a rich release that changes its rules shows up here."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dsctl.output.tables import _border_width, _column_width, _padding, _width, fit

WORDS = st.text(alphabet="abcdefghij XYZ_-0123456789,.", min_size=0, max_size=30)


@st.composite
def tables(draw: st.DrawFn) -> Table:
    table = Table(box=draw(st.sampled_from([None, box.SIMPLE, box.ROUNDED, box.SIMPLE_HEAD])),
                  show_edge=draw(st.booleans()), pad_edge=draw(st.booleans()),
                  collapse_padding=draw(st.booleans()), show_header=draw(st.booleans()),
                  padding=draw(st.sampled_from([(0, 1), (0, 2), (0, 0), (1, 1, 0, 3)])))
    num_columns = draw(st.integers(1, 6))
    for _ in range(num_columns):
        table.add_column(draw(WORDS), min_width=draw(st.none() | st.integers(1, 12)),
                         max_width=draw(st.none() | st.integers(1, 40)))
    for _ in range(draw(st.integers(0, 5))):
        table.add_row(*[Text(draw(WORDS)) if draw(st.booleans()) else draw(WORDS) for _ in range(num_columns)])
    return table


@settings(max_examples=150, deadline=None)
@given(tables())
def test_public_measurement_equals_richs_own(table: Table) -> None:
    console = Console(width=80, file=None, force_terminal=False)
    options = console.options.update(width=1 << 16)
    for index, column in enumerate(table.columns):
        theirs = table._measure_column(console, options, column)
        ours = _column_width(console, options, table, index)
        assert (ours.minimum, ours.maximum) == (theirs.minimum, theirs.maximum), index
        assert _padding(table, index) == table._get_padding_width(index)
    assert _border_width(table) == table._extra_width


def test_a_wide_table_fits_80_columns_without_cutting_a_word() -> None:
    table = Table(box=box.SIMPLE_HEAD)
    for name in ("num_redundant_experts", "balancedness", "placement_of_every_replica_on_gpus"):
        table.add_column(name)
    table.add_row("32", "0.725", " ".join(f"gpu{i}" for i in range(40)))
    console = Console(width=80, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(fit(table, console))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "num_redundant_experts" in text and "gpu39" in text
    assert _width(console, table).minimum <= 80


@pytest.mark.parametrize("columns", [1, 3])
def test_border_width_counts_edges_and_separators(columns: int) -> None:
    table = Table(box=box.ROUNDED, show_edge=True)
    for i in range(columns):
        table.add_column(str(i))
    assert _border_width(table) == 2 + columns - 1
