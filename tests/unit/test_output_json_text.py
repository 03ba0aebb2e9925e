"""--format json's fast path: one line through json's C encoder, integer arrays written by numpy (issue 32)."""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dsctl.output.data import to_data
from dsctl.output.emit import JSON_INDENT_ENV, emit, stdout_json_indented
from dsctl.output.formats import OutputFormat
from dsctl.output.json_text import MAX_TABLE_VALUES, compact_json, int_array_json

INT_DTYPES = st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64])


@given(hnp.arrays(INT_DTYPES, hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=5)))
def test_int_array_text_reads_back_as_tolist(array: np.ndarray) -> None:
    text = int_array_json(array)
    assert json.loads(text) == array.tolist()
    assert "\n" not in text


@pytest.mark.parametrize("values", [[-1, 0, 1279], [0, MAX_TABLE_VALUES + 5], [-(2**63), 2**63 - 1], [7]])
def test_value_ranges_narrow_and_wide(values: list[int]) -> None:
    array = np.array([values, values[::-1]], dtype=np.int64)
    assert json.loads(int_array_json(array)) == array.tolist()


def test_compact_json_equals_the_plain_encoding_and_keeps_lookalike_strings() -> None:
    data = {"log2phy": np.arange(24).reshape(2, 3, 4) - 1, "ids": np.array([3, 1], dtype=np.uint8),
            "names": ['"dsctl-array-0"', "dsctl-array-1", "ü"], "x": 1.5, "flags": np.array([True, False])}
    text = compact_json(to_data(data, keep_int_arrays=True))
    assert "\n" not in text
    assert json.loads(text) == to_data(data) == json.loads(json.dumps(to_data(data)))


def test_indenting_follows_the_terminal_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv(JSON_INDENT_ENV, raising=False)
    assert stdout_json_indented(Tty()) and not stdout_json_indented(io.StringIO())
    monkeypatch.setenv(JSON_INDENT_ENV, "0")
    assert not stdout_json_indented(Tty())
    monkeypatch.setenv(JSON_INDENT_ENV, "1")
    assert stdout_json_indented(io.StringIO())


@pytest.mark.parametrize("indent", ["0", "1"])
def test_emit_prints_the_same_data_either_way(monkeypatch: pytest.MonkeyPatch, capsys: Any, indent: str) -> None:
    monkeypatch.setenv(JSON_INDENT_ENV, indent)
    result = {"table": np.array([[1, -2], [30, 4]]), "loads": np.array([0.5, 2.0]), "name": "n\udcff"}
    emit(result, OutputFormat.json, "eplb rebalance")
    out = capsys.readouterr().out
    assert out.endswith("\n") and (out.count("\n") == 1) == (indent == "0")
    data = json.loads(out)
    assert data["table"] == [[1, -2], [30, 4]] and data["loads"] == [0.5, 2.0] and data["name"] == "n\udcff"
    assert data["dsctl"]["command"] == "eplb rebalance"
