"""Lines of text built column by column in numpy, for the plan's big files (issue 32: ft3 at 524,288 endpoints).

A column is a ``uint8`` matrix of shape (rows, width): one row's bytes, NUL-padded (where the padding sits does
not matter). :func:`lines` puts columns side by side and drops every NUL, so each row becomes its bytes in column
order: a million rows cost a few numpy passes instead of a million ``str.format`` calls. The texts written this way
never hold a NUL (device and NIC names are checked against ``dsctl.names.DEVICE``; numbers and GUIDs are digits).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: rows rendered per piece when a file is streamed to disk (2-8 MB of text; each piece's arrays stay below glibc's
#: 32 MB mmap threshold, so they reuse memory instead of faulting fresh pages: 131,072 rows cost 0.8 s more system time)
ROWS_PER_PIECE = 32_768
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_NUL = 0


def encoded(texts: Sequence[str]) -> np.ndarray:
    """The strings as a NumPy bytes array (``S``, UTF-8), shape (N,); gather rows from it with an index array."""
    return np.array([t.encode() for t in texts], dtype=np.bytes_) if len(texts) else np.zeros(0, "S1")


def column(values: np.ndarray) -> np.ndarray:
    """A bytes array (``S<w>``, shape (N,)) as a column, shape (N, w)."""
    values = np.ascontiguousarray(values)
    return values.view(np.uint8).reshape(len(values), values.dtype.itemsize)


def constant(text: str, rows: int) -> np.ndarray:
    """The same text on every row, shape (rows, len(text)) (a broadcast view, no copy)."""
    data = np.frombuffer(text.encode(), dtype=np.uint8)
    return np.broadcast_to(data, (rows, len(data)))


def decimal(values: np.ndarray) -> np.ndarray:
    """Integers as decimal text (``str(int)``, a '-' before negatives), shape (N, width) right-aligned."""
    v = np.asarray(values, dtype=np.int64)
    if len(v) and int(v.max()) - int(v.min()) < max(256, len(v) // 4):  # few distinct values: a table
        low = int(v.min())
        return _decimal(np.arange(low, int(v.max()) + 1, dtype=np.int64))[v - low]
    return _decimal(v)


def _decimal(v: np.ndarray) -> np.ndarray:
    negative = v < 0
    a = np.abs(v)
    digits = np.ones(len(v), dtype=np.int64)
    power = 10
    while len(a) and power <= int(a.max()):
        digits += a >= power
        power *= 10
    width = int(digits.max(initial=1)) + bool(negative.any())
    out = np.zeros((len(v), width), dtype=np.uint8)
    rest = a.copy()
    for j in range(width):
        out[:, width - 1 - j] = np.where(j < digits, 48 + rest % 10, _NUL)
        rest //= 10
    rows = np.flatnonzero(negative)
    out[rows, width - 1 - digits[rows]] = ord("-")
    return out


def hex16(values: np.ndarray, strip_zeros: bool = False) -> np.ndarray:
    """Unsigned 64-bit integers as 16 lower-case hex digits (``f"{v:016x}"``), shape (N, 16); with
    ``strip_zeros`` the leading zeros are left out (``.lstrip("0")``)."""
    octets = np.asarray(values, dtype=">u8").view(np.uint8).reshape(-1, 8)  # most significant first
    nibbles = np.empty((len(octets), 16), dtype=np.uint8)
    nibbles[:, 0::2] = octets >> 4
    nibbles[:, 1::2] = octets & 15
    out = _HEX[nibbles]
    if strip_zeros:
        out[np.logical_and.accumulate(nibbles == 0, axis=1)] = _NUL
    return out


def lines(*columns: np.ndarray | str) -> bytes:
    """Every row's columns side by side, NULs dropped, rows concatenated (add ``"\\n"`` as the last column for
    lines). A ``str`` column is the same text on every row. All matrix columns have the same number of rows."""
    rows = next((len(c) for c in columns if not isinstance(c, str)), 0)
    mats = [constant(c, rows) if isinstance(c, str) else c for c in columns]
    out = np.empty((rows, sum(m.shape[1] for m in mats)), dtype=np.uint8)
    at = 0
    for m in mats:
        out[:, at:at + m.shape[1]] = m
        at += m.shape[1]
    return out.tobytes().translate(None, b"\x00")


def bucket_order(keys: np.ndarray, size: int) -> np.ndarray | None:
    """The indices that sort ``keys`` (distinct integers in [0, size)), by one pass over ``size`` slots; None if two
    keys are equal. ``np.argsort`` costs a sort, and ``np.unique`` (hash-based in NumPy 2.4) is slower still."""
    slots = np.full(size, -1, dtype=np.int64 if len(keys) >= 2**31 else np.int32)
    slots[keys] = np.arange(len(keys))
    order = slots[slots >= 0]
    return order.astype(np.int64) if len(order) == len(keys) else None
