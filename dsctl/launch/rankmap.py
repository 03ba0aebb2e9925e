"""Rank map: which global rank (node, local GPU) gets which (pp, dp, ep, tp) coordinate, and the groups that follow.

**Order** (Megatron-LM ``tp-cp-ep-dp-pp``, listed fastest-varying first; cp = 1, expert-TP = 1)::

    rank = node * gpus_per_node + local_gpu                  (torchrun / Slurm block order)
    rank = tp_rank + tp * (dp_rank + dp * pp_rank)           (dense view: TP adjacent, PP outermost)
    rank = ep_rank + ep * (edp_rank + expert_dp * pp_rank)   (expert view: EP adjacent inside a stage)

so ``stage_pos = rank % (tp * dp)`` splits both ways: ``tp_rank = stage_pos % tp``, ``dp_rank = stage_pos // tp``,
``ep_rank = stage_pos % ep``, ``edp_rank = stage_pos // ep``.

Why this order:

- an EP group is ``ep`` *consecutive* ranks, so it sits on exactly ``ceil(ep / gpus_per_node)`` whole nodes (the
  fewest possible) when ``ep`` is a multiple of ``gpus_per_node``, or inside one node when it divides it;
- local GPU ``i`` of a node is paired with compute NIC ``i`` on network plane ``i``; an EP group of ``ep >= 8``
  ranks covers whole nodes, so it holds every plane equally (``ep / 8`` GPUs per plane) and its all-to-all uses
  all 8 planes;
- a TP group is ``tp`` consecutive ranks inside one node (NVLink);
- PP is outermost, so pipeline neighbours are ``tp * dp`` ranks apart, usually on different nodes, and a
  pipeline group holds GPUs with the same local index (same plane), so PP traffic never crosses planes.

Everything is vectorised: a 16,384-rank map is a handful of numpy operations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from dsctl.launch import rules
from dsctl.launch.layout import ParallelLayout

#: column order of ``ranks.csv`` and of :meth:`RankMap.columns`
COLUMNS: tuple[str, ...] = ("rank", "node", "local_gpu", "plane", "pp", "dp", "tp", "ep", "edp")

#: group kinds, in the order they are explained
GROUP_KINDS: tuple[str, ...] = ("tp", "dp", "pp", "ep", "edp")

GROUP_MEANING: dict[str, str] = {
    "tp": "tensor parallel (same dense shard, different tensor slices)",
    "dp": "dense data parallel (same dense weights; ZeRO-1 shards their optimizer states)",
    "pp": "pipeline (one rank per stage, point-to-point activations)",
    "ep": "expert parallel (all-to-all dispatch/combine; each holds experts/ep routed experts per layer)",
    "edp": "expert data parallel (replicas of the same routed experts; gradient all-reduce)",
}


@dataclass(frozen=True)
class RankMap:
    """Coordinates of every rank of a layout, as int64 arrays of shape ``(world_size,)`` indexed by global rank.

    ``plane`` equals ``local_gpu`` (GPU i uses NIC i on plane i). ``edp`` is the expert-data-parallel rank (which
    EP group of the stage the rank is in).
    """

    layout: ParallelLayout
    node: np.ndarray = field(repr=False)
    local_gpu: np.ndarray = field(repr=False)
    pp: np.ndarray = field(repr=False)
    dp: np.ndarray = field(repr=False)
    tp: np.ndarray = field(repr=False)
    ep: np.ndarray = field(repr=False)
    edp: np.ndarray = field(repr=False)

    @property
    def world_size(self) -> int:
        return int(self.node.shape[0])

    @property
    def plane(self) -> np.ndarray:
        return self.local_gpu

    def columns(self) -> dict[str, np.ndarray]:
        """Every column of :data:`COLUMNS` as an array."""
        rank = np.arange(self.world_size, dtype=np.int64)
        return {"rank": rank, "node": self.node, "local_gpu": self.local_gpu, "plane": self.plane,
                "pp": self.pp, "dp": self.dp, "tp": self.tp, "ep": self.ep, "edp": self.edp}

    def groups(self, kind: str) -> np.ndarray:
        """Ranks of every group of ``kind`` (tp, dp, pp, ep or edp): int64 array ``(num_groups, group_size)``.

        Rows are ordered by their smallest rank; each row lists its members in increasing rank (= increasing
        coordinate along that dimension).
        """
        lay = self.layout
        ranks = np.arange(self.world_size, dtype=np.int64)
        dense = ranks.reshape(lay.pp, lay.dp, lay.tp)
        expert = ranks.reshape(lay.pp, lay.expert_dp, lay.ep)
        if kind == "tp":
            return dense.reshape(-1, lay.tp)
        if kind == "dp":
            return dense.transpose(0, 2, 1).reshape(-1, lay.dp)
        if kind == "pp":
            return dense.reshape(lay.pp, -1).T.copy()
        if kind == "ep":
            return expert.reshape(-1, lay.ep)
        if kind == "edp":
            return expert.transpose(0, 2, 1).reshape(-1, lay.expert_dp)
        raise ValueError(f"unknown group kind {kind!r}; valid: {', '.join(GROUP_KINDS)}")

    def nodes_per_group(self, kind: str) -> np.ndarray:
        """Number of distinct nodes each group of ``kind`` touches, shape ``(num_groups,)``."""
        return _distinct_per_row(self.node[self.groups(kind)])

    def planes_per_group(self, kind: str) -> np.ndarray:
        """Number of distinct network planes each group of ``kind`` touches, shape ``(num_groups,)``."""
        return _distinct_per_row(self.local_gpu[self.groups(kind)])

    def summary(self) -> RankMapSummary:
        """Group counts, sizes and node/plane spans per kind, plus a few example groups."""
        rows = []
        for kind in GROUP_KINDS:
            groups = self.groups(kind)
            nodes = self.nodes_per_group(kind)
            planes = self.planes_per_group(kind)
            rows.append(GroupSummary(
                kind=kind,
                meaning=GROUP_MEANING[kind],
                num_groups=int(groups.shape[0]),
                group_size=int(groups.shape[1]),
                min_nodes_per_group=int(nodes.min()),
                max_nodes_per_group=int(nodes.max()),
                min_planes_per_group=int(planes.min()),
                max_planes_per_group=int(planes.max()),
                first_group=compact_ranks(groups[0]),
                first_group_nodes=compact_ranks(np.unique(self.node[groups[0]])),
            ))
        return RankMapSummary(order="tp-cp-ep-dp-pp (Megatron, fastest first; cp=1, expert-tp=1)",
                              world_size=self.world_size, groups=tuple(rows))

    def to_csv(self) -> str:
        """``ranks.csv`` text: header :data:`COLUMNS` plus ``stages``, then one line per rank."""
        cols = self.columns()
        table = np.stack([cols[c] for c in COLUMNS], axis=1)
        stage_text = _stage_text(self.layout)
        lines = [",".join((*COLUMNS, "stages"))]
        body = [",".join(map(str, row)) for row in table.tolist()]
        pps = self.pp.tolist()
        lines.extend(f"{line},{stage_text[p]}" for line, p in zip(body, pps, strict=True))
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class GroupSummary:
    """One kind of process group: how many, how big, and how many nodes / planes each spans."""

    kind: str
    meaning: str
    num_groups: int
    group_size: int
    min_nodes_per_group: int
    max_nodes_per_group: int
    min_planes_per_group: int
    max_planes_per_group: int
    first_group: str
    first_group_nodes: str


@dataclass(frozen=True)
class RankMapSummary:
    order: str
    world_size: int
    groups: tuple[GroupSummary, ...]

    def to_data(self) -> dict[str, Any]:
        return {"order": self.order, "world_size": self.world_size,
                "groups": {g.kind: {k: v for k, v in g.__dict__.items() if k != "kind"} for g in self.groups}}


def build_rank_map(layout: ParallelLayout) -> RankMap:
    """Vectorised rank map of a (validated) layout; see the module docstring for the order."""
    world = layout.world_size
    rank = np.arange(world, dtype=np.int64)
    stage_pos = rank % layout.stage_ranks
    return RankMap(
        layout=layout,
        node=rank // layout.gpus_per_node,
        local_gpu=rank % layout.gpus_per_node,
        pp=rank // layout.stage_ranks,
        dp=stage_pos // layout.tp,
        tp=stage_pos % layout.tp,
        ep=stage_pos % layout.ep,
        edp=stage_pos // layout.ep,
    )


def stages_of_rank(layout: ParallelLayout, pp_rank: int) -> tuple[int, ...]:
    """Model stages held by pipeline rank ``r`` of ``layout`` (:func:`dsctl.launch.rules.stages_of_rank`)."""
    return rules.stages_of_rank(layout.schedule, layout.pp, pp_rank)


def _stage_text(layout: ParallelLayout) -> list[str]:
    return [";".join(str(s) for s in stages_of_rank(layout, p)) for p in range(layout.pp)]


def _distinct_per_row(values: np.ndarray) -> np.ndarray:
    """Count distinct values in each row of a 2-D int array (vectorised: sort, then count changes)."""
    if values.shape[1] == 0:
        return np.zeros(values.shape[0], dtype=np.int64)
    ordered = np.sort(values, axis=1)
    return 1 + np.count_nonzero(np.diff(ordered, axis=1), axis=1)


def compact_ranks(values: np.ndarray | list[int], limit: int = 8) -> str:
    """Short text for a list of ranks: ``[0,1,2,3,8,9]`` -> ``"0-3, 8-9"``.

    Other arithmetic runs of 3 or more print as ``"0, 128, ..., 1920 (step 128, 16 in all)"``.
    """
    items = [int(v) for v in np.asarray(values).ravel().tolist()]
    if not items:
        return ""
    if len(items) >= 3:
        step = items[1] - items[0]
        if step > 0 and all(b - a == step for a, b in pairwise(items)):
            if step == 1:
                return f"{items[0]}-{items[-1]}"
            return f"{items[0]}, {items[1]}, ..., {items[-1]} (step {step}, {len(items)} in all)"
    parts: list[str] = []
    start = prev = items[0]
    for v in items[1:]:
        if v == prev + 1:
            prev = v
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        start = prev = v
    parts.append(f"{start}-{prev}" if prev > start else str(start))
    if len(parts) > limit:
        return ", ".join(parts[:limit]) + f", ... ({len(items)} in all)"
    return ", ".join(parts)
