"""One job, checked: the trace files given together must be the ranks of one run.

Each file says who wrote it in ``distributedInfo`` (``rank``, ``world_size``, ``backend``, ``pg_config``); the
rank comes from there, never from the file name (``tensorboard_trace_handler`` names files
``<worker>.<time>.pt.trace.json``). :func:`check_job` refuses (exit 2, naming the files):

- two files with the same rank (the same file given twice, or two runs' rank 0);
- different ``world_size`` or different process-group layouts (``pg_config`` names and sizes): two jobs mixed;
- files whose recorded wall-clock windows (``baseTimeNanoseconds`` + ``ts``) lie more than
  :data:`MAX_APART_S` apart: the same shape of job, run at another time;

and reports the ranks of ``world_size`` that no file holds (missing ranks are a finding, not an error). Files
without ``distributedInfo`` keep the rank of their position and are checked for duplicates only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dsctl.errors import InputError
from dsctl.trace.parse import TraceData

#: two ranks of one job record overlapping windows; more than this apart (seconds) is another run
MAX_APART_S = 60.0
_SHOWN = 6


@dataclass(frozen=True)
class TraceIdentity:
    """Who wrote one trace file: its rank (from ``distributedInfo``, else ``None``) and when (Unix µs)."""

    source: str
    rank: int | None
    world_size: int | None
    backend: str | None
    #: ``(pg_name, pg_size)`` per process group of ``distributedInfo.pg_config``
    groups: tuple[tuple[str, int], ...]
    #: first and last recorded event, Unix µs (None when the trace has no ``baseTimeNanoseconds``)
    start_unix_us: float | None
    end_unix_us: float | None


def identity(trace: TraceData) -> TraceIdentity:
    """The :class:`TraceIdentity` of a parsed trace."""
    ends = [float(t.end_us.max()) for t in (trace.gpu, trace.cpu) if t.size]
    starts = [float(t.start_us.min()) for t in (trace.gpu, trace.cpu) if t.size]
    base = trace.base_us
    start = end = None
    if base is not None and starts:
        start, end = base + trace.origin_us + min(starts), base + trace.origin_us + max(ends)
    return TraceIdentity(trace.source, trace.rank, trace.world_size, trace.backend,
                         tuple((name, size) for name, size, _ in trace.pg_config), start, end)


@dataclass(frozen=True)
class JobCheck:
    """The checked job: its size (None when no file says), the ranks present and those missing."""

    world_size: int | None
    ranks: tuple[int, ...]
    missing: tuple[int, ...]
    backend: str | None
    notes: list[str] = field(default_factory=list)

    def to_data(self) -> dict[str, object]:
        return {"world_size": self.world_size, "num_ranks": len(self.ranks), "missing_ranks": list(self.missing),
                "backend": self.backend}


def _names(sources: Sequence[str]) -> str:
    shown = ", ".join(sources[:_SHOWN])
    return shown + (f" and {len(sources) - _SHOWN} more" if len(sources) > _SHOWN else "")


def _ranges(ranks: Sequence[int]) -> str:
    """``0-3,7`` for sorted ranks."""
    parts: list[str] = []
    i = 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        parts.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
    return ",".join(parts)


def check_job(ids: Sequence[TraceIdentity]) -> JobCheck:
    """Check that ``ids`` (one per file, in argument order) are the ranks of one job; see the module docstring."""
    sizes: dict[int, list[str]] = {}
    for t in ids:
        if t.world_size is not None:
            sizes.setdefault(t.world_size, []).append(t.source)
    if len(sizes) > 1:
        described = "; ".join(f"world_size {w} in {_names(s)}" for w, s in sorted(sizes.items()))
        raise InputError(f"TRACE: files from different jobs: {described} (distributedInfo.world_size)",
                         hint="analyse one job's traces at a time")
    layouts: dict[tuple[tuple[str, int], ...], list[str]] = {}
    for t in ids:
        if t.groups:
            layouts.setdefault(t.groups, []).append(t.source)
    if len(layouts) > 1:
        (a, sa), (b, sb) = sorted(layouts.items(), key=lambda kv: -len(kv[1]))[:2]
        raise InputError(f"TRACE: files from different jobs: process groups {_layout(a)} in {_names(sa)} but "
                         f"{_layout(b)} in {_names(sb)} (distributedInfo.pg_config)",
                         hint="analyse one job's traces at a time")
    _check_times(ids)
    by_rank: dict[int, list[str]] = {}
    for i, t in enumerate(ids):
        by_rank.setdefault(t.rank if t.rank is not None else i, []).append(t.source)
    twice = {r: s for r, s in by_rank.items() if len(s) > 1}
    if twice:
        r, sources = min(twice.items())
        same = len(set(sources)) < len(sources)
        raise InputError(f"TRACE: rank {r} appears in {len(sources)} files ({_names(sources)})"
                         + ("; the same file is given twice" if same else "")
                         + (f"; {len(twice)} ranks are duplicated in all" if len(twice) > 1 else ""),
                         hint="give each rank's trace once, all from the same run")
    world = next(iter(sizes), None)
    ranks = tuple(sorted(by_rank))
    notes: list[str] = []
    missing: tuple[int, ...] = ()
    if world is not None:
        outside = [r for r in ranks if r >= world]
        if outside:
            raise InputError(f"TRACE: rank {outside[0]} ({by_rank[outside[0]][0]}) is outside world_size {world}")
        missing = tuple(np.setdiff1d(np.arange(world, dtype=np.int64), np.asarray(ranks, dtype=np.int64)).tolist())
        if missing:
            notes.append(f"{len(missing)} of {world} ranks have no trace file: ranks {_ranges(missing)}; the "
                         "figures cover the ranks given")
    backends = {t.backend for t in ids if t.backend}
    return JobCheck(world, ranks, missing, next(iter(backends)) if len(backends) == 1 else None, notes)


def _layout(groups: tuple[tuple[str, int], ...]) -> str:
    shown = ", ".join(f"{name}({size})" for name, size in groups[:4])
    return "[" + shown + (", ..." if len(groups) > 4 else "") + "]"


def _check_times(ids: Sequence[TraceIdentity]) -> None:
    timed = [t for t in ids if t.start_unix_us is not None and t.end_unix_us is not None]
    if len(timed) < 2:
        return
    # the latest start against the earliest end: in one job every window overlaps the others
    late = max(timed, key=lambda t: t.start_unix_us or 0.0)
    early = min(timed, key=lambda t: t.end_unix_us or 0.0)
    gap_s = ((late.start_unix_us or 0.0) - (early.end_unix_us or 0.0)) / 1e6
    if gap_s > MAX_APART_S:
        raise InputError(f"TRACE: files from different runs: {early.source} ends {gap_s:,.0f} s before "
                         f"{late.source} starts (baseTimeNanoseconds + ts); one job's ranks record the same "
                         f"window (at most {MAX_APART_S:g} s apart)", hint="analyse one job's traces at a time")
