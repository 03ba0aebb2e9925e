"""From rank to place: where the slow ranks sit, and whether they concentrate on one part of the cluster.

Input: each analysed rank's lateness (µs, :func:`dsctl.trace.skew._lateness`: how much later than the others it
arrived, summed over collectives) and the
:class:`dsctl.cluster.Places` of the job (``ranks.csv`` joined with ``plan.json``).

Slow ranks: scores above ``median + SLOW_MADS x 1.4826 x MAD`` (a robust outlier rule: the MAD of a normal
sample times 1.4826 is its standard deviation) and above ``SLOW_OVER_MEDIAN`` times the median.

Concentrations: the ranks are grouped by each place attribute (:data:`GROUPINGS`: node, leaf switch, network
plane, pipeline stage, EP group, DP group). With N analysed ranks of which n are slow, a group of K ranks holding
k slow ones is unlikely by chance when the hypergeometric tail ``P(X >= k)``, X ~ Hypergeometric(N, K, n) (the
chance that n ranks drawn at random put k or more into the group), is small. Groups are named greedily: the
group with the smallest tail (Bonferroni-adjusted by the number of groups tried, capped at 1) among those at
least half slow (``k >= K / 2``) and with ``k >= 2`` is named if its adjusted tail is below :data:`ALPHA`; its
slow ranks are then explained and the search repeats on the rest. A slow node therefore names the node, not its
pipeline stage (the stage is mostly healthy); a slow plane names the plane, not each of its leaves (the plane's
tail is the smaller).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from dsctl.cluster import Places, hostlist, load_plan, load_ranks, place_ranks

#: (name in the output, Places attribute); groups are the distinct values of the attribute
GROUPINGS: tuple[tuple[str, str], ...] = (("node", "node_name"), ("leaf", "leaf"), ("plane", "plane"),
                                          ("pp_stage", "pp"), ("ep_group", "ep_group"), ("dp_group", "dp_group"))
SLOW_MADS = 3.5
SLOW_OVER_MEDIAN = 1.5
ALPHA = 1e-3
MAX_NAMED = 16


def hypergeom_tail(k: int, total: int, group: int, drawn: int) -> float:
    """``P(X >= k)`` for X ~ Hypergeometric(total ranks, group size, ranks drawn), in log space (exact sum)."""
    hi = min(group, drawn)
    lo = max(k, drawn - (total - group), 0)
    if lo > hi:
        return 0.0

    def log_choose(n: int, r: int) -> float:
        return math.lgamma(n + 1) - math.lgamma(r + 1) - math.lgamma(n - r + 1)

    denom = log_choose(total, drawn)
    terms = [log_choose(group, i) + log_choose(total - group, drawn - i) - denom for i in range(lo, hi + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def slow_mask(score: NDArray[np.float64]) -> NDArray[np.bool_]:
    """The robust outlier rule of the module docstring over scores of shape ``(P,)``."""
    if score.size < 3:
        return np.zeros(score.size, dtype=bool)
    median = float(np.median(score))
    mad = float(np.median(np.abs(score - median))) * 1.4826
    return (score > median + SLOW_MADS * mad) & (score > SLOW_OVER_MEDIAN * median) & (score > 0)


@dataclass(frozen=True)
class Concentration:
    """Slow ranks gathered in one group: ``num_slow`` of its ``num_ranks`` ranks (of ``total_slow`` slow ranks
    among ``total_ranks``); ``p_value`` is the Bonferroni-adjusted hypergeometric tail."""

    kind: str
    group: str
    num_slow: int
    num_ranks: int
    total_slow: int
    total_ranks: int
    p_value: float
    nodes: list[str]
    ranks: list[int]


@dataclass(frozen=True)
class PlaceReport:
    """Slow ranks with their places, the concentrations named, and the suspects to hand on."""

    num_ranks: int
    num_slow: int
    slow_ranks: list[dict[str, object]]
    concentrations: list[Concentration]
    #: nodes to check (health check / fleet / burn-in -w): the nodes of every named concentration's slow ranks
    suspect_nodes: list[str]
    suspect_switches: list[str]
    suspect_planes: list[int]
    notes: list[str] = field(default_factory=list)
    #: ``suspect_nodes`` as a Slurm hostlist (``-w/--nodelist`` of health check, fleet, burn-in)
    suspect_hostlist: str = ""


def _label(kind: str, value: object) -> str:
    return str(value) if kind in ("node", "leaf") else f"{kind} {value}"


def places_from_texts(ranks_text: str, ranks_name: str, plan_text: str | None, plan_name: str) -> Places:
    """The places of a job from its ranks.csv text and (optionally) its plan.json text (:mod:`dsctl.cluster`)."""
    ranks = load_ranks(ranks_text, ranks_name)
    fabric = load_plan(plan_text, plan_name) if plan_text is not None else None
    return place_ranks(ranks, fabric, ranks_name, plan_name)


def locate(ranks: Sequence[int], score: NDArray[np.float64], places: Places, top: int = 10) -> PlaceReport:
    """Places of the slow ranks among ``ranks`` (shape ``(P,)``, global ranks) with scores ``score`` and the
    concentrations named as in the module docstring."""
    rank_arr = np.asarray(ranks, dtype=np.int64)
    slow = slow_mask(np.asarray(score, dtype=np.float64))
    total = int(rank_arr.size)
    groups: list[tuple[str, str, NDArray[np.bool_]]] = []
    for kind, attr in GROUPINGS:
        values = np.asarray(getattr(places, attr))[rank_arr]
        if kind == "node" and all(v == "" for v in values.tolist()):  # no plan: the rank map's node index
            values = np.array([f"node index {i}" for i in places.node[rank_arr].tolist()], dtype=object)
        elif kind == "leaf" and all(v == "" for v in values.tolist()):
            continue  # no plan: no leaves
        seen: set[bytes] = set()
        for value in dict.fromkeys(values.tolist()):
            mask = values == value
            signature = np.flatnonzero(mask).tobytes()
            if value == "" or signature in seen:
                continue
            seen.add(signature)
            groups.append((kind, _label(kind, value), mask))
    left = slow.copy()
    named: list[Concentration] = []
    while left.sum() >= 2 and len(named) < MAX_NAMED:
        n = int(left.sum())
        best: tuple[float, int] | None = None
        for g, (_kind, _name, mask) in enumerate(groups):
            k = int((mask & left).sum())
            size = int(mask.sum())
            if k < 2 or 2 * k < size:
                continue
            tail = min(1.0, hypergeom_tail(k, total, size, n) * len(groups))
            if best is None or tail < best[0]:
                best = (tail, g)
        if best is None or best[0] >= ALPHA:
            break
        kind, name, mask = groups[best[1]]
        hit = mask & left
        idx = np.flatnonzero(hit)
        named.append(Concentration(kind, name, int(hit.sum()), int(mask.sum()), n, total, float(best[0]),
                                   sorted({str(places.node_name[rank_arr[i]]) or f"node index "
                                           f"{int(places.node[rank_arr[i]])}" for i in idx}),
                                   sorted(int(rank_arr[i]) for i in idx)[:64]))
        left &= ~mask
    order = np.argsort(-np.where(slow, score, -np.inf), kind="stable")[: int(slow.sum())][:top]
    slow_rows = [{**places.of(int(rank_arr[i])), "wait_caused_us": round(float(score[i]), 3)} for i in order]
    notes = []
    if slow.any() and left.any():
        notes.append(f"{int(left.sum())} of {int(slow.sum())} slow ranks fit no concentration (scattered: look at "
                     "each rank)")
    suspects = sorted({n for c in named for n in c.nodes})
    named_nodes = [n for n in suspects if not n.startswith("node index ")]
    return PlaceReport(total, int(slow.sum()), slow_rows, named, suspects,
                       sorted({c.group for c in named if c.kind == "leaf"}),
                       sorted({int(c.group.split()[-1]) for c in named if c.kind == "plane"}), notes,
                       hostlist.compress(named_nodes) if named_nodes else "")
