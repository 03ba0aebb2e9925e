"""SVG timeline of compute and communication per rank, with the exposed communication in red.

Each rank gets two lanes: compute (blue) and communication (orange where hidden under compute, red where
exposed). Time runs left to right from each rank's first analysed window (ranks' clocks are not synchronised, so
each rank starts at 0), on one scale for all ranks; dashed lines mark where each ProfilerStep window starts.
Intervals closer than half a pixel are merged before drawing, so the file stays small (at most about one
rectangle per pixel per lane) however many events the trace holds.
"""

from __future__ import annotations

import numpy as np

from dsctl.names import xml_text as escape
from dsctl.svgdoc import SVG_END, svg_head
from dsctl.trace.intervals import FloatArray, union
from dsctl.trace.overlap import Lanes, OverlapResult, RankOverlap

COMPUTE = "#6fa8dc"
COMM = "#f6b26b"
EXPOSED = "#cc0000"
_LABEL_W = 130
_RIGHT_W = 210
_PLOT_W = 1000
_LANE_H = 14
_RANK_H = 2 * _LANE_H + 14
_TOP = 64


def _fmt(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3g} s"
    if us >= 1e3:
        return f"{us / 1e3:.3g} ms"
    return f"{us:.3g} us"


def _rects(intervals: tuple[FloatArray, FloatArray], origin: float, scale: float, y: float, colour: str,
           title: str) -> list[str]:
    s, e = union(intervals[0], intervals[1], gap_us=0.5 / scale)
    if s.size == 0:
        return []
    x0 = _LABEL_W + (s - origin) * scale
    width = np.maximum((e - s) * scale, 0.5)
    return [f'<rect x="{_fmt(float(x))}" y="{y}" width="{_fmt(float(w))}" height="{_LANE_H}" fill="{colour}">'
            f"<title>{title}</title></rect>" for x, w in zip(x0.tolist(), width.tolist(), strict=True)]


def _rank_rows(row: RankOverlap, lanes: Lanes, index: int, scale: float) -> list[str]:
    y = _TOP + index * _RANK_H
    m = row.metrics
    label = escape(f"rank {row.rank} {row.device}")
    ratio = "n/a" if m.overlap_ratio is None else f"{m.overlap_ratio:.0%}"
    out = [
        f'<text x="4" y="{y + _LANE_H - 3}" font-size="11">{label} compute</text>',
        f'<text x="4" y="{y + 2 * _LANE_H - 3}" font-size="11" fill="#555">comm</text>',
        f'<rect x="{_LABEL_W}" y="{y}" width="{_fmt((lanes.end_us - lanes.origin_us) * scale)}" '
        f'height="{2 * _LANE_H}" fill="#f3f3f3"/>',
    ]
    out += _rects(lanes.compute, lanes.origin_us, scale, y, COMPUTE, "compute")
    out += _rects(lanes.comm, lanes.origin_us, scale, y + _LANE_H, COMM, "communication (hidden)")
    out += _rects(lanes.exposed, lanes.origin_us, scale, y + _LANE_H, EXPOSED, "exposed communication")
    if len(row.steps) > 1 and len(lanes.windows) == len(row.steps):
        for (lo, _), number in zip(lanes.windows, row.steps, strict=True):
            x = _fmt(_LABEL_W + (lo - lanes.origin_us) * scale)
            out.append(f'<line x1="{x}" y1="{y - 2}" x2="{x}" y2="{y + 2 * _LANE_H + 2}" stroke="#444" '
                       f'stroke-dasharray="2,2"><title>ProfilerStep#{number}</title></line>')
    summary = escape(f"exposed {_time(m.exposed_comm_us)}, overlap {ratio}")
    out.append(f'<text x="{_LABEL_W + _PLOT_W + 8}" y="{y + 2 * _LANE_H - 6}" font-size="11">{summary}</text>')
    return out


def _ticks(span_us: float, scale: float, y: float) -> list[str]:
    if span_us <= 0:
        return []
    raw = span_us / 8
    step = 10 ** np.floor(np.log10(raw))
    for mult in (1, 2, 5, 10):
        if raw <= mult * step:
            step *= mult
            break
    out = []
    t = 0.0
    while t <= span_us * 1.0001:
        x = _LABEL_W + t * scale
        out.append(f'<line x1="{_fmt(x)}" y1="{_TOP - 4}" x2="{_fmt(x)}" y2="{_fmt(y)}" stroke="#ddd"/>')
        out.append(f'<text x="{_fmt(x)}" y="{_TOP - 8}" font-size="10" text-anchor="middle">{_time(t)}</text>')
        t += float(step)
    return out


def timeline_svg(result: OverlapResult) -> str:
    """The whole picture as SVG text (UTF-8); see the module docstring for what is drawn."""
    rows = [(r, r.lanes) for r in result.ranks if r.lanes is not None]
    span = max((lanes.end_us - lanes.origin_us for _, lanes in rows), default=0.0)
    scale = _PLOT_W / span if span > 0 else 1.0
    height = _TOP + len(rows) * _RANK_H + 10
    width = _LABEL_W + _PLOT_W + _RIGHT_W
    legend_x = _LABEL_W
    parts = [
        *svg_head(width, height, f"Compute / communication overlap (steps: {result.steps})"),
        f'<text x="4" y="16" font-size="14" font-weight="bold">Compute / communication overlap '
        f"(steps: {escape(result.steps)})</text>",
        f'<rect x="{legend_x}" y="24" width="12" height="10" fill="{COMPUTE}"/>',
        f'<text x="{legend_x + 16}" y="33" font-size="11">compute</text>',
        f'<rect x="{legend_x + 90}" y="24" width="12" height="10" fill="{COMM}"/>',
        f'<text x="{legend_x + 106}" y="33" font-size="11">communication hidden under compute</text>',
        f'<rect x="{legend_x + 330}" y="24" width="12" height="10" fill="{EXPOSED}"/>',
        f'<text x="{legend_x + 346}" y="33" font-size="11">exposed communication</text>',
    ]
    parts += _ticks(span, scale, _TOP + len(rows) * _RANK_H)
    for i, (row, lanes) in enumerate(rows):
        parts += _rank_rows(row, lanes, i, scale)
    parts.append(SVG_END)
    return "\n".join(parts) + "\n"
