"""rows_text writes exactly what an f-string per line writes (the chain-table files and the runbook, issue 32)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.storage import rows_text as rows_text_module
from dsctl.storage.rows_text import rows_text


def _joined(values: list[list[int]], pieces: tuple[str, ...]) -> str:
    return "".join(pieces[0] + "".join(f"{v}{p}" for v, p in zip(row, pieces[1:], strict=True)) for row in values)


_NUMBER = st.one_of(st.integers(0, 2**63 - 1), st.integers(0, 1_100), st.sampled_from([0, 9, 10, 99, 100, 999, 1000]),
                    st.integers(-5, 5))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4).flatmap(lambda w: st.tuples(
    st.lists(st.lists(_NUMBER, min_size=w, max_size=w), min_size=0, max_size=40),
    st.lists(st.text(st.sampled_from("ab ,-\n\u00e90\0"), max_size=4), min_size=w + 1, max_size=w + 1))))
def test_rows_text_is_an_f_string_per_line(case: tuple[list[list[int]], list[str]]) -> None:
    values, pieces = case
    width = len(pieces) - 1
    array = np.array(values, dtype=np.int64).reshape(len(values), width)
    assert rows_text(array, tuple(pieces)) == _joined(values, tuple(pieces))


def test_rows_text_crosses_its_block_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rows_text_module, "_BLOCK_BYTES", 1_000)  # ~60 lines a block
    values = np.arange(20_000, dtype=np.int64).reshape(10_000, 2) * 7
    assert rows_text(values, ("n ", ",", "\n")) == _joined(values.tolist(), ("n ", ",", "\n"))
