"""Lines of text made of fixed pieces and non-negative integers, written with numpy (issue 32: the chain-table
files and the expansion runbook hold hundreds of thousands of such lines; an f-string per line costs ~1 us).

``rows_text(values, pieces)`` is ``"".join(pieces[0] + str(row[0]) + pieces[1] + ... + pieces[-1] for row in
values)``: each line is laid out at its widest in a byte grid (each number right-aligned in the width of its
column's largest value, three digits per lookup, padded with NUL), then the NULs are dropped in one pass.
"""

from __future__ import annotations

import numpy as np

_BLOCK_BYTES = 4 * 1024**2  # the byte grid laid out at a time (a block of whole lines)


def rows_text(values: np.ndarray, pieces: tuple[str, ...]) -> str:
    """The lines for ``values`` (rows, len(pieces) - 1) int64 (any sign: negative rows go the f-string way)."""
    values = np.asarray(values, dtype=np.int64)
    rows, width = values.shape
    if width != len(pieces) - 1:
        raise ValueError(f"{width} numbers per line need {width + 1} pieces, not {len(pieces)}")
    if rows == 0:
        return ""
    if int(values.min()) < 0 or any("\0" in p or not p.isascii() for p in pieces):
        return "".join(pieces[0] + "".join(str(v) + p for v, p in zip(row, pieces[1:], strict=True))
                       for row in values.tolist())
    digits = [len(str(int(values[:, j].max()))) for j in range(width)]
    per_block = max(1, _BLOCK_BYTES // (sum(len(p) for p in pieces) + sum(digits)))
    return "".join(_block(values[start:start + per_block], pieces, digits) for start in range(0, rows, per_block))


# the three ASCII digits of 0..999 (zero-padded) and a NUL, as one uint32 each: one 1-d take per three digits
_THREE = np.frombuffer(b"".join(f"{i:03d}".encode("ascii") + b"\0" for i in range(1_000)), dtype=np.uint32)


def _block(values: np.ndarray, pieces: tuple[str, ...], digits: list[int]) -> str:
    rows = len(values)
    grid = np.empty((rows, sum(len(p) for p in pieces) + sum(digits)), dtype=np.uint8)
    at = 0
    for j, piece in enumerate(pieces):
        if piece:
            grid[:, at:at + len(piece)] = np.frombuffer(piece.encode("ascii"), dtype=np.uint8)
            at += len(piece)
        if j == len(digits):
            break
        column, size = values[:, j], digits[j]
        left, end = column, at + size
        while end > at:  # three digits at a time, zero-padded, last first
            over = left // 1_000  # floor division by a constant: several times divmod's speed
            three = _THREE.take(left - over * 1_000).view(np.uint8).reshape(rows, 4)
            start = max(at, end - 3)
            grid[:, start:end] = three[:, 3 - (end - start):3]
            left, end = over, start
        for place in range(len(str(int(column.min()))), size):  # leading zeros become NUL
            grid[column < 10**place, at + size - 1 - place] = 0
        at += size
    flat = grid.reshape(-1)
    return flat[flat != 0].tobytes().decode("ascii")
