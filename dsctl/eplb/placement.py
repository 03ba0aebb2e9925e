"""The placement data structure shared by every EPLB algorithm, and the load metrics over it.

Shapes: L layers, E logical experts, R physical slots per layer, G GPUs, k = R / G slots per GPU.
Slot ``s`` lives on GPU ``s // k``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dsctl.errors import InputError

#: most cells of ``log2phy`` [L, E, most replicas of one expert] (int64: 128 MiB); a plan or placement file that
#: gives one expert thousands of replicas would otherwise size it at L x E x thousands
MAX_LOG2PHY_CELLS = 2**24


@dataclass(frozen=True)
class Placement:
    """Where every replica of every expert lives.

    - ``phy2log`` int64 [L, R]: logical expert held by each physical slot.
    - ``log2phy`` int64 [L, E, M]: slot of replica rank r of expert e; -1 pads ranks >= ``logcnt[l, e]``.
      M is the largest replica count over all layers (global max of ``logcnt``), as in DeepSeek's reference.
    - ``logcnt`` int64 [L, E]: number of replicas of each expert (>= 1; each row sums to R).
    """

    phy2log: np.ndarray
    log2phy: np.ndarray
    logcnt: np.ndarray

    @property
    def num_layers(self) -> int:
        return int(self.phy2log.shape[0])

    @property
    def num_slots(self) -> int:
        return int(self.phy2log.shape[1])

    @property
    def num_experts(self) -> int:
        return int(self.logcnt.shape[1])


def check_log2phy_size(num_layers: int, num_experts: int, width: int) -> None:
    """Refuse, before allocating it, a ``log2phy`` of more than MAX_LOG2PHY_CELLS cells."""
    cells = num_layers * num_experts * width
    if cells > MAX_LOG2PHY_CELLS:
        raise InputError(f"the placement gives one expert {width:,} replicas: log2phy [{num_layers:,} layers, "
                         f"{num_experts:,} experts, {width:,} replicas] would hold {cells:,} entries, above the limit "
                         f"of {MAX_LOG2PHY_CELLS:,}", hint="use fewer --replicas (or a placement with fewer replicas "
                         "of its hottest expert)")


def placement_from_phy2log(phy2log: np.ndarray, num_experts: int) -> Placement:
    """Build ``logcnt`` and ``log2phy`` from ``phy2log`` [L, R]; replica ranks follow slot order."""
    phy2log = np.asarray(phy2log, dtype=np.int64)
    num_layers, num_slots = phy2log.shape
    logcnt = np.zeros((num_layers, num_experts), dtype=np.int64)
    rows = np.repeat(np.arange(num_layers), num_slots)
    np.add.at(logcnt, (rows, phy2log.ravel()), 1)
    width = int(logcnt.max()) if logcnt.size else 0
    check_log2phy_size(num_layers, num_experts, width)
    log2phy = np.full((num_layers, num_experts, width), -1, dtype=np.int64)
    # rank of each slot among the slots of its expert, in slot order
    order = np.argsort(phy2log, axis=1, kind="stable")
    sorted_experts = np.take_along_axis(phy2log, order, axis=1)
    starts = np.cumsum(logcnt, axis=1) - logcnt
    ranks_sorted = np.arange(num_slots)[None, :] - np.take_along_axis(starts, sorted_experts, axis=1)
    layer_idx = np.repeat(np.arange(num_layers), num_slots)
    log2phy[layer_idx, sorted_experts.ravel(), ranks_sorted.ravel()] = order.ravel()
    return Placement(phy2log=phy2log, log2phy=log2phy, logcnt=logcnt)


def gpu_loads(weight: np.ndarray, phy2log: np.ndarray, logcnt: np.ndarray, num_gpus: int) -> np.ndarray:
    """Per-GPU load, float64 [L, G]: sum over the GPU's slots of ``weight[e] / logcnt[e]``.

    ``weight`` is [L, E] (tokens routed to each logical expert); ``phy2log``/``logcnt`` as in ``Placement``.
    """
    weight = np.asarray(weight, dtype=np.float64)
    per_replica = weight / logcnt
    slot_load = np.take_along_axis(per_replica, phy2log, axis=1)
    num_layers, num_slots = phy2log.shape
    return slot_load.reshape(num_layers, num_gpus, num_slots // num_gpus).sum(axis=2)


def balancedness(loads: np.ndarray) -> np.ndarray:
    """Per-layer mean / max GPU load, float64 [L]; 1.0 for an all-zero layer (perfectly balanced, nothing to do)."""
    loads = np.asarray(loads, dtype=np.float64)
    peak = loads.max(axis=1)
    mean = loads.mean(axis=1)
    out = np.ones_like(peak)
    np.divide(mean, peak, out=out, where=peak > 0)
    return out


def layer_gpu_share(weight: np.ndarray, phy2log: np.ndarray, logcnt: np.ndarray, num_gpus: int,
                    layer: int) -> tuple[float, ...]:
    """Each GPU's routed load in one MoE layer for a placement (``weight`` [L, E], ``phy2log`` [L, R])."""
    if phy2log.shape[1] % num_gpus:
        raise InputError(f"has {phy2log.shape[1]} slots per layer, not a multiple of the "
                         f"{num_gpus} EP GPUs simulated", field="eplb_plan",
                         hint="simulate as many GPUs as the placement was made for")
    if not 0 <= layer < weight.shape[0]:
        raise InputError(f"{layer} must be 0..{weight.shape[0] - 1} (MoE layers in {{stats}})", field="layer",
                         mentions=("stats",))
    loads = gpu_loads(weight[layer:layer + 1], phy2log[layer:layer + 1], logcnt[layer:layer + 1], num_gpus)
    return tuple(float(x) for x in loads[0])
