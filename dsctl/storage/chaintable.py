"""3FS chain-table files: the upstream ``gen_chain_table.py`` id mapping and file formats (sheet section 2).

Ids (decimal digit concatenation; ``disk`` and ``t`` 0-based, written +1):

- ``target_id = ((target_prefix * 1_000_000 + node_id) * 1_000 + disk + 1) * 100 + t + 1``
  where ``t`` numbers a node's chains on that disk index in ascending chain index;
- ``chain_id  = (chain_prefix * 1_000 + disk + 1) * 100_000 + chain_index`` (chain_index 1..b).

Every other module builds and reads ids through the functions here (:func:`target_id`, :func:`decode_target`,
:func:`target_prefix`, :func:`target_slot`, :func:`chain_id`, :func:`chain_disk`, :func:`chain_index`), never by
its own digit arithmetic.

Files: ``generated_chains.csv``, ``generated_chain_table.csv``, ``create_target_cmd.txt`` and
``remove_target_cmd.txt``, byte-for-byte in the upstream layout (``\\n`` line endings, no spaces).
Reading them back is ``crosscheck``'s job.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsctl.errors import InputError
from dsctl.storage.layout import ChainLayout
from dsctl.storage.rows_text import rows_text

UINT32_MAX = 4_294_967_295
MAX_NODE_ID = 999_999
MAX_DISKS = 999
MAX_TARGETS_PER_DISK = 99
MAX_CHAINS_PER_DISK = 99_999
MAX_PREFIX = 99
#: field widths of the upstream ids, as powers of ten
_NODE = 1_000_000  # 6 digits of node id
_DISK = 1_000  # 3 digits of disk index + 1
_SLOT = 100  # 2 digits of t + 1
_CHAIN_INDEX = 100_000  # 5 digits of chain index
#: the smallest chain id of the upstream scheme (chain prefix 1, disk 0, index 0)
MIN_UPSTREAM_CHAIN_ID = _DISK * _CHAIN_INDEX
_SIZE = re.compile(r"[0-9]{1,15}(B|KB|MB|GB|TB|K|M|G|T)?")  # ASCII digits: admin_cli reads these


@dataclass(frozen=True)
class IdScheme:
    """Id prefixes and the first storage node id (node index ``i`` has id ``first_node_id + i``)."""

    first_node_id: int = 10001
    target_prefix: int = 1
    chain_prefix: int = 9


def check_ids(scheme: IdScheme, num_nodes: int, num_disks: int, targets_per_ssd: int, chains_per_disk: int) -> None:
    """Raise InputError (naming the field) when an id would not fit its digits or 3FS's integer types."""
    if not 0 <= scheme.target_prefix <= MAX_PREFIX:
        raise InputError(f"{scheme.target_prefix} must be 0..{MAX_PREFIX}", field="target_id_prefix")
    if not 1 <= scheme.chain_prefix <= MAX_PREFIX:
        raise InputError(f"{scheme.chain_prefix} must be 1..{MAX_PREFIX}", field="chain_id_prefix")
    if scheme.first_node_id < 1 or scheme.first_node_id + num_nodes - 1 > MAX_NODE_ID:
        raise InputError(f"{scheme.first_node_id} with {{nodes}} {num_nodes}: node ids must be "
                         f"1..{MAX_NODE_ID} (6 digits in a target id)", field="first_node_id", mentions=("nodes",))
    if num_disks > MAX_DISKS:
        raise InputError(f"{num_disks} is too many: a target id has 3 digits for the disk (max "
                         f"{MAX_DISKS})", field="ssds_per_node")
    if targets_per_ssd > MAX_TARGETS_PER_DISK:
        raise InputError(f"{targets_per_ssd} is too many: a target id has 2 digits for it (max "
                         f"{MAX_TARGETS_PER_DISK})", field="targets_per_ssd")
    if chains_per_disk > MAX_CHAINS_PER_DISK:
        raise InputError(f"{chains_per_disk} chains per disk index do not fit the 5 chain-index digits of a chain "
                         f"id (max {MAX_CHAINS_PER_DISK}); lower {{nodes}} or {{targets_per_ssd}}",
                         mentions=("nodes", "targets_per_ssd"))
    top = chain_id(scheme.chain_prefix, num_disks - 1, chains_per_disk)
    if top > UINT32_MAX:
        # largest prefix p with (p * 1000 + num_disks) * 100_000 + chains_per_disk <= UINT32_MAX
        best = ((UINT32_MAX - chains_per_disk) // _CHAIN_INDEX - num_disks) // _DISK
        advice = (f"use a prefix of {best} or less" if best >= 1 else
                  f"no prefix fits with {num_disks} disk indexes; lower --ssds-per-node")
        raise InputError(f"{scheme.chain_prefix} gives chain id {top} above the uint32 maximum "
                         f"{UINT32_MAX}; {advice}", field="chain_id_prefix")


def chain_id(prefix: Any, disk: Any, index: Any) -> Any:
    """Chain id of 1-based ``index`` on 0-based ``disk`` (ints or numpy arrays, elementwise)."""
    return (prefix * _DISK + disk + 1) * _CHAIN_INDEX + index


def chain_index(cid: int) -> int:
    """The 1-based chain index of an upstream-scheme chain id (its last 5 digits)."""
    return cid % _CHAIN_INDEX


def chain_disk(cid: int) -> int | None:
    """0-based disk index in an upstream-scheme chain id (``[prefix][disk 3][index 5]``), None if not one."""
    if cid < MIN_UPSTREAM_CHAIN_ID:
        return None
    disk = (cid // _CHAIN_INDEX) % _DISK - 1
    return disk if disk >= 0 and chain_index(cid) >= 1 else None


def target_id(prefix: Any, node_id: Any, disk: Any, t: Any) -> Any:
    """Target id of the 0-based ``t``-th target of ``node_id`` on 0-based ``disk`` (ints or numpy arrays)."""
    return ((prefix * _NODE + node_id) * _DISK + disk + 1) * _SLOT + t + 1


def target_prefix(tid: int) -> int:
    """The target-id prefix (the digits before node, disk and t)."""
    return tid // (_NODE * _DISK * _SLOT)


def target_slot(tid: int) -> int:
    """``t + 1`` of a target id (its last 2 digits)."""
    return tid % _SLOT


def target_ids(layout: ChainLayout, scheme: IdScheme) -> np.ndarray:
    """Target id of every chain member, shape (C, k) aligned with ``layout.nodes``.

    ``t`` = rank of the chain among the node's chains on the same disk index, by chain index.
    """
    count, k = layout.nodes.shape
    flat_node = layout.nodes.ravel()
    flat_disk = np.repeat(layout.disk, k)
    flat_index = np.repeat(layout.index, k)
    order = np.lexsort((flat_index, flat_node, flat_disk))
    key = flat_disk[order] * (layout.num_nodes + 1) + flat_node[order]
    starts = np.r_[0, np.flatnonzero(np.diff(key)) + 1]
    run_start = np.repeat(starts, np.diff(np.r_[starts, len(key)]))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - run_start
    node_id = flat_node + scheme.first_node_id
    return np.asarray(target_id(scheme.target_prefix, node_id, flat_disk, rank)).reshape(count, k)


def chain_ids(layout: ChainLayout, scheme: IdScheme) -> np.ndarray:
    """Chain id of every chain, shape (C,)."""
    return np.asarray(chain_id(scheme.chain_prefix, layout.disk, layout.index))


#: chains rendered per piece when the files are streamed to disk (a piece of create_target_cmd.txt: ~2 MB at k = 3)
CHAINS_PER_PIECE = 8_192
CHAINS = "generated_chains.csv"
TABLE = "generated_chain_table.csv"
CREATE = "create_target_cmd.txt"
REMOVE = "remove_target_cmd.txt"
#: the lines of create_target_cmd.txt around each target's node id, disk index, target id and chain id (no chunk
#: sizes: they stand between the two spaces of the last piece) and the two lines of remove_target_cmd.txt around
#: its node and target id, twice; ``storage expand``'s array reader reads this layout (expand_read)
CREATE_PIECES = ("create-target --node-id ", " --disk-index ", " --target-id ", " --chain-id ",
                 "  --use-new-chunk-engine\n")
REMOVE_PIECES = ("offline-target --node-id ", " --target-id ", "\nremove-target --node-id ", " --target-id ", "\n")
FILE_NAMES = (CHAINS, TABLE, CREATE, REMOVE)


class ChainTableFiles(Mapping[str, str]):
    """The four upstream files of a table (plus any text set on it, e.g. ``pair_share.svg``), rendered on use.

    ``files[name]`` is the whole text; ``files.pieces(name)`` yields it a block of ``CHAINS_PER_PIECE`` chains at
    a time, which is how ``--out-dir`` writes it (issue 32: 1,000 nodes x 16 SSDs no longer holds 400 MB of
    text). Rows are sorted by chain id, members head -> tail; arrays: ``chain_ids`` (C,), ``targets`` and
    ``nodes`` (C, k) target and node ids, ``disks`` (C,) 0-based disk index.
    """

    def __init__(self, chain_ids: np.ndarray, targets: np.ndarray, nodes: np.ndarray, disks: np.ndarray,
                 chunk_sizes: tuple[str, ...] = ()) -> None:
        self.chain_ids, self.targets, self.nodes, self.disks = chain_ids, targets, nodes, disks
        self.chunk = f"--chunk-size {' '.join(chunk_sizes)}" if chunk_sizes else ""
        self.extra: dict[str, str] = {}

    def __setitem__(self, name: str, text: str) -> None:
        self.extra[name] = text

    def __getitem__(self, name: str) -> str:
        return "".join(self.pieces(name))

    def __iter__(self) -> Iterator[str]:
        return iter([*FILE_NAMES, *self.extra])

    def __len__(self) -> int:
        return len(FILE_NAMES) + len(self.extra)

    def pieces(self, name: str) -> Iterator[str]:
        """The text of ``name`` in pieces (KeyError for a name it does not hold)."""
        if name in self.extra:
            yield self.extra[name]
            return
        render = {CHAINS: self._chains, TABLE: self._table, CREATE: self._creates, REMOVE: self._removes}[name]
        k = self.targets.shape[1]
        if name == CHAINS:
            yield "ChainId," + ",".join(["TargetId"] * k) + "\n"
        elif name == TABLE:
            yield "ChainId\n"
        for start in range(0, len(self.chain_ids), CHAINS_PER_PIECE):
            yield render(slice(start, start + CHAINS_PER_PIECE))

    def _chains(self, rows: slice) -> str:
        k = self.targets.shape[1]
        return rows_text(np.concatenate([self.chain_ids[rows, None], self.targets[rows]], axis=1),
                         ("",) + (",",) * k + ("\n",))

    def _table(self, rows: slice) -> str:
        return rows_text(self.chain_ids[rows, None], ("", "\n"))

    def _creates(self, rows: slice) -> str:
        k = self.targets.shape[1]
        values = np.stack([self.nodes[rows].ravel(), np.repeat(self.disks[rows], k), self.targets[rows].ravel(),
                           np.repeat(self.chain_ids[rows], k)], axis=1)
        return rows_text(values, (*CREATE_PIECES[:-1], CREATE_PIECES[-1].replace("  ", f" {self.chunk} ", 1)))

    def _removes(self, rows: slice) -> str:
        nodes, targets = self.nodes[rows].ravel(), self.targets[rows].ravel()
        return rows_text(np.stack([nodes, targets, nodes, targets], axis=1), REMOVE_PIECES)


def render_files(layout: ChainLayout, scheme: IdScheme, chunk_sizes: tuple[str, ...] = ()) -> ChainTableFiles:
    """The four upstream files (rendered when used, see :class:`ChainTableFiles`)."""
    cids = chain_ids(layout, scheme)
    order = np.argsort(cids, kind="stable")
    return ChainTableFiles(cids[order], target_ids(layout, scheme)[order], layout.nodes[order] + scheme.first_node_id,
                           layout.disk[order], chunk_sizes)


def check_chunk_sizes(values: list[str]) -> tuple[str, ...]:
    """Validate admin_cli size strings (integer + optional B, KB, MB, GB, TB, K, M, G, T; binary units)."""
    for value in values:
        if not _SIZE.fullmatch(value):
            raise InputError(f"{value!r} is not an admin_cli size; write an integer with an optional "
                             "unit B, KB, MB, GB, TB, K, M, G or T (binary), e.g. 1MB", field="chunk_size")
    return tuple(values)


def decode_target(tid: int) -> tuple[int, int]:
    """(node_id, 0-based disk index) from a target id built with the upstream mapping."""
    return (tid // (_DISK * _SLOT)) % _NODE, (tid // _SLOT) % _DISK - 1
