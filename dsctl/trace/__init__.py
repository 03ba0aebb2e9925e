"""Compute/communication overlap from PyTorch profiler (Kineto) Chrome traces.

The command layer reads the files and hands their bytes to :func:`overlap_from_bytes`; everything here is pure:
:mod:`~dsctl.trace.parse` (bytes -> event columns), :mod:`~dsctl.trace.classify` (communication patterns),
:mod:`~dsctl.trace.intervals` (numpy interval algebra), :mod:`~dsctl.trace.overlap` (the figures) and
:mod:`~dsctl.trace.svg` (the timeline picture).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from dsctl.trace.classify import DEFAULT_PATTERNS, compile_patterns
from dsctl.trace.overlap import OverlapResult, analyse
from dsctl.trace.parse import decode, parse_trace


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: decoding a trace allocates millions of dicts that hold no cycles, and
    the collector's repeated scans of them cost a third of the decode time of a 1M-event trace."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def overlap_from_bytes(files: Sequence[tuple[str, bytes]], patterns: Sequence[str] = DEFAULT_PATTERNS,
                       step: int | None = None, all_steps: bool = False,
                       pattern_option: str = "--comm-pattern") -> OverlapResult:
    """Overlap figures of each ``(source name, file bytes)`` trace (one per rank), see :func:`analyse`.

    ``patterns`` are the communication regexes (invalid ones raise InputError naming ``pattern_option``).
    """
    regex = compile_patterns(patterns, pattern_option)
    traces = []
    for source, data in files:
        with _gc_paused():
            traces.append(parse_trace(decode(data, source), source))
    return analyse(traces, regex, patterns, step, all_steps)


__all__ = ["DEFAULT_PATTERNS", "OverlapResult", "overlap_from_bytes"]
