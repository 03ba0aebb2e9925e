"""``storage expand``'s polish of the new chains: issue 14's member swaps, judged a batch of draws at a time.

The walk is the one issue 14 shipped (same draws, same accepted swaps, so the same files): step ``s`` draws a
disk index, two new chains of it and a member of each; the swap is taken when it lowers the sum of squared
pair-shares, half the time when it keeps it, and with probability ``0.01 * exp(-delta / T)`` otherwise
(``T`` x 0.7 every 5,000 steps). Fewer than 1 % of the steps swap (951 of 249,600 at 100 -> 110 nodes), so
the steps up to the next swap are judged together against the current table: one set of numpy calls per swap
instead of a Python loop per step. The exponential is taken again with ``math.exp`` for any draw near the line,
so every decision is the Python walk's.
"""

from __future__ import annotations

import math
import random

import numpy as np

POLISH_STEPS_PER_CHAIN = 40
POLISH_MAX_STEPS = 400_000
COOLING = 0.7  # temperature factor every COOLING_STEPS steps
COOLING_STEPS = 5_000
_FIRST_BATCH = 256
_MAX_BATCH = 8_192


def _swap(flat_share: np.ndarray, v: int, chains: np.ndarray, a: int, c: int, i: int, j: int) -> None:
    """Exchange member ``i`` (x) of chain ``a`` with member ``j`` (y) of chain ``c`` and move the pair-shares
    (``flat_share``: the (v, v) matrix as a flat view; scalar updates, k - 1 mates per chain)."""
    ra, rc = chains[a], chains[c]
    x, y = int(ra[i]), int(rc[j])
    for z in ra.tolist():
        if z != x:
            flat_share[x * v + z] -= 1
            flat_share[z * v + x] -= 1
            flat_share[y * v + z] += 1
            flat_share[z * v + y] += 1
    for z in rc.tolist():
        if z != y:
            flat_share[y * v + z] -= 1
            flat_share[z * v + y] -= 1
            flat_share[x * v + z] += 1
            flat_share[z * v + x] += 1
    ra[i], rc[j] = y, x


def polish(chains: list[np.ndarray], share: np.ndarray, rng: random.Random) -> None:
    """Swap members between two new chains of one disk index (node counts unchanged) while that lowers the sum
    of squared pair-shares over the whole table, with rare uphill moves early (``chains`` and ``share`` in place).
    """
    pools = [(d, arr) for d, arr in enumerate(chains) if len(arr) >= 2]
    if not pools:
        return
    k = pools[0][1].shape[1]
    v = len(share)
    rows = np.concatenate([arr for _, arr in pools]).astype(np.int64)
    sizes = np.array([len(arr) for _, arr in pools], dtype=np.int64)
    offsets = np.r_[0, np.cumsum(sizes)[:-1]]
    steps = min(POLISH_MAX_STEPS, POLISH_STEPS_PER_CHAIN * len(rows))
    gen = np.random.default_rng(rng.randrange(2**32))
    draws = gen.random((steps, 6))  # disk, chain a, chain c, slot i, slot j, acceptance
    pool = (draws[:, 0] * len(pools)).astype(np.int64)
    a_all = offsets[pool] + (draws[:, 1] * sizes[pool]).astype(np.int64)
    c_all = offsets[pool] + (draws[:, 2] * sizes[pool]).astype(np.int64)
    i_all = (draws[:, 3] * k).astype(np.int64)
    j_all = (draws[:, 4] * k).astype(np.int64)
    flat_share = share.reshape(v * v)  # a view
    signs = np.repeat(np.array([1, -1, 1, -1], dtype=np.int64), k)
    temperature = 1.0
    start, batch = 0, _FIRST_BATCH
    while start < steps:
        stop = min(steps, start + batch)
        a, c, i, j, u = a_all[start:stop], c_all[start:stop], i_all[start:stop], j_all[start:stop], draws[start:stop, 5]
        ra, rc = rows[a], rows[c]
        span = np.arange(stop - start)
        x, y = ra[span, i], rc[span, j]
        valid = (a != c) & (x != y) & ~(rc == x[:, None]).any(axis=1) & ~(ra == y[:, None]).any(axis=1)
        # delta = sum over a's other members m of 2 (share[y, m] - share[x, m]) + 2, and the same for c with x and
        # y exchanged; over whole rows (share[x, x] = 0, x in a, y in c, for a valid draw) that is:
        xs, ys = x[:, None] * v, y[:, None] * v
        picked = flat_share[np.concatenate((ys + ra, xs + ra, xs + rc, ys + rc), axis=1)]
        delta = 2 * (picked @ signs) - 4 * flat_share[x * v + y] + 4 * (k - 1)
        # the walk cools after each step s = 4,999 mod 5,000 that it did not skip as invalid (issue 14's loop
        # ``continue``s past the cooling); temperatures by repeated products, as the walk takes them
        cools = valid & (np.arange(start, stop) % COOLING_STEPS == COOLING_STEPS - 1)
        before = np.cumsum(cools) - cools
        levels = [temperature]
        for _ in range(int(cools.sum())):
            levels.append(levels[-1] * COOLING)
        temps = np.asarray(levels)[before]
        with np.errstate(over="ignore"):
            line = np.exp(-delta / temps) * 0.01
        maybe = valid & ((delta <= 0) | (u < line * (1 + 1e-9)))
        taken, swapped = stop - start - 1, False
        for t in np.flatnonzero(maybe).tolist():
            d, uu = int(delta[t]), float(u[t])
            if d < 0 or (d == 0 and uu < 0.5) or uu < math.exp(-d / levels[before[t]]) * 0.01:
                _swap(flat_share, v, rows, int(a[t]), int(c[t]), int(i[t]), int(j[t]))
                taken, swapped = t, True
                break
        temperature = levels[int(before[taken] + cools[taken])]
        start += taken + 1
        batch = max(_FIRST_BATCH, min(_MAX_BATCH, 2 * (taken + 1))) if swapped else min(_MAX_BATCH, 2 * batch)
    for (_, arr), off in zip(pools, offsets.tolist(), strict=True):
        arr[:] = rows[off:off + len(arr)]
