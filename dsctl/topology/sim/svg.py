"""SVG of one simulated plane: switches by tier, every switch-to-switch cable coloured by its utilisation.

A cable's colour is the larger utilisation of its two directions (green 0% -> yellow 50% -> red 100%); failed
cables are dashed grey. A leaf's fill shows the busiest NIC link on it.
"""

from __future__ import annotations

import numpy as np

from dsctl.names import xml_text
from dsctl.svgdoc import SVG_END, svg_head
from dsctl.topology.sim.graph import NIC_DOWN, NIC_UP, SW_UP, SimGraph

_TIERS = ("leaf", "spine", "core")
#: widest row drawn box by box; wider rows are squeezed into this width
_MAX_ROW_PX = 2400


def colour(util: float) -> str:
    """Green -> yellow -> red for 0 -> 0.5 -> 1 (clipped)."""
    u = min(max(util, 0.0), 1.0)
    red = int(255 * min(1.0, 2 * u))
    green = int(200 * min(1.0, 2 * (1 - u)))
    return f"#{red:02x}{green:02x}30"


LEGEND = ("cable colour = utilisation (green 0%, yellow 50%, red 100%), dashed = failed; leaf fill = its busiest "
          "NIC link")


def plane_svg(graph: SimGraph, util: np.ndarray, dead: np.ndarray, plane: int, title: str,
              legend: str = LEGEND, label: str = "") -> str:
    """A self-contained SVG document of ``plane`` (util float [L] in 0..1 picks each colour, dead bool [L]);
    ``legend`` explains the colours; ``label`` formats the cable tooltip (``{u}`` = util, ``{r}`` = 1 - util)."""
    tier = np.array(graph.device_tier)
    rows = [np.flatnonzero((tier == t) & (graph.device_plane == plane)) for t in _TIERS]
    rows = [r for r in rows if len(r)]
    widest = max((len(r) for r in rows), default=0)  # a plan's plane may have no switch at all
    heading = f"{graph.kind} plane {plane}: {title}"
    # wide enough for the heading (13 px) and the legend (10 px) at Helvetica's average glyph width (~0.56 em)
    text_px = max(0.56 * 13 * len(heading), 0.56 * 10 * len(legend))
    width = float(max(min(_MAX_ROW_PX, max(60 * widest, 600)), text_px) + 40)
    height = 120 * len(rows) + 50
    pos: dict[int, tuple[float, float]] = {}
    for level, devs in enumerate(rows):
        y = height - 60 - level * 120
        step = (width - 40) / len(devs)
        for k, dev in enumerate(devs.tolist()):
            pos[dev] = (20 + step * (k + 0.5), y)
    num_cables = int(np.count_nonzero(graph.link_kind <= 3)) // 2
    up = np.flatnonzero((graph.link_kind[:num_cables] == SW_UP) & (graph.link_plane[:num_cables] == plane))
    out = [*svg_head(round(width), height, heading, font_size=10),
           f'<text x="20" y="20" font-size="13">{xml_text(heading)}</text>',
           f'<text x="20" y="36">{xml_text(legend)}</text>']
    cable_util = np.maximum(util[up], util[up + num_cables])
    # parallel cables of one leaf-spine pair share their coordinates: the worst is drawn last, on top
    for c in up[np.argsort(cable_util, kind="stable")].tolist():
        a, b = int(graph.link_src[c]), int(graph.link_dst[c])
        u = max(float(util[c]), float(util[c + num_cables]))
        (x1, y1), (x2, y2) = pos[a], pos[b]
        style = ('stroke="#999999" stroke-dasharray="4 3"' if dead[c] else
                 f'stroke="{colour(u)}" stroke-width="1.5"')
        name = xml_text(graph.link_name(c).replace(" -> ", " <-> "))
        out.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" {style}>'
                   f'<title>{name}: {label.format(u=u, r=1 - u) if label else f"{u:.0%}"}</title></line>')
    nic = (graph.link_kind == NIC_UP) | (graph.link_kind == NIC_DOWN)
    leaf_util = np.zeros(len(graph.device_names))
    ends = np.where(graph.link_kind == NIC_UP, graph.link_dst, graph.link_src)
    np.maximum.at(leaf_util, ends[nic], util[nic])
    for dev, (bx, by) in pos.items():
        fill = colour(float(leaf_util[dev])) if graph.device_tier[dev] == "leaf" else "#dde6f0"
        name = xml_text(graph.device_names[dev])
        out.append(f'<rect x="{bx - 24:.1f}" y="{by - 9:.1f}" width="48" height="18" rx="3" fill="{fill}" '
                   f'stroke="#334455"><title>{name}</title></rect>')
        if len(pos) <= 200:
            label_y = by + 22 if graph.device_tier[dev] == "leaf" else by - 13  # upper tiers: above, clear of cables
            out.append(f'<text x="{bx:.1f}" y="{label_y:.1f}" text-anchor="middle">{name}</text>')
    out.append(SVG_END)
    return "\n".join(out) + "\n"
