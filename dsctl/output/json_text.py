"""One-line JSON text of output data through json's C encoder, integer numpy arrays written by numpy.

A big result is mostly integer tables (eplb's log2phy: layers x experts x replicas, 4.9 million numbers at
240 x 1024): one Python int per number and the encoder's call per number were most of ``--format json``'s CPU.
Here each integer array (left as an array by ``to_data(..., keep_int_arrays=True)``) is written as its text
directly: its values index a small table of their texts, padded on the left with spaces to one width (JSON
whitespace), innermost rows joined by numpy. Arrays with a wide value range or no elements take ``tolist()``.
"""

from __future__ import annotations

import json
import secrets
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

#: widest value range (max - min + 1) written through a table of texts
MAX_TABLE_VALUES = 1 << 16


def int_array_json(array: np.ndarray) -> str:
    """``array`` (integers, at least 1-D) as JSON nested lists; ``json.loads`` of it equals ``array.tolist()``."""
    import numpy as np

    if array.size == 0 or array.ndim == 0:
        return json.dumps(array.tolist())
    low, high = int(array.min()), int(array.max())
    if high - low + 1 > MAX_TABLE_VALUES:
        return json.dumps(array.tolist())
    texts = [str(v) for v in range(low, high + 1)]
    width = max(len(t) for t in texts) + 1  # each field: the number right-aligned, then ","
    table = np.frombuffer("".join(t.rjust(width - 1) + "," for t in texts).encode("ascii"), dtype=np.uint8)
    table = table.reshape(len(texts), width)
    row_len = array.shape[-1]
    rows = array.reshape(-1, row_len)
    num_rows = rows.shape[0]
    outer = array.ndim - 1
    # a row: `outer` slots for the "[" of enclosing lists it opens (spaces otherwise), its own "[", the fields
    # (the last one's "," becomes "]"), `outer` slots for the "]" it closes, and "," before the next row
    body = row_len * width
    buf = np.empty((num_rows, outer + 1 + body + outer + 1), dtype=np.uint8)
    buf[:, :outer] = ord(" ")
    buf[:, outer] = ord("[")
    # the offsets from ``low``: in int64 for signed types (int8 0 - -128 overflows int8), in the array's own
    # unsigned type otherwise (no value is below ``low``; uint64 above int64's range would wrap in int64)
    offsets = rows - rows.dtype.type(low) if array.dtype.kind == "u" else rows.astype(np.int64) - low
    # each field one fixed-size item (void views of the table's rows and of the rows' fields): one gather of
    # items straight into the text, 3-4x faster than gathering rows of bytes ("clip": every offset is in range)
    field = np.dtype((np.void, width))
    np.take(table.view(field).ravel(), offsets, out=buf[:, outer + 1:outer + 1 + body].view(field), mode="clip")
    buf[:, outer + body] = ord("]")
    buf[:, outer + 1 + body:] = ord(" ")
    buf[:-1, -1] = ord(",")
    index = np.arange(num_rows)
    block = 1
    for k, size in enumerate(reversed(array.shape[:-1])):
        block *= size  # rows per element of the list ``k + 1`` levels out
        buf[index % block == 0, outer - 1 - k] = ord("[")
        buf[(index + 1) % block == 0, outer + 1 + body + k] = ord("]")
    return str(buf.data.cast("B"), "ascii")  # decoded from the buffer itself, not a copy of it


def compact_json(data: Any) -> str:
    """``data`` as one line of JSON (``json.dumps`` without indent: the C encoder, UTF-8 as is, no NaN); integer
    numpy arrays in it through :func:`int_array_json`. Each array first becomes a quoted placeholder holding a
    fresh random token (no input can guess it), replaced by the array's text afterwards."""
    np = sys.modules.get("numpy")  # no array exists before numpy is imported: a small answer need not load it
    if np is None:
        return json.dumps(data, ensure_ascii=False, allow_nan=False)
    arrays: list[str] = []
    mark = "dsctl-array-" + secrets.token_hex(8) + "-"

    def placeholder(obj: Any) -> str:
        if isinstance(obj, np.ndarray) and obj.dtype.kind in "iu":
            arrays.append(int_array_json(obj))
            return f"{mark}{len(arrays) - 1}"
        raise TypeError(f"cannot write {type(obj).__name__} as JSON")

    text = json.dumps(data, ensure_ascii=False, allow_nan=False, default=placeholder)
    if not arrays:
        return text
    pieces = text.split(f'"{mark}')
    out = [pieces[0]]
    for piece in pieces[1:]:
        index, _, rest = piece.partition('"')
        out.append(arrays[int(index)])
        out.append(rest)
    return "".join(out)
