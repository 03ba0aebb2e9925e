"""``dsctl trace overlap --slurm``: rebuild the per-rank rows that each node printed as JSON.

Every node runs ``dsctl trace overlap PATTERN... --format json`` on its own disk; the documents come back through
the fleet runner and are merged here into rank rows (sources prefixed with the node name), so the spread and
worst ranks are computed over the whole job. A document that does not have the expected shape is bad input from
that node (exit 2 naming it), never a crash.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dsctl.errors import InputError
from dsctl.trace.overlap import CategoryStat, CollectiveStat, KernelStat, OverlapMetrics, RankOverlap, StreamStat

_METRICS = ("wall_us", "compute_busy_us", "comm_busy_us", "overlapped_us", "exposed_comm_us", "compute_only_us",
            "idle_us", "overlap_ratio", "exposed_comm_fraction")


def _num(d: Mapping[str, Any], key: str, optional: bool = False) -> float | None:
    value = d.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ValueError(key)
    return float(value)


def _row(node: str, d: Mapping[str, Any]) -> RankOverlap:
    metrics = OverlapMetrics(**{k: _num(d, k, optional=k in ("overlap_ratio", "exposed_comm_fraction"))
                                for k in _METRICS})  # type: ignore[arg-type]
    rank = d["rank"]
    if type(rank) is not int:
        raise ValueError("rank")
    return RankOverlap(
        source=f"{node}:{d['source']}", rank=rank, device=str(d["device"]), basis=str(d["basis"]),
        steps=[int(s) for s in d.get("steps", [])], metrics=metrics,
        collectives=[CollectiveStat(**c) for c in d.get("collectives", [])],
        streams=[StreamStat(**c) for c in d.get("streams", [])], per_step=[],
        num_events=int(d.get("num_events", 0)), notes=[str(n) for n in d.get("notes", [])],
        categories=[CategoryStat(**c) for c in d.get("categories", [])],
        top_kernels=[KernelStat(**c) for c in d.get("top_kernels", [])], kernels=[], lanes=None)


def rows_from_nodes(documents: Sequence[tuple[str, Mapping[str, Any]]]) -> list[RankOverlap]:
    """Rank rows of every node's ``trace overlap`` JSON document, in node order."""
    rows: list[RankOverlap] = []
    for node, doc in documents:
        try:
            ranks = doc["ranks"]
            if not isinstance(ranks, list):
                raise ValueError("ranks")
            rows.extend(_row(node, d) for d in ranks)
        except (KeyError, ValueError, TypeError) as exc:
            raise InputError(f"--slurm: node {node} answered a document without a valid {exc} field; is dsctl on "
                             "that node the same version?") from None
    return rows
