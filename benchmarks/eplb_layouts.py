"""The DeepSeek-V3-scale EPLB layouts every EPLB benchmark and comparison script runs."""

from __future__ import annotations

#: MoE layers, routed experts and expert groups of DeepSeek-V3
NUM_LAYERS, NUM_EXPERTS, NUM_GROUPS = 58, 256, 8

#: (label, replicas, nodes, gpus, policy)
LAYOUTS: list[tuple[str, int, int, int, str]] = [
    ("hier 288 / 4x8", 288, 4, 32, "hierarchical"),
    ("hier 320 / 8x8", 320, 8, 64, "hierarchical"),
    ("global 288 / 32", 288, 4, 32, "global"),
    ("global 320 / 64", 320, 8, 64, "global"),
]
