"""Pictures of a plan: Graphviz DOT and a self-contained SVG of one plane.

Both draw plane 0 at switch level (NICs are shown as one box per leaf: the node range it serves), because
every plane of a plan has the same shape. A plane too large to read (three-tier, or more than
``DOT_DETAIL_MAX_PAIRS`` leaf-spine pairs) is drawn as a per-plane summary in DOT and as its first pod
in SVG.
"""

from __future__ import annotations

import numpy as np

from dsctl.cluster import hostlist
from dsctl.names import dot_string, xml_text
from dsctl.svgdoc import SVG_END, svg_head
from dsctl.topology.plan import Plan
from dsctl.topology.summary import PlanSummary

DOT_DETAIL_MAX_PAIRS = 2048


def _plane0(plan: Plan) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Plane-0 switch indices by tier: (leaves, spines, cores, node-leaf cable indices)."""
    sw = plan.device_plane == 0
    leaves = np.flatnonzero(sw & (plan.device_tier == 1))
    spines = np.flatnonzero(sw & (plan.device_tier == 2))
    cores = np.flatnonzero(sw & (plan.device_tier == 3))
    node_cab = np.flatnonzero((plan.cable_plane == 0) & (plan.cable_kind == 0))
    return leaves, spines, cores, node_cab


def _pairs(plan: Plan, kind: int, plane: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (lower, upper) switch pairs of cable ``kind`` in ``plane`` and the cable count of each."""
    cab = np.flatnonzero((plan.cable_plane == plane) & (plan.cable_kind == kind))
    if not len(cab):
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64)
    # one integer per pair, sorted: np.unique(axis=0) sorts a void view (2.8 s for 1M ft3 cables on NumPy 2.4)
    span = len(plan.device_names)
    key = np.sort(plan.a_dev[cab].astype(np.int64) * span + plan.b_dev[cab])
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    first = key[starts]
    pairs = np.stack([first // span, first % span], axis=1).astype(np.result_type(plan.a_dev, plan.b_dev))
    return pairs, np.diff(np.r_[starts, len(key)])


def _leaf_labels(plan: Plan, node_cab: np.ndarray) -> dict[int, str]:
    by_leaf: dict[int, list[int]] = {}
    for node, leaf in zip(plan.a_dev[node_cab].tolist(), plan.b_dev[node_cab].tolist(), strict=True):
        by_leaf.setdefault(leaf, []).append(node)
    return {leaf: hostlist.compress(plan.device_names[n] for n in dict.fromkeys(nodes))
            for leaf, nodes in by_leaf.items()}


def topology_dot(plan: Plan, summary: PlanSummary) -> str:
    """Graphviz source: plane 0 in detail when readable, else one summary cluster per plane."""
    leaves, spines, _, node_cab = _plane0(plan)
    pairs, counts = _pairs(plan, 1)
    names = plan.device_names
    out = ["graph fabric {", '  graph [rankdir=BT, fontname="Helvetica", splines=line];',
           '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
           '  edge [color="#8899aa"];']
    detailed = plan.spec.tiers == 2 and len(pairs) <= DOT_DETAIL_MAX_PAIRS
    if detailed:
        out.append(f'  label="{plan.spec.kind} plane 0 of {plan.spec.num_planes}: {len(leaves)} leaves, '
                   f'{len(spines)} spines (every plane has this shape)";')
        labels = _leaf_labels(plan, node_cab)
        for leaf in leaves.tolist():
            group = dot_string("nodes@" + names[leaf])
            out.append(f'  {group} [label={dot_string(labels.get(leaf, ""))}, shape=note, fillcolor="#eeeeee"];')
            out.append(f'  {dot_string(names[leaf])} [fillcolor="#cfe3ff"];')
            out.append(f'  {group} -- {dot_string(names[leaf])};')
        for spine in spines.tolist():
            out.append(f'  {dot_string(names[spine])} [fillcolor="#e2d4f7"];')
        for (a, b), c in zip(pairs.tolist(), counts.tolist(), strict=True):
            label = f' [label="x{c}"]' if c > 1 else ""
            out.append(f'  {dot_string(names[a])} -- {dot_string(names[b])}{label};')
        out.append('  { rank=same; ' + " ".join(f'{dot_string(names[s])};' for s in spines.tolist()) + " }")
    else:
        out.append(f'  label="{plan.spec.kind}: per-plane summary ({summary.num_planes} planes)";')
        for p in range(plan.spec.num_planes):
            out.append(f"  subgraph cluster_p{p} {{")
            out.append(f'    label="plane {p}";')
            out.append(f'    "p{p}_nics" [label="{summary.num_nodes * summary.rails_per_plane:,} NICs", '
                       'shape=note, fillcolor="#eeeeee"];')
            out.append(f'    "p{p}_leaf" [label="{summary.leaves_per_plane:,} leaves", fillcolor="#cfe3ff"];')
            out.append(f'    "p{p}_nics" -- "p{p}_leaf" [label="{summary.num_nodes * summary.rails_per_plane:,}"];')
            if summary.spines_per_plane:
                out.append(f'    "p{p}_spine" [label="{summary.spines_per_plane:,} spines", fillcolor="#e2d4f7"];')
                out.append(f'    "p{p}_leaf" -- "p{p}_spine" [label="{len(plan.layout.leaf_spine.lower):,}"];')
            if summary.cores_per_plane and plan.layout.spine_core is not None:
                out.append(f'    "p{p}_core" [label="{summary.cores_per_plane:,} cores", fillcolor="#ffe0b3"];')
                out.append(f'    "p{p}_spine" -- "p{p}_core" [label="{len(plan.layout.spine_core.lower):,}"];')
            out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"


def topology_svg(plan: Plan, summary: PlanSummary) -> str:
    """An SVG picture of plane 0 (its first pod for three-tier plans): rows of spines, leaves and node groups.

    Leaf fill: blue when every NIC port is used, amber when partly used. Line width grows with the number
    of parallel cables between a leaf and a spine. Hovering a box shows its name and used ports.
    """
    leaves, spines, cores, node_cab = _plane0(plan)
    pairs, counts = _pairs(plan, 1)
    title_extra = ""
    if plan.spec.tiers == 3:
        pod0 = plan.device_pod == 0
        leaves = leaves[pod0[leaves]]
        spines = spines[pod0[spines]]
        keep = np.isin(pairs[:, 0], leaves) if len(pairs) else np.zeros(0, dtype=bool)
        pairs, counts = pairs[keep], counts[keep]
        node_cab = node_cab[np.isin(plan.b_dev[node_cab], leaves)]
        title_extra = f", pod 1 of {summary.pods_per_plane}"
    down, up = plan.ports_used()
    names = plan.device_names
    n_cols = max(len(leaves), len(spines), 1)
    col_w = min(110.0, max(28.0, 820.0 / n_cols))
    gap = 8
    box_w = col_w - gap
    width = max(900, n_cols * col_w + 80)
    margin = (width - n_cols * col_w) / 2
    y_core = 84
    y_spine = 200 if len(cores) else 150
    y_leaf, y_nodes = y_spine + 220, y_spine + 310
    height = y_nodes + 150

    def x_of(i: int, count: int) -> float:
        offset = (n_cols - count) * col_w / 2
        return margin + offset + i * col_w + gap / 2

    leaf_x = {d: x_of(i, len(leaves)) for i, d in enumerate(leaves.tolist())}
    spine_x = {d: x_of(i, len(spines)) for i, d in enumerate(spines.tolist())}
    parts = [*svg_head(round(width), height, f"{plan.spec.kind.upper()} plane 0 of {summary.num_planes}"),
             f'<text x="20" y="24" font-size="15" font-weight="bold">{xml_text(plan.spec.kind.upper())} plane 0 of '
             f'{summary.num_planes}{title_extra}: {len(leaves)} leaves, {len(spines)} spines, '
             f'{len(node_cab):,} NICs</text>',
             f'<text x="20" y="42" fill="#555">{summary.num_nodes:,} nodes, {summary.num_switches:,} switches and '
             f'{summary.cables.total:,} cables in all; max {summary.max_switch_hops} switch hops; '
             'every plane has this shape.</text>',
             f'<text x="20" y="58" fill="#555">Blue leaf: every NIC port used; amber: partly used. '
             f'{_multiplicity_note(counts)}</text>']
    max_c = int(counts.max()) if len(counts) else 1
    uniform = len(counts) == 0 or int(counts.min()) == max_c
    wide = box_w >= 72
    box_h = 40 if wide else 64
    for (a, b), c in zip(pairs.tolist(), counts.tolist(), strict=True):
        if a in leaf_x and b in spine_x:
            w = 0.6 + 2.4 * c / max_c
            x1, x2 = leaf_x[a] + box_w / 2, spine_x[b] + box_w / 2
            parts.append(f'<line x1="{x1:.1f}" y1="{y_leaf}" x2="{x2:.1f}" '
                         f'y2="{y_spine + box_h}" stroke="#7a8fa6" stroke-opacity="0.35" stroke-width="{w:.2f}"/>')
            if not uniform and len(pairs) <= 32:
                xm, ym = x1 + (x2 - x1) * 0.2, y_leaf - (y_leaf - y_spine - box_h) * 0.2
                parts.append(f'<text x="{xm:.1f}" y="{ym:.1f}" font-size="9" fill="#445">x{c}</text>')
    if len(cores):
        core_groups = len(spines)
        parts.append(f'<text x="{margin:.0f}" y="{y_core - 8}" fill="#555">core layer: {len(cores):,} switches; '
                     f'spine i of every pod joins core group i ({core_groups} groups)</text>')
        parts.append(f'<rect x="{margin:.0f}" y="{y_core}" width="{n_cols * col_w:.0f}" height="26" rx="4" '
                     'fill="#ffe0b3" stroke="#b07a2a"/>')
        for x in spine_x.values():
            parts.append(f'<line x1="{x + box_w / 2:.1f}" y1="{y_spine}" x2="{x + box_w / 2:.1f}" y2="{y_core + 26}" '
                         'stroke="#b07a2a" stroke-opacity="0.5"/>')
    for d, x in spine_x.items():
        parts.append(f'<rect x="{x:.1f}" y="{y_spine}" width="{box_w}" height="{box_h}" rx="3" fill="#e2d4f7" '
                     f'stroke="#6b4fa0"><title>{xml_text(names[d])}: {int(down[d])} down, {int(up[d])} up of '
                     f'{plan.spec.radix} ports</title></rect>')
        parts.append(_box_label(x, y_spine, box_w, box_h, names[d], wide))
    labels = _leaf_labels(plan, node_cab)
    full = plan.spec.leaf_down_ports
    for d, x in leaf_x.items():
        fill = "#cfe3ff" if down[d] >= full or int(down[d]) == 0 else "#ffd98a"
        parts.append(f'<rect x="{x:.1f}" y="{y_leaf}" width="{box_w}" height="{box_h}" rx="3" fill="{fill}" '
                     f'stroke="#3a6ea5"><title>{xml_text(names[d])}: {int(down[d])} NIC ports, {int(up[d])} uplinks, '
                     f'{plan.spec.radix - int(down[d]) - int(up[d])} free</title></rect>')
        parts.append(_box_label(x, y_leaf, box_w, box_h, names[d], wide))
        parts.append(f'<line x1="{x + box_w / 2:.1f}" y1="{y_leaf + box_h}" x2="{x + box_w / 2:.1f}" '
                     f'y2="{y_nodes}" stroke="#999"/>')
        parts.append(f'<rect x="{x:.1f}" y="{y_nodes}" width="{box_w}" height="18" fill="#eeeeee" stroke="#999">'
                     f'<title>{xml_text(labels.get(d, ""))}</title></rect>')
        parts.append(_vertical_label(x + box_w / 2, y_nodes + 22, labels.get(d, ""), below=True))
    parts.append(SVG_END)
    return "\n".join(parts) + "\n"


def _multiplicity_note(counts: np.ndarray) -> str:
    """Legend text for the leaf-spine lines: one sentence when every pair has the same number of cables."""
    if len(counts) == 0:
        return ""
    low, high = int(counts.min()), int(counts.max())
    if low == high:
        return f"Every leaf-spine pair is joined by {low} parallel cable{'s' if low > 1 else ''}."
    return f"Line width: parallel cables between a leaf and a spine ({low} to {high}, label xN)."


def _box_label(x: float, y: float, width: float, height: float, text: str, horizontal: bool) -> str:
    """A switch name inside its box: horizontal in wide boxes, rotated in narrow ones."""
    cx, cy = x + width / 2, y + height / 2
    if horizontal:
        return (f'<text x="{cx:.1f}" y="{cy + 3:.1f}" text-anchor="middle" font-size="10" '
                f'fill="#222">{xml_text(text)}</text>')
    return (f'<text x="{cx + 3:.1f}" y="{cy:.1f}" text-anchor="middle" transform="rotate(-90 {cx + 3:.1f} {cy:.1f})" '
            f'font-size="9" fill="#222">{xml_text(text)}</text>')


def _vertical_label(x: float, y: float, text: str, below: bool = False) -> str:
    angle = 90 if below else -90
    return (f'<text x="{x + 3:.1f}" y="{y:.1f}" transform="rotate({angle} {x + 3:.1f} {y:.1f})" '
            f'font-size="9" fill="#333">{xml_text(text)}</text>')
