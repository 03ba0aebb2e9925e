"""Parse perftest bandwidth reports (``ib_write_bw``, ``ib_send_bw``, ``ib_read_bw``): an optional second
measurement tool for burn-in where operators already run perftest between two NICs.

The result table follows a header ``#bytes #iterations BW peak[UNIT] BW average[UNIT] MsgRate[Mpps]`` with UNIT
``Gb/sec`` (``--report_gbits``: 10^9 bit/s) or ``MB/sec`` (2^20 bytes/s, perftest's ``format_factor``); one row per
message size (``-a`` sweeps sizes). Rows end at a dashed line or the end of the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsctl.errors import InputError

_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(Gb|MB)/sec\]\s+BW average\[(Gb|MB)/sec\]")
#: a result row; digit runs bounded (message sizes and iteration counts fit 64 bits: 20 digits; a rate of 40
#: characters is far beyond any link) so that no row reaches int()'s 4,300-digit limit or float overflow
_ROW = re.compile(r"^\s*([0-9]{1,20})\s+([0-9]{1,20})\s+([0-9.]{1,40})\s+([0-9.]{1,40})\s+([0-9.]{1,40})\s*$")
#: Gb/s per reported unit
UNIT_GBPS = {"Gb": 1.0, "MB": 8 * 2 ** 20 / 1e9}


@dataclass(frozen=True)
class PerftestRow:
    """One message size: ``size_bytes``, ``iterations``, peak and average in Gb/s, message rate in Mpps."""

    size_bytes: int
    iterations: int
    peak_gbps: float
    average_gbps: float
    msg_rate_mpps: float


def parse_perftest(text: str, source: str) -> list[PerftestRow]:
    """The rows of every result table in ``text``; InputError when there is none."""
    rows: list[PerftestRow] = []
    unit: str | None = None
    for line in text.splitlines():
        head = _HEADER.search(line)
        if head:
            unit = head.group(2)
            continue
        if unit is None:
            continue
        if line.strip().startswith("---"):
            unit = None
            continue
        match = _ROW.match(line)
        if match:
            scale = UNIT_GBPS[unit]
            rows.append(PerftestRow(int(match.group(1)), int(match.group(2)), float(match.group(3)) * scale,
                                    float(match.group(4)) * scale, float(match.group(5))))
    if not rows:
        raise InputError(f"{source}: no perftest result table (a '#bytes #iterations BW peak[...]' header and "
                         "rows)", hint="give the full output of ib_write_bw (client or server side)")
    return rows


def best_average_gbps(rows: list[PerftestRow]) -> float:
    """The average bandwidth of the largest message size (what a link-rate check compares), Gb/s."""
    return max(rows, key=lambda r: r.size_bytes).average_gbps
