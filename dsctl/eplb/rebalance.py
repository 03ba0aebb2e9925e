"""``dsctl eplb rebalance`` as one domain call: check the input, run the chosen algorithm, measure the result.

Algorithms: ``reference`` (DeepSeek's EPLB, exact; dsctl.eplb.reference), ``balanced`` (dsctl.eplb.balanced),
and migration-aware planning from a previous placement (dsctl.eplb.migration).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from dsctl.eplb.balanced import rebalance_balanced
from dsctl.eplb.checks import Layout, check_layout, check_weight
from dsctl.eplb.metrics import placement_metrics
from dsctl.eplb.migration import rebalance_with_previous
from dsctl.eplb.placement import Placement
from dsctl.eplb.placement_file import LoadedPlacement, placement_warnings
from dsctl.eplb.reference import rebalance_layout
from dsctl.eplb.result import MigrationSummary, RebalanceResult
from dsctl.errors import InputError
from dsctl.model.params import bytes_per_routed_expert
from dsctl.profiles.schema import ModelProfile

ALGORITHMS = ("reference", "balanced")
#: --tolerance when none is given: the plan may lose 1% of the unconstrained balancedness to move fewer replicas
DEFAULT_TOLERANCE = 0.01


def expert_size_bytes(model: ModelProfile, bytes_per_param: float = 1.0) -> int | None:
    """Bytes of one routed expert's weights, or None for a dense model.

    ``bytes_per_param`` 1.0 = FP8 (DeepSeek-V3 as served; block scales add < 0.1%), 2.0 = BF16.
    """
    if model.moe is None:
        return None
    return bytes_per_routed_expert(model, bytes_per_param)


def _run_algorithm(weight: np.ndarray, layout: Layout, algorithm: str,
                   progress: Callable[[int, int], None] | None = None) -> Placement:
    if algorithm == "reference":
        return rebalance_layout(weight, layout)
    return rebalance_balanced(weight, layout.num_replicas, layout.num_groups, layout.num_nodes,
                              layout.num_gpus, layout.policy, progress)


def _check_previous(previous: Placement, layout: Layout) -> None:
    expected = (layout.num_layers, layout.num_replicas)
    if tuple(previous.phy2log.shape) != expected:
        raise InputError(f"--previous placement is {previous.phy2log.shape[0]} MoE layers x "
                         f"{previous.phy2log.shape[1]} slots, "
                         f"but the statistics and --replicas give {expected[0]} layers x {expected[1]} slots")
    if previous.num_experts != layout.num_experts:
        raise InputError(f"--previous placement has {previous.num_experts} experts, "
                         f"the statistics have {layout.num_experts}")


def rebalance(
    weight: np.ndarray,
    *,
    num_replicas: int,
    num_gpus: int,
    num_nodes: int,
    num_groups: int,
    policy: str = "auto",
    algorithm: str = "reference",
    previous: Placement | LoadedPlacement | None = None,
    tolerance: float | None = None,
    expert_bytes: int | None = None,
    sources: tuple[str, ...] = (),
    num_dense_layers: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> RebalanceResult:
    """Plan a placement for ``weight`` [L, E] (summed routing statistics) and measure it before/after.

    ``previous`` is the current placement (read by ``export.read_placement``, the reader ``simulate`` uses too);
    ``tolerance`` (None = ``DEFAULT_TOLERANCE``) only applies with it: a value other than the default without
    ``previous`` is an InputError, the default given explicitly only a warning.
    ``progress(steps_done, num_steps)`` is called as the balanced algorithm's refinement steps finish.
    Raises InputError for any bad input (rules V1-V12, unknown algorithm, mismatching previous placement).
    """
    if algorithm not in ALGORITHMS:
        raise InputError(f"--algorithm {algorithm!r} is not valid: choose reference or balanced")
    extra_warnings: tuple[str, ...] = ()
    if tolerance is not None:
        if not 0.0 <= tolerance < 1.0:
            raise InputError(f"--tolerance {tolerance} must be in [0, 1) (a fraction: 0.01 = 1% of the balancedness)")
        if previous is None:
            if tolerance != DEFAULT_TOLERANCE:
                raise InputError(f"--tolerance {tolerance} only applies with --previous (migration-aware planning)",
                                 hint="drop --tolerance, or give the current placement with --previous FILE")
            extra_warnings += ("--tolerance only applies with --previous; ignored",)
    tolerance = DEFAULT_TOLERANCE if tolerance is None else tolerance
    if isinstance(previous, LoadedPlacement):
        extra_warnings += placement_warnings(previous)
        previous = previous.placement
    checked, weight_warnings = check_weight(weight, "statistics")
    layout = check_layout(checked.shape[0], checked.shape[1], num_replicas, num_groups, num_nodes, num_gpus, policy)
    migration = None
    if previous is None:
        placement = _run_algorithm(checked, layout, algorithm, progress)
    else:
        _check_previous(previous, layout)
        result = rebalance_with_previous(checked, previous, layout.num_replicas, layout.num_groups,
                                                layout.num_nodes, layout.num_gpus, layout.policy, tolerance, algorithm)
        placement = result.placement
        moved = int(result.replicas_moved)
        details: dict[str, Any] = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)
                                   if f.name not in ("placement", "replicas_moved")}
        migration = MigrationSummary(moved, None if expert_bytes is None else moved * expert_bytes,
                                     expert_bytes, tolerance, details)
    metrics = placement_metrics(checked, placement, layout)
    return RebalanceResult(placement, metrics, layout, algorithm, sources,
                           weight_warnings + layout.warnings + extra_warnings, migration, num_dense_layers)
