"""dsctl.eplb.stats: routing statistics from JSON, CSV and .npy contents; every bad input names file and row."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.eplb.stats import detect_format, parse_stats, sum_stats
from dsctl.errors import InputError


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def test_json_bare_list_and_load_key() -> None:
    assert parse_stats("a.json", b"[[1, 2], [3, 4.5]]").tolist() == [[1, 2], [3, 4.5]]
    assert parse_stats("a.json", b'{"load": [[1, 2]], "step": 7}').tolist() == [[1, 2]]
    assert parse_stats("a.json", b"[[1, 2, 3]]").shape == (1, 3)  # one layer


@pytest.mark.parametrize(("name", "content", "needle"), [
    ("a.json", b"[1, 2, 3]", "a.json: found a 1-D list of 3 values; statistics must be 2-D [layers, experts]"),
    ("a.json", b'{"load": [4, 5]}', "found a 1-D list of 2 values"),
    ("a.npy", None, "a.npy: found an array of shape (3,); statistics must be 2-D [layers, experts]"),
])
def test_one_dimensional_statistics_are_rejected_with_shapes(name: str, content: bytes | None, needle: str) -> None:
    with pytest.raises(InputError) as err:
        parse_stats(name, content if content is not None else _npy(np.array([1.0, 2.0, 3.0])))
    assert needle in err.value.message and "rule V1" in err.value.message


def test_csv_with_header_comments_and_trailing_comma() -> None:
    text = b"# window 1\ne0,e1,e2\n1,2,3,\n\n4,5,6\n"
    assert parse_stats("s.csv", text).tolist() == [[1, 2, 3], [4, 5, 6]]


def test_whitespace_separated_rows_and_numeric_first_rows() -> None:
    assert parse_stats("s.txt", b"1 2 3\n4\t5 6\n").tolist() == [[1, 2, 3], [4, 5, 6]]
    assert parse_stats("s.csv", b"e0 e1\n1 2\n").tolist() == [[1, 2]]  # a header of words
    # numeric-looking first rows are data, never a header (nan is a number: reported, not dropped)
    assert parse_stats("s.csv", b"1, 2\n3, 4\n").tolist() == [[1, 2], [3, 4]]
    with pytest.raises(InputError, match="layer row 0, column 0: nan is not finite"):
        parse_stats("s.csv", b"nan,inf\n1,2\n")


def test_npy_and_format_sniffing() -> None:
    arr = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert parse_stats("x.npy", _npy(arr)).tolist() == arr.tolist()
    assert detect_format("stats", _npy(arr)) == "npy"
    assert detect_format("stats", b" [[1]]") == "json"
    assert detect_format("stats", b"1,2") == "csv"


def test_several_files_are_summed() -> None:
    total = sum_stats([("a.json", b"[[1, 2]]"), ("b.csv", b"3,4\n"), ("c.npy", _npy(np.array([[1.5, 0.5]])))])
    assert total.tolist() == [[5.5, 6.5]]


def test_mismatching_shapes_name_both_files() -> None:
    with pytest.raises(InputError, match=r"b.csv: shape 1 layers x 3 experts differs from a.json \(1 x 2\)"):
        sum_stats([("a.json", b"[[1, 2]]"), ("b.csv", b"3,4,5\n")])


@pytest.mark.parametrize(("name", "content", "needle"), [
    ("r.json", b"[[1, 2], [3]]", "r.json: layer row 1 has 1 values but row 0 has 2"),
    ("r.csv", b"1,2\n3\n", "r.csv: layer row 1 has 1 values"),
    ("n.json", b"[[1, NaN]]", "n.json: layer row 0, column 1: NaN is not finite"),
    ("i.json", b"[[Infinity, 1]]", "i.json: layer row 0, column 0: Infinity is not finite"),
    ("n.csv", b"1,2\n3,nan\n", "n.csv: layer row 1, column 1: nan is not finite"),
    ("i.csv", b"1,inf\n", "i.csv: layer row 0, column 1: inf is not finite"),
    ("neg.json", b"[[1, -2]]", "neg.json: layer row 0, column 1: -2 is negative"),
    ("neg.csv", b"1,2\n-3,4\n", "neg.csv: layer row 1, column 0: -3 is negative"),
    ("t.json", b'[[1, "x"]]', "t.json: layer row 0, column 1: 'x' is not a number"),
    ("b.json", b"[[1, true]]", "b.json: layer row 0, column 1: True is not a number"),
    ("t.csv", b"1,2\n3,abc\n", "t.csv: layer row 1 (line 2), column 1: 'abc' is not a number"),
    ("t2.csv", b"# c\n\n1,2\n3,abc\n", "t2.csv: layer row 1 (line 4), column 1: 'abc' is not a number"),
    ("semi.csv", b"1;2;3\n4;5;6\n", "semi.csv: line 1: values are separated by ';'; separate them with commas"),
    ("hsemi.csv", b"a;b;c\n4;5;6\n", "hsemi.csv: line 2: values are separated by ';'"),
    ("pipe.csv", b"1|2\n", "separated by '|'"),
    ("bool.npy", None, "bool.npy: .npy array must hold integers or floats, got dtype bool"),
    ("text.npy", b"1,2,3\n", "text.npy: not a .npy array file"),
    ("e.json", b"", "e.json: file is empty"),
    ("e.json", b"[]", "e.json: no load rows found"),
    ("e.csv", b"\n# nothing\n", "e.csv: file is empty"),
    ("e.npy", b"", "e.npy: file is empty"),
    ("h.csv", b"a,b\n", "h.csv: no load rows found"),
    ("k.json", b'{"loads": [[1]]}', 'k.json: JSON object has no "load" key (keys: loads)'),
    ("s.json", b'"hello"', "expected a 2-D list"),
    ("bad.json", b"[[1, 2]", "bad.json: not valid JSON"),
    ("bad.npy", b"not numpy at all", "bad.npy: not a .npy array file"),
    ("trunc.npy", b"\x93NUMPY\x01\x00", "trunc.npy: not a readable .npy array"),
    ("n.npy", None, "n.npy: layer row 1, column 0: nan is not finite"),
    ("3d.npy", None, "found an array of shape (2, 2, 2); statistics must be 2-D"),
    ("z.json", b"[[]]", "layer row 0 is empty"),
])
def test_bad_input_names_file_and_row(name: str, content: bytes | None, needle: str) -> None:
    if content is None:
        arrays = {"n.npy": np.array([[1.0], [np.nan]]), "bool.npy": np.ones((2, 3), dtype=bool)}
        content = _npy(arrays.get(name, np.zeros((2, 2, 2))))
    with pytest.raises(InputError) as err:
        parse_stats(name, content)
    assert needle in err.value.message


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.floats(0, 1e9, allow_nan=False, width=32), min_size=3, max_size=3), min_size=1, max_size=5))
def test_json_and_csv_round_trip(rows: list[list[float]]) -> None:
    arr = np.array(rows)
    from_json = parse_stats("a.json", json.dumps(rows).encode())
    from_csv = parse_stats("a.csv", "\n".join(",".join(repr(v) for v in r) for r in rows).encode())
    assert np.array_equal(from_json, arr) and np.array_equal(from_csv, arr)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=200), st.sampled_from(["x.json", "x.csv", "x.npy", "x"]))
def test_garbage_never_escapes_as_another_exception(content: bytes, name: str) -> None:
    try:
        arr = parse_stats(name, content)
    except InputError:
        return
    assert arr.ndim == 2 and np.all(np.isfinite(arr)) and np.all(arr >= 0)
