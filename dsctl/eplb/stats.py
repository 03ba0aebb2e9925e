"""Parse routing statistics (per-layer, per-logical-expert load) from file contents.

Accepted formats (chosen by file suffix, or sniffed when the suffix says nothing):
- JSON: a bare 2-D list ``[[...], ...]`` (layers x experts), or an object whose ``"load"`` key holds one;
- CSV: one row per layer, values separated by commas (or, in a file without any comma, by spaces/tabs); blank
  lines and lines starting with ``#`` are skipped, and a first row whose cells are all words (each holds a
  letter and is not a number) is taken as a header;
- ``.npy``: a 2-D integer or floating-point array (no pickles, no booleans);
- ``.pt``: an SGLang expert-distribution recorder dump (``torch.save`` zip with ``logical_count`` [steps, layers,
  experts], steps summed), read without torch by ``dsctl.eplb.torch_dump``'s bounded pickle interpreter; its
  tensors may hold at most MAX_STATS_VALUES elements in all (steps x layers x experts), checked before reading.
Every format must give a 2-D table [layers, experts] (rule V1); a 1-D list or array is rejected with the shape
found and the shape wanted. Several files (a window of snapshots) are summed element by element.

Pure functions over text/bytes: the command layer reads the files.
"""

from __future__ import annotations

import csv
import io
import math
import re
import tokenize
from collections.abc import Sequence

import numpy as np

from dsctl.eplb.torch_dump import sglang_logical_count
from dsctl.errors import InputError
from dsctl.names import shown
from dsctl.textjson import load_json

FORMATS = ("json", "csv", "npy", "pt")
_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK\x03\x04"


def detect_format(name: str, content: bytes) -> str:
    """``json``, ``csv`` or ``npy`` from the suffix of ``name``, else from the first bytes of ``content``."""
    lower = name.lower()
    for fmt in FORMATS:
        if lower.endswith("." + fmt):
            return fmt
    if content.startswith(_NPY_MAGIC):
        return "npy"
    if content.startswith(_ZIP_MAGIC):
        return "pt"
    head = content.lstrip()[:1]
    return "json" if head in (b"[", b"{") else "csv"


def _cell_value(name: str, row: int, col: int, cell: object) -> float:
    if isinstance(cell, bool) or not isinstance(cell, (int, float)):
        raise InputError(f"{name}: layer row {row}, column {col}: {cell!r} is not a number",
                         hint="loads must be non-negative finite numbers (token counts or floats)")
    try:
        value = float(cell)
    except OverflowError:  # an integer above 1.8e308
        value = math.inf
    _check_value(name, row, col, value, repr(cell) if isinstance(cell, float) else str(cell))
    return value


def _check_value(name: str, row: int, col: int, value: float, shown: str) -> None:
    shown = shown if len(shown) <= 40 else f"{shown[:20]}... ({len(shown):,} characters)"
    if not math.isfinite(value):
        raise InputError(f"{name}: layer row {row}, column {col}: {shown} is not finite; loads must be finite numbers")
    if value < 0:
        raise InputError(f"{name}: layer row {row}, column {col}: {shown} is negative; loads must be >= 0")


def _rows_to_array(name: str, rows: Sequence[Sequence[float]]) -> np.ndarray:
    if not rows:
        raise InputError(f"{name}: no load rows found (empty statistics)",
                         hint="expected one row per MoE layer, one number per logical expert")
    width = len(rows[0])
    if width == 0:
        raise InputError(f"{name}: layer row 0 is empty; expected one number per logical expert")
    for index, row in enumerate(rows):
        if len(row) != width:
            raise InputError(f"{name}: layer row {index} has {len(row)} values but row 0 has {width} "
                             f"(ragged rows: every layer needs one value per expert)")
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), width)


def parse_json(name: str, text: str) -> np.ndarray:
    """JSON bare 2-D list, or ``{"load": 2-D list}`` -> float64 [L, E]."""
    if not text.strip():
        raise InputError(f"{name}: file is empty; expected a JSON 2-D list of loads (layers x experts)")
    data = load_json(text, name, parse_constant=lambda token: token)  # keep NaN/Infinity as text to report them
    if isinstance(data, dict):
        if "load" not in data:
            keys = ", ".join(sorted(k if k.isidentifier() else shown(k) for k in map(str, data)))[:200] or "none"
            raise InputError(f"{name}: JSON object has no \"load\" key (keys: {keys})",
                             hint='give a bare 2-D list, or {"load": [[...], ...]}')
        data = data["load"]
    if not isinstance(data, list):
        raise InputError(f"{name}: expected a 2-D list of loads (layers x experts), got a JSON {type(data).__name__}")
    if data and not any(isinstance(row, list) for row in data):
        raise InputError(f"{name}: found a 1-D list of {len(data)} values; statistics must be 2-D "
                         f"[layers, experts] (rule V1)",
                         hint="write one inner list per MoE layer, e.g. [[1, 2, 3]] for a single layer")
    rows: list[list[float]] = []
    for r, row in enumerate(data):
        if not isinstance(row, list):
            raise InputError(f"{name}: layer row {r} is a {type(row).__name__}, expected a list of numbers")
        values = []
        for c, cell in enumerate(row):
            if isinstance(cell, str) and cell in ("NaN", "Infinity", "-Infinity"):
                raise InputError(f"{name}: layer row {r}, column {c}: {cell} is not finite; "
                                 f"loads must be finite numbers")
            values.append(_cell_value(name, r, c, cell))
        rows.append(values)
    return _rows_to_array(name, rows)


def _parse_number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


#: characters that separate values in other "CSV" dialects; named in the message when a cell holds one
_OTHER_DELIMITERS = (";", "|", ":")


def _is_header(cells: Sequence[str]) -> bool:
    """A header row: every cell is a word (holds a letter and is not a number, so ``nan``/``inf`` are data)."""
    return bool(cells) and all(_parse_number(cell) is None and any(ch.isalpha() for ch in cell) for cell in cells)


def _csv_cells(name: str, number: int, line: str) -> list[str]:
    """One CSV line's cells; a quote left open (or other CSV syntax error) names the line."""
    try:
        return next(csv.reader([line], strict=True))
    except csv.Error as exc:
        raise InputError(f"{name}: line {number}: not valid CSV ({exc})",
                         hint="a quoted value must end with a quote on the same line") from None


def parse_csv(name: str, text: str) -> np.ndarray:
    """CSV, one row per layer -> float64 [L, E].

    Values are comma-separated; a file without any comma may separate them with spaces or tabs instead.
    A first row made only of words is a header; any other cell that is not a number is an error naming its line.
    """
    lines = [(number, line) for number, line in enumerate(text.splitlines(), start=1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise InputError(f"{name}: file is empty; expected one CSV row of loads per MoE layer")
    if any("," in line for _, line in lines):
        table = [(number, [cell.strip() for cell in _csv_cells(name, number, line)]) for number, line in lines]
        delimiter = "comma"
    else:
        table = [(number, line.split()) for number, line in lines]
        delimiter = "whitespace"
    if _is_header(table[0][1]):
        table = table[1:]
    rows: list[list[float]] = []
    for r, (line_number, cells) in enumerate(table):
        if delimiter == "comma" and cells and cells[-1] == "":
            cells = cells[:-1]  # trailing comma
        values = []
        for c, cell in enumerate(cells):
            value = _parse_number(cell)
            if value is None:
                found = next((d for d in _OTHER_DELIMITERS if d in cell), None)
                if found is not None:
                    raise InputError(f"{name}: line {line_number}: values are separated by {found!r}; "
                                     f"separate them with commas (or spaces)",
                                     hint="one row per MoE layer, e.g. 12,7,0,3")
                raise InputError(f"{name}: layer row {r} (line {line_number}), column {c}: {cell!r} is not a number")
            _check_value(name, r, c, value, cell)
            values.append(value)
        rows.append(values)
    return _rows_to_array(name, rows)


#: most values a statistics file may hold (layers x experts; DeepSeek-V3 has 58 x 256 = 14,848): bounds the
#: memory of parsing (a text value costs ~32 bytes as a Python float) and of a forged .npy header
MAX_STATS_VALUES = 1_000_000
_VALUE = re.compile(r"[^\s,\[\]{}:]+")


def _check_value_count(name: str, text: str) -> None:
    """Refuse text with more than MAX_STATS_VALUES values before parsing it (counted without storing them)."""
    if len(text) <= 2 * MAX_STATS_VALUES:  # each value takes at least two characters with its separator
        return
    for count, _ in enumerate(_VALUE.finditer(text), start=1):
        if count > MAX_STATS_VALUES:
            raise InputError(f"{name}: more than {MAX_STATS_VALUES:,} values; statistics are limited to "
                             f"{MAX_STATS_VALUES:,} values (layers x experts)")


def _check_npy_header(name: str, content: bytes) -> None:
    """Refuse a header whose shape asks for more than MAX_STATS_VALUES values or more bytes than the file
    holds, before NumPy allocates the array."""
    stream = io.BytesIO(content)
    try:
        version = np.lib.format.read_magic(stream)
        read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                       (2, 0): np.lib.format.read_array_header_2_0}.get(version)
        if read_header is None:
            raise ValueError(f".npy format version {version[0]}.{version[1]} is not supported (use 1.0 or 2.0)")
        shape, _, dtype = read_header(stream)
        count = math.prod(int(n) for n in shape)
    except (ValueError, TypeError, OverflowError, SyntaxError, tokenize.TokenError, RecursionError) as exc:
        raise InputError(f"{name}: not a readable .npy array ({str(exc)[:200]})") from None
    if count > MAX_STATS_VALUES:
        raise InputError(f"{name}: .npy header asks for shape {tuple(shape)} = {count:,} values; statistics are "
                         f"limited to {MAX_STATS_VALUES:,} values (layers x experts)")
    if dtype.hasobject:
        raise InputError(f"{name}: .npy array must hold integers or floats, got dtype {dtype}")
    if count * dtype.itemsize > len(content) - stream.tell():
        raise InputError(f"{name}: .npy header asks for {count * dtype.itemsize:,} bytes of data but the file holds "
                         f"{len(content) - stream.tell():,} (truncated or forged header)")


def parse_npy(name: str, content: bytes) -> np.ndarray:
    """``.npy`` bytes (2-D, integer or floating point, no pickles) -> float64 [L, E]."""
    if not content:
        raise InputError(f"{name}: file is empty; expected a .npy array of loads (layers x experts)")
    if not content.startswith(_NPY_MAGIC):
        raise InputError(f"{name}: not a .npy array file (it does not start with the NumPy header)",
                         hint="save the array with numpy.save, or name a text file .csv or .json")
    _check_npy_header(name, content)
    try:
        arr = np.load(io.BytesIO(content), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"{name}: not a readable .npy array ({exc})") from None
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "iuf":
        raise InputError(f"{name}: .npy array must hold integers or floats, got dtype "
                         f"{getattr(arr, 'dtype', '?')}")
    if arr.ndim != 2 or arr.size == 0:
        raise InputError(f"{name}: found an array of shape {tuple(arr.shape)}; statistics must be 2-D "
                         f"[layers, experts] with at least one of each (rule V1)",
                         hint="a single layer is shape (1, experts): numpy.save(path, loads[None, :])")
    arr = arr.astype(np.float64)
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        r, c = (int(v) for v in np.argwhere(bad)[0])
        _check_value(name, r, c, float(arr[r, c]), repr(float(arr[r, c])))
    return arr


def parse_stats(name: str, content: bytes) -> np.ndarray:
    """One statistics file's contents -> float64 [L, E] loads; ``name`` is used in messages and for the format."""
    fmt = detect_format(name, content)
    if fmt == "npy":
        return parse_npy(name, content)
    if fmt == "pt":
        return sglang_logical_count(name, content, MAX_STATS_VALUES)
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{name}: not UTF-8 text; expected JSON, CSV or .npy statistics") from None
    _check_value_count(name, text)
    return parse_json(name, text) if fmt == "json" else parse_csv(name, text)


def sum_stats(named: Sequence[tuple[str, bytes]]) -> np.ndarray:
    """Parse several files and sum them (a window of snapshots); every file must have the same shape."""
    if not named:
        raise InputError("no statistics files given")
    first_name = named[0][0]
    total = parse_stats(first_name, named[0][1]).copy()
    for name, content in named[1:]:
        arr = parse_stats(name, content)
        if arr.shape != total.shape:
            raise InputError(f"{name}: shape {arr.shape[0]} layers x {arr.shape[1]} experts differs from "
                             f"{first_name} ({total.shape[0]} x {total.shape[1]}); summed files must match")
        total += arr
    return total
