"""Training-launch planning: parallel layout, stage split, memory fit, rank map and pipeline schedules."""

#: the public surface: the modules (and names) other packages, the commands and benchmarks may import;
#: tests/unit/test_architecture.py holds every import from outside the package to this list
__all__ = [
    "candidates",
    "defaults",
    "engines",
    "imbalance",
    "layout",
    "layout_report",
    "memory",
    "minnodes",
    "plan",
    "ranking",
    "rankmap",
    "request",
    "rules",
    "schedule",
    "search",
    "search_explain",
    "stages",
    "sweep",
    "tensor_parallel",
]
