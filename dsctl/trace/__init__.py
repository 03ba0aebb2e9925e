"""Compute/communication overlap, kernel classes and cross-rank skew from PyTorch profiler (Kineto) traces.

The runner layer opens the files and hands their byte chunks here; everything in this package is pure:
:mod:`~dsctl.trace.scan` (byte chunks -> events, streaming), :mod:`~dsctl.trace.parse` (events -> columns),
:mod:`~dsctl.trace.kernels` and :mod:`~dsctl.trace.classify` (the classification table and options),
:mod:`~dsctl.trace.intervals` (numpy interval algebra), :mod:`~dsctl.trace.overlap` (the per-rank figures),
:mod:`~dsctl.trace.spread` (across ranks), :mod:`~dsctl.trace.comms` (which events are collectives, per
backend, and which synchronise), :mod:`~dsctl.trace.job` (the files are one job), :mod:`~dsctl.trace.skew`
(collective matching, clock alignment, stragglers, critical path), :mod:`~dsctl.trace.place` (slow ranks in
their place on the cluster) and the SVG pictures.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dsctl.gcpause import gc_paused
from dsctl.trace.classify import DEFAULT_PATTERNS, Classifier
from dsctl.trace.overlap import OverlapResult, RankOverlap, analyse_trace, combine
from dsctl.trace.parse import TraceData, parse_trace
from dsctl.trace.scan import DEFAULT_MAX_BYTES


def read_trace(chunks: Iterable[bytes], source: str, max_bytes: int = DEFAULT_MAX_BYTES) -> TraceData:
    """Stream one trace file's byte chunks into column arrays (see :mod:`dsctl.trace.parse`)."""
    with gc_paused():
        return parse_trace(chunks, source, max_bytes)


def rank_overlap(chunks: Iterable[bytes], source: str, index: int, classifier: Classifier,
                 step: int | None = None, all_steps: bool = False, top: int = 10, keep_lanes: bool = False,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> list[RankOverlap]:
    """Overlap rows of one file (``index`` is its rank when the trace does not say): the unit of parallel work."""
    if step is not None and all_steps:
        from dsctl.errors import InputError
        raise InputError("and {all_steps} exclude each other; give one", field="step", mentions=("all_steps",))
    return analyse_trace(read_trace(chunks, source, max_bytes), index, classifier, step, all_steps, top, keep_lanes)


def overlap_from_bytes(files: Sequence[tuple[str, bytes]], classifier: Classifier | None = None,
                       step: int | None = None, all_steps: bool = False, top: int = 10,
                       keep_lanes: bool = True) -> OverlapResult:
    """Overlap figures of each ``(source name, file bytes)`` trace (one per rank), in this process."""
    classifier = classifier or Classifier()
    rows: list[RankOverlap] = []
    for i, (source, data) in enumerate(files):
        rows.extend(rank_overlap([data], source, i, classifier, step, all_steps, top, keep_lanes))
    return combine(rows, classifier, step)


#: the public surface: the modules (and names) other packages, the commands and benchmarks may import;
#: tests/unit/test_architecture.py holds every import from outside the package to this list
__all__ = [
    "DEFAULT_PATTERNS",
    "Classifier",
    "OverlapResult",
    "classify",
    "explain",
    "intervals",
    "job",
    "kernels",
    "nodes",
    "overlap",
    "overlap_from_bytes",
    "parse",
    "place",
    "rank_overlap",
    "read_trace",
    "request",
    "skew",
    "svg",
    "timeline",
]
