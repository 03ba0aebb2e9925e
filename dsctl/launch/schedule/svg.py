"""SVG drawing of a simulated timeline, in the style of the DualPipe README figures.

Rows are ranks (devices), time runs left to right. Orange = forward, green = full backward (darker) or
input-gradient backward I (lighter), blue = weight-gradient W; an overlapped F&B is one framed cell split
into its forward and backward parts. Cells carry the micro-batch number: black for direction (leg) 0, white on a
darker shade for direction (leg) 1.

An SVG holds one cell (about 190 bytes) per op, so timelines of more than :data:`MAX_SVG_OPS` ops are refused
(``--pp 100 --micro-batches 10000`` would be a million ops, 200 MB, too many to see); ``--format json`` still
lists every op.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from dsctl.errors import InputError
from dsctl.launch.schedule.ops import parse_op
from dsctl.names import xml_text as escape
from dsctl.svgdoc import SVG_END, svg_head

if TYPE_CHECKING:
    from dsctl.launch.schedule.api import ScheduleResult

#: fill colours per op kind, (direction 0, direction 1)
COLOURS = {
    "F": ("#f9cb9c", "#e69138"),
    "B": ("#93c47d", "#38761d"),
    "I": ("#b6d7a8", "#6aa84f"),
    "W": ("#9fc5e8", "#3d85c6"),
}
_LABEL_W = 78
_ROW_H = 26
_TOP = 58
_MAX_WIDTH_PX = 2400

#: most ops an SVG timeline draws (about 4 MB); every op is one cell
MAX_SVG_OPS = 20_000


def min_ops(num_stages: int, num_micro_batches: int) -> int:
    """A lower bound on a schedule's op count: every micro-batch's forward visits every stage, one op each."""
    return max(0, num_stages) * max(0, num_micro_batches)


def check_svg_size(num_ops: int, exact: bool = True) -> None:
    """Raise InputError naming ``--svg`` if a timeline of ``num_ops`` ops (or at least that many) is too large."""
    if num_ops > MAX_SVG_OPS:
        count = f"{num_ops:,} ops" if exact else f"at least {num_ops:,} ops ({{pp}} x {{micro_batches}})"
        raise InputError(
            f": the timeline has {count}, more than the {MAX_SVG_OPS:,} an SVG draws (one cell per op, "
            f"about {num_ops * 190 / 1e6:,.0f} MB and unreadable)", field="svg", mentions=("pp", "micro_batches"),
            hint="lower --pp or --micro-batches for the drawing (the bubble no longer changes beyond a few x pp "
                 "micro-batches), or drop --svg; --format json lists every op",
        )


def _fmt(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _cell(x: float, y: float, width: float, kind: str, d: int, m: int, frame: bool) -> list[str]:
    fill = COLOURS[kind][d]
    stroke = ' stroke="#222" stroke-width="0.6"' if frame else ""
    parts = [f'<rect x="{_fmt(x)}" y="{y}" width="{_fmt(width)}" height="{_ROW_H - 4}" fill="{fill}"{stroke}/>']
    if width >= 9:
        colour = "#fff" if d else "#000"
        parts.append(f'<text x="{_fmt(x + width / 2)}" y="{y + _ROW_H / 2 + 2}" fill="{colour}" '
                     f'text-anchor="middle">{m}</text>')
    return parts


def timeline_svg(result: ScheduleResult) -> str:
    """A standalone SVG document (UTF-8 text) of ``result.timeline``; InputError above :data:`MAX_SVG_OPS` ops."""
    check_svg_size(sum(len(row) for row in result.timeline))
    makespan = max(result.makespan, 1e-9)
    scale = max(2.0, min(24.0, (_MAX_WIDTH_PX - _LABEL_W) / makespan))
    width = _LABEL_W + makespan * scale + 20
    height = _TOP + result.num_ranks * _ROW_H + 40
    costs = result.costs
    title = (f"{result.schedule} PP={result.num_stages} ({result.num_ranks} ranks), "
             f"{result.num_micro_batches} micro-batches, F={_fmt(costs.f)} B={_fmt(costs.b)} W={_fmt(costs.w)} "
             f"F&amp;B={_fmt(costs.fb_cost)}, {result.comm_model} model: makespan {_fmt(result.makespan)}, "
             f"bubble {_fmt(result.bubble)} (formula {_fmt(result.formula_bubble)})")
    out = [
        *svg_head(width, height, "Pipeline schedule"),
        f'<text x="8" y="18" font-size="13">{title}</text>',
    ]
    legend_x = 8.0
    for label, kind in (("forward", "F"), ("backward", "B"), ("backward for input", "I"),
                        ("backward for weights", "W")):
        for d in (0, 1):
            out.append(f'<rect x="{_fmt(legend_x + 12 * d)}" y="28" width="11" height="11" '
                       f'fill="{COLOURS[kind][d]}"/>')
        out.append(f'<text x="{_fmt(legend_x + 28)}" y="38">{escape(label)}</text>')
        legend_x += 40 + 6.2 * len(label)
    out.append(f'<rect x="{_fmt(legend_x)}" y="28" width="22" height="11" fill="none" stroke="#222" '
               f'stroke-width="1.6"/><text x="{_fmt(legend_x + 28)}" y="38">overlapped F&amp;B '
               f'(light: direction or leg 0, dark: 1)</text>')
    fb_split = costs.f / (costs.f + costs.b)
    for rank, row in enumerate(result.timeline):
        y = _TOP + rank * _ROW_H
        out.append(f'<text x="8" y="{y + _ROW_H / 2 + 2}">Device {rank}</text>')
        for name, start, end in row:
            op = parse_op(name)
            x, w = _LABEL_W + start * scale, (end - start) * scale
            if op.kind == "FB" and op.fwd is not None and op.bwd is not None:
                wf = w * fb_split
                out += _cell(x, y, wf, "F", *op.fwd, frame=False)
                out += _cell(x + wf, y, w - wf, "B", *op.bwd, frame=False)
                out.append(f'<rect x="{_fmt(x)}" y="{y}" width="{_fmt(w)}" height="{_ROW_H - 4}" fill="none" '
                           f'stroke="#222" stroke-width="1.6"/>')
            else:
                part = op.fwd if op.kind == "F" else op.bwd
                d, m = part if part is not None else (0, 0)
                out += _cell(x, y, w, op.kind, d, m, frame=True)
    axis_y = _TOP + result.num_ranks * _ROW_H + 4
    out.append(f'<line x1="{_LABEL_W}" y1="{axis_y}" x2="{_fmt(_LABEL_W + makespan * scale)}" y2="{axis_y}" '
               f'stroke="#444"/>')
    step = _tick_step(makespan, scale)
    tick = 0.0
    while tick <= makespan + 1e-9:
        x = _LABEL_W + tick * scale
        out.append(f'<line x1="{_fmt(x)}" y1="{axis_y}" x2="{_fmt(x)}" y2="{axis_y + 4}" stroke="#444"/>'
                   f'<text x="{_fmt(x)}" y="{axis_y + 16}" text-anchor="middle">{_fmt(tick)}</text>')
        tick += step
    out.append(SVG_END)
    return "\n".join(out) + "\n"


def _tick_step(makespan: float, scale: float) -> float:
    """A 1-2-5 tick spacing that leaves at least ~40 px between labels."""
    step = 1.0
    if not (math.isfinite(makespan) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"no tick spacing for makespan {makespan} at scale {scale}")  # simulate() refuses these
    for _ in range(3000):  # 1e-308 to 1e308 in 1-2-5 steps is under 2,000 rounds: never endless
        if step * scale >= 40 and makespan / step <= 60:
            break
        for factor in (2.0, 2.5, 2.0):
            step *= factor
            if step * scale >= 40 and makespan / step <= 60:
                return step
    return step
