"""``dsctl eplb simulate``: the loads and balancedness a given placement yields on another window of statistics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dsctl.eplb.checks import EplbLayout, check_weight
from dsctl.eplb.metrics import PlacementMetrics, placement_metrics
from dsctl.eplb.placement_file import LoadedPlacement, drop_trivial_leading_layers, placement_warnings
from dsctl.eplb.result import layout_data
from dsctl.errors import InputError


@dataclass(frozen=True)
class SimulationResult:
    """An existing placement measured on (new) statistics: ``metrics.after`` = it, ``before`` = contiguous."""

    metrics: PlacementMetrics
    layout: EplbLayout
    placement_source: str
    placement_kind: str
    sources: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def to_data(self) -> dict[str, Any]:
        return {"metrics": self.metrics, "layout": layout_data(self.layout), "placement": self.placement_source,
                "placement_kind": self.placement_kind, "sources": list(self.sources), "warnings": list(self.warnings)}


def simulate(
    weight: np.ndarray,
    loaded: LoadedPlacement,
    num_gpus: int | None = None,
    sources: tuple[str, ...] = (),
) -> SimulationResult:
    """Per-GPU loads of ``loaded``'s placement under ``weight`` [L, E].

    ``loaded`` comes from ``read_placement`` (the reader ``rebalance --previous`` uses too); a placement with
    extra leading trivial layers is matched here as well. ``num_gpus`` overrides the file's; one of the two is
    needed (an SGLang file does not record it). The lower bound uses the file's policy, groups and nodes when it
    records them, else the policy-free global bound.
    """
    checked, warnings = check_weight(weight, "statistics")
    num_layers, num_experts = checked.shape
    if loaded.placement.num_experts != num_experts:
        raise InputError(f"{loaded.source}: placement has {loaded.placement.num_experts} experts, "
                         f"the statistics have {num_experts}")
    loaded = drop_trivial_leading_layers(loaded, num_layers)
    gpus = num_gpus if num_gpus is not None else loaded.num_gpus
    if gpus is None:
        raise InputError(f"{loaded.source}: the file does not say how many GPUs it spans; pass {{gpus}}",
                         mentions=("gpus",))
    num_slots = loaded.placement.num_slots
    if gpus < 1:
        raise InputError(f"must be >= 1, got {gpus}", field="gpus")
    if num_slots % gpus != 0:
        raise InputError(f"{gpus}: the placement's {num_slots} slots per layer must split evenly over the GPUs "
                         f"({num_slots} = {num_slots // gpus} x {gpus} + {num_slots % gpus})", field="gpus")
    hierarchical = (loaded.policy == "hierarchical" and loaded.num_nodes is not None and loaded.num_groups is not None
                    and loaded.num_groups % loaded.num_nodes == 0 and num_experts % loaded.num_groups == 0
                    and gpus % loaded.num_nodes == 0)
    layout = EplbLayout(num_layers, num_experts, num_slots,
                    loaded.num_groups if hierarchical and loaded.num_groups else 1,
                    loaded.num_nodes if hierarchical and loaded.num_nodes else 1,
                    gpus, "hierarchical" if hierarchical else "global")
    metrics = placement_metrics(checked, loaded.placement, layout)
    warnings += placement_warnings(loaded)
    return SimulationResult(metrics, layout, loaded.source, loaded.kind, sources, warnings)
