"""The arithmetic behind the paper's tables: parameters, KV cache, training FLOPs, GPU hours, EP speed limit.

Pure functions over ``ModelProfile`` / plain numbers; see docs/model.md for the formulas.
"""

from dsctl.model.params import ParameterCounts, bytes_per_routed_expert, count_parameters

__all__ = ["ParameterCounts", "bytes_per_routed_expert", "count_parameters"]
