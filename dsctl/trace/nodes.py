"""``dsctl trace overlap --slurm``: rebuild the per-rank rows that each node printed as JSON.

Every node runs ``dsctl trace overlap PATTERN... --format json`` on its own disk; the documents come back through
the fleet runner and are merged here into rank rows (sources prefixed with the node name), so the spread and
worst ranks are computed over the whole job. A document that does not have the expected shape is bad input from
that node (exit 2, one line naming the node and the field), never a crash: every field is checked for its type,
numbers must be finite (JSON's ``Infinity``/``NaN`` would print as ``nan``) and counts whole and non-negative.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from dsctl.errors import InputError
from dsctl.names import shown
from dsctl.trace.overlap import CategoryStat, CollectiveStat, KernelStat, OverlapMetrics, RankOverlap, StreamStat
from dsctl.trace.parse import MAX_WORLD_SIZE

_METRICS = ("wall_us", "compute_busy_us", "comm_busy_us", "overlapped_us", "exposed_comm_us", "compute_only_us",
            "idle_us", "overlap_ratio", "exposed_comm_fraction")
_OPTIONAL = frozenset({"overlap_ratio", "exposed_comm_fraction", "share"})
#: the largest count or id taken from a node's answer (int64)
_MAX_COUNT = 2**63 - 1
#: entries of one list field read from a node's row (a node's own output lists at most a few thousand)
_MAX_ITEMS = 1 << 20


class _Bad(Exception):
    """A field of a node's answer that does not have the expected shape: ``(field path, why)``."""


def _obj(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _Bad(where, f"{shown(value)} is not an object")
    return value


def _num(d: Mapping[str, Any], key: str, where: str) -> float | None:
    value = d.get(key)
    if value is None and key in _OPTIONAL:
        return None
    ok = math.isfinite(value) if type(value) is float else type(value) is int and abs(value) <= _MAX_COUNT
    if not ok:
        raise _Bad(f"{where}.{key}", f"{shown(value)} is not a finite number")
    return float(value)  # type: ignore[arg-type]


def _count(d: Mapping[str, Any], key: str, where: str, upper: int = _MAX_COUNT, default: int | None = None,
           lower: int = 0) -> int:
    value = d.get(key, default)
    if type(value) is not int or not lower <= value <= upper:
        raise _Bad(f"{where}.{key}", f"{shown(value)} is not a whole number {lower:,}..{upper:,}")
    return value


def _str(d: Mapping[str, Any], key: str, where: str) -> str:
    value = d.get(key)
    if not isinstance(value, str):
        raise _Bad(f"{where}.{key}", f"{shown(value)} is not a string")
    return value


def _list(d: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = d.get(key, [])
    if not isinstance(value, list) or len(value) > _MAX_ITEMS:
        raise _Bad(f"{where}.{key}", f"{shown(value)} is not a list of at most {_MAX_ITEMS:,} entries")
    return value


def _entries(d: Mapping[str, Any], key: str, where: str) -> list[tuple[str, Mapping[str, Any]]]:
    """``(field path, object)`` of each entry of the list field ``key`` (every entry must be an object)."""
    out = []
    for i, raw in enumerate(_list(d, key, where)):
        path = f"{where}.{key}[{i}]"
        out.append((path, _obj(raw, path)))
    return out


def _row(node: str, d: Any, where: str) -> RankOverlap:
    d = _obj(d, where)
    metrics = OverlapMetrics(**{k: _num(d, k, where) for k in _METRICS})  # type: ignore[arg-type]
    collectives = [CollectiveStat(_str(c, "name", w), _count(c, "count", w), _num(c, "total_us", w) or 0.0,
                                  _num(c, "exposed_us", w) or 0.0, _num(c, "mean_us", w) or 0.0)
                   for w, c in _entries(d, "collectives", where)]
    streams = [StreamStat(_count(c, "stream", w, 2**31 - 1, lower=-(2**31)), _str(c, "kind", w),
                          _count(c, "num_events", w), _num(c, "busy_us", w) or 0.0)
               for w, c in _entries(d, "streams", where)]
    categories = [CategoryStat(_str(c, "category", w), _num(c, "busy_us", w) or 0.0, _num(c, "kernel_us", w) or 0.0,
                               _count(c, "num_kernels", w), _num(c, "share", w))
                  for w, c in _entries(d, "categories", where)]
    top = [KernelStat(_str(c, "name", w), _str(c, "cls", w), _str(c, "rule", w), _count(c, "count", w),
                      _num(c, "total_us", w) or 0.0)
           for w, c in _entries(d, "top_kernels", where)]
    steps = _list(d, "steps", where)
    for i, step in enumerate(steps):
        if type(step) is not int or not -_MAX_COUNT <= step <= _MAX_COUNT:
            raise _Bad(f"{where}.steps[{i}]", f"{shown(step)} is not a step number")
    notes = _list(d, "notes", where)
    if not all(isinstance(n, str) for n in notes):
        raise _Bad(f"{where}.notes", "holds a value that is not a string")
    return RankOverlap(
        source=f"{node}:{_str(d, 'source', where)}", rank=_count(d, "rank", where, MAX_WORLD_SIZE - 1),
        device=_str(d, "device", where), basis=_str(d, "basis", where), steps=list(steps), metrics=metrics,
        collectives=collectives, streams=streams, per_step=[], num_events=_count(d, "num_events", where, default=0),
        notes=list(notes), categories=categories, top_kernels=top, kernels=[], lanes=None)


def rows_from_nodes(documents: Sequence[tuple[str, Mapping[str, Any]]]) -> list[RankOverlap]:
    """Rank rows of every node's ``trace overlap`` JSON document, in node order; InputError names the node and
    the first field that does not have the shape ``dsctl trace overlap --format json`` writes."""
    rows: list[RankOverlap] = []
    for node, doc in documents:
        try:
            ranks = doc.get("ranks") if isinstance(doc, Mapping) else None
            if not isinstance(ranks, list):
                raise _Bad("ranks", f"{shown(ranks)} is not a list")
            rows.extend(_row(node, d, f"ranks[{i}]") for i, d in enumerate(ranks))
        except _Bad as bad:
            field, why = bad.args
            raise InputError(f": node {node} answered a document whose {field} {why}",
                             field="slurm", hint="is dsctl on that node the same version?") from None
    return rows
