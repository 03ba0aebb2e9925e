"""The rebalance result object (what ``--format json`` / ``--out`` write), the SGLang export, and placement files.

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
from dsctl.eplb.placement import Placement, placement_from_phy2log
from dsctl.errors import InputError
from dsctl.textjson import load_json


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


@dataclass(frozen=True)
class LoadedPlacement:
    """A placement read from a file, with whatever layout facts the file carried (None = unknown)."""

    placement: Placement
    source: str
    kind: str  # "dsctl" | "sglang"
    num_gpus: int | None = None
    num_nodes: int | None = None
    num_groups: int | None = None
    policy: str | None = None
    dropped_leading_layers: int = 0


#: largest expert id, GPU, node or group count read from a placement file (real models have hundreds; arrays
#: are sized from these, so the bound also bounds memory)
MAX_PLACEMENT_ID = 2**20 - 1


def _int_table(name: str, key: str, value: Any) -> np.ndarray:
    if not isinstance(value, list) or not value or not all(isinstance(r, list) and r for r in value):
        raise InputError(f"{name}: \"{key}\" must be a non-empty 2-D list (layers x slots)")
    width = len(value[0])
    for r, row in enumerate(value):
        if len(row) != width:
            raise InputError(f"{name}: \"{key}\" row {r} has {len(row)} slots but row 0 has {width}")
        for c, cell in enumerate(row):
            if isinstance(cell, bool) or not isinstance(cell, int) or not 0 <= cell <= MAX_PLACEMENT_ID:
                shown = repr(cell) if not isinstance(cell, int) or cell < 10**20 else f"{str(cell)[:20]}..."
                raise InputError(f"{name}: \"{key}\" row {r}, slot {c}: {shown} is not an expert id "
                                 f"(integer 0..{MAX_PLACEMENT_ID:,})")
    return np.asarray(value, dtype=np.int64)


def parse_placement(name: str, text: str, num_experts: int | None = None) -> LoadedPlacement:
    """Read a dsctl placement file (``phy2log`` ...) or an SGLang one (``physical_to_logical_map``).

    ``num_experts`` E (from the statistics) sets the expert count; otherwise max id + 1. Replica ranks follow
    slot order. Every expert 0..E-1 must appear at least once per layer.
    """
    data = load_json(text, name)
    if not isinstance(data, dict):
        raise InputError(f"{name}: expected a JSON object with \"phy2log\" (dsctl) "
                         f"or \"physical_to_logical_map\" (SGLang)")
    raw_layout = data.get("layout")
    layout: dict[str, Any] = raw_layout if isinstance(raw_layout, dict) else {}
    if "phy2log" in data:
        kind, table = "dsctl", _int_table(name, "phy2log", data["phy2log"])
    elif "physical_to_logical_map" in data:
        kind, table = "sglang", _int_table(name, "physical_to_logical_map", data["physical_to_logical_map"])
    else:
        raise InputError(f"{name}: no \"phy2log\" or \"physical_to_logical_map\" key "
                         f"(keys: {', '.join(sorted(map(str, data))) or 'none'})")
    experts = int(num_experts) if num_experts is not None else int(table.max()) + 1
    if int(table.max()) >= experts:
        r, c = (int(v) for v in np.argwhere(table >= experts)[0])
        raise InputError(f"{name}: layer {r}, slot {c} holds expert {int(table[r, c])}, but there are only "
                         f"{experts} experts (ids 0..{experts - 1})")
    placement = placement_from_phy2log(table, experts)
    missing = placement.logcnt == 0
    if missing.any():
        r, e = (int(v) for v in np.argwhere(missing)[0])
        raise InputError(f"{name}: layer {r} has no slot for expert {e}; every expert needs at least one replica")

    def _opt_int(key: str) -> int | None:
        value = layout.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_PLACEMENT_ID:
            return int(value)
        return None

    policy = layout.get("policy") if layout.get("policy") in ("hierarchical", "global") else None
    return LoadedPlacement(placement, name, kind, _opt_int("num_gpus"), _opt_int("num_nodes"),
                           _opt_int("num_groups"), policy)


def drop_trivial_leading_layers(loaded: LoadedPlacement, num_layers: int) -> LoadedPlacement:
    """Match a placement with extra leading layers (an SGLang file with dense layers) to ``num_layers`` MoE layers.

    The extra leading rows must be the trivial map (slot s -> expert s mod E); otherwise the counts must match.
    """
    phy2log = loaded.placement.phy2log
    extra = phy2log.shape[0] - num_layers
    if extra == 0:
        return loaded
    trivial = np.arange(phy2log.shape[1]) % loaded.placement.num_experts
    if extra < 0 or not np.all(phy2log[:extra] == trivial):
        raise InputError(f"{loaded.source}: placement has {phy2log.shape[0]} layers "
                         f"but the statistics have {num_layers}",
                         hint="both must describe the same MoE layers (leading dense layers are dropped only when "
                              "they hold the trivial map)")
    placement = placement_from_phy2log(phy2log[extra:], loaded.placement.num_experts)
    return LoadedPlacement(placement, loaded.source, loaded.kind, loaded.num_gpus, loaded.num_nodes,
                           loaded.num_groups, loaded.policy, extra)


def read_placement(name: str, text: str, num_layers: int, num_experts: int) -> LoadedPlacement:
    """The one reader of placement files, for ``simulate`` and ``rebalance --previous`` alike.

    Parses a dsctl or SGLang file (``parse_placement``) against the statistics' ``num_experts`` E and matches it to
    their ``num_layers`` L MoE layers: leading rows holding the trivial map (the dense layers of an SGLang file,
    e.g. 3 + 58 = 61 rows for DeepSeek-V3) are dropped; any other layer-count mismatch is an InputError.
    """
    return drop_trivial_leading_layers(parse_placement(name, text, num_experts), num_layers)


def placement_warnings(loaded: LoadedPlacement) -> tuple[str, ...]:
    """Warnings about how a placement file was read (dense layers dropped)."""
    if not loaded.dropped_leading_layers:
        return ()
    return (f"{loaded.source}: skipped {loaded.dropped_leading_layers} leading layers holding the trivial "
            f"map (dense layers of an SGLang file)",)
