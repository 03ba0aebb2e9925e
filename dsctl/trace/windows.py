"""GPU step windows that partition the device's timeline: every instant belongs to exactly one step.

The GPU still runs step N's tail (the last collectives, the optimizer) after the host launched step N+1, so the
span of the kernels a step launched (first start to last end) overlaps the next step's span; summing such spans
counts the shared stretch twice (wall, idle and busy time too high, issue 29). Here each kernel belongs to one
step (the ``ProfilerStep#N`` in which the host launched it, :func:`dsctl.trace.overlap.step_of`), and the
device's window of step N runs from the first start of its kernels to the first start of the next step's kernels
(the last step's window ends where the latest kernel ends). Starts are made non-decreasing, so the windows are
disjoint and their lengths add up to the device's span from the first step's first kernel to the last end.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from dsctl.trace.intervals import FloatArray, clip


def partition(starts: FloatArray, ends: FloatArray, step_idx: NDArray[np.int32],
              num_steps: int) -> list[tuple[int, float, float]]:
    """``(step index, lo_us, hi_us)`` for every step with events on one device, in step order, disjoint and
    contiguous; ``step_idx[i]`` is event i's step (-1 = none: it shapes no window). Shapes ``(n,)``."""
    has = step_idx >= 0
    if not has.any():
        return []
    lo = np.full(num_steps, np.inf)
    hi = np.full(num_steps, -np.inf)
    np.minimum.at(lo, step_idx[has], starts[has])
    np.maximum.at(hi, step_idx[has], ends[has])
    present = np.flatnonzero(np.isfinite(lo))
    begin = np.maximum.accumulate(lo[present])
    finish = np.append(begin[1:], max(float(np.max(hi[present])), float(begin[-1])))
    return [(int(k), float(a), float(b)) for k, a, b in zip(present, begin, finish, strict=True)]


def clip_set(cover: tuple[FloatArray, FloatArray], lo: float, hi: float) -> tuple[FloatArray, FloatArray]:
    """A canonical interval set (:func:`dsctl.trace.intervals.union`) cut to ``[lo, hi]`` (µs), still canonical."""
    s, e = clip(cover[0], cover[1], lo, hi)
    keep = e > s
    return s[keep], e[keep]
