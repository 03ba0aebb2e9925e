"""``dsctl trace timeline``: one lane per rank and stream, kernels coloured by HTA category, as SVG.

The window is the whole trace, or the GPU window of ``ProfilerStep#N`` (``step``), cut to ``[from_us, to_us]``
microseconds after each rank's own window start. Ranks are drawn on one clock: hosts' clocks differ, so each
rank's times are shifted by the clock offset ``trace stragglers`` computes (:func:`dsctl.trace.skew.clock_offsets`:
synchronising collectives end together), and the picture starts at the earliest aligned window start. Without a
synchronising collective matched on two ranks, each rank is drawn from its own window start (the title says so).
Intervals of one category closer than half a pixel are merged per lane before they leave the worker, so both the
data sent back per rank and the SVG are bounded by pixels x lanes, not by events.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dsctl.errors import InputError
from dsctl.names import xml_text as escape
from dsctl.svgdoc import SVG_END, svg_head
from dsctl.trace.classify import CLASS_NAMES, Classifier, classify_names
from dsctl.trace.groups import runs
from dsctl.trace.intervals import FloatArray, union
from dsctl.trace.kernels import CATEGORY
from dsctl.trace.overlap import launch_times, select_steps, step_of
from dsctl.trace.parse import TraceData
from dsctl.trace.skew import RankCollectives, clock_offsets, rank_collectives

PLOT_W = 1200
LANE_H = 12
LABEL_W = 190
TOP = 56
MAX_LANES = 1024
COLOURS = {"computation": "#6fa8dc", "communication": "#e69138", "memory": "#93c47d"}


@dataclass(frozen=True)
class Lane:
    """One stream of one rank: merged intervals per category, µs from the rank's window start."""

    rank: int
    device: str
    stream: int
    intervals: dict[str, tuple[FloatArray, FloatArray]]


@dataclass(frozen=True)
class RankLanes:
    """The lanes of one trace file and the drawn span (µs)."""

    source: str
    span_us: float
    lanes: list[Lane]
    #: the drawn window's start in the trace's own clock (µs, as the collectives' times)
    start_us: float = 0.0
    #: the rank's matchable collectives, for the clock alignment (empty when it has none)
    collectives: list[RankCollectives] = field(default_factory=list)


def rank_lanes(trace: TraceData, index: int, classifier: Classifier, step: int | None, from_us: float | None,
               to_us: float | None) -> RankLanes:
    """Lanes of one trace (see the module docstring); times relative to the chosen window's start."""
    on_host = trace.gpu.size == 0
    table = trace.cpu if on_host else trace.gpu
    if table.size == 0:
        raise InputError(f"{trace.source}: no GPU kernels and no CPU ops to draw")
    sel = np.ones(table.size, dtype=bool)
    if step is not None:
        k = select_steps(trace, step)[0]
        sel = step_of(table.start_us if on_host else launch_times(table, trace), trace) == k
        if not sel.any():
            raise InputError(f"{step}: {trace.source} has no kernels launched in ProfilerStep#{step}", field="step")
    lo = float(table.start_us[sel].min())
    hi = float(table.end_us[sel].max())
    a = lo + (from_us or 0.0)
    b = min(hi, lo + to_us) if to_us is not None else hi
    if b <= a:
        raise InputError(f"/{{to_us}}: the window [{from_us or 0:g}, "
                         f"{to_us if to_us is not None else hi - lo:g}] us is empty for {trace.source} "
                         f"(its window lasts {hi - lo:,.3f} us)", field="from_us", mentions=("to_us",))
    sel &= (table.end_us > a) & (table.start_us < b)
    codes, _ = classify_names(table.names, classifier)
    cls = codes[table.name_code]
    if on_host:  # host annotations (record_function regions) are neither compute nor drawn, unless collectives
        cls = np.where(table.annotation & (cls != 1), np.int8(-1), cls)
    gap = 0.5 * (b - a) / PLOT_W
    s, e = np.clip(table.start_us, a, b) - a, np.clip(table.end_us, a, b) - a
    if on_host:  # a thread with nothing but annotations (or zero-length ops) gets no lane
        sel &= (cls >= 0) & (e > s)
    rank = trace.rank if trace.rank is not None else index
    # one sort groups the events by lane, counted before any drawing work (a mask per lane cost lanes x events)
    groups = runs(np.flatnonzero(sel), table.device, table.stream)
    if len(groups) > MAX_LANES:
        raise InputError(f"{trace.source}: {len(groups):,} lanes (device x stream); at most {MAX_LANES:,} fit one "
                         "picture",
                         hint="give fewer trace files, or draw one step (--step) or window (--from-us/--to-us)")
    lanes = []
    for on in groups:
        kind = cls[on]
        intervals = {CATEGORY[name]: union(s[on[kind == c]], e[on[kind == c]], gap_us=gap)
                     for c, name in enumerate(CLASS_NAMES)}
        device = int(table.device[on[0]])
        lanes.append(Lane(rank, "cpu" if on_host else f"gpu{device}", int(table.stream[on[0]]), intervals))
    try:
        collectives = rank_collectives(trace, index, classifier, step)
    except InputError:  # no collectives: this rank cannot be aligned, it is drawn from its own start
        collectives = []
    return RankLanes(trace.source, b - a, lanes, a + trace.origin_us, collectives)


def _shifts(ranks: list[RankLanes]) -> tuple[list[float], bool]:
    """Where each rank's window starts in the picture (µs) and whether the clocks were aligned."""
    parts = [part for r in ranks for part in r.collectives]
    offsets = clock_offsets(parts)
    if offsets is None:
        return [0.0] * len(ranks), False
    at = 0
    starts = []
    for r in ranks:
        n = len(r.collectives)
        # a file's devices share its host's clock; a file without collectives keeps its own clock
        starts.append(r.start_us - float(np.median(offsets[at:at + n])) if n else float("nan"))
        at += n
    known = [x for x in starts if np.isfinite(x)]
    first = min(known)
    return [x - first if np.isfinite(x) else 0.0 for x in starts], True


def _lane_kind(lane: Lane) -> str:
    return "thread" if lane.device == "cpu" else "stream"


def _fmt(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def timeline(ranks: list[RankLanes], title: str) -> str:
    """The SVG text of every lane of every rank, one time scale (the longest span)."""
    lanes = [lane for r in ranks for lane in r.lanes]
    if len(lanes) > MAX_LANES:
        raise InputError(f"{len(lanes):,} lanes (rank x stream); at most {MAX_LANES:,} fit one picture",
                         hint="give fewer trace files")
    shifts, aligned = _shifts(ranks) if len(ranks) > 1 else ([0.0] * len(ranks), False)
    shift_of = [shift for r, shift in zip(ranks, shifts, strict=True) for _ in r.lanes]
    span = max((shift + r.span_us for r, shift in zip(ranks, shifts, strict=True)), default=0.0)
    scale = PLOT_W / span if span > 0 else 1.0
    axis_y = TOP + len(lanes) * (LANE_H + 2) + 4
    width, height = LABEL_W + PLOT_W + 20, axis_y + 28
    parts = [*svg_head(width, height, title),
             f'<text x="4" y="16" font-size="14" font-weight="bold">{escape(title)}</text>']
    x = LABEL_W
    for name, colour in COLOURS.items():
        parts.append(f'<rect x="{x}" y="24" width="12" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{x + 16}" y="33" font-size="11">{name}</text>')
        x += 130
    clock = ("ranks on one clock (offsets from collective ends, as trace stragglers)" if aligned
             else "each rank from its own window start")
    parts.append(f'<text x="{x}" y="33" font-size="11">span {span / 1e3:,.3f} ms; {clock}</text>')
    for i, lane in enumerate(lanes):
        y = TOP + i * (LANE_H + 2)
        parts.append(f'<text x="4" y="{y + LANE_H - 2}" font-size="10">'
                     f"{escape(f'rank {lane.rank} {lane.device} {_lane_kind(lane)} {lane.stream}')}</text>")
        parts.append(f'<rect x="{LABEL_W}" y="{y}" width="{PLOT_W}" height="{LANE_H}" fill="#f3f3f3"/>')
        for category, (s0, e0) in lane.intervals.items():
            colour = COLOURS[category]
            s, e = s0 + shift_of[i], e0 + shift_of[i]
            with np.errstate(invalid="ignore", over="ignore"):  # spans near 1e308: inf - inf, inf * 0
                left = np.nan_to_num(LABEL_W + np.clip(s * scale, 0.0, PLOT_W), nan=LABEL_W)
                wide = np.nan_to_num(np.clip((e - s) * scale, 0.5, PLOT_W), nan=0.5)
            for a, w in zip(left.tolist(), wide.tolist(), strict=True):
                parts.append(f'<rect x="{_fmt(a)}" y="{y}" width="{_fmt(w)}" height="{LANE_H}" fill="{colour}">'
                             f"<title>{category}</title></rect>")
    parts.extend(_time_axis(span, scale, axis_y))
    parts.append(SVG_END)
    return "\n".join(parts) + "\n"


def _tick_step_us(span_us: float) -> float:
    """A 1/2/5 x 10^k µs step giving at most 10 ticks over ``span_us``."""
    if span_us <= 0:
        return 1.0
    step = 10.0 ** np.floor(np.log10(span_us / 10))
    for factor in (1.0, 2.0, 5.0, 10.0):
        if span_us / (step * factor) <= 10:
            return float(step * factor)
    return float(step * 10)


def _time_axis(span_us: float, scale: float, y: float) -> list[str]:
    """Ticks and labels (ms from each rank's window start) under the lanes."""
    step = _tick_step_us(span_us)
    parts = [f'<line x1="{LABEL_W}" y1="{y}" x2="{LABEL_W + PLOT_W}" y2="{y}" stroke="#666666"/>',
             f'<text x="4" y="{y + 16}" font-size="10">ms from window start</text>']
    for k in range(int(span_us // step) + 1):
        x = LABEL_W + k * step * scale
        parts.append(f'<line x1="{_fmt(x)}" y1="{y}" x2="{_fmt(x)}" y2="{y + 4}" stroke="#666666"/>')
        parts.append(f'<text x="{_fmt(x)}" y="{y + 16}" font-size="10" text-anchor="middle">'
                     f"{k * step / 1e3:g}</text>")
    return parts
