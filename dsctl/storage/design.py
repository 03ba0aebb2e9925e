"""Chain placement as a (near-)balanced incomplete block design.

Vocabulary (3FS data-placement model, reference sheet section 2):

- ``v`` storage nodes (services), ``k`` replication factor (chain length), ``r`` targets per SSD
  (chains each node joins on one disk index), ``b = v*r // k`` chains per disk index.
- A design is an int array ``blocks`` of shape ``(b, k)``: row = one chain, values = 0-based node indexes.
- The pair-share of nodes ``(x, y)`` is the number of chains holding both; a perfect design has
  every pair at ``lambda = r*(k-1)/(v-1)``. We minimise the sum of squared pair-shares, which for a fixed
  total is smallest exactly when every pair sits at ``floor(lambda)`` or ``ceil(lambda)``.

Construction, fastest first:

1. **Cyclic** part: ``r // k`` base blocks ``{0, a1, .., a_{k-1}}`` developed mod ``v`` (each full orbit puts
   every node in ``k`` chains). A local search over the base blocks evens out the coverage of the
   differences ``1..v//2``; when every difference is covered equally this is an exact cyclic design
   (Fano plane, cyclic Steiner triple systems, ...). When ``k`` divides ``v`` one short orbit
   ``{0, v/k, 2v/k, ..}`` (every node once) may be added, as in cyclic STS(15).
2. The **remainder** (``r mod k`` more chains per node) starts as consecutive runs of the node list.
3. A **local search** swaps nodes between two chains (keeps every node's chain count) and accepts moves
   that do not raise the sum of squares, with occasional uphill moves; it stops at the lower bound.
   Its move budget is bounded, so large designs rely on step 1 being (near-)exact.

Every disk index gets the same design under a different node relabelling (chosen to even out the
pair totals summed over disks), so a pair that shares one chain more than ideal on one disk shares one
less elsewhere. When one disk index cannot give every pair a chain (``r(k-1) < v-1``) and ``k`` divides
``r``, the cyclic search instead picks separate orbits for every disk, evening the coverage per disk and
over all disks (``build_disk_designs``).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np

from dsctl.progress_count import Report, Stages

# Local-search budgets (proposals). Pure Python; ~1 us per proposal.
CYCLIC_SEARCH_STEPS = 20_000
CYCLIC_SEARCH_MAX_STEPS = 150_000  # keep going past the budget while the cost still falls
CYCLIC_PATIENCE = 10_000
CYCLIC_RESTARTS = 4  # attempts for odd v (see build_design)
CYCLIC_RESTART_MIN_NODES = 25  # smaller designs are left to the swap search
SWAP_SEARCH_STEPS = 60_000
SWAP_PATIENCE = 15_000  # stop after this many proposals without a new best
SWAP_SEARCH_MAX_CYCLIC_BLOCKS = 3_000  # a large all-cyclic design is left as the cyclic search made it
PERMUTATION_TRIES = 4
RELABEL_SWEEPS = 2
RELABEL_MAX_NODES = 300  # label-swap search costs O(v^3) per sweep
RELABEL_ONE_SWEEP_NODES = 120
# Estimated cost (microseconds on the reference laptop) of the counted steps; they only weigh the stages of the
# progress count against each other (bar and ETA), never change a result.
SEARCH_STEP_COST_US = 80
RELABEL_COST_US_PER_NODE_SQUARED = 3
FEW_DISKS = 8  # with this many disk indexes or fewer ...
FEW_DISKS_MIN_NODES = 60  # ... and more nodes, relabelling one design leaves totals uneven: use all-disk orbits


@dataclass(frozen=True)
class ChainDesign:
    """One disk index's chains: ``blocks[c]`` = the ``k`` node indexes of chain ``c`` (unordered)."""

    num_nodes: int
    blocks: np.ndarray  # (b, k) int64
    method: str  # "cyclic", "cyclic+search" or "search"


def pair_share_matrix(blocks: np.ndarray, num_nodes: int) -> np.ndarray:
    """Symmetric (v, v) int64 matrix: chains shared by each node pair (diagonal 0)."""
    share = np.zeros((num_nodes, num_nodes), dtype=np.int64)
    k = blocks.shape[1] if blocks.ndim == 2 else 0
    for p in range(k):
        for q in range(p + 1, k):
            np.add.at(share, (blocks[:, p], blocks[:, q]), 1)
    return share + share.T


def sum_squares_lower_bound(num_nodes: int, num_blocks: int, k: int) -> int:
    """Smallest possible sum over node pairs of pair-share squared (all shares at floor/ceil of lambda)."""
    pairs = num_nodes * (num_nodes - 1) // 2
    total = num_blocks * k * (k - 1) // 2
    if pairs == 0:
        return 0
    f, extra = divmod(total, pairs)
    return pairs * f * f + extra * (2 * f + 1)


def _class_of(d: int, v: int) -> int:
    d %= v
    return min(d, v - d)


def _cyclic_base_blocks(v: int, k: int, count: int, short_classes: list[int], rng: random.Random,
                        groups: int = 1, report: Report | None = None) -> tuple[list[list[int]], int, int]:
    """``groups * count`` base blocks (each containing 0) whose developed orbits cover the difference
    classes evenly, both within each group of ``count`` blocks (one disk index) and over all groups.

    The cost is the pair-level sum of squares: class ``c`` holds ``v`` pairs (``v/2`` for ``c = v/2``), each
    sharing ``cover[c]`` chains (``2*cover[c]`` for ``c = v/2``, whose pairs appear twice in one orbit),
    summed for the totals and for every group. ``short_classes`` are covered once per group by a short
    orbit that is already chosen. Returns (blocks, their cost, the cost lower bound). ``report(step,
    expected_steps)`` every 1,000 steps: the search stops at its budget or ``CYCLIC_PATIENCE`` steps after its last
    gain, so the expected count grows while it still improves.
    """
    half = v // 2
    total_blocks = count * groups
    cover = [0] * (half + 1)
    group_cover = [[0] * (half + 1) for _ in range(groups)]
    short = [0] * (half + 1)
    for c in short_classes:
        short[c] = 1
    even = v % 2 == 0

    def class_cost(c: int, n: int, times: int) -> int:
        if even and c == half:
            return half * (2 * n + times * short[c]) ** 2
        return v * (n + times * short[c]) ** 2

    def block_classes(block: list[int]) -> list[int]:
        return [_class_of(block[j] - block[i], v) for i in range(k) for j in range(i + 1, k)]

    def cost_of(classes: set[int], group_counts: list[int]) -> int:
        """Cost of these difference classes over all groups, plus within this block's group when there are several."""
        cost = sum(class_cost(c, cover[c], groups) for c in classes)
        return cost + sum(class_cost(c, group_counts[c], 1) for c in classes) if groups > 1 else cost

    def move(remove: list[int], add: list[int], group_counts: list[int]) -> None:
        """Take ``remove``'s classes out of the covers and put ``add``'s in (total and this group's)."""
        for c in remove:
            cover[c] -= 1
            group_counts[c] -= 1
        for c in add:
            cover[c] += 1
            group_counts[c] += 1

    blocks: list[list[int]] = []
    for j in range(total_blocks):
        block = [0, *rng.sample(range(1, v), k - 1)]
        blocks.append(block)
        for c in block_classes(block):
            cover[c] += 1
            group_cover[j // count][c] += 1
    total_cost = sum(class_cost(c, cover[c], groups) for c in range(1, half + 1))
    if groups > 1:
        total_cost += sum(class_cost(c, g[c], 1) for g in group_cover for c in range(1, half + 1))
    short_blocks = v // k if short_classes else 0
    target = sum_squares_lower_bound(v, groups * (v * count + short_blocks), k)
    if groups > 1:
        target += groups * sum_squares_lower_bound(v, v * count + short_blocks, k)
    best_cost, best = total_cost, [b[:] for b in blocks]
    temperature = 2.0 * v
    steps = max(CYCLIC_SEARCH_STEPS, 40 * total_blocks)
    last_gain = 0
    for step in range(max(steps, CYCLIC_SEARCH_MAX_STEPS)):
        if best_cost <= target or (step >= steps and step - last_gain > CYCLIC_PATIENCE):
            break
        if report is not None and step % 1000 == 0:
            report(step, max(steps, last_gain + CYCLIC_PATIENCE))
        j = rng.randrange(total_blocks)
        gc = group_cover[j // count]
        pos = rng.randrange(1, k)
        block = blocks[j]
        if step % 2:
            new = rng.randrange(1, v)
        else:
            # Targeted move: cover a class this block's group covers least (fewest in total among those).
            low = min(gc[1:])
            candidates = [c for c in range(1, half + 1) if gc[c] == low]
            lowest = min(cover[c] for c in candidates)
            c = rng.choice([c for c in candidates if cover[c] == lowest])
            anchor = block[rng.choice([i for i in range(k) if i != pos])]
            new = (anchor + (c if rng.random() < 0.5 else -c)) % v
            if new == 0:
                continue
        if new in block:
            continue
        old_classes = block_classes(block)
        trial = block[:]
        trial[pos] = new
        new_classes = block_classes(trial)
        touched = set(old_classes) | set(new_classes)
        before = cost_of(touched, gc)
        move(old_classes, new_classes, gc)
        delta = cost_of(touched, gc) - before
        if delta <= 0 or rng.random() < math.exp(-delta / temperature):
            blocks[j] = trial
            total_cost += delta
            if total_cost < best_cost:
                best_cost, best, last_gain = total_cost, [b[:] for b in blocks], step
        else:
            move(new_classes, old_classes, gc)
        if step % 1000 == 999:
            temperature *= 0.7
    return best, best_cost, target


def _develop(base: list[int], v: int, orbit: int) -> np.ndarray:
    """Blocks ``base + i (mod v)`` for ``i = 0..orbit-1``: shape (orbit, k)."""
    return (np.asarray(base, dtype=np.int64)[None, :] + np.arange(orbit, dtype=np.int64)[:, None]) % v


def _remainder_blocks(v: int, k: int, per_node: int) -> np.ndarray:
    """Chains giving every node ``per_node`` more appearances: consecutive runs of ``0..v-1`` repeated.

    Runs of length ``k <= v`` never repeat a node. A trailing run shorter than ``k`` is dropped (those
    targets stay unused, as when ``v*r`` is not a multiple of ``k``).
    """
    seq = np.tile(np.arange(v, dtype=np.int64), per_node)
    usable = (len(seq) // k) * k
    return seq[:usable].reshape(-1, k)


def swap_members(share: list[list[int]], ra: list[int], rc: list[int], i: int, j: int) -> None:
    """Exchange member ``ra[i]`` (x) of one chain with member ``rc[j]`` (y) of another, in place, and update the
    pair-share matrix ``share`` (v x v, chains shared per node pair): x leaves ra's nodes and joins rc's; y the
    reverse."""
    x, y = ra[i], rc[j]
    for z in ra:
        if z != x:
            share[x][z] -= 1
            share[z][x] -= 1
            share[y][z] += 1
            share[z][y] += 1
    for z in rc:
        if z != y:
            share[y][z] -= 1
            share[z][y] -= 1
            share[x][z] += 1
            share[z][x] += 1
    ra[i], rc[j] = y, x


def _swap_search(blocks: np.ndarray, v: int, fixed: int, rng: random.Random, steps: int) -> np.ndarray:
    """Swap nodes between chains ``fixed..b-1`` (and, if few, all chains) to lower the pair sum of squares."""
    b, k = blocks.shape
    if b < 2 or k < 2:
        return blocks
    share = pair_share_matrix(blocks, v).tolist()
    rows = blocks.tolist()
    bound = sum_squares_lower_bound(v, b, k)
    cost = sum(share[x][y] ** 2 for x in range(v) for y in range(x + 1, v))
    lo = fixed if b - fixed >= 2 else 0
    temperature = 1.0
    best_cost, last_gain = cost, 0
    for step in range(steps):
        if cost <= bound or step - last_gain > SWAP_PATIENCE:
            break
        if cost < best_cost:
            best_cost, last_gain = cost, step
        a = rng.randrange(lo, b)
        c = rng.randrange(lo, b)
        if a == c:
            continue
        ra, rc = rows[a], rows[c]
        i = rng.randrange(k)
        j = rng.randrange(k)
        x, y = ra[i], rc[j]
        if x == y or x in rc or y in ra:
            continue
        delta = 0
        # x leaves a and joins c; y leaves c and joins a.
        for z in ra:
            if z != x:
                delta += (share[x][z] - 1) ** 2 - share[x][z] ** 2
                delta += (share[y][z] + 1) ** 2 - share[y][z] ** 2
        for z in rc:
            if z != y:
                delta += (share[y][z] - 1) ** 2 - share[y][z] ** 2
                delta += (share[x][z] + 1) ** 2 - share[x][z] ** 2
        if delta <= 0 or rng.random() < math.exp(-delta / temperature):
            swap_members(share, ra, rc, i, j)
            cost += delta
        if step % 2000 == 1999:
            temperature *= 0.8
    return np.asarray(rows, dtype=np.int64).reshape(b, k)


def build_design(v: int, k: int, r: int, seed: int = 0, report: Report | None = None) -> ChainDesign:
    """A (near-)balanced design of ``v`` nodes, chains of ``k``, every node in ``r`` chains (fewer if
    ``v*r`` is not a multiple of ``k``: ``(v*r) % k`` target slots stay unused).

    Deterministic for a given ``seed``. Requires ``2 <= k <= v`` and ``r >= 1`` (validated by the caller).
    ``report`` follows the first cyclic search's steps (``_cyclic_base_blocks``).
    """
    rng = random.Random(seed)
    parts: list[np.ndarray] = []
    method = "search"
    full_orbits = r // k
    rem = r % k
    short_classes: list[int] = []
    use_short = rem >= 1 and v % k == 0 and k > 1
    if use_short:
        step = v // k
        short_classes = sorted({_class_of(step * (j - i), v) for i in range(k) for j in range(i + 1, k)})
    if full_orbits:
        # Odd v > 25: exact cyclic designs (e.g. STS(v), v = 1 mod 6) exist but a search may stall one class
        # short; a few restarts usually find them. Even v with k = 3 cannot be exact (parity), so no restarts.
        bases, cost, target = _cyclic_base_blocks(v, k, full_orbits, short_classes, rng, report=report)
        for attempt in range(1, CYCLIC_RESTARTS if v % 2 and v > CYCLIC_RESTART_MIN_NODES else 1):
            if cost <= target:
                break
            again, again_cost, _ = _cyclic_base_blocks(v, k, full_orbits, short_classes,
                                                       random.Random(seed * 1_000 + attempt))
            if again_cost < cost:
                bases, cost = again, again_cost
        parts.extend(_develop(base, v, v) for base in bases)
        method = "cyclic"
    if use_short:
        parts.append(_develop([j * (v // k) for j in range(k)], v, v // k))
        rem -= 1
        method = "cyclic"
    fixed = sum(len(p) for p in parts)
    if rem:
        parts.append(_remainder_blocks(v, k, rem))
    blocks = np.concatenate(parts, axis=0) if parts else np.zeros((0, k), dtype=np.int64)
    bound = sum_squares_lower_bound(v, len(blocks), k)
    share = pair_share_matrix(blocks, v)
    pure_cyclic_and_large = fixed == len(blocks) and len(blocks) > SWAP_SEARCH_MAX_CYCLIC_BLOCKS
    if int((np.triu(share, 1) ** 2).sum()) > bound and not pure_cyclic_and_large:
        steps = SWAP_SEARCH_STEPS
        blocks = _swap_search(blocks, v, fixed if fixed < len(blocks) else 0, rng, steps)
        method = "cyclic+search" if method == "cyclic" else "search"
    return ChainDesign(v, np.sort(blocks, axis=1), method)


def use_all_disk_orbits(v: int, k: int, r: int, num_disks: int) -> bool:
    """Whether several disk indexes are balanced together by cyclic orbits (needs ``k | r``) rather than by
    relabelling one design: when one disk cannot give every pair a chain, when the relabelling search is too
    slow (many nodes), and when few disks leave the relabelling too little room to even the totals."""
    few_disks = num_disks <= FEW_DISKS and v > FEW_DISKS_MIN_NODES
    return num_disks > 1 and (r * (k - 1) < v - 1 or v > RELABEL_MAX_NODES or few_disks)


def search_cost_us(v: int, k: int, r: int, num_disks: int) -> float:
    """Estimated cost of ``build_disk_designs`` in microseconds (weighs it against other stages of a progress count)."""
    groups = num_disks if r % k == 0 and use_all_disk_orbits(v, k, r, num_disks) else 1
    blocks = groups * max(1, r // k)
    steps = max(CYCLIC_SEARCH_STEPS, 40 * blocks) + CYCLIC_PATIENCE
    relabel = 0 if groups > 1 else (num_disks - 1) * RELABEL_COST_US_PER_NODE_SQUARED * v * v
    return steps * SEARCH_STEP_COST_US + relabel


def build_disk_designs(v: int, k: int, r: int, num_disks: int, seed: int = 0,
                       report: Report | None = None) -> tuple[list[np.ndarray], str]:
    """Chains of every disk index: a list of ``num_disks`` arrays of shape ``(v*r // k, k)`` and the method.

    Usually one design (``build_design``) relabelled per disk index (``disk_relabellings``). When a disk
    index alone cannot give every pair a chain (``r(k-1) < v-1``, pair-shares 0 or 1) and ``k`` divides
    ``r``, every disk instead gets its own ``r/k`` cyclic orbits, chosen together so that the difference
    classes are covered evenly on each disk *and* over all disks (a cyclic design of the whole table).
    ``report(done, total)`` counts search steps, then (one design) the disks relabelled.
    """
    if r % k == 0 and use_all_disk_orbits(v, k, r, num_disks):
        rng = random.Random(seed)
        q = r // k
        bases, _, _ = _cyclic_base_blocks(v, k, q, [], rng, groups=num_disks, report=report)
        per_disk = [np.concatenate([_develop(b, v, v) for b in bases[d * q:(d + 1) * q]], axis=0)
                    for d in range(num_disks)]
        return [np.sort(b, axis=1) for b in per_disk], "cyclic (all disks)"
    one_design_us = search_cost_us(v, k, r, 1)
    stages = Stages(report, [one_design_us, search_cost_us(v, k, r, num_disks) - one_design_us])
    design = build_design(v, k, r, seed=seed, report=stages.part(0))
    perms = disk_relabellings(design, num_disks, seed=seed, report=stages.part(1))
    stages.finish()
    return [perms[d][design.blocks] for d in range(num_disks)], design.method


def _improve_relabelling(moved: np.ndarray, deg: np.ndarray, total: np.ndarray, total_deg: np.ndarray,
                         perm: np.ndarray, sweeps: int) -> None:
    """Swap node labels of one disk (in place: ``moved``, ``deg``, ``perm``) while that lowers
    ``sum((total + moved)**2) + v * sum((total_deg + deg)**2)``.

    For labels ``a, b`` the change is ``4 * sum_y (M[b,y] - M[a,y]) (T[a,y] - T[b,y])`` over ``y`` not in
    ``{a, b}`` (plus the degree term), evaluated for every ``b`` at once.
    """
    v = moved.shape[0]
    labels = np.arange(v)
    m = moved.astype(np.float64)  # float for BLAS mat-vec products; values are small exact integers
    t = total.astype(np.float64)
    row_dot = (m * t).sum(axis=1)
    for _ in range(sweeps):
        improved = False
        for a in range(v):
            # sum_y (M[b,y] - M[a,y]) (T[a,y] - T[b,y]) = (M T[a])_b - rd_b - rd_a + (T M[a])_b
            delta = m @ t[a] - row_dot - row_dot[a] + t @ m[a]
            delta += m[:, a] * t[:, a]  # drop the y = a term: (M[b,a] - 0) * (0 - T[b,a])
            delta += m[a, :] * t[a, :]  # drop the y = b term: (0 - M[a,b]) * (T[a,b] - 0)
            delta = 4 * delta + 2 * v * (deg - deg[a]) * (total_deg[a] - total_deg)
            delta[a] = 0
            b = int(np.argmin(delta))
            if delta[b] >= -0.5:
                continue
            swap = labels.copy()
            swap[a], swap[b] = b, a
            m = m[np.ix_(swap, swap)]
            row_dot = (m * t).sum(axis=1)
            moved[:] = moved[np.ix_(swap, swap)]
            deg[:] = deg[swap]
            x, y = np.flatnonzero(perm == a)[0], np.flatnonzero(perm == b)[0]
            perm[x], perm[y] = b, a
            improved = True
        if not improved:
            break


def disk_relabellings(design: ChainDesign, num_disks: int, seed: int = 0,
                      report: Report | None = None) -> np.ndarray:
    """Node relabelling per disk index, shape ``(num_disks, v)``: disk ``d`` uses ``perm[d][node]``.

    Disk 0 keeps the identity. Each later disk takes, of ``PERMUTATION_TRIES`` random relabellings,
    the one that keeps the pair-share totals and per-node target totals summed over disks most even,
    then improves it by label swaps. An exact design (all pair-shares equal, all nodes equally loaded)
    keeps the identity everywhere. ``report(disks_done, num_disks - 1)`` after each relabelled disk.
    """
    v = design.num_nodes
    perms = np.tile(np.arange(v, dtype=np.int64), (num_disks, 1))
    base = pair_share_matrix(design.blocks, v)
    degree = np.bincount(design.blocks.ravel(), minlength=v).astype(np.int64)
    off = ~np.eye(v, dtype=bool)
    if v < 3 or (np.ptp(base[off]) == 0 and np.ptp(degree) == 0):
        return perms
    gen = np.random.default_rng(seed)
    total = base.copy()
    total_deg = degree.copy()
    for d in range(1, num_disks):
        best_cost, best_perm = None, perms[d]
        for _ in range(PERMUTATION_TRIES):
            perm = gen.permutation(v)
            inv = np.empty_like(perm)
            inv[perm] = np.arange(v)
            moved = base[np.ix_(inv, inv)]
            cost = int(((total + moved) ** 2).sum()) + v * int(((total_deg + degree[inv]) ** 2).sum())
            if best_cost is None or cost < best_cost:
                best_cost, best_perm = cost, perm
        perm = best_perm.copy()
        inv = np.empty_like(perm)
        inv[perm] = np.arange(v)
        moved = base[np.ix_(inv, inv)].copy()
        deg = degree[inv].copy()
        sweeps = 0 if v > RELABEL_MAX_NODES else 1 if v > RELABEL_ONE_SWEEP_NODES else RELABEL_SWEEPS
        _improve_relabelling(moved, deg, total, total_deg, perm, sweeps)
        perms[d] = perm
        total += moved
        total_deg += deg
        if report is not None:
            report(d, num_disks - 1)
    return perms
