"""Parallel layouts: how many ways a training job is split along pipeline, expert, tensor and data parallelism.

Conventions (Megatron-LM ``order="tp-cp-ep-dp-pp"``, context parallelism fixed at 1):

- ``world_size = pp x dp x tp`` GPUs. **EP does not multiply the world size**: it is carved out of the
  ``tp x dp`` ranks of one pipeline stage. Experts are never tensor-parallel (expert-TP = 1, as in DeepSeek-V3),
  so every pipeline stage's ``tp x dp`` ranks split into ``expert_dp = tp x dp / ep`` expert-parallel groups of
  ``ep`` ranks each, and every routed expert is replicated ``expert_dp`` times.
- Optimizer states are sharded ZeRO-1 style over each parameter's data-parallel group (dense parameters over
  ``dp``, routed-expert parameters over ``expert_dp``).
- ``pp`` counts pipeline *ranks* (GPUs in one pipeline group). With ``dualpipev`` and ``interleaved`` the model
  is cut into ``2 x pp`` stages (two per rank); with every other schedule into ``pp`` stages.

Every check raises :class:`~dsctl.errors.InputError` whose message shows the arithmetic that failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dsctl.errors import InputError, one_of
from dsctl.launch.rules import check_schedule_layout, check_schedule_name, divisors, ep_node_aligned, num_stages

#: ZeRO stages the memory model knows (the step-time model: 1 and 2, docs/launch.md "ZeRO stages")
ZERO_STAGES: tuple[int, ...] = (1, 2, 3)


@dataclass(frozen=True)
class ParallelLayout:
    """One parallel layout of ``num_nodes x gpus_per_node`` GPUs.

    ``pp``, ``ep``, ``tp``, ``dp`` are the degrees (group sizes) of pipeline, expert, tensor and data
    parallelism; ``schedule`` is the pipeline schedule; ``zero_stage`` what is sharded over each parameter's
    data-parallel group: 1 optimizer states, 2 also gradients, 3 also parameters (docs/launch.md, "ZeRO stages").
    """

    num_nodes: int
    gpus_per_node: int
    pp: int
    ep: int
    tp: int
    dp: int
    schedule: str = "dualpipe"
    zero_stage: int = 1

    def __post_init__(self) -> None:
        """A layout is valid by construction: every rule that needs no model is checked here (InputError with the
        arithmetic); the model's rules (experts, layers) and the batch's are :func:`validate_layout`'s."""
        for name in ("pp", "ep", "tp", "dp"):
            _positive(name, getattr(self, name))
        if self.zero_stage not in ZERO_STAGES:
            raise InputError(f"ZeRO stage {self.zero_stage} is not one of {one_of([str(z) for z in ZERO_STAGES])}")
        if self.num_nodes < 1:
            raise InputError(f"{self.num_nodes} is not valid: it must be a whole number >= 1", field="nodes")
        gpn, world = self.gpus_per_node, self.world_size
        resolve_dp(self.num_nodes, gpn, self.pp, self.tp, self.dp)
        check_tp_in_node(self.tp, gpn)
        stage_ranks = self.stage_ranks
        if stage_ranks % self.ep:
            raise InputError(
                f"ep {self.ep} does not divide the tp {self.tp} x dp {self.dp} = {stage_ranks} ranks of a "
                f"pipeline stage (EP is carved out of them; it does not multiply the world size {world})",
                hint=f"valid ep here: {one_of([str(d) for d in divisors(stage_ranks)][:12])}",
            )
        if not ep_node_aligned(self.ep, gpn):
            raise InputError(
                f"ep {self.ep} neither divides nor is a multiple of the {gpn} GPUs of a node, so EP groups "
                f"would straddle nodes unevenly and miss network planes",
                hint=f"use ep = {gpn} x k (k nodes per EP group) or a divisor of {gpn}",
            )
        object.__setattr__(self, "schedule", check_schedule_name(self.schedule))
        check_schedule_layout(self.schedule, self.pp, None)

    @property
    def world_size(self) -> int:
        """Number of GPUs (ranks)."""
        return self.num_nodes * self.gpus_per_node

    @property
    def expert_dp(self) -> int:
        """Replicas of each routed expert = number of EP groups per pipeline stage (``tp x dp / ep``)."""
        return self.tp * self.dp // self.ep

    @property
    def stage_ranks(self) -> int:
        """Ranks per pipeline stage (``tp x dp``)."""
        return self.tp * self.dp

    @property
    def num_stages(self) -> int:
        """Model stages: ``2 x pp`` under DualPipeV and interleaved 1F1B (two per rank), else ``pp``."""
        return num_stages(self.schedule, self.pp)

    def degrees(self) -> dict[str, int]:
        """``{"pp", "ep", "tp", "dp"}`` as plain ints (the JSON shape of a layout)."""
        return {"pp": int(self.pp), "ep": int(self.ep), "tp": int(self.tp), "dp": int(self.dp)}

    def to_data(self) -> dict[str, Any]:
        return self.degrees()

    def describe(self) -> str:
        """``PP16 EP64 TP1 DP128`` (the way DeepSeek writes it)."""
        return f"PP{self.pp} EP{self.ep} TP{self.tp} DP{self.dp}"


def tp_in_node(tp: int, gpus_per_node: int) -> bool:
    """Whether ``tp`` (>= 1) divides the GPUs of a node (tensor parallelism stays on NVLink)."""
    return 1 <= tp <= gpus_per_node and gpus_per_node % tp == 0


def check_tp_in_node(tp: int, gpus_per_node: int) -> None:
    """:func:`tp_in_node`, raising InputError."""
    if not tp_in_node(tp, gpus_per_node):
        raise InputError(
            f"tp {tp} must divide the {gpus_per_node} GPUs of a node (tensor parallelism stays on NVLink)",
            hint=f"valid tp: {one_of([str(d) for d in divisors(gpus_per_node)])}",
        )


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise InputError(f"{value} is not valid: it must be a whole number >= 1", field=name)


def resolve_dp(num_nodes: int, gpus_per_node: int, pp: int, tp: int, dp: int | None) -> int:
    """Data-parallel degree: ``world / (pp x tp)`` when ``dp`` is None (``--dp auto``), else ``dp`` checked.

    Raises InputError with the arithmetic when the degrees do not multiply to the world size.
    """
    world = num_nodes * gpus_per_node
    where = f"{num_nodes} nodes x {gpus_per_node} GPUs"
    if dp is None:
        if world % (pp * tp):
            raise InputError(
                f"pp {pp} x tp {tp} = {pp * tp} does not divide world size {world} ({where}), so dp cannot be whole",
                hint=f"choose pp x tp among the divisors of {world}",
            )
        return world // (pp * tp)
    if pp * dp * tp != world:
        raise InputError(
            f"pp {pp} x dp {dp} x tp {tp} = {pp * dp * tp} != world size {world} ({where})",
            hint=f"leave --dp out (auto) to get dp = {world} / (pp x tp)" if world % (pp * tp) == 0 else None,
        )
    return dp


def validate_layout(layout: ParallelLayout, *, num_layers: int, num_routed_experts: int,
                    num_micro_batches: int | None = None) -> None:
    """Check the model's constraints on ``layout`` (its own were checked when it was built); raise InputError with
    the arithmetic on the first failure.

    ``num_layers`` are the model's transformer layers (MTP modules excluded); ``num_routed_experts`` is 0 for a
    dense model. ``num_micro_batches`` (per pipeline per step) is checked against the schedule when given.
    """
    if num_routed_experts:
        if num_routed_experts % layout.ep:
            raise InputError(
                f"{num_routed_experts} routed experts % ep {layout.ep} = {num_routed_experts % layout.ep}: "
                f"experts must split evenly over the EP group",
                hint=f"valid ep: {one_of([str(d) for d in divisors(num_routed_experts)])}",
            )
    elif layout.ep != 1:
        raise InputError(f"ep {layout.ep} needs a mixture-of-experts model; this model is dense, use ep 1")
    stages = layout.num_stages
    if stages > num_layers:
        raise InputError(
            f"{stages} pipeline stages > {num_layers} transformer layers: every stage needs at least one layer"
            + (f" ({layout.schedule} cuts the model into 2 x pp {layout.pp} = {stages} stages)"
               if layout.schedule in ("dualpipev", "interleaved") else ""),
        )
    check_schedule_layout(layout.schedule, layout.pp, num_micro_batches)
