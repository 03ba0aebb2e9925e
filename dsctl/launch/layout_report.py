"""``dsctl launch layout``: the layout part of the plan ``dsctl launch`` would make (the same search, so the two
never disagree), why it was chosen, the stage split, the rank map and (``--explain``) every group."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from dsctl.errors import InputError
from dsctl.launch import minnodes
from dsctl.launch.plan import LaunchPlan, Progress, plan_launch
from dsctl.launch.rankmap import GROUP_KINDS, GROUP_MEANING
from dsctl.launch.request import LaunchRequest
from dsctl.launch.search import SearchOptions
from dsctl.profiles.schema import ModelProfile, NodeProfile


@dataclass(frozen=True)
class GroupListing:
    """Every group of one kind: ``ranks`` has shape ``(num_groups, group_size)``."""

    kind: str
    meaning: str
    num_groups: int
    group_size: int
    ranks: Any  # numpy int64 array

    def to_data(self) -> dict[str, Any]:
        return {"kind": self.kind, "meaning": self.meaning, "num_groups": self.num_groups,
                "group_size": self.group_size, "ranks": self.ranks.tolist()}


@dataclass(frozen=True)
class LayoutReport:
    """``dsctl launch layout``: the layout part of a plan, why it was chosen, the stage split, the rank map and
    (``--explain``) every group. ``min_nodes`` is the node count ``--min-nodes`` found (None: given as --nodes).
    The JSON keeps the memory check to ``memory_fits`` / ``max_memory_bytes`` / ``hbm_bytes`` (details in
    ``dsctl launch``); ``exit_code`` is 1 when the layout does not fit in memory, as for ``dsctl launch``."""

    plan: LaunchPlan
    groups: tuple[GroupListing, ...] = ()
    min_nodes: int | None = None
    #: the first layout ``--min-nodes`` found to fit at ``min_nodes`` (the plan shows the best one there)
    min_nodes_layout: str = ""

    @property
    def choices(self) -> tuple[str, ...]:
        rule = ("the layout 'dsctl launch' plans with the same options (the same search by predicted step)"
                if self.plan.search is not None else "the memory rule (smallest pp that fits)")
        if self.min_nodes is None:
            return (*self.plan.choices, rule)
        first = f"; {self.min_nodes_layout} fits there" if self.min_nodes_layout else ""
        return (*self.plan.choices, rule, f"--min-nodes: {self.min_nodes} is the smallest node count that fits "
                                          f"(every smaller count was checked{first})")

    @property
    def exit_code(self) -> int:
        return self.plan.exit_code

    def to_data(self) -> dict[str, Any]:
        p = self.plan
        return {
            "model": p.model, "node_profile": p.node_profile, "num_nodes": p.num_nodes,
            "gpus_per_node": p.gpus_per_node, "world_size": p.world_size, "layout": p.layout,
            "expert_dp": p.expert_dp, "zero_stage": p.zero_stage, "schedule": p.schedule, "num_stages": p.num_stages,
            "micro_batches": p.batch.micro_batches, "stages": p.stages, "choices": self.choices,
            "memory_fits": p.memory.fits, "max_memory_bytes": p.memory.max_total_bytes,
            "hbm_bytes": p.memory.hbm_bytes, "rank_map": p.rank_map, "groups": self.groups,
            "exit_code": self.exit_code,
        }


def plan_layout(model: ModelProfile, node: NodeProfile, request: LaunchRequest, explain: bool = False,
                find_min_nodes: bool = False, progress: Progress | None = None,
                search: SearchOptions | None = None, balancedness: float = 1.0,
                fabric_plan: str | None = None) -> LayoutReport:
    """``dsctl launch layout``: the plan of ``request``, every group with ``explain``. With ``search`` the layout
    is the one ``dsctl launch`` chooses (:func:`dsctl.launch.plan.plan_launch` with the same search); without,
    the memory rule's, and no schedule is simulated.

    ``find_min_nodes``: plan the smallest node count that fits instead of ``request.num_nodes``
    (:func:`dsctl.launch.minnodes.smallest_fit` over the search's space, else the memory rule's; reporting to
    ``progress``); InputError if none up to its limit does.
    """
    found = None
    if find_min_nodes:
        found = minnodes.smallest_fit(model, node, request, progress=progress, search=search)
        if found is None:
            raise InputError(f"no node count up to {minnodes.SEARCH_LIMIT_NODES:,} fits {model.name} on {node.name} "
                             "with these options", hint="try --tp, --pp, or a smaller --global-batch / --micro-batches")
        request = replace(request, num_nodes=found.num_nodes)
    plan = plan_launch(model, node, request, simulate_schedule=search is not None, search=search,
                       balancedness=balancedness, fabric_plan=fabric_plan)
    groups: tuple[GroupListing, ...] = ()
    if explain:
        groups = tuple(GroupListing(kind, GROUP_MEANING[kind], int(ranks.shape[0]), int(ranks.shape[1]), ranks)
                       for kind in GROUP_KINDS for ranks in (plan.ranks.groups(kind),))
    return LayoutReport(plan, groups, found.num_nodes if found else None, found.label if found else "")
