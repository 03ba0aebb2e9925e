"""MoE imbalance of a launch from routing statistics (``--eplb-stats``): the balancedness the step prediction
divides the busiest GPU's expert work by."""

from __future__ import annotations

import numpy as np

from dsctl.errors import InputError


def stats_balancedness(expert_loads: np.ndarray, ep: int) -> float:
    """Mean over layers of (mean GPU load / max GPU load) with ``expert_loads`` (float [layers, experts], tokens
    routed to each expert) placed contiguously on ``ep`` GPUs (experts/ep each, no redundant experts: the
    placement before EPLB); 1.0 for ``ep`` 1 or an all-zero table. Raises InputError when ``ep`` does not divide
    the experts."""
    loads = np.asarray(expert_loads, dtype=np.float64)
    if loads.ndim != 2 or loads.shape[1] % ep:
        raise InputError(f": {loads.shape[-1]} experts per layer do not split over ep {ep}", field="eplb_stats",
                         hint="give the statistics of this model (one column per routed expert)")
    per_gpu = loads.reshape(loads.shape[0], ep, loads.shape[1] // ep).sum(axis=2)
    peak = per_gpu.max(axis=1)
    mean = per_gpu.mean(axis=1)
    ratio = np.ones_like(peak)
    np.divide(mean, peak, out=ratio, where=peak > 0)
    return float(ratio.mean()) if ratio.size else 1.0


def model_stats_balancedness(expert_loads: np.ndarray, source: str, routed_experts: int, model_name: str,
                             ep: int) -> float:
    """:func:`stats_balancedness` of routing statistics (read from ``source``) given for a model with
    ``routed_experts`` experts per layer; InputError naming ``eplb_stats`` when their columns are not that model's
    experts."""
    if expert_loads.ndim != 2 or expert_loads.shape[1] != routed_experts:
        raise InputError(f": {expert_loads.shape[-1]} experts per layer in {source}, but {model_name} has "
                         f"{routed_experts} routed experts", field="eplb_stats",
                         hint="give routing statistics of this model")
    return stats_balancedness(expert_loads, ep)
