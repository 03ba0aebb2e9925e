"""``--explain-classes``: every distinct kernel name with its class, the rule that decided it and its time."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dsctl.trace.kernels import CATEGORY
from dsctl.trace.overlap import RankOverlap


@dataclass(frozen=True)
class ClassRow:
    """One distinct name over all analysed ranks: class, category, rule, count and summed time (µs)."""

    name: str
    cls: str
    category: str
    rule: str
    count: int
    total_us: float
    num_ranks: int


@dataclass(frozen=True)
class ExplainResult:
    """Every distinct name (largest summed time first) and the time per class."""

    comm_patterns: list[str]
    compute_patterns: list[str]
    num_ranks: int
    class_totals_us: dict[str, float]
    names: list[ClassRow]


def explain(rows: Sequence[RankOverlap], comm_patterns: list[str], compute_patterns: list[str]) -> ExplainResult:
    """Merge the per-rank kernel statistics of ``rows`` by name."""
    kind: dict[str, tuple[str, str]] = {}
    count: dict[str, int] = {}
    total: dict[str, float] = {}
    ranks: dict[str, int] = {}
    for row in rows:
        for k in row.kernels:
            kind.setdefault(k.name, (k.cls, k.rule))
            count[k.name] = count.get(k.name, 0) + k.count
            total[k.name] = total.get(k.name, 0.0) + k.total_us
            ranks[k.name] = ranks.get(k.name, 0) + 1
    names = [ClassRow(name, cls, CATEGORY.get(cls, "computation"), rule, count[name], round(total[name], 3),
                      ranks[name]) for name, (cls, rule) in kind.items()]
    names.sort(key=lambda r: (-r.total_us, r.name))
    totals: dict[str, float] = {}
    for r in names:
        totals[r.cls] = round(totals.get(r.cls, 0.0) + r.total_us, 3)
    return ExplainResult(comm_patterns, compute_patterns, len(rows), totals, names)
