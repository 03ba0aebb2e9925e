"""Expert-parallel load balancing: where each MoE expert's replicas live, from routing statistics."""

#: the public surface: the modules (and names) other packages, the commands and benchmarks may import;
#: tests/unit/test_architecture.py holds every import from outside the package to this list
__all__ = [
    "balanced",
    "bounds",
    "budget",
    "checks",
    "exact",
    "metrics",
    "migration",
    "milp",
    "move_time",
    "pareto",
    "placement",
    "placement_file",
    "rebalance",
    "reference",
    "request",
    "result",
    "simulate",
    "stats",
    "windows",
]
