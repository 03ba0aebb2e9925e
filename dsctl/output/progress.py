"""Progress on stderr for work that may take more than about two seconds.

One helper for every command::

    with progress("sampling counters", fmt, total=interval_s) as report:
        work(report)              # report(done, total=None, status=None), e.g. passed to domain code as a callback

Nothing is drawn when stderr is not a terminal or ``--format`` is json/yaml, nor for work that ends within
``DELAY_S`` (the bar appears only then). With a total the line shows the latest status text (e.g. a burn-in
round's name), a bar, percent, elapsed time and ETA; without one, a spinner, the latest status text and the
elapsed time (e.g. a Slurm job's state while waiting).
Domain code never sees rich: it gets ``report`` as a plain ``Callable[[float, float], None]``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from dsctl.output.formats import OutputFormat

#: seconds of work before the progress line appears (shorter work stays silent)
DELAY_S = 2.0


class Report(Protocol):
    def __call__(self, done: float | None = None, total: float | None = None, status: str | None = None) -> None:
        ...


def _silent(done: float | None = None, total: float | None = None, status: str | None = None) -> None:
    return None


def shows_progress(fmt: OutputFormat | None, stream: Any = None) -> bool:
    """True when a progress line may be drawn: table output (None = no output to share the screen with, silent)
    and a terminal on stderr."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return fmt is OutputFormat.table and bool(isatty and isatty())


class _Line:
    """A rich progress line started lazily (after ``delay_s``) and updated from any thread."""

    def __init__(self, description: str, total: float | None, delay_s: float) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            Progress,
            SpinnerColumn,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
        if total is not None:
            columns += [TextColumn("{task.fields[status]}"), BarColumn(), TaskProgressColumn(), TextColumn("elapsed"),
                        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn()]
        else:
            columns += [TextColumn("{task.fields[status]}"), TextColumn("elapsed"), TimeElapsedColumn()]
        self._progress = Progress(*columns, console=Console(file=sys.stderr), transient=True,
                                  refresh_per_second=4)
        self._task = self._progress.add_task(description, total=total, status="")
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self._timer = threading.Timer(delay_s, self._start)
        self._timer.daemon = True
        self._timer.start()

    def _start(self) -> None:
        with self._lock:
            if not self._closed:
                self._progress.start()
                self._started = True

    def report(self, done: float | None = None, total: float | None = None, status: str | None = None) -> None:
        fields: dict[str, Any] = {}
        if done is not None:
            fields["completed"] = done
        if total is not None:
            fields["total"] = total
        if status is not None:
            fields["status"] = status
        self._progress.update(self._task, **fields)

    def close(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._closed = True
            if self._started:
                self._progress.stop()


@contextmanager
def progress(description: str, fmt: OutputFormat | None, total: float | None = None, *,
             delay_s: float | None = None) -> Iterator[Report]:
    """Yield ``report(done=None, total=None, status=None)``; draws on stderr only where ``shows_progress``."""
    if not shows_progress(fmt):
        yield _silent
        return
    line = _Line(description, total, DELAY_S if delay_s is None else delay_s)
    try:
        yield line.report
    finally:
        line.close()


def sleep_reporting(seconds: float, report: Report, step_s: float = 0.25) -> None:
    """``time.sleep(seconds)`` that reports the seconds slept so far (total ``seconds``) every ``step_s``."""
    import time

    start = time.monotonic()
    end = start + seconds
    while (now := time.monotonic()) < end:
        report(now - start, seconds)
        time.sleep(min(step_s, end - now))
    report(seconds, seconds)
