"""``storage expand``: grow a chain table by ``N`` nodes without a full reshuffle (issue 14, item 3).

3FS grows the way DeepSeek describes in upstream issue #137: a new chain-table version over the larger
node set, plus target replacements inside existing chains (``update-chain -m add`` a target on a new node,
let it sync, then offline and ``update-chain -m remove`` an old one). New files use the new version.

Plan, per disk index ``d`` (``b`` old chains of ``k`` members, ``v`` old and ``v' = v + N`` nodes):

1. **Even data.** The old chains' ``b*k`` members are spread evenly over ``v'`` nodes: every new node gets
   ``q = floor(b*k / v')`` of them, old nodes keep ``q`` or ``q+1`` (the remainder stays on old nodes, where
   it costs no copy). A replacement copies one full replica, so this is the fewest copies any plan can make
   in which every node holds its even share of the existing data (within one target):
   **lower bound = N * sum_d q_d targets**, times the bytes per target.
2. **Which member.** Each replacement puts a new node ``x`` (round robin) into the chain and member slot
   that adds least to the sum of squared pair-shares over all disks (greedy, vectorised over the chains),
   taking a slot only from an old node above its even share, and preferring chains not yet touched.
3. **New chains.** Targets per SSD ``r'`` for ``v'`` nodes (as ``storage chains`` picks it, within what
   the target-id digits allow); the ``b' - b`` new chains per disk fill each node up to ``r'`` targets,
   members picked greedily by pair-share. They start empty, so they move no data.

The migration is an ordered list of replacements. Wave ``w`` holds the ``w``-th replacement of each chain,
so a chain never has two members in flight: it keeps its ``k`` members while the new one syncs (add, wait
for SERVING, then offline/remove the old one), and at worst ``k-1`` serving if the old member is taken
offline first.

Cost (issue 32): the files are read whole (``expand_read``); each new node's replacement scores are kept whole
(``expand_replace``: one argmin over the disk's ``b*k`` slots per replacement, the remaining ``O(steps * b*k)``
term, ~1 ns a slot, plus O(r) Python per replacement); the polish judges its draws in batches and
re-judges after a swap only the draws it touched (``expand_polish``); the steps and new targets are numbered
with arrays and the grown table and runbook are written from them by numpy (``expand_files``, ``rows_text``).
``report(done, total)`` counts the replacements and new chains. The choices are issue 14's, byte for byte.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from dsctl.errors import InputError
from dsctl.storage.balance import Balance, measure
from dsctl.storage.chaintable import (
    MAX_CHAINS_PER_DISK,
    MAX_NODE_ID,
    MAX_TARGETS_PER_DISK,
    MIN_UPSTREAM_CHAIN_ID,
    UINT32_MAX,
    chain_index,
    target_id,
    target_prefix,
)
from dsctl.storage.choice import CHOICE_MARGIN, REDIRECT_LIMIT, bound_ratio, choose_targets_per_ssd, pair_share_ideal
from dsctl.storage.crosscheck import CREATE, ChainRow, read_checked
from dsctl.storage.design import pair_share_matrix
from dsctl.storage.expand_files import GrownTable, ReplacementStep, render, table_problems
from dsctl.storage.expand_polish import polish
from dsctl.storage.expand_read import read_sound
from dsctl.storage.expand_replace import check_size, replace
from dsctl.storage.layout import rotate_chains

#: the chain-table files expand reads (each; ``--max-input-bytes`` raises it further): 600 nodes x 16 SSDs at 99
#: targets per SSD write a 110 MB create_target_cmd.txt; 500 -> 550 nodes plans in ~6 CPU-s and ~0.5 GB (issue 32)
MAX_TABLE_FILE_BYTES = 128 * 1024**2
MAX_ADDED_NODES = 2_000
MAX_NODES_AFTER = 4_000  # the plan keeps a node x node pair-share matrix
NEED_WEIGHT = 2.0  # pair-shares one more slot of need is worth when picking new-chain members


@dataclass(frozen=True)
class ExpandResult:
    """The new chain-table version, the migration to it and its data-movement figures."""

    source: str
    old_nodes: int
    added_nodes: int
    new_nodes: int
    first_new_node_id: int
    replication: int
    ssds_per_node: int
    old_targets_per_ssd: int
    new_targets_per_ssd: int
    chains_unchanged: int
    chains_changed: int
    chains_added: int
    targets_kept: int
    replacements: int
    waves: int
    bytes_per_target: float
    moved_bytes: float
    lower_bound_bytes: float
    moved_over_bound: float
    bound: str
    balance: Balance
    check_problems: list[str]
    steps: list[ReplacementStep]
    notes: list[str]
    out_dir: str | None
    files: list[str]
    files_text: Mapping[str, str] = field(repr=False, metadata={"output": False})
    exit_code: int = field(default=0, metadata={"output": False})


@dataclass
class _Table:
    """The old table in index form: chains per disk, ``nodes[d]`` (b, k) node indexes, ``tids[d]`` target ids."""

    node_ids: list[int]
    disks: list[int]
    chain_ids: list[list[int]]
    nodes: list[np.ndarray]
    tids: list[np.ndarray]


def _load(texts: dict[str, str | None], source: str) -> _Table:
    sound = read_sound(texts)
    if sound is not None:
        unique_nodes, node_index = np.unique(sound.nodes, return_inverse=True)
        node_index = node_index.reshape(sound.nodes.shape)
        sound_disks: list[int] = np.unique(sound.disks).tolist()
        picks = [np.flatnonzero(sound.disks == d) for d in sound_disks]
        return _Table(unique_nodes.tolist(), sound_disks, [sound.chain_ids[i].tolist() for i in picks],
                      [node_index[i] for i in picks], [sound.targets[i] for i in picks])
    result, rows, node_of, disk_of = read_checked(texts, source)
    if result.problems:
        first = result.problems[0]
        raise InputError(f"{source}: {first.where}: {first.problem} ({len(result.problems)} problem(s); "
                         "run `dsctl storage check-chains` on it)", field="source")
    if texts.get(CREATE) is None:
        raise InputError(f"{source} needs {CREATE} (the node and disk of every target)", field="source")
    node_ids = sorted(set(node_of.values()))
    disks = sorted(set(disk_of.values()))
    index = {n: i for i, n in enumerate(node_ids)}
    per_disk: dict[int, list[ChainRow]] = defaultdict(list)
    for row in rows:
        per_disk[disk_of[row.targets[0]]].append(row)
    chain_ids = [[row.chain_id for row in per_disk[d]] for d in disks]
    nodes = [np.array([[index[node_of[t]] for t in row.targets] for row in per_disk[d]], dtype=np.int64)
             for d in disks]
    tids = [np.array([row.targets for row in per_disk[d]], dtype=np.int64) for d in disks]
    return _Table(node_ids, disks, chain_ids, nodes, tids)


def _rank_within(key: np.ndarray) -> np.ndarray:
    """For each entry, how many entries before it hold the same key (0, 1, ... per key, in order)."""
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    starts = np.r_[0, np.flatnonzero(sorted_key[1:] != sorted_key[:-1]) + 1]
    rank = np.arange(len(key)) - np.repeat(starts, np.diff(np.r_[starts, len(key)]))
    out = np.empty(len(key), dtype=np.int64)
    out[order] = rank
    return out


def _pick_new_r(v_new: int, k: int, num_disks: int, lo: int, hi: int) -> tuple[int, str | None]:
    """Targets per SSD for the grown table within ``[lo, hi]`` (even data share .. target-id digits)."""
    wanted, _ = choose_targets_per_ssd(v_new, k, num_disks)
    options = [r for r in range(max(lo, 1), hi + 1) if (v_new * r) % k == 0] or list(range(max(lo, 1), hi + 1))
    if not options:
        raise InputError(f"no targets-per-SSD value fits: the grown table needs {lo}..{hi} per SSD (two digits "
                         "of a target id); add fewer nodes at a time")
    good = [r for r in options
            if pair_share_ideal(v_new, k, r, num_disks) >= 1 and bound_ratio(v_new, k, r, num_disks) <= CHOICE_MARGIN]
    pick = min(good or options, key=lambda r: (abs(r - wanted), -r))
    note = None
    if pick != wanted:
        note = (f"targets per SSD {pick} for {v_new} nodes ({wanted} wanted): old nodes keep their target ids, "
                f"so at most {hi} fit in the two id digits")
    return pick, note


def _new_chains(need: np.ndarray, share: np.ndarray, k: int, count: int) -> tuple[np.ndarray, int]:
    """``count`` chains of ``k`` distinct nodes using each node ``need[node]`` times (modifies both arrays).

    Members are picked greedily: the node with most need left heads the chain, then each next one is the
    node that shares fewest chains with the members so far (need breaks ties, weighted to avoid dead ends).
    Returns the chains and the slots left unused when no ``k`` distinct nodes had need left.
    """
    out = []
    weight = NEED_WEIGHT
    weighted = weight * need  # kept equal to weight * need
    blocked = np.where(need > 0, 0.0, np.inf)  # inf where no need is left
    mates = np.zeros(len(need), dtype=np.int64)  # chains shared with the members so far (share is symmetric)
    score = np.empty(len(need), dtype=np.float64)
    need_of = need.tolist()  # scalar reads and writes: a list (numpy's cost 3x)
    v = len(need)
    share_flat = share.reshape(v * v)  # a view
    for _ in range(count):
        chain: list[int] = []
        mates[:] = 0
        for _ in range(k):
            np.subtract(mates, weighted, out=score)
            score += blocked
            if chain:
                score[chain] = np.inf
            pick = int(score.argmin())
            if score[pick] == np.inf:
                break
            chain.append(pick)
            mates += share[pick]
        if len(chain) < k:
            break
        for i, a in enumerate(chain):
            need_of[a] -= 1
            weighted[a] = weight * need_of[a]
            if need_of[a] <= 0:
                blocked[a] = np.inf
            for z in chain[i + 1:]:
                share_flat[a * v + z] += 1
                share_flat[z * v + a] += 1
        out.append(chain)
    need[:] = need_of
    arr = np.array(out, dtype=np.int64).reshape(len(out), k)
    return arr, int(need.sum())


def expand(texts: dict[str, str | None], source: str, add_nodes: int, target_bytes: float | None,
           ssd_capacity_bytes: float, used: float, report: Callable[[float, float], None] | None = None
           ) -> ExpandResult:
    """Plan growing the table in ``texts`` (the four chain-table files) by ``add_nodes`` storage nodes.

    Bytes per old target: ``target_bytes`` when given, else ``ssd_capacity_bytes * used / r_old`` (an SSD
    ``used`` full, shared by its ``r_old`` targets). ``report(done, total)``: the replacements and new chains
    planned so far, of all (the polish and the files come after the last).
    """
    if not 1 <= add_nodes <= MAX_ADDED_NODES:
        raise InputError(f"{add_nodes} must be 1..{MAX_ADDED_NODES}", field="add_nodes")
    if not 0 <= used <= 1:
        raise InputError(f"{used} must be in [0, 1] (fraction of each old SSD holding data)", field="used")
    if target_bytes is not None and not (math.isfinite(target_bytes) and target_bytes >= 0):
        raise InputError(f"{target_bytes} must be a finite size of at least 0 bytes", field="target_bytes")
    old = _load(texts, source)
    v, n = len(old.node_ids), add_nodes
    if v + n > MAX_NODES_AFTER:
        raise InputError(f"{source} has {v:,} nodes; with {{add_nodes}} {n} that is more than "
                         f"{MAX_NODES_AFTER:,}, the most dsctl plans for", field="source", mentions=("add_nodes",))
    v_new = v + n
    k = int(old.nodes[0].shape[1])
    if k < 2:  # no pairs to balance: check-chains passes such a table
        raise InputError(f"{source}: chains of {k} target; expand plans for chains of 2 or more (replicas on "
                         "distinct nodes)", field="source")
    num_disks = len(old.disks)
    first_new = old.node_ids[-1] + 1
    if first_new + n - 1 > MAX_NODE_ID:
        raise InputError(f"{n}: new node ids {first_new}..{first_new + n - 1} pass {MAX_NODE_ID} "
                         "(6 digits in a target id)", field="add_nodes")
    check_size(n, max(arr.size for arr in old.nodes))
    prefix = target_prefix(min(int(arr.min()) for arr in old.tids))
    share = pair_share_matrix(np.concatenate(old.nodes), v_new)  # no pair-long temporaries
    new_nodes = list(range(v, v_new))
    # per disk: members' goal counts (even share, remainder on old nodes)
    goals, quotas, old_r = [], [], 0
    for arr in old.nodes:
        counts = np.bincount(arr.ravel(), minlength=v_new)
        old_r = max(old_r, int(counts.max()))
        q, extra = divmod(arr.size, v_new)
        goal = np.full(v_new, q, dtype=np.int64)
        order = np.argsort(-counts[:v], kind="stable")
        goal[order[:min(extra, v)]] += 1
        if extra > v:
            goal[v:v + extra - v] += 1
        goals.append(goal)
        quotas.append(q)
    bytes_per_target = target_bytes if target_bytes is not None else ssd_capacity_bytes * used / old_r
    lo = max(int(g.max()) for g in goals)
    hi = MAX_TARGETS_PER_DISK - old_r + min(int(g[:v].min()) for g in goals)
    r_new, r_note = _pick_new_r(v_new, k, num_disks, lo, hi)
    notes = [r_note] if r_note else []
    steps_raw: list[tuple[int, int, int, int, int]] = []  # (disk i, chain, slot, old node, new node)
    final_nodes = [arr.copy() for arr in old.nodes]
    new_counts = [max(0, (v_new * r_new) // k - len(arr)) for arr in final_nodes]
    work = sum(int(goal[v:].sum()) for goal in goals) + sum(new_counts)  # replacements, then new chains
    tell = report or (lambda done, total: None)
    tell(0, work)
    offset = [0]  # replacements made on the disk indexes before this one

    def replaced(made: int) -> None:
        tell(offset[0] + made, work)

    for i, arr in enumerate(final_nodes):
        counts = np.bincount(arr.ravel(), minlength=v_new)
        offset[0] = len(steps_raw)
        for c, p, y in replace(arr, share, counts, goals[i], new_nodes, replaced):
            steps_raw.append((i, c, p, y, int(arr[c, p])))
    added: list[np.ndarray] = []
    unused = 0
    done = len(steps_raw)
    for arr, count in zip(final_nodes, new_counts, strict=True):
        need = r_new - np.bincount(arr.ravel(), minlength=v_new)
        chains, left = _new_chains(need, share, k, count)
        added.append(chains)
        unused += left
        done += count
        tell(done, work)
    polish(added, share, random.Random(0))
    added = [rotate_chains(arr, v_new) if len(arr) else arr for arr in added]
    if unused:
        notes.append(f"{unused} target slot(s) left unused: the greedy fill ran out of distinct nodes")
    return _assemble(old, texts, source, n, first_new, prefix, k, r_new, old_r, final_nodes, added, steps_raw,
                     quotas, bytes_per_target, notes)


def _assemble(old: _Table, texts: dict[str, str | None], source: str, n: int, first_new: int, prefix: int, k: int,
              r_new: int, old_r: int, final_nodes: list[np.ndarray], added: list[np.ndarray],
              steps_raw: list[tuple[int, int, int, int, int]], quotas: list[int], bytes_per_target: float,
              notes: list[str]) -> ExpandResult:
    v = len(old.node_ids)
    node_ids = old.node_ids + list(range(first_new, first_new + n))
    # old chains as arrays (disk after disk), their node ids, and the highest target slot per (node, disk)
    old_cids = np.concatenate([np.asarray(c, dtype=np.int64) for c in old.chain_ids])
    old_disks = np.concatenate([np.full(len(c), d, dtype=np.int64) for c, d in zip(old.chain_ids, old.disks,
                                                                                     strict=True)])
    old_tids = np.concatenate(old.tids)
    old_nids = np.asarray(old.node_ids, dtype=np.int64)[np.concatenate(old.nodes)]
    offsets = np.r_[0, np.cumsum([len(c) for c in old.chain_ids])].tolist()
    keys = old_nids * 1_000 + old_disks[:, None]
    unique_keys, inverse = np.unique(keys.ravel(), return_inverse=True)
    top_slot = np.zeros(len(unique_keys), dtype=np.int64)
    np.maximum.at(top_slot, inverse, old_tids.ravel() % 100)
    used_t: dict[int, int] = dict(zip(unique_keys.tolist(), top_slot.tolist(), strict=True))  # node*1000+disk

    def fresh(node: np.ndarray, disk: np.ndarray) -> np.ndarray:
        """New target ids for (node id, disk) pairs taken in this order, each pair's numbers after those used."""
        key = node * 1_000 + disk
        t = _rank_within(key) + np.array([used_t.get(x, 0) for x in key.tolist()], dtype=np.int64)
        if len(t) and int(t.max()) + 1 > MAX_TARGETS_PER_DISK:
            bad = int(np.flatnonzero(t + 1 > MAX_TARGETS_PER_DISK)[0])
            raise InputError(f"node {int(node[bad])} disk {int(disk[bad])} would need target number "
                             f"{int(t[bad]) + 1} (two digits allow 99)")
        for x, top in zip(key.tolist(), (t + 1).tolist(), strict=True):
            used_t[x] = max(used_t.get(x, 0), top)
        return np.asarray(target_id(prefix, node, disk, t), dtype=np.int64)

    # the steps: a replaced member is always an old one, at its old place p; update-chain -m add appends the new
    # member at the tail, so a changed chain lists its kept members in order, then the new ones as added
    ids = np.asarray(node_ids, dtype=np.int64)
    raw_arr = np.asarray(steps_raw, dtype=np.int64).reshape(len(steps_raw), 5)
    step_i, step_c, step_p, step_y, step_x = raw_arr.T
    rows = np.asarray(offsets, dtype=np.int64)[step_i] + step_c
    step_disk = np.asarray(old.disks, dtype=np.int64)[step_i]
    step_cid = old_cids[rows]
    old_tid = old_tids[rows, step_p]
    y_ids, x_ids = ids[step_y], ids[step_x]
    new_tid = fresh(x_ids, step_disk)
    wave = _rank_within(rows)
    place = np.broadcast_to(np.arange(k, dtype=np.int64), old_tids.shape).copy()
    place[rows, step_p] = k + wave
    old_tids[rows, step_p], old_nids[rows, step_p] = new_tid, x_ids
    by_place = np.argsort(place, axis=1, kind="stable")
    old_tids = np.take_along_axis(old_tids, by_place, axis=1)
    old_nids = np.take_along_axis(old_nids, by_place, axis=1)
    # interleave the new nodes inside a wave so parallel copies spread over them
    order_s = np.lexsort((x_ids, _rank_within(wave * len(node_ids) + step_x), wave))
    columns = zip(*(a[order_s].tolist() for a in (wave, step_cid, step_disk, old_tid, y_ids, new_tid, x_ids)),
                  strict=True)
    steps = [ReplacementStep(j, w, cid, disk, old_t, old_n, new_t, new_n, bytes_per_target)
             for j, (w, cid, disk, old_t, old_n, new_t, new_n) in enumerate(columns, 1)]
    changed = len(np.unique(rows))
    waves = int(wave.max()) + 1 if len(wave) else 0
    new_cids: list[int] = []
    new_disks: list[int] = []
    top_any = int(old_cids.max())
    for i, arr in enumerate(added):
        disk = old.disks[i]
        base_cid = old.chain_ids[i][0]
        top = max(old.chain_ids[i])
        follows = base_cid >= MIN_UPSTREAM_CHAIN_ID
        for j in range(len(arr)):
            cid = top + j + 1 if follows else top_any + 1
            if cid > UINT32_MAX or (follows and chain_index(top) + j + 1 > MAX_CHAINS_PER_DISK):
                fresh(ids[np.concatenate([a.ravel() for a in added[:i]] + [arr[:j].ravel()])],
                      np.repeat(np.asarray(old.disks[:i + 1], dtype=np.int64),
                                [a.size for a in added[:i]] + [j * k]))  # an earlier member's error first
                raise InputError(f"new chain ids on disk index {disk} pass the 5 chain-index digits")
            top_any = max(top_any, cid)
            new_cids.append(cid)
            new_disks.append(disk)
    member_ids = ids[np.concatenate([a.ravel() for a in added])] if added else np.zeros(0, dtype=np.int64)
    member_disks = np.repeat(np.asarray(old.disks, dtype=np.int64), [a.size for a in added])
    new_pairs = np.stack([fresh(member_ids, member_disks), member_ids], axis=1).reshape(len(new_cids), k, 2)
    all_cids = np.concatenate([old_cids, np.asarray(new_cids, dtype=np.int64)])
    order = np.argsort(all_cids, kind="stable")
    table = GrownTable(
        chain_ids=all_cids[order],
        disks=np.concatenate([old_disks, np.asarray(new_disks, dtype=np.int64)])[order],
        targets=np.concatenate([old_tids, new_pairs[:, :, 0]])[order],
        nodes=np.concatenate([old_nids, new_pairs[:, :, 1]])[order],
        added=(np.arange(len(all_cids)) >= len(old_cids))[order])
    files = render(table, steps)
    problems = table_problems(table)
    member_arr = np.searchsorted(np.asarray(node_ids, dtype=np.int64), table.nodes)
    disk_arr = np.searchsorted(np.asarray(old.disks, dtype=np.int64), table.disks)
    balance = measure(member_arr, disk_arr, len(node_ids))
    lower = n * sum(quotas)
    moved = len(steps)
    total_old = sum(len(c) for c in old.chain_ids)
    if balance.redirect.max_over_ideal > REDIRECT_LIMIT:
        notes.append(f"node-failure redirect {balance.redirect.max_over_ideal:.2f}x the even share is above "
                     f"{REDIRECT_LIMIT}x")
    bound = (f"every new node must end with its even share of the old chains' members, floor(b*k/v') per disk "
             f"index = {', '.join(sorted({str(q) for q in quotas}))}; each such member is one full-replica copy: "
             f"{n} x {sum(quotas)} = {lower:,} targets")
    return ExpandResult(
        source=source, old_nodes=v, added_nodes=n, new_nodes=v + n, first_new_node_id=first_new, replication=k,
        ssds_per_node=len(old.disks), old_targets_per_ssd=old_r, new_targets_per_ssd=r_new,
        chains_unchanged=total_old - changed, chains_changed=changed, chains_added=len(new_cids),
        targets_kept=total_old * k - moved, replacements=moved, waves=waves,
        bytes_per_target=bytes_per_target, moved_bytes=moved * bytes_per_target,
        lower_bound_bytes=lower * bytes_per_target, moved_over_bound=moved / lower if lower else 1.0,
        bound=bound, balance=balance, check_problems=problems, steps=steps, notes=notes, out_dir=None, files=[],
        files_text=files, exit_code=1 if problems or balance.redirect.max_over_ideal > REDIRECT_LIMIT else 0,
    )
