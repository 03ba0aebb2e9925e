"""The grown table of ``storage expand`` as arrays, its files and its check (issue 32: no per-target dicts).

Files, byte for byte as issue 14 wrote them: the four files of the new version (rows by chain id, members in
chain order; rendered by ``chaintable.ChainTableFiles``, as ``storage chains`` renders its own), ``new_chains.csv``
and ``create_new_chain_targets_cmd.txt`` (the new chains alone) and ``migration_steps.txt``, the runbook.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dsctl.storage.chaintable import CHAINS, CREATE, ChainTableFiles
from dsctl.storage.expand_check import grown_table_problems


@dataclass(frozen=True)
class ReplacementStep:
    """One replacement inside a chain: copy a full replica to ``new_target`` then retire ``old_target``."""

    step: int
    wave: int
    chain_id: int
    disk_index: int
    old_target: int
    old_node: int
    new_target: int
    new_node: int
    bytes: float


@dataclass(frozen=True)
class GrownTable:
    """Every chain of the new version, sorted by chain id: ``chain_ids`` (C,), ``disks`` (C,) disk index,
    ``targets`` and ``nodes`` (C, k) target and node ids head -> tail, ``added`` (C,) True for a new chain."""

    chain_ids: np.ndarray
    disks: np.ndarray
    targets: np.ndarray
    nodes: np.ndarray
    added: np.ndarray


def table_problems(table: GrownTable) -> list[str]:
    """What ``check-chains`` would find wrong in the grown table (see ``grown_table_problems``), checked on the
    arrays; only a table with a problem is walked row by row to name each one."""
    tids, nids = table.targets, table.nodes
    k = tids.shape[1]
    flat = np.sort(tids.ravel())
    sound = (not np.any(flat[1:] == flat[:-1])
             and not any(np.any(nids[:, p] == nids[:, q]) for p in range(k) for q in range(p + 1, k))
             and np.array_equal((tids // 100_000) % 1_000_000, nids)
             and np.array_equal((tids // 100) % 1_000 - 1, np.broadcast_to(table.disks[:, None], tids.shape)))
    if sound:
        return []
    rows = {cid: (disk, list(zip(t, n, strict=True)))
            for cid, disk, t, n in zip(table.chain_ids.tolist(), table.disks.tolist(), tids.tolist(), nids.tolist(),
                                       strict=True)}
    return grown_table_problems(rows)


def render(table: GrownTable, steps: list[ReplacementStep]) -> ChainTableFiles:
    """The four files of the grown table (rendered when used, streamed by ``--out-dir``), plus the new chains
    alone and the migration runbook."""
    files = ChainTableFiles(table.chain_ids, table.targets, table.nodes, table.disks)
    added = np.flatnonzero(table.added)
    new = ChainTableFiles(table.chain_ids[added], table.targets[added], table.nodes[added], table.disks[added])
    runbook = ["# dsctl storage expand: replacements inside existing chains, in order. Run the steps of one wave",
               "# in any order or in parallel (a wave never holds two steps of one chain); wait for each new target",
               "# to be SERVING-UPTODATE (`list-targets -c CHAIN`) before taking the old one offline."]
    for s in steps:
        runbook += [f"# step {s.step} wave {s.wave}: chain {s.chain_id} disk {s.disk_index}: "
                    f"{s.old_target} on {s.old_node} -> {s.new_target} on {s.new_node}, copies {s.bytes:.0f} bytes",
                    f"create-target --node-id {s.new_node} --disk-index {s.disk_index} --target-id {s.new_target} "
                    f"--chain-id {s.chain_id}  --use-new-chunk-engine",
                    f"update-chain --mode add {s.chain_id} {s.new_target}",
                    f"# wait: list-targets -c {s.chain_id} shows {s.new_target} SERVING UPTODATE",
                    f"offline-target --node-id {s.old_node} --target-id {s.old_target}",
                    f"update-chain --mode remove {s.chain_id} {s.old_target}",
                    f"remove-target --node-id {s.old_node} --target-id {s.old_target}"]
    files["new_chains.csv"] = new[CHAINS]
    files["create_new_chain_targets_cmd.txt"] = new[CREATE]
    files["migration_steps.txt"] = "\n".join(runbook) + "\n"
    return files
