"""The arithmetic behind the paper's tables: parameters, KV cache, training FLOPs, GPU hours, EP speed limit.

Pure functions over ``ModelProfile`` / plain numbers; see docs/model.md for the formulas.
"""

from dsctl.model.params import ParameterCounts, bytes_per_routed_expert, count_parameters

#: the public surface: the modules (and names) other packages, the commands and benchmarks may import;
#: tests/unit/test_architecture.py holds every import from outside the package to this list
__all__ = [
    "ParameterCounts",
    "bytes_per_routed_expert",
    "checks",
    "cost",
    "count_parameters",
    "dtypes",
    "ep",
    "flops",
    "kvcache",
    "memory",
    "params",
    "recipes",
]
