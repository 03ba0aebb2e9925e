"""How long a migration's expert moves take on a planned fabric (``eplb rebalance --previous P --plan FABRIC``).

A move is a slot whose expert changes. Its weights (``expert_bytes``) are copied from a GPU that holds the expert in
the previous placement to the slot's GPU. The source is chosen per move, nearest first: the same GPU (a local copy,
no traffic), a GPU of the same node (NVLink), a GPU with the same local index on another node (its NIC is on the
same plane: no PXN relay), any other holder; among equally near holders the moves rotate over them so copies of a
hot expert spread over its replicas. Every move of every layer runs at once (one rebalance), copies between the
same pair of GPUs are merged into one flow, and the time is what ``dsctl topology simulate`` computes for that
traffic (``dsctl.topology.sim.transfer_time``: max-min fair rates on the plan's links, NVLink inside a node,
re-solved as copies finish as ``topology simulate --reflow`` does).

EP GPU g of the placement is GPU g of the plan (node g // GPUs per node of the plan, in plan order): the plan must
have at least as many GPUs, and the same GPUs per node as the layout when the layout spans several nodes.

The time is set against the predicted gain: ``gain`` (relative drop of the summed max GPU load) of every step's
load-bound time. With ``step_time_s`` (seconds per step that scale with the max GPU load: the MoE part of a step)
the saving is ``gain * step_time_s`` per step and the moves pay back after ``move_s / (gain * step_time_s)`` steps;
without it, after ``move_s / gain`` seconds of such step time (``dsctl.eplb.move_cost``).

This module imports the fabric simulator (``dsctl.topology.sim``, some 60 modules): only a rebalance with ``--plan``
loads it; the fabric and result types and the payback arithmetic live in the light ``dsctl.eplb.move_cost``.
"""

from __future__ import annotations

import numpy as np

from dsctl.cluster import load_plan
from dsctl.eplb.move_cost import MoveFabric, MoveTime
from dsctl.eplb.placement import Placement
from dsctl.errors import InputError
from dsctl.topology import sim


def _check_fabric(fabric: MoveFabric, num_gpus: int, num_nodes: int) -> int:
    """GPUs per node of the plan, checked against the layout (InputError naming the field ``fabric``)."""
    planned = load_plan(fabric.plan_text, fabric.plan_name)
    per_node = int(planned.number("num_gpus_per_node", 0))
    if per_node < 1:
        raise InputError(f"{fabric.plan_name}: spec.num_gpus_per_node is missing", field="fabric",
                         hint="regenerate it with 'dsctl topology plan --out-dir DIR'")
    total = per_node * len(planned.nodes)
    nodes = f"{len(planned.nodes)} node{'s' if len(planned.nodes) != 1 else ''}"
    if num_gpus > total:
        raise InputError(f"{fabric.plan_name} has {total} GPUs ({nodes} x {per_node}); "
                         f"the placement spans {num_gpus}", field="fabric",
                         hint="plan at least as many nodes, or give a smaller layout")
    if num_nodes > 1 and num_gpus != num_nodes * per_node:
        raise InputError(f"{fabric.plan_name} has {per_node} GPUs per node; the layout puts "
                         f"{num_gpus} GPUs on {num_nodes} nodes ({num_gpus / num_nodes:g} per node)", field="fabric",
                         hint="give -N/--nodes and --gpus that match the plan's nodes")
    return per_node


def move_transfers(previous: Placement, new: Placement, num_gpus: int, gpus_per_node: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The copies of a migration: (source GPU, destination GPU, copy count) per GPU pair, int64 arrays [P].

    Sources are chosen as the module doc says; local copies (source = destination) are included with their count.
    """
    old, cur = np.asarray(previous.phy2log), np.asarray(new.phy2log)
    per_gpu = old.shape[1] // num_gpus
    layer, slot = np.nonzero(old != cur)
    if not len(layer):
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    expert = cur[layer, slot]
    dst = slot // per_gpu
    holders = previous.log2phy[layer, expert]  # [T, M] slots of the expert before, -1 padded
    valid = holders >= 0
    hold_gpu = np.where(valid, holders, 0) // per_gpu
    dst_col = dst[:, None]
    tier = np.where(hold_gpu == dst_col, 0,
                    np.where(hold_gpu // gpus_per_node == dst_col // gpus_per_node, 1,
                             np.where(hold_gpu % gpus_per_node == dst_col % gpus_per_node, 2, 3)))
    tier = np.where(valid, tier, 9)
    width = holders.shape[1]
    rotate = (np.arange(len(layer))[:, None] + np.arange(width)[None, :]) % width  # spread over equal holders
    pick = np.argmin(tier * width + rotate, axis=1)
    src = hold_gpu[np.arange(len(layer)), pick]
    pair = src * num_gpus + dst
    pairs, counts = np.unique(pair, return_counts=True)
    return pairs // num_gpus, pairs % num_gpus, counts.astype(np.int64)


def time_moves(previous: Placement, new: Placement, num_gpus: int, num_nodes: int, expert_bytes: int,
               fabric: MoveFabric) -> MoveTime:
    """Simulate the migration ``previous`` -> ``new`` (same [L, R] shape) on ``fabric`` (module doc)."""
    per_node = _check_fabric(fabric, num_gpus, num_nodes)
    src, dst, count = move_transfers(previous, new, num_gpus, per_node)
    local = src == dst
    same_node = ~local & (src // per_node == dst // per_node)
    network = ~local & ~same_node
    sizes = count * float(expert_bytes)
    moving = ~local
    if moving.any():
        result = sim.transfer_time(fabric.plan_text, fabric.plan_name, fabric.nvlink_bytes_per_s, src[moving],
                                   dst[moving], sizes[moving], routing=fabric.routing, reflow=fabric.reflow,
                                   name="--plan moves")
        move_s, lower = float(result.completion_s), float(result.lower_bound_s)
    else:
        move_s = lower = 0.0
    return MoveTime(move_s, lower, int(count[local].sum()), int(count[same_node].sum()),
                    int(count[network].sum()), int(count[network].sum()) * int(expert_bytes))
