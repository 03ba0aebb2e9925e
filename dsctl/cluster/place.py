"""Where each rank sits: the rank map (ranks.csv) joined with the planned fabric (plan.json).

Rank ``r`` runs on node ``nodes[node[r]]``, GPU ``local_gpu[r]``, which uses NIC ``nics[local_gpu[r]]`` on that
NIC's plane, cabled to one leaf port; it is in pipeline stage ``pp[r]``, EP group ``ep_group[r]`` (the ranks of
one pipeline stage with the same ``edp``) and dense DP group ``dp_group[r]`` (same stage, same ``tp``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dsctl.cluster.plan_file import PlannedFabric
from dsctl.cluster.ranks_file import RankTable
from dsctl.errors import InputError


@dataclass(frozen=True)
class Places:
    """Per-rank places, every array of shape ``(world_size,)`` indexed by global rank.

    Name arrays (``node_name``, ``nic``, ``leaf``) hold ``""`` where no plan was given or the plan lacks the
    object; ``leaf_port`` is 0 there. ``plane`` comes from the plan's NIC planes when a plan is given, else
    from ranks.csv.
    """

    node: np.ndarray = field(repr=False)
    local_gpu: np.ndarray = field(repr=False)
    plane: np.ndarray = field(repr=False)
    pp: np.ndarray = field(repr=False)
    ep_group: np.ndarray = field(repr=False)
    dp_group: np.ndarray = field(repr=False)
    node_name: np.ndarray = field(repr=False)
    nic: np.ndarray = field(repr=False)
    leaf: np.ndarray = field(repr=False)
    leaf_port: np.ndarray = field(repr=False)

    @property
    def world_size(self) -> int:
        return int(self.node.shape[0])

    def of(self, rank: int) -> dict[str, Any]:
        """The place of one rank as plain data (what JSON output carries)."""
        return {
            "rank": rank, "node": int(self.node[rank]), "node_name": str(self.node_name[rank]),
            "gpu": int(self.local_gpu[rank]), "nic": str(self.nic[rank]), "plane": int(self.plane[rank]),
            "leaf": str(self.leaf[rank]), "leaf_port": int(self.leaf_port[rank]), "pp_stage": int(self.pp[rank]),
            "ep_group": int(self.ep_group[rank]), "dp_group": int(self.dp_group[rank]),
        }


def place_ranks(ranks: RankTable, fabric: PlannedFabric | None = None, ranks_name: str = "ranks.csv",
                plan_name: str = "plan.json") -> Places:
    """Join a rank map with a plan. InputError when the rank map uses more nodes or GPUs than the plan has."""
    node, gpu = ranks["node"], ranks["local_gpu"]
    n = ranks.world_size
    num_edp = int(ranks["edp"].max()) + 1
    num_tp = int(ranks["tp"].max()) + 1
    ep_group = ranks["pp"] * num_edp + ranks["edp"]
    dp_group = ranks["pp"] * num_tp + ranks["tp"]
    empty = np.full(n, "", dtype=object)
    if fabric is None:
        return Places(node, gpu, ranks["plane"], ranks["pp"], ep_group, dp_group, empty, empty.copy(),
                      empty.copy(), np.zeros(n, dtype=np.int64))
    nodes, nics = fabric.nodes, fabric.nics
    if ranks.num_nodes > len(nodes):
        raise InputError(f"{ranks_name} places ranks on {ranks.num_nodes} nodes but {plan_name} plans "
                         f"{len(nodes)}", hint="plan the fabric for at least as many nodes as the job uses")
    if int(gpu.max()) >= len(nics):
        raise InputError(f"{ranks_name} uses GPU {int(gpu.max())} of a node but {plan_name} gives each node "
                         f"{len(nics)} NICs (GPU i uses NIC i)")
    node_names = np.array(nodes, dtype=object)[node]
    nic_names = np.array(nics, dtype=object)[gpu]
    planes = np.array([fabric.nic_plane[x] for x in nics], dtype=np.int64)[gpu]
    uplink = fabric.uplink
    node_count, nic_count = len(nodes), len(nics)
    leaf_of = np.full(node_count * nic_count, "", dtype=object)
    port_of = np.zeros(node_count * nic_count, dtype=np.int64)
    node_index = {name: i for i, name in enumerate(nodes)}
    nic_index = {name: i for i, name in enumerate(nics)}
    for (dev, nic), (leaf, port) in uplink.items():
        k = node_index[dev] * nic_count + nic_index[nic]
        leaf_of[k], port_of[k] = leaf, int(port)
    slot = node * nic_count + gpu
    return Places(node, gpu, planes, ranks["pp"], ep_group, dp_group, node_names, nic_names, leaf_of[slot],
                  port_of[slot])
