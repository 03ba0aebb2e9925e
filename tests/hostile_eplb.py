"""Very large eplb inputs (issue 33): each ``CASES[name] = (what, args(tmp) -> argv after "dsctl")``.

Used by tests/cli/test_hardening_round4_eplb.py (exit 2 naming the limit) and ``python -m
benchmarks.eplb_hostile_peaks`` (peak memory and time of each in a fresh process).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np


def _npy(tmp: Path, name: str, loads: np.ndarray) -> str:
    path = tmp / name
    np.save(path, loads)
    return str(path)


def _stats(tmp: Path, layers: int, experts: int, hot: bool = False) -> str:
    loads = np.random.default_rng(0).integers(1, 1000, (layers, experts)).astype(np.float64)
    if hot:
        loads[:, 0] = 1e12  # one expert takes nearly every replica
    return _npy(tmp, f"s{layers}x{experts}{'hot' if hot else ''}.npy", loads)


def _hot_placement(tmp: Path) -> str:
    """One layer, 4,096 experts in 65,536 slots, expert 0 in 61,441 of them."""
    row = list(range(4096)) + [0] * (65536 - 4096)
    path = tmp / "hot_placement.json"
    path.write_text(json.dumps({"phy2log": [row], "layout": {"num_gpus": 4096}}))
    return str(path)


def _many_numbers(tmp: Path) -> str:
    """3,000,000 slot ids (6 MB): above MAX_PLAN_SLOTS before the JSON parser builds them."""
    path = tmp / "many.json"
    path.write_text('{"phy2log": [[' + "0," * 2_999_999 + "0]]}")
    return str(path)


CASES: dict[str, tuple[str, Callable[[Path], list[str]]]] = {
    "balanced_large": ("rebalance --algorithm balanced, 4 layers x 4,096 experts, 8,192 slots on 1,024 GPUs "
                       "(before: 57 s, 573 MiB)",
                       lambda t: ["eplb", "rebalance", _stats(t, 4, 4096), "--replicas", "8192", "--gpus", "1024",
                                  "--nodes", "1", "--algorithm", "balanced"]),
    "reference_hot_expert": ("rebalance --algorithm reference, 4,096 experts in 65,536 slots, one expert hot "
                             "(before: > 120 s, 6 GB)",
                             lambda t: ["eplb", "rebalance", _stats(t, 1, 4096, hot=True), "--replicas", "65536",
                                        "--gpus", "4096", "--nodes", "1", "--algorithm", "reference"]),
    "simulate_hot_placement": ("simulate a placement giving one expert 61,441 of 65,536 slots",
                               lambda t: ["eplb", "simulate", _stats(t, 1, 4096), _hot_placement(t)]),
    "previous_hot_placement": ("rebalance --previous with that placement",
                               lambda t: ["eplb", "rebalance", _stats(t, 1, 4096), "--previous", _hot_placement(t),
                                          "--replicas", "65536", "--gpus", "4096", "--nodes", "1",
                                          "--algorithm", "reference"]),
    "simulate_many_numbers": ("simulate a 6 MB placement of 3,000,000 slot ids",
                              lambda t: ["eplb", "simulate", _stats(t, 1, 4), _many_numbers(t), "--gpus", "1"]),
    "budget_many_levels": ("budget with 2 layers x 256 experts on 1 GPU, --total-slots 8,192 (3,841 slot counts)",
                           lambda t: ["eplb", "budget", _stats(t, 2, 256), "--replicas", "4096", "--gpus", "1",
                                      "--nodes", "1", "--total-slots", "8192"]),
    "replay_many_windows": ("replay of 40 windows of 58 x 256 at 1,024 slots, balanced",
                            lambda t: ["eplb", "replay", *[_stats(t, 58, 256)] * 40, "--replicas", "1024", "--gpus",
                                       "128", "--nodes", "16", "--algorithm", "balanced"]),
    "plan_slots": ("rebalance of 3,906 layers x 256 experts at 4,096 slots (16 million slots)",
                   lambda t: ["eplb", "rebalance", _stats(t, 3906, 256), "--replicas", "4096", "--gpus", "512",
                              "--nodes", "64", "--algorithm", "reference"]),
    "replay_min_gain_nan": ("replay --min-gain nan",
                            lambda t: ["eplb", "replay", _stats(t, 2, 8), _stats(t, 2, 8), "--replicas", "8",
                                       "--gpus", "2", "--nodes", "1", "--min-gain", "nan"]),
}
