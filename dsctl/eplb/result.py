"""The rebalance result object (what ``--format json`` / ``--out`` write) and the SGLang export (what
``--sglang-out`` writes). Placement files are read by ``dsctl.eplb.placement_file``.

dsctl placement file (``dsctl eplb rebalance --out FILE``): a JSON object with top-level keys
``phy2log`` [L][R], ``log2phy`` [L][E][M] (-1 padded, M = global max replica count), ``logcnt`` [L][E],
``metrics``, ``layout`` (num_replicas, num_gpus, num_nodes, num_groups, policy ...), ``algorithm``.

SGLang export (``--sglang-out FILE``): the JSON SGLang reads through ``--init-expert-location FILE``:
``{"physical_to_logical_map": [[...], ...]}``, one row per *model* layer (dense layers included, mapped
trivially slot s -> expert s mod E), R = E + ``--ep-num-redundant-experts`` slots per row, slot s on
EP rank s // (R / ep_size).
SGLang passes the object's keys as keyword arguments, so the file holds that one key only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dsctl.eplb.checks import Layout
from dsctl.eplb.metrics import PlacementMetrics
from dsctl.eplb.placement import Placement


def layout_data(layout: Layout) -> dict[str, Any]:
    return {
        "num_layers": layout.num_layers, "num_experts": layout.num_experts, "num_replicas": layout.num_replicas,
        "num_gpus": layout.num_gpus, "num_nodes": layout.num_nodes, "num_groups": layout.num_groups,
        "policy": layout.policy, "slots_per_gpu": layout.slots_per_gpu,
        "num_redundant_experts": layout.num_replicas - layout.num_experts,
    }


@dataclass(frozen=True)
class MigrationSummary:
    """What ``--previous`` cost: replicas moved against the previous placement; bytes when the expert size is known."""

    replicas_moved: int
    bytes_moved: int | None
    expert_bytes: int | None
    tolerance: float
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RebalanceResult:
    """Output of ``dsctl eplb rebalance``."""

    placement: Placement
    metrics: PlacementMetrics
    layout: Layout
    algorithm: str
    sources: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    migration: MigrationSummary | None = None
    num_dense_layers: int = 0  # model layers before the first MoE layer (for the SGLang export)

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "phy2log": self.placement.phy2log,
            "log2phy": self.placement.log2phy,
            "logcnt": self.placement.logcnt,
            "metrics": self.metrics,
            "layout": layout_data(self.layout),
            "algorithm": self.algorithm,
            "sources": list(self.sources),
            "warnings": list(self.warnings),
        }
        if self.migration is not None:
            data["migration"] = self.migration
        return data


def sglang_expert_location(placement: Placement, num_dense_layers: int = 0) -> dict[str, Any]:
    """The object SGLang's ``--init-expert-location`` reads: ``{"physical_to_logical_map": [[...]]}``.

    ``num_dense_layers`` rows are prepended with the trivial map (slot s -> expert s mod E): SGLang indexes the map
    by model layer id, dense layers included (DeepSeek-V3: 3 dense + 58 MoE = 61 rows).
    """
    phy2log = placement.phy2log
    trivial = np.arange(placement.num_slots, dtype=np.int64) % placement.num_experts
    rows = np.concatenate([np.broadcast_to(trivial, (num_dense_layers, placement.num_slots)), phy2log], axis=0)
    return {"physical_to_logical_map": rows.tolist()}


def sglang_server_args(layout: Layout, path: str) -> str:
    """The SGLang server options that go with an exported placement."""
    return (f"--init-expert-location {path} --ep-num-redundant-experts {layout.num_replicas - layout.num_experts} "
            f"--ep-size {layout.num_gpus}")
