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
from dsctl.storage.rows_text import rows_text


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


_HEADER = ("# dsctl storage expand: replacements inside existing chains, in order. Run the steps of one wave\n"
           "# in any order or in parallel (a wave never holds two steps of one chain); wait for each new target\n"
           "# to be SERVING-UPTODATE (`list-targets -c CHAIN`) before taking the old one offline.\n")
#: a step's seven runbook lines, as pieces around its numbers (``_STEP_FIELDS`` picks them); {copies} the size
_STEP_PIECES = ("# step ", " wave ", ": chain ", " disk ", ": ", " on ", " -> ", " on ",
                ", copies {copies} bytes\ncreate-target --node-id ", " --disk-index ", " --target-id ", " --chain-id ",
                "  --use-new-chunk-engine\nupdate-chain --mode add ", " ", "\n# wait: list-targets -c ", " shows ",
                " SERVING UPTODATE\noffline-target --node-id ", " --target-id ", "\nupdate-chain --mode remove ", " ",
                "\nremove-target --node-id ", " --target-id ", "\n")
# step 0, wave 1, chain_id 2, disk_index 3, old_target 4, old_node 5, new_target 6, new_node 7
_STEP_FIELDS = [0, 1, 2, 3, 4, 5, 6, 7, 7, 3, 6, 2, 2, 6, 2, 6, 5, 4, 2, 4, 5, 4]


def _runbook(steps: list[ReplacementStep]) -> str:
    """The migration runbook: the header, then each step's seven lines (one block of numbers per size copied)."""
    parts, at = [_HEADER], 0
    while at < len(steps):  # steps of one size together (expand gives every step the same size)
        size = steps[at].bytes
        end = next((i for i in range(at + 1, len(steps)) if steps[i].bytes != size), len(steps))  # NaN: one step
        values = np.array([(s.step, s.wave, s.chain_id, s.disk_index, s.old_target, s.old_node, s.new_target,
                            s.new_node) for s in steps[at:end]], dtype=np.int64)[:, _STEP_FIELDS]
        pieces = (*_STEP_PIECES[:8], _STEP_PIECES[8].replace("{copies}", f"{size:.0f}"), *_STEP_PIECES[9:])
        parts.append(rows_text(values, pieces))
        at = end
    return "".join(parts)


def render(table: GrownTable, steps: list[ReplacementStep]) -> ChainTableFiles:
    """The four files of the grown table (rendered when used, streamed by ``--out-dir``), plus the new chains
    alone and the migration runbook."""
    files = ChainTableFiles(table.chain_ids, table.targets, table.nodes, table.disks)
    added = np.flatnonzero(table.added)
    new = ChainTableFiles(table.chain_ids[added], table.targets[added], table.nodes[added], table.disks[added])
    files["new_chains.csv"] = new[CHAINS]
    files["create_new_chain_targets_cmd.txt"] = new[CREATE]
    files["migration_steps.txt"] = _runbook(steps)
    return files
