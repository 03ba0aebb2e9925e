"""SVG heat map of the node x node pair-share matrix (chains shared by each pair, all disk indexes)."""

from __future__ import annotations

import numpy as np

from dsctl.names import xml_text
from dsctl.svgdoc import SVG_END, svg_head

MAX_CELLS_SIDE = 720
MAX_DRAWN_NODES = 180  # larger tables are drawn as groups of nodes (mean pair-share per group pair)


def _colour(fraction: float) -> str:
    """White (0) -> dark blue (1)."""
    f = min(max(fraction, 0.0), 1.0)
    red = int(255 - 225 * f)
    green = int(255 - 175 * f)
    blue = int(255 - 75 * f)
    return f"#{red:02x}{green:02x}{blue:02x}"


def pair_share_svg(share: np.ndarray, first_node_id: int, subtitle: str) -> str:
    """Self-contained SVG: cell (x, y) shaded by ``share[x, y]``; shape (v, v) int matrix.

    Above ``MAX_DRAWN_NODES`` nodes each cell is a group of ``g`` consecutive nodes and shows the mean
    pair-share over the node pairs it holds (the diagonal cells leave out each node with itself).
    """
    nodes = share.shape[0]
    group = -(-nodes // MAX_DRAWN_NODES)
    if group > 1:
        share, subtitle = _grouped(share, group), f"{subtitle}; cell = {group} nodes, mean"
    v = share.shape[0]
    cell = max(1, MAX_CELLS_SIDE // max(v, 1))
    side = cell * v
    margin_left, margin_top = 70, 60
    width, height = margin_left + side + 150, margin_top + side + 40
    off = share[~np.eye(v, dtype=bool)] if v > 1 else np.zeros(1, dtype=np.int64)
    if group > 1:
        off = share[np.isfinite(share)]
    lo, hi = float(off.min()), float(off.max())
    span = max(hi - lo, 1e-9 if group > 1 else 1.0)
    parts = [
        *svg_head(width, height, "Chains shared by each storage-node pair", font_size=12),
        f'<text x="{margin_left}" y="22" font-size="15">Chains shared by each storage-node pair</text>',
        f'<text x="{margin_left}" y="40">{xml_text(subtitle)}; min {lo:g}, max {hi:g}</text>',
        f'<g transform="translate({margin_left},{margin_top})" shape-rendering="crispEdges">',
    ]
    for x in range(v):
        for y in range(v):
            if (x == y and group == 1) or not np.isfinite(share[x, y]):
                colour = "#dddddd"
            else:
                colour = _colour((float(share[x, y]) - lo) / span)
            parts.append(f'<rect x="{y * cell}" y="{x * cell}" width="{cell}" height="{cell}" fill="{colour}"/>')
    parts.append("</g>")
    parts.append(f'<text x="{margin_left - 6}" y="{margin_top + 10}" text-anchor="end">{first_node_id}</text>')
    parts.append(f'<text x="{margin_left - 6}" y="{margin_top + side}" text-anchor="end">'
                 f'{first_node_id + nodes - 1}</text>')
    legend_x = margin_left + side + 20
    integral = group == 1 and hi - lo <= 8
    values = [float(x) for x in (np.arange(lo, hi + 1) if integral else np.linspace(lo, hi, 9))]
    for i, value in enumerate(values):
        y = margin_top + i * 22
        parts.append(f'<rect x="{legend_x}" y="{y}" width="16" height="16" fill="{_colour((value - lo) / span)}" '
                     'stroke="#999999"/>')
        parts.append(f'<text x="{legend_x + 22}" y="{y + 13}">{value:.3g} shared</text>')
    parts.append(SVG_END)
    return "\n".join(parts) + "\n"


def _grouped(share: np.ndarray, group: int) -> np.ndarray:
    """Mean pair-share between groups of ``group`` consecutive nodes, shape (ceil(v/group),)*2; NaN where a
    cell holds no node pair (a one-node group with itself)."""
    v = share.shape[0]
    cells = -(-v // group)
    pad = cells * group - v
    values = np.pad(share.astype(np.float64), ((0, pad), (0, pad)))
    member = np.pad(np.ones(v), (0, pad)).reshape(cells, group).sum(axis=1)
    pairs = np.outer(member, member) - np.diag(member)  # node pairs per cell (no node with itself)
    sums = values.reshape(cells, group, cells, group).sum(axis=(1, 3))
    return np.divide(sums, pairs, out=np.full_like(sums, np.nan), where=pairs > 0)
