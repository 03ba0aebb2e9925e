"""Load metrics of a placement: per-GPU loads, max, mean, balancedness, and lower bounds on the max GPU load.

Definitions (per layer; loads in the statistics' unit, e.g. tokens):
- GPU load = sum over the GPU's slots of load(e) / logcnt(e); slot s is on GPU s // (R / G).
- balancedness = mean GPU load / max GPU load (1.0 = perfect; 1.0 for an all-zero layer).
- "before" = one copy per expert, contiguous: expert e on GPU floor(e * G / E).
- lower bounds on the max GPU load: dsctl.eplb.bounds (mean, m*, replica granularity, per node and group).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dsctl.eplb.bounds import MAX_PARTITIONS, global_lower_bound, hierarchical_lower_bound, num_partitions
from dsctl.eplb.checks import EplbLayout
from dsctl.eplb.exact import ExactResult
from dsctl.eplb.placement import Placement, balancedness, gpu_loads


@dataclass(frozen=True)
class LoadMetrics:
    """Per-layer GPU loads of one placement: ``gpu_loads`` float64 [L, G]; the rest float64 [L]."""

    gpu_loads: np.ndarray
    max_gpu_load: np.ndarray
    mean_gpu_load: np.ndarray
    balancedness: np.ndarray

    @staticmethod
    def from_loads(loads: np.ndarray) -> LoadMetrics:
        loads = np.asarray(loads, dtype=np.float64)
        return LoadMetrics(loads, loads.max(axis=1), loads.mean(axis=1), balancedness(loads))

    def layer(self, index: int) -> dict[str, Any]:
        return {"gpu_loads": self.gpu_loads[index], "max_gpu_load": float(self.max_gpu_load[index]),
                "mean_gpu_load": float(self.mean_gpu_load[index]), "balancedness": float(self.balancedness[index])}


@dataclass(frozen=True)
class PlacementMetrics:
    """Before/after metrics and the lower bound, per layer. ``bound_kind`` says which bound was computed."""

    before: LoadMetrics
    after: LoadMetrics
    lower_bound_gpu_load: np.ndarray  # float64 [L]
    bound_kind: str
    optimum_gpu_load: np.ndarray | None = None  # float64 [L], with --prove: proved optimum (or best found)
    proved: np.ndarray | None = None  # bool [L], with --prove: the exact search completed

    @property
    def gap_to_bound(self) -> np.ndarray:
        """max GPU load / lower bound - 1 per layer, float64 [L] (0 = proved optimal by the bound)."""
        out = np.zeros_like(self.lower_bound_gpu_load)
        np.divide(self.after.max_gpu_load, self.lower_bound_gpu_load, out=out, where=self.lower_bound_gpu_load > 0)
        return np.where(self.lower_bound_gpu_load > 0, out - 1.0, 0.0)

    @property
    def gap_to_optimum(self) -> np.ndarray | None:
        """max GPU load / proved optimum - 1 per layer, float64 [L]; None without --prove."""
        if self.optimum_gpu_load is None:
            return None
        opt = self.optimum_gpu_load
        out = np.ones_like(opt)
        np.divide(self.after.max_gpu_load, opt, out=out, where=opt > 0)
        return np.maximum(out - 1.0, 0.0)

    @property
    def num_layers(self) -> int:
        return int(self.after.max_gpu_load.shape[0])

    @property
    def balancedness_bound(self) -> np.ndarray:
        """mean / lower bound: the best balancedness any placement under the policy could reach, [L]."""
        out = np.ones_like(self.lower_bound_gpu_load)
        np.divide(self.after.mean_gpu_load, self.lower_bound_gpu_load, out=out, where=self.lower_bound_gpu_load > 0)
        return out

    @property
    def worst_layer(self) -> int:
        """Index of the layer with the lowest balancedness after placement (first on ties)."""
        return int(np.argmin(self.after.balancedness))

    def summary(self) -> dict[str, Any]:
        bound = self.balancedness_bound
        worst = self.worst_layer
        return {
            "num_layers": self.num_layers,
            "mean_balancedness_before": float(self.before.balancedness.mean()),
            "mean_balancedness_after": float(self.after.balancedness.mean()),
            "mean_balancedness_bound": float(bound.mean()),
            "worst_layer": worst,
            "worst_balancedness_before": float(self.before.balancedness.min()),
            "worst_balancedness_after": float(self.after.balancedness[worst]),
            "worst_layer_balancedness_bound": float(bound[worst]),
            "bound_kind": self.bound_kind,
            "mean_gap_to_bound": float(self.gap_to_bound.mean()),
            "max_gap_to_bound": float(self.gap_to_bound.max()),
            "worst_gap_layer": int(np.argmax(self.gap_to_bound)),
        } | self._proof_summary()

    def _proof_summary(self) -> dict[str, Any]:
        gap = self.gap_to_optimum
        if gap is None or self.proved is None:
            return {}
        return {"layers_proved": int(self.proved.sum()),
                "layers_proved_optimal": int((self.proved & (gap <= 1e-9)).sum()),
                "max_gap_to_optimum": float(gap.max())}

    def to_data(self) -> dict[str, Any]:
        bound = self.balancedness_bound
        layers = [
            {"layer": i, "before": self.before.layer(i), "after": self.after.layer(i),
             "bound": {"max_gpu_load": float(self.lower_bound_gpu_load[i]), "balancedness": float(bound[i])},
             "gap_to_bound": float(self.gap_to_bound[i])}
            for i in range(self.num_layers)
        ]
        if self.optimum_gpu_load is not None and self.proved is not None:
            for i, layer in enumerate(layers):
                layer["optimum"] = {"max_gpu_load": float(self.optimum_gpu_load[i]), "proved": bool(self.proved[i])}
        return {"summary": self.summary(), "layers": layers}


def contiguous_loads(weight: np.ndarray, num_gpus: int) -> np.ndarray:
    """GPU loads [L, G] with one copy per expert, expert e on GPU floor(e * G / E) (contiguous blocks)."""
    weight = np.asarray(weight, dtype=np.float64)
    num_layers, num_experts = weight.shape
    gpu_of = (np.arange(num_experts) * num_gpus) // num_experts
    loads = np.zeros((num_gpus, num_layers))
    np.add.at(loads, gpu_of, weight.T)
    return loads.T.copy()


def lower_bound(weight: np.ndarray, layout: EplbLayout) -> tuple[np.ndarray, str]:
    """Best valid lower bound on the max GPU load for the layout's policy, float64 [L], and its name."""
    if layout.policy != "hierarchical":
        return global_lower_bound(weight, layout.num_replicas, layout.num_gpus), "global"
    kind = "hierarchical"
    if num_partitions(layout.num_groups, layout.num_groups // layout.num_nodes) > MAX_PARTITIONS:
        kind = "hierarchical (closed form: too many group->node partitions to enumerate)"
    bound = hierarchical_lower_bound(weight, layout.num_replicas, layout.num_groups, layout.num_nodes, layout.num_gpus)
    return bound, kind


def placement_metrics(weight: np.ndarray, placement: Placement, layout: EplbLayout,
                      proof: ExactResult | None = None) -> PlacementMetrics:
    """Before (contiguous, one copy per expert) and after metrics of ``placement`` on ``weight`` [L, E];
    ``proof`` (``dsctl.eplb.exact.solve`` from this placement) adds the optimum per layer."""
    weight = np.asarray(weight, dtype=np.float64)
    before = LoadMetrics.from_loads(contiguous_loads(weight, layout.num_gpus))
    after = LoadMetrics.from_loads(gpu_loads(weight, placement.phy2log, placement.logcnt, layout.num_gpus))
    bound, kind = lower_bound(weight, layout)
    if proof is None:
        return PlacementMetrics(before, after, bound, kind)
    if proof.lower is not None and (proof.lower > bound * (1.0 + 1e-12)).any():  # the MILP's dual bound is tighter
        bound, kind = np.maximum(bound, proof.lower), f"{kind} + MILP"
    optimum = np.minimum(proof.optimum, after.max_gpu_load)
    return PlacementMetrics(before, after, bound, kind, optimum, proof.proved.copy())
