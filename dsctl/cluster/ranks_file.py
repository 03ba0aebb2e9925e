"""ranks.csv, the rank map that ``dsctl launch --out-dir DIR`` writes: its columns and its reader.

Header ``rank,node,local_gpu,plane,pp,dp,tp,ep,edp,stages``, then one line per global rank 0..W-1 in order:
``node`` is the node index (the plan's ``nodes[node]``), ``local_gpu`` the GPU on that node (paired with NIC
``local_gpu``), ``plane`` the network plane of that NIC, ``pp``/``dp``/``tp``/``ep``/``edp`` the rank's coordinate
in each parallel dimension, ``stages`` the model stages the pipeline rank holds (``;``-separated, e.g. ``0;15``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dsctl.errors import InputError
from dsctl.names import shown

RANK_COLUMNS: tuple[str, ...] = ("rank", "node", "local_gpu", "plane", "pp", "dp", "tp", "ep", "edp")
"""The integer columns of ranks.csv, in file order (``stages`` follows them)."""
STAGES_COLUMN = "stages"
#: more ranks than any planned cluster (1M): a bigger file is refused before parsing
MAX_RANKS = 1 << 20
_MAX_COORD = 1 << 24
_REGENERATE = "regenerate it with 'dsctl launch --out-dir DIR'"


@dataclass(frozen=True)
class RankTable:
    """The columns of a ranks.csv as int64 arrays of shape ``(world_size,)`` indexed by global rank.

    ``columns[name]`` for every name in :data:`RANK_COLUMNS`; ``stages[r]`` is the tuple of model stages of rank
    ``r``'s pipeline rank.
    """

    columns: dict[str, np.ndarray] = field(repr=False)
    stages: tuple[tuple[int, ...], ...] = field(repr=False)

    @property
    def world_size(self) -> int:
        return int(self.columns["rank"].shape[0])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    @property
    def num_nodes(self) -> int:
        return int(self.columns["node"].max()) + 1 if self.world_size else 0


def _stages(text: str, source: str, line: int) -> tuple[int, ...]:
    parts = text.split(";")
    if not text or len(parts) > 4 or not all(p.isascii() and p.isdigit() and len(p) <= 7 for p in parts):
        raise InputError(f"{source} line {line}: {STAGES_COLUMN} {shown(text)} must be stage numbers separated "
                         "by ';' (e.g. 0;15)", hint=_REGENERATE)
    return tuple(int(p) for p in parts)


def load_ranks(text: str, source: str = "ranks.csv") -> RankTable:
    """Read and validate a ranks.csv text.

    InputError (file, line, column) unless: the header is exactly that of dsctl launch, every value is a whole
    number 0..2^24, rank ``r`` is on line ``r + 2`` for ``r`` in 0..W-1, no (node, local_gpu) appears twice,
    and at most :data:`MAX_RANKS` ranks.
    """
    lines = text.splitlines()
    header = (*RANK_COLUMNS, STAGES_COLUMN)
    if not lines or lines[0].strip().split(",") != list(header):
        got = shown(lines[0] if lines else "", 80)
        raise InputError(f"{source} is not a dsctl rank map: the header must be {','.join(header)}, got {got}",
                         hint=_REGENERATE)
    rows = [ln for ln in lines[1:] if ln.strip()]
    if not rows:
        raise InputError(f"{source} lists no ranks", hint=_REGENERATE)
    if len(rows) > MAX_RANKS:
        raise InputError(f"{source} lists {len(rows):,} ranks; at most {MAX_RANKS:,} are read")
    width = len(header)
    values = np.empty((len(rows), len(RANK_COLUMNS)), dtype=np.int64)
    stage_of_pp: dict[str, tuple[int, ...]] = {}
    stage_text: list[str] = []
    for i, row in enumerate(rows):
        cells = row.strip().split(",")
        if len(cells) != width:
            raise InputError(f"{source} line {i + 2}: expected {width} values ({','.join(header)}), "
                             f"got {len(cells)}", hint=_REGENERATE)
        for j, cell in enumerate(cells[:-1]):
            if not (cell.isascii() and cell.isdigit() and len(cell) <= 8 and int(cell) <= _MAX_COORD):
                raise InputError(f"{source} line {i + 2}: {RANK_COLUMNS[j]} {shown(cell)} must be a whole number "
                                 f"0..{_MAX_COORD}", hint=_REGENERATE)
            values[i, j] = int(cell)
        if cells[-1] not in stage_of_pp:
            stage_of_pp[cells[-1]] = _stages(cells[-1], source, i + 2)
        stage_text.append(cells[-1])
    columns = {name: values[:, j].copy() for j, name in enumerate(RANK_COLUMNS)}
    bad = np.flatnonzero(columns["rank"] != np.arange(len(rows)))
    if bad.size:
        first = int(bad[0])
        raise InputError(f"{source} line {first + 2}: rank {int(columns['rank'][first])} is out of order "
                         f"(expected rank {first}: one line per rank, 0..{len(rows) - 1})", hint=_REGENERATE)
    gpus = int(columns["local_gpu"].max()) + 1
    slot = columns["node"] * gpus + columns["local_gpu"]
    uniq, counts = np.unique(slot, return_counts=True)
    if uniq.size != slot.size:
        dup = int(uniq[np.flatnonzero(counts > 1)[0]])
        lines_of = np.flatnonzero(slot == dup)[:2] + 2
        raise InputError(f"{source} lines {lines_of[0]} and {lines_of[1]}: node {dup // gpus} GPU {dup % gpus} "
                         "holds two ranks", hint=_REGENERATE)
    return RankTable(columns, tuple(stage_of_pp[t] for t in stage_text))
