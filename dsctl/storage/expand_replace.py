"""``storage expand``'s replacement search on one disk index, with each new node's scores kept up to date.

The greedy is the one issue 14 shipped (same choices, same order, so the same files): rounds of one slot per
new node; in a round each new node ``x`` takes the open slot ``(c, p)`` of lowest score

    score = 2 * sum_{q != p} share[x, m_q]  +  base[c, p],
    base  = (k - 1) - 2 * sum_{q != p} share[m_p, m_q]  +  UNTOUCHED_BONUS * (replacements made in c)

(``base`` taken once per round, then only closed), ties to the lowest chain then slot. Issue 14 recomputed the
first term for every open slot at every step, gathering ``b x k`` pair-shares per step (v^2 over a whole
expansion). Here ``scores[j]`` (the whole score of new node ``j``, flat ``b * k``, one contiguous int32 row) is
kept: a replacement changes the pair-shares of its chain's members only, so it adds to j's row at the mates of
those members' slots (``_Slots.mates_of``) and refreshes the replaced chain for every new node; a change of
``base`` is added to the column of every new node. A step is then one argmin over one row (~1 ns a slot, the
term that still grows as the square of the table) and O(r) index work in Python. ``base`` is taken at the start
of each round and only the slots whose base moved are folded into the rows: whole (a few numpy gathers over all
chains) in the first round and once no untouched chain is left; in between (the usual case: every round at the
default sizes) only for the untouched chains holding an old pair ``(y, z)`` whose share fell in the last round
(``y`` replaced beside ``z``), found through the kept mates of each ``y`` in O(pairs * r), because every other
change (a closed slot, a touched chain, a pair with a new node) was closed as it came. At 500 nodes that is
~0.4 ms a round instead of ~1.4 ms (issue 32); below KEPT_BASE_MIN_SLOTS slots the whole recompute is cheaper.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dsctl.errors import InputError

UNTOUCHED_BONUS = 1_000_000  # score penalty per replacement already made in a chain
KEPT_BASE_MIN_SLOTS = 12_000  # slots on a disk index from which the base is kept between rounds (below it numpy's
# per-call cost makes the whole recompute the cheaper: measured 50 -> 55 nodes 0.05 s whole, 0.08 s kept)
MAX_SCORE_CELLS = 20_000_000  # new nodes x old members of one disk index: the kept scores (4 or 8 bytes each)


def check_size(new_nodes: int, members: int) -> None:
    """Refuse an expansion whose kept scores would pass MAX_SCORE_CELLS (before any work)."""
    if new_nodes * members > MAX_SCORE_CELLS:
        raise InputError(f"{new_nodes} on a table of {members:,} targets per disk index needs "
                         f"{new_nodes * members:,} kept scores, more than {MAX_SCORE_CELLS:,}; add at most "
                         f"{max(1, MAX_SCORE_CELLS // members):,} nodes at a time", field="add_nodes")


class _Slots:
    """Where each node sits on this disk index: ``own[node, :count[node]]`` its flat slots ``c * k + p``,
    ``at[f]`` the place of slot ``f`` in its node's list, ``mates[f]`` the other ``k - 1`` slots of f's chain,
    ``mates_of[node, :count[node]]`` the mates of the node's slots (kept beside ``own``: one gather fewer)."""

    def __init__(self, nodes: np.ndarray, num_nodes: int, capacity: int) -> None:
        b, k = nodes.shape
        flat = nodes.ravel()
        order = np.argsort(flat, kind="stable")
        self.count = np.bincount(flat, minlength=num_nodes).tolist()
        starts = np.r_[0, np.cumsum(self.count)[:-1]]
        place = np.arange(flat.size) - np.repeat(starts, self.count)
        self.own = np.zeros((num_nodes, max(capacity, 1)), dtype=np.int64)
        self.own[flat[order], place] = order
        at = np.empty(flat.size, dtype=np.int64)
        at[order] = place
        self.at = at.tolist()
        slot = np.arange(b * k)
        others = np.array([[q for q in range(k) if q != p] for p in range(k)], dtype=np.int64).reshape(k, k - 1)
        self.mates = (slot // k * k)[:, None] + others[slot % k]  # (b * k, k - 1)
        self.mates_of = np.zeros((num_nodes, max(capacity, 1), k - 1), dtype=np.int64)
        self.mates_of[flat[order], place] = self.mates[order]

    def of(self, node: int) -> np.ndarray:
        return self.own[node, :self.count[node]]

    def mates_of_node(self, node: int) -> np.ndarray:
        """The other slots of every chain ``node`` is in (distinct), flat."""
        return self.mates_of[node, :self.count[node]].reshape(-1)

    def move(self, f: int, old: int, new: int) -> None:
        """Slot ``f`` passes from node ``old`` to node ``new``."""
        i, last = self.at[f], self.count[old] - 1
        moved = int(self.own[old, last])
        self.own[old, i] = moved
        self.mates_of[old, i] = self.mates_of[old, last]
        self.at[moved] = i
        self.count[old] = last
        self.own[new, self.count[new]] = f
        self.mates_of[new, self.count[new]] = self.mates[f]
        self.at[f] = self.count[new]
        self.count[new] += 1


def _add_mates(score: np.ndarray, slots: _Slots, node: int, delta: int) -> None:
    """One new node's kept scores (flat, b * k) after its pair-share with ``node`` moved by ``delta / 2``: the
    other slots of every chain ``node`` is in change by ``delta``."""
    score[slots.mates_of_node(node)] += delta


def _refresh(scores: np.ndarray, base: np.ndarray, share: np.ndarray, nodes: np.ndarray, first: int,
             chains: np.ndarray, never: int) -> None:
    """Recompute the kept scores of ``chains`` for every new node (gain ``never`` in chains a new node is in)."""
    k = nodes.shape[1]
    members = nodes[chains]  # (C, k)
    mates = share[first:, :][:, members]  # (N, C, k)
    fresh = 2 * (mates.sum(axis=2, keepdims=True) - mates)
    inside = members[:, None, :] == np.arange(first, len(share))[None, :, None]  # (C, N, k)
    fresh[np.transpose(inside.any(axis=2))] = never
    cols = (chains[:, None] * k + np.arange(k)).ravel()
    scores[:, cols] = fresh.reshape(len(scores), -1) + base[cols]


def replace(nodes: np.ndarray, share: np.ndarray, counts: np.ndarray, goal: np.ndarray, new: list[int],
            report: Callable[[int], None] | None = None, whole_base: bool = False) -> list[tuple[int, int, int]]:
    """Greedy replacements on one disk index (modifies ``nodes``, ``share``, ``counts``).

    ``nodes`` (b, k) node indexes, ``share`` (v', v') chains shared per node pair over all disks, ``counts``
    members per node on this disk, ``goal`` members each node should end with, ``new`` the new node indexes
    (contiguous, ascending); ``report(made)`` after each round; ``whole_base`` takes every round's base for
    all chains (the reference the kept base is tested against: the same choices). Returns ``(chain, slot, old
    node)`` in the order made.
    """
    b, k = nodes.shape
    first = new[0]
    made: list[tuple[int, int, int]] = []
    pending = {x: int(goal[x] - counts[x]) for x in new}
    open_slot = (counts[nodes] > goal[nodes]).ravel()  # the member may give its slot up (above its share)
    touched = np.zeros(b, dtype=np.int64)
    slots = _Slots(nodes, len(share), int(max(counts.max(), goal.max())))
    mates_of_new = share[first:, :][:, nodes]  # (N, b, k)
    gain = (2 * (mates_of_new.sum(axis=2, keepdims=True) - mates_of_new)).reshape(len(new), b * k)
    del mates_of_new
    # scores as int32 when every score fits far below 2^29 (the usual case: half the memory traffic per step)
    reach = 4 * k * (int(share.max()) + sum(pending.values())) + k * UNTOUCHED_BONUS + k
    dtype, never = (np.int32, 2**29) if reach < 2**27 else (np.int64, 2**61)
    closed = never // 2  # never plus or minus pair-share sums: a slot that cannot be taken
    # ``scores[j]``: new node j's score of every slot, gain + ``base`` (kept: each change of either is applied
    # where it happens, so a step reads one row once); new nodes are in no chain yet: nothing to close
    scores = np.ascontiguousarray(gain, dtype=dtype)  # rows contiguous: a fancy-index result is laid out by column
    del gain
    stale: set[int] = set()  # chains whose kept scores wait for a refresh (replaced while closed anyway)
    num_nodes = len(share)
    share_flat = share.reshape(num_nodes * num_nodes)  # a view: 1-d takes are the fast gathers
    flat_nodes = nodes.reshape(b * k)  # a view: writes go to ``nodes``
    scaled = nodes * num_nodes  # kept equal

    def live_base(chains: np.ndarray | None = None) -> np.ndarray:
        """Each round's base (issue 14's, for all chains at once or for ``chains``, flat in their order):
        (k-1) - 2 * pair-shares with the chain's other members + UNTOUCHED_BONUS * replacements made in the
        chain, ``never`` where closed."""
        held, at = (nodes, scaled) if chains is None else (nodes[chains], scaled[chains])
        value = np.full(held.shape, k - 1, dtype=np.int64)
        value += UNTOUCHED_BONUS * (touched if chains is None else touched[chains])[:, None]
        for p in range(k):
            for q in range(p + 1, k):  # share is symmetric: each pair once
                pair = share_flat.take(at[:, p] + held[:, q])
                pair *= 2
                value[:, p] -= pair
                value[:, q] -= pair
        is_open = open_slot if chains is None else open_slot.reshape(b, k)[chains].ravel()
        return np.where(is_open, value.ravel(), never).astype(dtype)

    def holding(pair_y: list[int], pair_z: list[int]) -> np.ndarray:
        """The chains of this disk index that hold both nodes of some pair ``(pair_y[i], pair_z[i])``, and maybe
        a few more (a row's places past its node's count are stale: harmless, their base is taken afresh too),
        distinct: O(pairs * r), not O(b)."""
        ys = np.asarray(pair_y, dtype=np.int64)
        zs = np.asarray(pair_z, dtype=np.int64)[:, None]
        mates = flat_nodes.take(slots.mates_of[ys])  # (P, width, k - 1) the other members of each y's chains
        hit = mates[:, :, 0] == zs
        for q in range(1, k - 1):
            hit |= mates[:, :, q] == zs
        return np.unique(slots.own[ys][hit] // k)

    count_of, goal_of = counts.tolist(), goal.tolist()  # scalar reads and writes: lists (numpy's cost 3x)
    touched_of = [0] * b
    open_count = open_slot.reshape(b, k).sum(axis=1)
    open_total = int(open_count.sum())
    fresh_count = int(np.count_nonzero(open_count))  # untouched chains with an open slot
    touched_slot = np.zeros(b * k, dtype=bool)
    base = np.zeros(b * k, dtype=dtype)  # the base of the round, as folded into ``scores``

    def close(where: slice | int | np.ndarray) -> None:
        """Close slots for every new node (base ``never``). The scores are set, not moved: a closed slot is
        either closed for good or in a stale chain, whose scores are recomputed before it opens again."""
        scores[:, where] = never
        base[where] = never

    whole = True  # the first round takes every slot's base, as does every round once no untouched chain is left
    pair_y: list[int] = []  # the old-node pairs whose share fell in this round (fresh rounds)
    pair_z: list[int] = []
    while any(n > 0 for n in pending.values()):
        fresh_mode = fresh_count > 0
        if not fresh_mode and stale:
            _refresh(scores, base, share, nodes, first, np.fromiter(stale, dtype=np.int64, count=len(stale)), never)
            stale.clear()
        if whole or whole_base or not fresh_mode or b * k < KEPT_BASE_MIN_SLOTS:
            cols = np.arange(b * k)
            round_base = live_base()
        else:
            # after a fresh round the base moved only in untouched chains holding an old pair whose share fell:
            # every other change (a closed slot, a touched chain, a pair with a new node) was closed as it came
            dirty = holding(pair_y, pair_z) if pair_y else np.zeros(0, dtype=np.int64)
            cols = (dirty[:, None] * k + np.arange(k)).ravel()
            round_base = live_base(dirty)
        pair_y.clear()
        pair_z.clear()
        whole = False
        if fresh_mode:
            round_base[touched_slot[cols]] = never
        changed = np.flatnonzero(round_base != base[cols])
        moved = cols[changed]  # slots whose base changed since the last round
        if len(moved):
            scores[:, moved] += round_base[changed] - base[moved]
            base[moved] = round_base[changed]
        for x in new:
            if pending[x] <= 0:
                continue
            j = x - first
            score = scores[j]
            f = int(score.argmin())
            if score[f] >= closed:
                break  # nothing left in this subset: the next round looks again
            c, p = divmod(f, k)
            row = flat_nodes[c * k:c * k + k].tolist()
            y = row[p]
            others = row[:p] + row[p + 1:]
            for z in others:  # scalar updates through the flat view (a 2-d index costs 3x)
                if fresh_mode and z < first:  # chains holding x or a new node are touched: closed already
                    pair_y.append(y)
                    pair_z.append(z)
                share_flat[y * num_nodes + z] -= 1
                share_flat[z * num_nodes + y] -= 1
                share_flat[x * num_nodes + z] += 1
                share_flat[z * num_nodes + x] += 1
            flat_nodes[f] = x
            scaled[c, p] = x * num_nodes
            slots.move(f, y, x)
            open_slot[f] = False
            open_count[c] -= 1
            open_total -= 1
            if touched_of[c] == 0:
                fresh_count -= 1
                touched_slot[c * k:c * k + k] = True
            touched[c] += 1
            touched_of[c] += 1
            chain_slots = slice(c * k, c * k + k)
            if fresh_mode:
                close(chain_slots)  # f with them
            else:  # chain c's scores are recomputed below
                base[chain_slots] += UNTOUCHED_BONUS
                base[f] = never
            count_of[y] -= 1
            count_of[x] += 1
            if count_of[y] <= goal_of[y]:
                gone = slots.of(y)
                open_slot[gone] = False
                close(gone)
                gone_chains = gone // k
                open_count[gone_chains] -= 1
                open_total -= len(gone)
                fresh_count -= int(np.count_nonzero((open_count[gone_chains] == 0) & (touched[gone_chains] == 0)))
            pending[x] -= 1
            made.append((c, p, y))
            # kept scores: x's pair-shares with the others rose; a new node among the others lost y, gained x
            for z in others:
                _add_mates(score, slots, z, 2)
                if z >= first:
                    _add_mates(scores[z - first], slots, y, -2)
                    _add_mates(scores[z - first], slots, x, 2)
            if fresh_mode:
                stale.add(c)  # closed for the rest of the round and every round with untouched chains left
            else:
                _refresh(scores, base, share, nodes, first, np.array([c]), never)
        else:
            if report is not None:
                report(len(made))
            continue
        if not fresh_mode or open_total == 0:
            counts[:] = count_of
            raise InputError("no old member can make room for a new node on this disk index (the old table "
                             "is too uneven to expand); regenerate it with `dsctl storage chains`")
    counts[:] = count_of
    return made
