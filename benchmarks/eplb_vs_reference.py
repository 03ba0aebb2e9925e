"""Side by side: DeepSeek's reference EPLB (torch) and dsctl's numpy implementation, same inputs, same run.

The reference is NOT part of dsctl. Point this script at a copy of deepseek-ai/EPLB's ``eplb.py`` kept outside
the repository, in a Python that has torch::

    DSCTL_EPLB_REFERENCE=/work/ref/eplb.py PYTHONPATH=/work/main /work/refenv/bin/python benchmarks/eplb_vs_reference.py
    python benchmarks/eplb_vs_reference.py --reference /path/to/eplb.py --seeds 5 --repeats 5

Without the file or without torch it prints why and exits 0 (skipped). It checks exactness
(tie-free float loads: phy2log and logcnt equal, log2phy equal per expert as a set; integer loads: logcnt
equal and the same per-GPU sorted replica loads) and times both (best / median of --repeats after a warm-up).
It can also write a small golden fixture (``--write-golden FILE``: inputs and the reference's outputs, data only).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.eplb_layouts import LAYOUTS, NUM_EXPERTS, NUM_GROUPS, NUM_LAYERS
from dsctl.eplb.reference import rebalance_reference


def load_reference(path: str | None) -> tuple[ModuleType | None, str]:
    """Import the reference ``eplb.py`` from ``path``; (None, reason) when that is impossible."""
    if not path:
        return None, "no reference given (--reference or DSCTL_EPLB_REFERENCE)"
    if not Path(path).is_file():
        return None, f"reference file {path} not found"
    try:
        import torch  # noqa: F401
    except ImportError:
        return None, "torch is not installed in this Python"
    spec = importlib.util.spec_from_file_location("deepseek_eplb_reference", path)
    if spec is None or spec.loader is None:
        return None, f"cannot import {path}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, ""


def synthetic_loads(rng: np.random.Generator, integer: bool, zipf: float = 1.0) -> np.ndarray:
    """Zipf-shaped loads per layer with lognormal jitter, experts shuffled per layer; float64 [L, E]."""
    ranks = np.arange(1, NUM_EXPERTS + 1, dtype=np.float64)
    base = 1e6 / ranks**zipf
    loads = np.stack([rng.permutation(base) for _ in range(NUM_LAYERS)])
    loads *= rng.lognormal(0.0, 0.1, size=loads.shape)
    return np.round(loads) if integer else loads


def run_reference(ref: ModuleType, weight: np.ndarray, replicas: int, nodes: int, gpus: int,
                  policy: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import torch

    groups, nodes_arg = (NUM_GROUPS, nodes) if policy == "hierarchical" else (1, 1)  # global = pipeline with 1, 1
    out = ref.rebalance_experts(torch.from_numpy(weight), replicas, groups, nodes_arg, gpus)
    return out[0].numpy(), out[1].numpy(), out[2].numpy()


def per_gpu_sorted(weight: np.ndarray, phy2log: np.ndarray, logcnt: np.ndarray, gpus: int) -> np.ndarray:
    w32 = weight.astype(np.float32)
    per_replica = w32 / logcnt.astype(np.float32)
    slot = np.take_along_axis(per_replica, phy2log, axis=1)
    return np.sort(slot.reshape(slot.shape[0], gpus, -1), axis=2)


def log2phy_sets_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(np.sort(a, axis=2), np.sort(b, axis=2)))


def timed(func: Callable[[], Any], repeats: int) -> tuple[float, float]:
    func()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def compare(ref: ModuleType, seeds: int, repeats: int) -> int:
    failures = 0
    print(f"{NUM_LAYERS} layers x {NUM_EXPERTS} experts, {NUM_GROUPS} groups; "
          "Zipf(1.0) loads with 10% lognormal jitter")
    print(f"{'layout':36} {'float exact':>12} {'int logcnt+loads':>17} {'ref best/med s':>16} "
          f"{'dsctl best/med ms':>18} {'speed-up':>9}")
    for name, replicas, nodes, gpus, policy in LAYOUTS:
        float_ok = int_ok = 0
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            w = synthetic_loads(rng, integer=False).astype(np.float32)
            r_p2l, r_l2p, r_cnt = run_reference(ref, w, replicas, nodes, gpus, policy)
            ours = rebalance_reference(w, replicas, NUM_GROUPS, nodes, gpus, policy)
            if (np.array_equal(r_p2l, ours.phy2log) and np.array_equal(r_cnt, ours.logcnt)
                    and log2phy_sets_equal(r_l2p, ours.log2phy)):
                float_ok += 1
            wi = synthetic_loads(rng, integer=True)
            r_p2l, _, r_cnt = run_reference(ref, wi, replicas, nodes, gpus, policy)
            ours = rebalance_reference(wi, replicas, NUM_GROUPS, nodes, gpus, policy)
            if np.array_equal(r_cnt, ours.logcnt) and np.array_equal(
                    per_gpu_sorted(wi, r_p2l, r_cnt, gpus), per_gpu_sorted(wi, ours.phy2log, ours.logcnt, gpus)):
                int_ok += 1
        failures += (seeds - float_ok) + (seeds - int_ok)
        w = synthetic_loads(np.random.default_rng(1234), integer=False).astype(np.float32)
        args = (w, replicas, nodes, gpus, policy)
        ref_best, ref_med = timed(lambda a=args: run_reference(ref, *a), repeats)
        our_best, our_med = timed(lambda a=args: rebalance_reference(a[0], a[1], NUM_GROUPS, *a[2:]), repeats)
        print(f"{name:36} {f'{float_ok}/{seeds}':>12} {f'{int_ok}/{seeds}':>17} "
              f"{f'{ref_best:.3f}/{ref_med:.3f}':>16} {f'{our_best * 1e3:.2f}/{our_med * 1e3:.2f}':>18} "
              f"{ref_best / our_best:>8.0f}x")
    return failures


def write_golden(ref: ModuleType, path: Path) -> None:
    """Small inputs and the reference's outputs, data only, for tests that must run without torch."""
    cases = []
    specs = [("hier-tiefree", 4, 64, 8, 96, 4, 16, "hierarchical", False),
             ("global-tiefree", 3, 64, 8, 96, 3, 16, "global", False),
             ("hier-integer", 4, 64, 8, 160, 2, 8, "hierarchical", True)]
    for name, layers, experts, groups, replicas, nodes, gpus, policy, integer in specs:
        rng = np.random.default_rng(len(cases) + 7)
        loads = rng.lognormal(0.0, 1.0, size=(layers, experts)) * 1000
        loads = np.round(loads) if integer else loads.astype(np.float32).astype(np.float64)
        import torch

        g, n = (groups, nodes) if policy == "hierarchical" else (1, 1)
        outputs = ref.rebalance_experts(torch.from_numpy(loads), replicas, g, n, gpus)
        p2l, l2p, cnt = (t.numpy().tolist() for t in outputs)
        cases.append({"name": name, "weight": loads.tolist(), "num_replicas": replicas, "num_groups": groups,
                      "num_nodes": nodes, "num_gpus": gpus, "policy": policy, "integer": integer,
                      "phy2log": p2l, "log2phy": l2p, "logcnt": cnt})
    path.write_text(json.dumps({"source": "deepseek-ai/EPLB eplb.py @ d52c72d (MIT), run with torch", "cases": cases}))
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", default=os.environ.get("DSCTL_EPLB_REFERENCE"),
                        help="path to deepseek-ai/EPLB eplb.py (default: $DSCTL_EPLB_REFERENCE)")
    parser.add_argument("--seeds", type=int, default=3, help="random inputs per layout and load kind")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs after one warm-up")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for the reference (1 is its fastest)")
    parser.add_argument("--write-golden", type=Path, help="also write a golden fixture (inputs + reference outputs)")
    args = parser.parse_args(argv)
    ref, reason = load_reference(args.reference)
    if ref is None:
        print(f"skipped: {reason}")
        return 0
    import torch

    torch.set_num_threads(args.threads)
    print(f"reference: {args.reference} (torch {torch.__version__}, {args.threads} thread(s)); numpy {np.__version__}")
    if args.write_golden:
        write_golden(ref, args.write_golden)
    failures = compare(ref, args.seeds, args.repeats)
    print("all exact" if failures == 0 else f"{failures} mismatching inputs")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
