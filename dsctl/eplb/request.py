"""What ``eplb rebalance`` is asked for, as one frozen value that checks its own option rules.

Errors name the request's fields (``tolerance``), never command-line options: the command layer's table
(``FIELD_OPTIONS`` in dsctl/commands/eplb.py) spells each field as the option the user typed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsctl.eplb.checks import POLICIES
from dsctl.eplb.migration import ALGORITHMS
from dsctl.errors import InputError, one_of

if TYPE_CHECKING:
    from dsctl.eplb.move_cost import MoveFabric
    from dsctl.eplb.placement import Placement
    from dsctl.eplb.placement_file import LoadedPlacement
    from dsctl.profiles.schema import ModelProfile

#: tolerance when none is given: the plan may lose 1% of the unconstrained balancedness to move fewer replicas
DEFAULT_TOLERANCE = 0.01
#: the fields that only mean something when a previous placement is given (migration-aware planning)
MIGRATION_FIELDS = ("tolerance", "max_moves", "max_move_bytes", "min_gain", "fabric", "step_time_s")
_WITH_PREVIOUS_HINT = "give the current placement with --previous FILE"


@dataclass(frozen=True)
class RebalanceRequest:
    """One rebalance: the layout (None = from the model's published ``deployment``), the algorithm, and the
    migration-aware options that apply with a ``previous`` placement.

    ``expert_bytes``: bytes of one routed expert's weights (None: the model's at ``bytes_per_param``, 1.0 = FP8);
    ``num_dense_layers``: model layers before the first MoE row (None: the model's when the rows are its MoE
    layers); ``fabric``: the planned fabric the moves are timed on (``dsctl.eplb.move_time``), with
    ``node_profile`` the profile its NVLink bandwidth came from (None: the plan's); ``step_time_s``: seconds per
    step that scale with the max GPU load. Construction raises InputError naming the first field that breaks a rule.
    """

    replicas: int | None = None
    gpus: int | None = None
    nodes: int | None = None
    groups: int | None = None
    model: ModelProfile | None = None
    deployment: str = "prefill"
    policy: str = "auto"
    algorithm: str = "reference"
    prove: bool = False
    #: with ``prove``: ``search``, ``milp`` or ``auto`` (dsctl.eplb.prove_milp), and the MILP's seconds per run
    prove_with: str = "search"
    prove_time_s: float | None = None
    previous: Placement | LoadedPlacement | None = None
    tolerance: float | None = None
    max_moves: int | None = None
    max_move_bytes: int | None = None
    min_gain: float | None = None
    fabric: MoveFabric | None = None
    node_profile: str | None = None
    step_time_s: float | None = None
    bytes_per_param: float = 1.0
    expert_bytes: int | None = None
    num_dense_layers: int | None = None
    sources: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise InputError(f"{self.algorithm!r} is not valid: choose {one_of(ALGORITHMS)}", field="algorithm")
        if self.policy not in POLICIES:
            raise InputError(f"{self.policy!r} is not valid: choose {one_of(POLICIES)}", field="policy")
        if not (math.isfinite(self.bytes_per_param) and self.bytes_per_param > 0):
            raise InputError(f"{self.bytes_per_param} must be a positive number of bytes (1 = FP8, 2 = BF16)",
                             field="bytes_per_param")
        if self.tolerance is not None and not (math.isfinite(self.tolerance) and 0.0 <= self.tolerance < 1.0):
            raise InputError(f"{self.tolerance} must be in [0, 1) (a fraction: 0.01 = 1% of the balancedness)",
                             field="tolerance")
        if self.max_moves is not None and self.max_moves < 0:
            raise InputError(f"{self.max_moves} must be >= 0 (replicas moved over all layers)", field="max_moves")
        if self.max_move_bytes is not None and self.max_move_bytes < 0:
            raise InputError(f"{self.max_move_bytes} must be >= 0", field="max_move_bytes")
        if self.min_gain is not None and not (math.isfinite(self.min_gain) and 0.0 <= self.min_gain < 1.0):
            raise InputError(f"{self.min_gain} must be in [0, 1) (a fraction of the max load per step)",
                             field="min_gain")
        if self.step_time_s is not None and not (math.isfinite(self.step_time_s) and self.step_time_s > 0):
            raise InputError(f"{self.step_time_s} must be a positive number of seconds", field="step_time_s")
        if not self.prove and (self.prove_with != "search" or self.prove_time_s is not None):
            raise InputError("and {prove_time_s} apply with {prove}", field="prove_with",
                             mentions=("prove_time_s", "prove"), hint="ask for a proof with --prove")
        if self.node_profile is not None and self.fabric is None:
            raise InputError("only applies with a planned fabric (its NVLink bandwidth)", field="node_profile",
                             hint="give the plan with --plan, or drop --node-profile")
        if self.previous is None:
            self._check_without_previous()
        if self.step_time_s is not None and self.fabric is None:
            raise InputError("only applies with a planned fabric (the fabric the moves are timed on)",
                             field="step_time_s", hint="give the plan with --plan")

    def _check_without_previous(self) -> None:
        for name in MIGRATION_FIELDS:
            value = getattr(self, name)
            if value is None or (name == "tolerance" and value == DEFAULT_TOLERANCE):
                continue
            shown = "" if name == "fabric" else f"{value} "
            raise InputError(f"{shown}only applies with a previous placement (migration-aware planning)",
                             field=name, hint=_WITH_PREVIOUS_HINT)

    @property
    def layout_missing(self) -> bool:
        """True when the layout needs the model's deployment (a replica, GPU or node count not given)."""
        return None in (self.replicas, self.gpus, self.nodes)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Options given that change nothing (the default tolerance without a previous placement)."""
        if self.previous is None and self.tolerance is not None:
            return ("--tolerance only applies with --previous; ignored",)
        return ()

    @property
    def accepted_tolerance(self) -> float:
        """The tolerance planning accepts (``DEFAULT_TOLERANCE`` when none is given)."""
        return DEFAULT_TOLERANCE if self.tolerance is None else self.tolerance
