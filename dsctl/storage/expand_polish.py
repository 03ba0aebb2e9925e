"""``storage expand``'s polish of the new chains: issue 14's member swaps, judged a batch of draws at a time.

The walk is the one issue 14 shipped (same draws, same accepted swaps, so the same files): step ``s`` draws a
disk index, two new chains of it and a member of each; the swap is taken when it lowers the sum of squared
pair-shares, half the time when it keeps it, and with probability ``0.01 * exp(-delta / T)`` otherwise
(``T`` x 0.7 every 5,000 steps). Fewer than 1 % of the steps swap (951 of 249,600 at 100 -> 110 nodes), so
the draws are judged 2,048 at a time against the current table, and after a swap only the later draws that read
what it changed (its two chains, or a pair-share row of one of their members: a few percent) are judged again:
one small set of numpy calls per swap instead of a Python loop per step. The exponential is taken again with
``math.exp`` for any draw near the line, so every decision is the Python walk's.
"""

from __future__ import annotations

import math
import random

import numpy as np

POLISH_STEPS_PER_CHAIN = 40
POLISH_MAX_STEPS = 400_000
COOLING = 0.7  # temperature factor every COOLING_STEPS steps
COOLING_STEPS = 5_000
_BATCH = 2_048  # draws judged at a time; after a swap only those that read what it changed are judged again


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


class _Batch:
    """Draws ``start:stop`` of the walk: chains ``a``, ``c``, slots ``i``, ``j``, acceptance ``u``; once judged,
    members ``x``, ``y``, ``valid``, ``delta`` (the change in the sum of squared pair-shares) and ``maybe`` (may
    swap: the exponential is judged again exactly when the draw is reached), at temperature ``levels[before]``."""

    def __init__(self, walk: _Walk, start: int, stop: int, temperature: float) -> None:
        self.walk, self.temperature = walk, temperature
        self.a, self.c = walk.a[start:stop], walk.c[start:stop]
        self.i, self.j, self.u = walk.i[start:stop], walk.j[start:stop], walk.u[start:stop]
        n = stop - start
        self.x, self.y = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        self.valid, self.delta = np.empty(n, dtype=bool), np.empty(n, dtype=np.int64)
        # the walk cools after each step s = 4,999 mod 5,000 that it did not skip as invalid (issue 14's loop
        # ``continue``s past the cooling); temperatures by repeated products, as the walk takes them
        self.cooling = np.arange(start, stop) % COOLING_STEPS == COOLING_STEPS - 1
        self.before = np.zeros(n, dtype=np.int64)
        self.levels = [temperature]
        self.level_of = np.asarray(self.levels)
        self.maybe = np.zeros(n, dtype=bool)
        self.ai, self.cj = self.a * walk.k + self.i, self.c * walk.k + self.j  # x's and y's places in ``members``
        self.judge(slice(None))

    def judge(self, at: slice | np.ndarray) -> None:
        """Judge the draws ``at`` against the table as it is now (overflow in exp ignored by the caller)."""
        walk, k, v = self.walk, self.walk.k, self.walk.v
        ra, rc = walk.rows[self.a[at]], walk.rows[self.c[at]]
        x, y = walk.members[self.ai[at]], walk.members[self.cj[at]]
        self.x[at], self.y[at] = x, y
        # x is in a and y in c: x not in c and y not in a also rules out a == c and x == y
        valid = (rc != x[:, None]).all(axis=1) & (ra != y[:, None]).all(axis=1)
        self.valid[at] = valid
        # delta = sum over a's other members m of 2 (share[y, m] - share[x, m]) + 2, and the same for c with x
        # and y exchanged; over whole rows (share[x, x] = 0, x in a, y in c, for a valid draw) that is:
        xs, ys = x[:, None] * v, y[:, None] * v
        picked = walk.flat_share[np.concatenate((ys + ra, xs + ra, xs + rc, ys + rc), axis=1)]
        delta = 2 * (picked @ walk.signs) - 4 * walk.flat_share[xs[:, 0] + y] + 4 * (k - 1)
        self.delta[at] = delta
        if isinstance(at, slice) or self.cooling[at].any():  # the cooling count moved: judge every draw's line
            cools = self.valid & self.cooling
            self.before = np.cumsum(cools) - cools
            self.levels = [self.temperature]
            for _ in range(int(cools.sum())):
                self.levels.append(self.levels[-1] * COOLING)
            self.level_of = np.asarray(self.levels)
            at, valid, delta = slice(None), self.valid, self.delta
        line = np.exp(-delta / self.level_of[self.before[at]]) * 0.01
        self.maybe[at] = valid & ((delta <= 0) | (self.u[at] < line * (1 + 1e-9)))

    def walk_through(self) -> None:
        """Take the batch's swaps in order; after each, judge again the later draws that read what it changed."""
        walk, after = self.walk, 0
        while after < len(self.a):
            taken = -1
            for t in (after + np.flatnonzero(self.maybe[after:])).tolist():
                d, u = int(self.delta[t]), float(self.u[t])
                if d < 0 or (d == 0 and u < 0.5) or u < math.exp(-d / self.levels[self.before[t]]) * 0.01:
                    _swap(walk.flat_share, walk.v, walk.rows, int(self.a[t]), int(self.c[t]), int(self.i[t]),
                          int(self.j[t]))
                    taken = t
                    break
            if taken < 0:
                return
            after = taken + 1
            # a later draw reads its two chains and the pair-share rows of its x and y; the swap changed two
            # chains and pair-shares between their members only
            ta, tc, a, c = self.a[taken], self.c[taken], self.a[after:], self.c[after:]
            members = walk.in_swap
            members[walk.rows[ta]] = members[walk.rows[tc]] = True
            hit = members[self.x[after:]] | members[self.y[after:]] | (a == ta) | (a == tc) | (c == ta) | (c == tc)
            members[walk.rows[ta]] = members[walk.rows[tc]] = False
            again = after + np.flatnonzero(hit)
            if len(again):
                self.judge(again)


class _Walk:
    """The whole walk's draws and the table it changes: ``rows`` (the new chains of every disk index, stacked),
    ``flat_share`` (the (v, v) pair-shares as a flat view)."""

    def __init__(self, rows: np.ndarray, share: np.ndarray, sizes: np.ndarray, steps: int, seed: int) -> None:
        self.rows, self.k, self.v = rows, rows.shape[1], len(share)
        self.members = rows.reshape(-1)  # a view: chain after chain
        self.flat_share = share.reshape(self.v * self.v)
        offsets = np.r_[0, np.cumsum(sizes)[:-1]]
        draws = np.random.default_rng(seed).random((steps, 6))  # disk, chain a, chain c, slot i, slot j, accept
        pool = (draws[:, 0] * len(sizes)).astype(np.int64)
        self.a = offsets[pool] + (draws[:, 1] * sizes[pool]).astype(np.int64)
        self.c = offsets[pool] + (draws[:, 2] * sizes[pool]).astype(np.int64)
        self.i = (draws[:, 3] * self.k).astype(np.int64)
        self.j = (draws[:, 4] * self.k).astype(np.int64)
        self.u = draws[:, 5]
        self.signs = np.repeat(np.array([1, -1, 1, -1], dtype=np.int64), self.k)
        self.in_swap = np.zeros(self.v, dtype=bool)  # scratch: the members of a swap's two chains


def polish(chains: list[np.ndarray], share: np.ndarray, rng: random.Random) -> None:
    """Swap members between two new chains of one disk index (node counts unchanged) while that lowers the sum
    of squared pair-shares over the whole table, with rare uphill moves early (``chains`` and ``share`` in place).
    """
    pools = [arr for arr in chains if len(arr) >= 2]
    if not pools:
        return
    rows = np.concatenate(pools).astype(np.int64)
    sizes = np.array([len(arr) for arr in pools], dtype=np.int64)
    steps = min(POLISH_MAX_STEPS, POLISH_STEPS_PER_CHAIN * len(rows))
    walk = _Walk(rows, share, sizes, steps, rng.randrange(2**32))
    temperature = 1.0
    with np.errstate(over="ignore"):  # exp(-delta / T) of a steep downhill draw is inf: it is taken anyway
        for start in range(0, steps, _BATCH):
            batch = _Batch(walk, start, min(steps, start + _BATCH), temperature)
            batch.walk_through()
            temperature = batch.levels[-1]
    at = 0
    for arr in pools:
        arr[:] = rows[at:at + len(arr)]
        at += len(arr)
