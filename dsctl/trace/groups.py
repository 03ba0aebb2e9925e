"""Group a trace's events by device, window, stream or lane with one sort, so every analysis costs O(n log n) in
the events, whatever the number of groups.

A boolean mask per group (``table.device == d`` for every device) costs groups x events: 20,000 devices or
300,000 one-kernel streams in one file took minutes and gigabytes (issue 33). Here the events are sorted once
by their keys (``np.lexsort``, stable: indices stay ascending inside a group) and cut where a key changes.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def runs(chosen: NDArray[np.intp], *keys: NDArray[np.generic]) -> list[NDArray[np.intp]]:
    """The event indices ``chosen`` grouped by ``keys`` (arrays over all events, most significant first): one
    array of indices per distinct key tuple, in ascending key order, each in the order of ``chosen``."""
    if not chosen.size:
        return []
    order = chosen[np.lexsort(tuple(key[chosen] for key in reversed(keys)))]
    change = np.zeros(order.size - 1, dtype=bool)
    for key in keys:
        sorted_key = key[order]
        change |= sorted_key[1:] != sorted_key[:-1]
    return np.split(order, np.flatnonzero(change) + 1)
