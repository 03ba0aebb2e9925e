"""Counted progress for domain code: a plain ``report(done, total)`` callback and stages summed into one count.

Domain functions that may run over about two seconds take ``report: Report | None`` and call it with counts
(planes simulated, chains ordered, dump bytes parsed). They never draw anything: the output layer
(``dsctl.output.progress``) turns the counts into a bar, percent and ETA on a terminal's stderr.

Work in several stages of different cost (parse, then check) reports one count through ``Stages``: stage ``i``
owns ``weights[i]`` units of the total (the units of its estimated cost), so the bar moves evenly and the ETA holds.
Counts only grow: a stage that reports less than it did before is ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

#: ``report(done, total)``: ``done`` of ``total`` units of work finished (floats; ``done <= total``)
Report = Callable[[float, float], None]


class Stages:
    """One count over stages: ``part(i)(done, total)`` maps stage ``i``'s own count onto its share of the sum of
    ``weights`` (units of estimated cost, e.g. bytes to parse); ``finish()`` reports the whole total.

    A part is bound to its stage, not to a position: a stage inserted later (``add(weight, before=i)``) moves the
    stages after it along, and their parts follow."""

    def __init__(self, report: Report | None, weights: Sequence[float]) -> None:
        self._report = report
        self._stages = [[max(0.0, float(w))] for w in weights]  # one-item lists: a part keeps its stage by identity
        self._done = 0.0

    @property
    def total(self) -> float:
        return sum(w for w, in self._stages) or 1.0

    def add(self, weight: float, before: int | None = None) -> int:
        """A stage found to be needed late (a retry), at the end or before stage ``before``; returns its index
        (use it at once: a later insertion shifts indexes). The total grows, the count so far stays."""
        at = len(self._stages) if before is None else before if before >= 0 else len(self._stages) + before
        self._stages.insert(at, [max(0.0, float(weight))])
        return at

    def _emit(self, done: float) -> None:
        total = self.total
        done = min(done, total)
        if self._report is not None and done >= self._done:
            self._done = done
            self._report(done, total)

    def part(self, index: int) -> Report:
        """The callback of stage ``index``: its ``(done, total)`` in whatever units it counts."""
        stage = self._stages[index]

        def report(done: float, total: float) -> None:
            start = 0.0
            for other in self._stages:
                if other is stage:
                    break
                start += other[0]
            width = stage[0]
            self._emit(start + (width * min(done, total) / total if total > 0 else width))

        return report

    def finish(self) -> None:
        self._emit(self.total)


def each(report: Report | None, total: int, every: int = 1) -> Callable[[int], None]:
    """``tick(done)`` that calls ``report(done, total)`` every ``every`` items and at the last one (a loop's
    counter without a call per item)."""
    step = max(1, every)

    def tick(done: int) -> None:
        if report is not None and (done % step == 0 or done >= total):
            report(float(done), float(total))

    return tick
