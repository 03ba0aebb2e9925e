"""Training step time in seconds from profiles (issue 27): per-stage op costs, the schedule simulated with them,
ZeRO-1 and optimizer tail. ``predict_step`` is the entry point; docs/steptime.md has the formulas and sources."""

from dsctl.steptime.collectives import PREDICTED_ZERO_STAGES
from dsctl.steptime.ep import EpCostModel, EpSeconds, FabricEp, fabric_ep
from dsctl.steptime.predict import predict_step, step_lower_bound
from dsctl.steptime.result import (
    DEFAULT_GPU_HOUR_USD,
    PhaseBreakdown,
    StageCost,
    StepTime,
    TokenBudget,
    token_budget,
)

#: the public surface: the modules (and names) other packages, the commands and benchmarks may import;
#: tests/unit/test_architecture.py holds every import from outside the package to this list
__all__ = [
    "DEFAULT_GPU_HOUR_USD",
    "PREDICTED_ZERO_STAGES",
    "EpCostModel",
    "EpSeconds",
    "FabricEp",
    "PhaseBreakdown",
    "StageCost",
    "StepTime",
    "TokenBudget",
    "calibrate",
    "fabric_ep",
    "mfu",
    "predict_step",
    "step_lower_bound",
    "token_budget",
]
