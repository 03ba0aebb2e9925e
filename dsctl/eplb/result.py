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

from dsctl.eplb.checks import EplbLayout
from dsctl.eplb.metrics import PlacementMetrics
from dsctl.eplb.pareto import TradeOff
from dsctl.eplb.placement import Placement
from dsctl.errors import InputError


def layout_data(layout: EplbLayout) -> dict[str, Any]:
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
    layout: EplbLayout
    algorithm: str
    sources: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    migration: MigrationSummary | None = None
    num_dense_layers: int = 0  # model layers before the first MoE layer (for the SGLang export)
    model: str | None = None  # the model profile the statistics belong to (given or inferred)
    model_num_layers: int | None = None  # its layer count, dense layers included (the rows SGLang expects)
    notes: tuple[str, ...] = ()  # how the layout was chosen (deployment defaults)
    trade_off: TradeOff | None = None  # with --previous: the Pareto table and the decision

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
            "model": self.model,
            "notes": list(self.notes),
        }
        if self.migration is not None:
            data["migration"] = self.migration
        if self.trade_off is not None:
            data["trade_off"] = self.trade_off
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


def check_sglang_name(name: str) -> None:
    """SGLang reads ``--init-expert-location`` as JSON only from a name ending in ``.json`` (``.pt`` goes to
    torch.load, anything else is parsed as an inline JSON string): refuse other names."""
    if not name.endswith(".json"):
        raise InputError(f"{name}: SGLang reads --init-expert-location as a JSON file only when the "
                         "name ends in .json (other names are parsed as inline JSON text and fail)", field="sglang_out",
                         hint=f"e.g. --sglang-out {name.rsplit('.', 1)[0] if '.' in name else name}.json")


def sglang_export(result: RebalanceResult, name: str) -> dict[str, Any]:
    """The ``--sglang-out`` object, refusing a map whose row count is not the model's layer count (SGLang indexes
    it by model layer and accepts a short map silently, shifting every layer)."""
    check_sglang_name(name)
    rows = result.num_dense_layers + result.layout.num_layers
    if result.model_num_layers is None:
        raise InputError(f"{name}: the model is unknown, so the map's layer count cannot be checked",
                         field="sglang_out",
                         hint="give -m/--model (SGLang needs one row per model layer, dense layers included)")
    if rows != result.model_num_layers:
        raise InputError(f"{name}: the map would have {rows} rows ({result.num_dense_layers} dense + "
                         f"{result.layout.num_layers} statistics rows) but {result.model} has "
                         f"{result.model_num_layers} layers; SGLang would shift every layer",
                         hint="give statistics for the model's MoE layers only (or every layer)", field="sglang_out")
    return sglang_expert_location(result.placement, result.num_dense_layers)


def sglang_server_args(layout: EplbLayout, path: str) -> str:
    """The SGLang server options that go with an exported placement."""
    return (f"--init-expert-location {path} --ep-num-redundant-experts {layout.num_replicas - layout.num_experts} "
            f"--ep-size {layout.num_gpus}")
