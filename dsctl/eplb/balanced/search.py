"""Local search over (replica counts, replica -> GPU packing) for the balanced EPLB mode.

Works on a batch of independent sub-problems, one per (layer, node) for the hierarchical policy and one per layer for
the global policy. Shapes: B sub-problems, X experts each (local ids 0..X-1), S = P * k slots each, P GPUs of k slots.
Slot ``s`` of a sub-problem lives on its GPU ``s // k``. Loads are float64 token counts (any unit); a GPU's load is
the sum over its slots of ``w[e] / cnt[e]``.

All searches are deterministic and bounded by iteration budgets (never by wall-clock time), and they only accept a
move that lowers the sub-problem's sorted load vector lexicographically from the top (the largest GPU load, or the
number of GPUs at that load), so a sub-problem's largest GPU load never rises.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: relative margin a move must win by to count as an improvement (guards against float noise loops)
REL_EPS = 1e-12


@dataclass
class Batch:
    """Mutable working state of B sub-problems (internal to the balanced mode).

    - ``w`` float64 [B, X]: load of each local expert.
    - ``cnt`` int64 [B, X]: replicas of each local expert (>= 1, rows sum to S).
    - ``slot`` int64 [B, S]: local expert held by each slot.
    - ``num_gpus`` P and ``slots_per_gpu`` k of one sub-problem.
    """

    w: np.ndarray
    cnt: np.ndarray
    slot: np.ndarray
    num_gpus: int
    slots_per_gpu: int

    @property
    def num_slots(self) -> int:
        """S, the slots of one sub-problem (``num_gpus * slots_per_gpu``)."""
        return int(self.slot.shape[1])

    @property
    def gpu_of_slot(self) -> np.ndarray:
        """int64 [S]: the GPU (0 .. P-1) of each slot of a sub-problem."""
        return np.arange(self.num_slots) // self.slots_per_gpu

    def slot_values(self, rows: np.ndarray) -> np.ndarray:
        """Per-slot load float64 [A, S] of the sub-problems ``rows``."""
        per_replica = self.w[rows] / self.cnt[rows]
        return np.take_along_axis(per_replica, self.slot[rows], axis=1)

    def loads(self, rows: np.ndarray) -> np.ndarray:
        """Per-GPU load float64 [A, P] of the sub-problems ``rows``."""
        values = self.slot_values(rows)
        return values.reshape(len(rows), self.num_gpus, self.slots_per_gpu).sum(axis=2)


def _prefer_clean(
    flat: np.ndarray,
    new_max: np.ndarray,
    top_load: np.ndarray,
    slot: np.ndarray,
    top_slots: np.ndarray,
    gpu_of: np.ndarray,
    num_gpus: int,
) -> np.ndarray:
    """Mask improving swaps that co-locate two replicas of one expert, where a clean improving swap exists.

    ``new_max`` [A, k, S] pair maxima of swapping top slot i with slot j; returns the candidate scores [A, k * S].
    """
    count, k, _ = new_max.shape
    top_experts = np.take_along_axis(slot, top_slots, axis=1)  # [A, k]
    same_top = top_experts[:, :, None] == slot[:, None, :]  # [A, k, S]
    onto_top = same_top.any(axis=1)  # j's expert already on the top GPU
    per_gpu = same_top.reshape(count, k, num_gpus, k).sum(axis=3)  # copies of i's expert per GPU
    creates = onto_top[:, None, :] | (per_gpu[:, :, gpu_of] > 0)
    clean = (new_max < top_load[:, None, None] * (1.0 - REL_EPS)) & ~creates
    has_clean = clean.reshape(count, -1).any(axis=1)
    masked = np.where(clean, new_max, np.inf).reshape(count, -1)
    result: np.ndarray = np.where(has_clean[:, None], masked, flat)
    return result


def swap_refine(batch: Batch, rows: np.ndarray, max_iter: int, avoid_duplicates: bool = False) -> None:
    """Pairwise swaps between the most loaded GPU and any other GPU, best swap first, until none helps.

    A swap of slot i (on the top GPU, load L1) with slot j (another GPU, load L2) is taken when both new loads
    stay strictly below L1; among those the one with the smallest new pair maximum wins (first in slot order on ties).
    Slot values and GPU loads are updated incrementally; sub-problems leave the active set once no swap helps.
    With ``avoid_duplicates``, an improving swap that puts no second replica of an expert on a GPU is preferred
    over a better one that does (slower: smaller steps and extra work per step).
    """
    k, num_gpus, num_slots = batch.slots_per_gpu, batch.num_gpus, batch.num_slots
    if num_gpus == 1:
        return
    gpu_of = batch.gpu_of_slot
    active = np.asarray(rows, dtype=np.int64)
    values = batch.slot_values(active)
    loads = values.reshape(active.size, num_gpus, k).sum(axis=2)
    slot = batch.slot[active]
    for _ in range(max_iter):
        count = active.size
        if count == 0:
            break
        idx = np.arange(count)
        top = loads.argmax(axis=1)
        top_load = loads[idx, top]
        top_slots = top[:, None] * k + np.arange(k)[None, :]
        top_values = np.take_along_axis(values, top_slots, axis=1)
        other_load = loads[:, gpu_of]  # [A, S]
        # pair maximum of swapping i (top) with j: (L1 + L2) / 2 + |v_i - v_j - (L1 - L2) / 2|, and it beats L1
        # exactly when that distance is below (L1 - L2) / 2 (which also rules out j on the top GPU)
        half_gap = (top_load[:, None] - other_load) / 2.0
        distance = np.abs(top_values[:, :, None] - (values + half_gap)[:, None, :])  # [A, k, S]
        valid = distance < (half_gap - REL_EPS * top_load[:, None])[:, None, :]
        new_max = np.where(valid, distance + ((top_load[:, None] + other_load) / 2.0)[:, None, :], np.inf)
        flat = new_max.reshape(count, -1)
        ok = valid.reshape(count, -1).any(axis=1)
        if avoid_duplicates:
            flat = _prefer_clean(flat, new_max, top_load, slot, top_slots, gpu_of, num_gpus)
        best = flat.argmin(axis=1)
        done = ~ok
        if done.any():
            batch.slot[active[done]] = slot[done]
            keep = ok
            active, values, loads, slot = active[keep], values[keep], loads[keep], slot[keep]
            best, top, top_slots = best[keep], top[keep], top_slots[keep]
            count = active.size
            if count == 0:
                return
            idx = np.arange(count)
        slot_i = top_slots[idx, best // num_slots]
        slot_j = best % num_slots
        value_i = values[idx, slot_i]
        value_j = values[idx, slot_j]
        delta = value_i - value_j
        loads[idx, top] -= delta
        loads[idx, gpu_of[slot_j]] += delta
        values[idx, slot_i] = value_j
        values[idx, slot_j] = value_i
        expert_i = slot[idx, slot_i]
        slot[idx, slot_i] = slot[idx, slot_j]
        slot[idx, slot_j] = expert_i
    batch.slot[active] = slot


def _top_two(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Largest value, its index and the second largest value per row of ``values`` [A, P]."""
    count = values.shape[0]
    first = values.argmax(axis=1)
    top = values[np.arange(count), first]
    if values.shape[1] == 1:
        return top, first, np.full(count, -np.inf)
    masked = values.copy()
    masked[np.arange(count), first] = -np.inf
    return top, first, masked.max(axis=1)


def recount_search(
    batch: Batch,
    rows: np.ndarray,
    rounds: int,
    refine_iter: int,
    num_donors: int = 3,
    max_amount: int = 3,
) -> None:
    """Re-choose replica counts with the packing in mind: move replicas from a donor to a hot expert.

    Each round proposes, per sub-problem in ``rows``, one move: a receiver b (an expert on the most loaded GPU or
    one of the k experts with the heaviest replicas anywhere; heaviest replica first) takes ``amount`` slots from a
    donor a (an expert with more than ``amount`` replicas; donors ranked by how far their grown replicas would push
    GPUs above the current largest load, then by id; the first ``num_donors``). Each donor replica given up is the
    one whose replacement by b yields the lowest largest GPU load. The packing is then swap-refined (at most
    ``refine_iter`` swaps); the move is kept if the largest GPU load dropped, else undone, and the next candidate
    is tried next round. A kept move restarts the candidate list. Amounts run 1 .. ``max_amount``: one replica can
    be a step uphill where two or three are a step down.
    """
    k, num_gpus = batch.slots_per_gpu, batch.num_gpus
    gpu_of = batch.gpu_of_slot
    rows = np.asarray(rows, dtype=np.int64)
    pointer = np.zeros(rows.size, dtype=np.int64)
    num_heavy = min(k, batch.w.shape[1])
    limit = (k + num_heavy) * num_donors * max_amount
    pool_size = k + num_heavy
    earlier = np.tril(np.ones((pool_size, pool_size), dtype=bool), -1)  # [j, i]: i before j
    interleave = np.argsort(np.concatenate([np.arange(k) * 2.0, np.arange(num_heavy) * 2.0 + 1.0]), kind="stable")
    for _ in range(rounds):
        live = pointer < limit
        if not live.any():
            return
        act = rows[live]
        count = act.size
        idx = np.arange(count)
        w = batch.w[act]
        cnt = batch.cnt[act]
        slot = batch.slot[act]
        per_replica = w / cnt
        values = np.take_along_axis(per_replica, slot, axis=1)
        loads = values.reshape(count, num_gpus, k).sum(axis=2)
        top = loads.argmax(axis=1)
        top_load = loads[idx, top]
        top_slots = top[:, None] * k + np.arange(k)[None, :]
        # receivers: experts on the top GPU and the heaviest replicas anywhere, each once, heaviest first
        # (alternating: top GPU's heaviest, heaviest anywhere, top GPU's second, ...)
        heaviest = np.argsort(-per_replica, axis=1, kind="stable")[:, :num_heavy]  # [A, m]
        on_top = np.take_along_axis(slot, top_slots, axis=1)
        on_top = np.take_along_axis(on_top, np.argsort(-per_replica[idx[:, None], on_top], axis=1, kind="stable"), 1)
        pool = np.concatenate([on_top, heaviest], axis=1)[:, interleave]
        pool_value = np.take_along_axis(per_replica, pool, axis=1)
        repeated = ((pool[:, :, None] == pool[:, None, :]) & earlier).any(axis=2)
        pool_value[repeated] = -np.inf
        order = np.argsort(np.isinf(pool_value), axis=1, kind="stable")  # repeats last, order kept
        receivers = np.take_along_axis(pool, order, axis=1)
        ptr = pointer[live]
        choice = ptr // (num_donors * max_amount)
        amount = ptr % max_amount + 1
        usable = np.isfinite(np.take_along_axis(pool_value, order, axis=1)[idx, choice])
        receiver = receivers[idx, choice]
        w_r = w[idx, receiver]
        cnt_r = cnt[idx, receiver]
        new_r = w_r / (cnt_r + 1)
        holds_r = slot == receiver[:, None]
        n_r = holds_r.reshape(count, num_gpus, k).sum(axis=2)
        after_r = loads + n_r * (new_r - w_r / cnt_r)[:, None]  # [A, P]
        # rank every donor by how far its grown replicas push GPUs above the current top load
        can_give = (cnt >= 2) & (np.arange(cnt.shape[1])[None, :] != receiver[:, None])
        grow = np.where(can_give, w / np.maximum(cnt - 1, 1) - per_replica, 0.0)  # [A, X]
        num_experts = cnt.shape[1]
        cell = ((idx[:, None] * num_gpus + gpu_of[None, :]) * num_experts + slot).ravel()
        holds = np.bincount(cell, minlength=count * num_gpus * num_experts).reshape(count, num_gpus, num_experts)
        pushed = after_r[:, :, None] + holds * grow[:, None, :]  # [A, P, X]
        excess = np.maximum(pushed - top_load[:, None, None] * (1.0 - REL_EPS), 0.0).sum(axis=1)
        excess[~can_give] = np.inf
        donor_order = np.argsort(excess, axis=1, kind="stable")
        donor_order = donor_order[:, :num_donors]
        donor_pos = (ptr // max_amount) % num_donors
        in_range = donor_pos < donor_order.shape[1]
        donor = donor_order[idx, np.minimum(donor_pos, donor_order.shape[1] - 1)]
        valid = usable & in_range & np.isfinite(excess[idx, donor])
        valid &= cnt[idx, donor] > amount
        # advanced now (a row whose receivers are used up is done); reset below where the move is kept
        pointer[live] = np.where(usable, ptr + 1, limit)
        if not valid.any():
            continue
        sel = np.flatnonzero(valid)
        tgt = act[sel]
        saved_slot = batch.slot[tgt].copy()
        saved_cnt = batch.cnt[tgt].copy()
        for step in range(max_amount):
            part = amount[sel] > step
            _transfer(batch, tgt[part], receiver[sel][part], donor[sel][part])
        swap_refine(batch, tgt, refine_iter)
        after = batch.loads(tgt).max(axis=1)
        keep = after < top_load[sel] * (1.0 - REL_EPS)
        lose = ~keep
        batch.slot[tgt[lose]] = saved_slot[lose]
        batch.cnt[tgt[lose]] = saved_cnt[lose]
        live_idx = np.flatnonzero(live)
        pointer[live_idx[sel[keep]]] = 0


def _transfer(batch: Batch, rows: np.ndarray, receiver: np.ndarray, donor: np.ndarray) -> None:
    """Turn one donor replica into a receiver replica in each sub-problem of ``rows`` (donor count must be >= 2).

    The donor replica chosen is the one whose replacement gives the lowest largest GPU load (first on ties).
    """
    if rows.size == 0:
        return
    k = batch.slots_per_gpu
    num_gpus = batch.num_gpus
    gpu_of = np.arange(batch.slot.shape[1]) // k
    count = rows.size
    idx = np.arange(count)
    w = batch.w[rows]
    cnt = batch.cnt[rows]
    slot = batch.slot[rows]
    loads = batch.loads(rows)
    w_r, cnt_r = w[idx, receiver], cnt[idx, receiver]
    w_d, cnt_d = w[idx, donor], cnt[idx, donor]
    new_r = w_r / (cnt_r + 1)
    new_d = w_d / np.maximum(cnt_d - 1, 1)
    holds_d = slot == donor[:, None]
    n_r = (slot == receiver[:, None]).reshape(count, num_gpus, k).sum(axis=2)
    n_d = holds_d.reshape(count, num_gpus, k).sum(axis=2)
    base = loads + n_r * (new_r - w_r / cnt_r)[:, None] + n_d * (new_d - w_d / cnt_d)[:, None]
    best_top, best_gpu, second = _top_two(base)
    # slot s (holding the donor) turns into the receiver: its GPU changes by new_r - new_d
    bump = base[:, gpu_of] + (new_r - new_d)[:, None]  # [A, S]
    other = np.where(gpu_of[None, :] == best_gpu[:, None], second[:, None], best_top[:, None])
    give = np.where(holds_d, np.maximum(bump, other), np.inf).argmin(axis=1)
    batch.slot[rows, give] = receiver
    batch.cnt[rows, donor] -= 1
    batch.cnt[rows, receiver] += 1


def _duplicate_mask(slot: np.ndarray, k: int) -> np.ndarray:
    """bool [A, S]: slot holds an expert that an earlier slot of the same GPU also holds."""
    count, num_slots = slot.shape
    per_gpu = slot.reshape(count, num_slots // k, k)
    same = per_gpu[:, :, :, None] == per_gpu[:, :, None, :]  # [A, P, k, k]
    earlier = np.tril(np.ones((k, k), dtype=bool), -1)  # [i, j]: j < i
    return (same & earlier).any(axis=3).reshape(count, num_slots)


def spread_duplicates(batch: Batch, rows: np.ndarray, limit: np.ndarray, max_iter: int) -> None:
    """Swap away co-located replicas (two replicas of one expert on one GPU) without raising the largest load.

    For the first unresolved duplicate slot i (expert e on GPU g1) of each sub-problem, take the swap partner j on
    another GPU g2 such that g2 does not hold e, g1 does not hold j's expert, and both new GPU loads stay at or below
    ``limit[b]`` (float64 [B], e.g. the layer's largest GPU load, which only the bottleneck node reaches); the
    partner with the closest per-replica load wins. Duplicates without such a partner are left (e.g. an expert with
    more replicas than GPUs).
    """
    k, num_gpus, num_slots = batch.slots_per_gpu, batch.num_gpus, batch.num_slots
    if k == 1 or num_gpus == 1:
        return
    num_experts = batch.w.shape[1]
    gpu_of = batch.gpu_of_slot
    rows = np.asarray(rows, dtype=np.int64)
    skipped = np.zeros((rows.size, num_slots), dtype=bool)
    limit = np.asarray(limit, dtype=np.float64)[rows]
    for _ in range(max_iter):
        slot_all = batch.slot[rows]
        todo = _duplicate_mask(slot_all, k) & ~skipped
        live = np.flatnonzero(todo.any(axis=1))
        if live.size == 0:
            return
        act = rows[live]
        count = act.size
        idx = np.arange(count)
        slot = slot_all[live]
        values = batch.slot_values(act)
        loads = values.reshape(count, num_gpus, k).sum(axis=2)
        first = todo[live].argmax(axis=1)
        expert = slot[idx, first]
        g1 = gpu_of[first]
        present = np.zeros((count, num_gpus, num_experts), dtype=bool)
        present[np.repeat(idx, num_slots), np.tile(gpu_of, count), slot.ravel()] = True
        diff = values[idx, first][:, None] - values  # [A, S]: load leaving g1
        new_g1 = loads[idx, g1][:, None] - diff
        new_g2 = loads[:, gpu_of] + diff
        ok = (
            (gpu_of[None, :] != g1[:, None])
            & ~present[idx, :, expert][:, gpu_of]
            & ~present[idx[:, None], g1[:, None], slot]
            & (np.maximum(new_g1, new_g2) <= limit[live][:, None])
        )
        score = np.where(ok, np.abs(diff), np.inf)
        best = score.argmin(axis=1)
        found = np.isfinite(score[idx, best])
        skipped[live[~found], first[~found]] = True
        if found.any():
            sel = np.flatnonzero(found)
            tgt = act[sel]
            i_slot, j_slot = first[sel], best[sel]
            held = batch.slot[tgt, i_slot]
            batch.slot[tgt, i_slot] = batch.slot[tgt, j_slot]
            batch.slot[tgt, j_slot] = held


def repair_duplicates(
    batch: Batch, rows: np.ndarray, limit: np.ndarray, rounds: int, refine_iter: int, partners: int = 3
) -> None:
    """Resolve co-located replicas that ``spread_duplicates`` could not: swap, re-balance, keep if no worse.

    Per round and sub-problem: the first unresolved duplicate slot is swapped with the clean partner (no new
    co-location) giving the lowest pair maximum, even above ``limit``; duplicate-avoiding swap refinement follows.
    The result is kept if the largest GPU load stays at or below ``limit[b]`` and the number of co-located replicas
    dropped; otherwise it is undone and the next partner (by pair maximum) is tried in a later round, up to
    ``partners`` partners per duplicate slot.
    """
    k, num_gpus, num_slots = batch.slots_per_gpu, batch.num_gpus, batch.num_slots
    if k == 1 or num_gpus == 1:
        return
    num_experts = batch.w.shape[1]
    gpu_of = batch.gpu_of_slot
    rows = np.asarray(rows, dtype=np.int64)
    limit = np.asarray(limit, dtype=np.float64)[rows]
    skipped = np.zeros((rows.size, num_slots), dtype=bool)
    tries = np.zeros((rows.size, num_slots), dtype=np.int64)
    for _ in range(rounds):
        dup_all = _duplicate_mask(batch.slot[rows], k)
        todo = dup_all & ~skipped
        live = np.flatnonzero(todo.any(axis=1))
        if live.size == 0:
            return
        act = rows[live]
        count = act.size
        idx = np.arange(count)
        slot = batch.slot[act]
        values = batch.slot_values(act)
        loads = values.reshape(count, num_gpus, k).sum(axis=2)
        first = todo[live].argmax(axis=1)
        expert = slot[idx, first]
        g1 = gpu_of[first]
        cell = ((idx[:, None] * num_gpus + gpu_of[None, :]) * num_experts + slot).ravel()
        present = np.bincount(cell, minlength=count * num_gpus * num_experts).reshape(count, num_gpus, num_experts) > 0
        diff = values[idx, first][:, None] - values
        pair = np.maximum(loads[idx, g1][:, None] - diff, loads[:, gpu_of] + diff)
        ok = (
            (gpu_of[None, :] != g1[:, None])
            & ~present[idx, :, expert][:, gpu_of]
            & ~present[idx[:, None], g1[:, None], slot]
        )
        score = np.where(ok, pair, np.inf)
        attempt = tries[live, first]
        ranked = np.argsort(score, axis=1, kind="stable")
        best = ranked[idx, np.minimum(attempt, num_slots - 1)]
        found = np.isfinite(score[idx, best])
        tries[live, first] += 1
        skipped[live, first] = (tries[live, first] >= partners) | ~found
        if not found.any():
            continue
        sel = np.flatnonzero(found)
        tgt = act[sel]
        before = dup_all[live[sel]].sum(axis=1)
        saved = batch.slot[tgt].copy()
        i_slot, j_slot = first[sel], best[sel]
        held = batch.slot[tgt, i_slot]
        batch.slot[tgt, i_slot] = batch.slot[tgt, j_slot]
        batch.slot[tgt, j_slot] = held
        swap_refine(batch, tgt, refine_iter, avoid_duplicates=True)
        after_max = batch.loads(tgt).max(axis=1)
        after_dup = _duplicate_mask(batch.slot[tgt], k).sum(axis=1)
        keep = (after_max <= limit[live[sel]]) & (after_dup < before)
        batch.slot[tgt[~keep]] = saved[~keep]
